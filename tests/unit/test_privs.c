/* tests/unit/test_privs.c - vdsmd/privs.c: which listen addresses count as
 * loopback, the plaintext refusal and its override, the user lookup.  The
 * privilege drop itself is tested on a real daemon (test_security.py). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/config.h"
#include "vdsmd/daemon.h"
#include "check_main.h"

START_TEST(loopback_addresses)
{
	ck_assert(daemon_addr_is_loopback("127.0.0.1"));
	ck_assert(daemon_addr_is_loopback("127.1.2.3"));
	ck_assert(daemon_addr_is_loopback("::1"));
	ck_assert(daemon_addr_is_loopback("::ffff:127.0.0.1"));
	ck_assert(!daemon_addr_is_loopback("::"));
	ck_assert(!daemon_addr_is_loopback("0.0.0.0"));
	ck_assert(!daemon_addr_is_loopback("10.0.0.1"));
	ck_assert(!daemon_addr_is_loopback("::ffff:10.0.0.1"));
	ck_assert(!daemon_addr_is_loopback("fe80::1"));
	ck_assert(!daemon_addr_is_loopback(""));
	ck_assert(!daemon_addr_is_loopback(NULL));
}
END_TEST

START_TEST(plaintext_check)
{
	struct vd_config c;
	memset(&c, 0, sizeof(c));
	char why[512] = "";
	char any[] = "::", lo[] = "127.0.0.1";
	c.listen = any;
	c.tls = true;
	ck_assert_int_eq(daemon_check_plaintext(&c, why, sizeof(why)), 0);
	c.tls = false;
	ck_assert_int_eq(daemon_check_plaintext(&c, why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, "allow_plaintext") && strstr(why, "listen = ::"), "%s", why);
	c.allow_plaintext = true;  /* allowed, with a warning in the log */
	ck_assert_int_eq(daemon_check_plaintext(&c, why, sizeof(why)), 0);
	c.allow_plaintext = false;
	c.listen = lo;
	ck_assert_int_eq(daemon_check_plaintext(&c, why, sizeof(why)), 0);
}
END_TEST

START_TEST(user_lookup)
{
	char why[256] = "";
	ck_assert_int_eq(daemon_drop_privileges("", why, sizeof(why)), 0);
	ck_assert_int_eq(daemon_drop_privileges(NULL, why, sizeof(why)), 0);
	ck_assert_int_eq(daemon_drop_privileges("no-such-user-vdsmd", why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, "no-such-user-vdsmd") && strstr(why, "no such user"), "%s", why);
}
END_TEST

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, "stderr", VD_LOG_ERROR);
	Suite *s = suite_create("privs");
	TCase *tc = tcase_create("privs");
	tcase_add_test(tc, loopback_addresses);
	tcase_add_test(tc, plaintext_check);
	tcase_add_test(tc, user_lookup);
	suite_add_tcase(s, tc);
	return check_run(s);
}
