/* tests/unit/test_virt_policy.c - the CPU limit of VM.updateVmPolicy as
 * VDSM's default MOM policy (mom.d/04-cputune.policy) computes it: quota =
 * limit% x period x host CPUs / vCPUs, both scaled while the quota is under
 * libvirt's 1000 us minimum, no limit from 100 %. */
#include "../../vdsmd/virt/virt_int.h"
#include "check_main.h"

static void cq(double limit, unsigned host, unsigned vcpus, long long quota,
	       unsigned long long period)
{
	long long q = 0;
	unsigned long long p = 0;
	virt_cpu_quota(limit, host, vcpus, &q, &p);
	ck_assert_int_eq(q, quota);
	ck_assert_uint_eq(p, period);
}

START_TEST(cpu_quota_as_mom)
{
	cq(50, 4, 2, 100000, 100000);      /* half of 4 CPUs over 2 vCPUs */
	cq(50, 2, 1, 100000, 100000);
	cq(25, 8, 4, 50000, 100000);
	cq(10, 1, 1, 10000, 100000);
	cq(100, 4, 2, -1, 100000);         /* no limit */
	cq(150, 4, 2, -1, 100000);
	cq(0, 4, 2, -1, 100000);
	/* 1 % of 1 CPU: 1000 us is not above the minimum: scaled by 1 + 1000/1000 */
	cq(1, 1, 1, 2000, 200000);
	/* 1 % of 1 CPU over 4 vCPUs: 250 us, scaled by 5 */
	cq(1, 1, 4, 1250, 500000);
	/* over libvirt's 1 s period bound: the ratio is kept, the quota >= 1000 */
	cq(1, 1, 16, 1000, 1000000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virt_policy");
	TCase *tc = tcase_create("policy");
	tcase_add_test(tc, cpu_quota_as_mom);
	suite_add_tcase(s, tc);
	return check_run(s);
}
