/* tests/unit/test_host_proc.c - host backend: /proc parsers on crafted and
 * odd input and on the real /proc, snapshot arithmetic, the sampler on a
 * crafted root tree and on the real one, capabilities. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vdsmd/host/host_int.h"
#include "check_main.h"

#define S(lit) (lit), (sizeof(lit) - 1)

/* ---- /proc/stat ---------------------------------------------------------- */

START_TEST(stat_crafted)
{
	struct host_cpu_times c;
	uint64_t bt;
	ck_assert_int_eq(host_parse_stat(S("cpu  10 2 30 400 5 6 7 8 9 10\n"
					   "cpu0 1 1 1 1 1 1 1 1\n"
					   "intr 1 2 3\nbtime 1700000000\nprocesses 5\n"),
					 &c, &bt), 0);
	ck_assert_uint_eq(c.user, 10);
	ck_assert_uint_eq(c.nice, 2);
	ck_assert_uint_eq(c.system, 30);
	ck_assert_uint_eq(c.idle, 400);
	ck_assert_uint_eq(c.steal, 8);
	ck_assert_uint_eq(host_cpu_total(&c), 10 + 2 + 30 + 400 + 5 + 6 + 7 + 8);
	ck_assert_uint_eq(bt, 1700000000ull);

	/* old kernels: only four fields; no btime; no trailing newline */
	ck_assert_int_eq(host_parse_stat(S("cpu 1 2 3 4"), &c, &bt), 0);
	ck_assert_uint_eq(c.idle, 4);
	ck_assert_uint_eq(c.iowait, 0);
	ck_assert_uint_eq(bt, 0);
}
END_TEST

START_TEST(stat_odd)
{
	struct host_cpu_times c;
	uint64_t bt;
	ck_assert_int_eq(host_parse_stat(S(""), &c, &bt), VD_EPROTO);
	ck_assert_int_eq(host_parse_stat(S("cpu0 1 2 3 4\n"), &c, &bt), VD_EPROTO);
	ck_assert_int_eq(host_parse_stat(S("cpu 1 2 x\nbtime 5\n"), &c, &bt), VD_EPROTO);
	ck_assert_uint_eq(c.user, 0);
	ck_assert_uint_eq(bt, 5);
	ck_assert_int_eq(host_parse_stat(S("\0\0\0cpu \n\n\n"), &c, &bt), VD_EPROTO);
	/* saturates instead of wrapping */
	ck_assert_int_eq(host_parse_stat(S("cpu 99999999999999999999999 0 0 0\n"), &c, &bt), 0);
	ck_assert_uint_eq(c.user, UINT64_MAX);
	/* the length bounds the parse: the btime beyond len is not seen */
	const char *t = "cpu 1 2 3 4\nbtime 77\n";
	ck_assert_int_eq(host_parse_stat(t, 12, &c, &bt), 0);
	ck_assert_uint_eq(bt, 0);
}
END_TEST

START_TEST(stat_per_cpu_and_node_meminfo)
{
	struct host_cpu_times c[4];
	unsigned ids[4];
	const char *t = "cpu  9 9 9 9\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpux 1 2 3 4\ncpu1 1 2\n"
			"cpu17\t5 6 7 8\ncpu2x 1 2 3 4\ncpu99999999999 1 2 3 4\ncpu3 1 1 1 1\n"
			"cpu4 2 2 2 2\n";
	int n = host_parse_stat_cpus(t, strlen(t), c, ids, 4);
	ck_assert_int_eq(n, 4);   /* cpu0, cpu17, cpu3, cpu4 */
	ck_assert_uint_eq(ids[0], 0);
	ck_assert_uint_eq(c[0].steal, 8);
	ck_assert_uint_eq(ids[1], 17);
	ck_assert_uint_eq(c[1].idle, 8);
	ck_assert_uint_eq(ids[2], 3);
	ck_assert_uint_eq(ids[3], 4);
	ck_assert_int_eq(host_parse_stat_cpus(t, strlen(t), c, ids, 2), 2);
	ck_assert_int_eq(host_parse_stat_cpus(S("cpu 1 2 3 4\n"), c, ids, 4), 0);

	uint64_t tot, fr;
	ck_assert_int_eq(host_parse_node_meminfo(S("Node 1 MemTotal:       2048 kB\n"
						   "Node 1 MemFree:        1024 kB\n"
						   "Node 1 MemUsed:        1024 kB\n"), &tot, &fr), 0);
	ck_assert_uint_eq(tot, 2048);
	ck_assert_uint_eq(fr, 1024);
	ck_assert_int_eq(host_parse_node_meminfo(S("Node x MemTotal: 5 kB\nMemFree: 3\n"), &tot, &fr),
			 VD_EPROTO);
}
END_TEST

/* ---- meminfo, loadavg, uptime, pid stat ------------------------------------ */

START_TEST(meminfo_crafted)
{
	struct host_meminfo m;
	ck_assert_int_eq(host_parse_meminfo(S("MemTotal:       16384000 kB\n"
					      "MemFree:         1024000 kB\n"
					      "MemAvailable:    9000000 kB\n"
					      "Buffers:          102400 kB\n"
					      "Cached:          2048000 kB\n"
					      "SwapCached:            0 kB\n"
					      "SwapTotal:       4194304 kB\n"
					      "SwapFree:        4194300 kB\n"
					      "AnonHugePages:     20480 kB\n"
					      "SReclaimable:     204800 kB\n"
					      "HugePages_Total:       0\n"),
					    &m), 0);
	ck_assert_uint_eq(m.total_kb, 16384000);
	ck_assert_uint_eq(m.free_kb, 1024000);
	ck_assert_uint_eq(m.cached_kb, 2048000);   /* not SwapCached */
	ck_assert_uint_eq(m.buffers_kb, 102400);
	ck_assert_uint_eq(m.sreclaimable_kb, 204800);
	ck_assert_uint_eq(m.swap_total_kb, 4194304);
	ck_assert_uint_eq(m.swap_free_kb, 4194300);
	ck_assert_uint_eq(m.anon_huge_kb, 20480);
}
END_TEST

START_TEST(meminfo_odd)
{
	struct host_meminfo m;
	ck_assert_int_eq(host_parse_meminfo(S(""), &m), VD_EPROTO);
	ck_assert_int_eq(host_parse_meminfo(S("MemFree: 5 kB\n"), &m), VD_EPROTO);
	ck_assert_int_eq(host_parse_meminfo(S("MemTotal: lots kB\nMemFree: 5 kB"), &m), VD_EPROTO);
	ck_assert_uint_eq(m.free_kb, 5);
	ck_assert_int_eq(host_parse_meminfo(S("MemTotal:0 kB\n"), &m), VD_EPROTO);
	ck_assert_int_eq(host_parse_meminfo(S("garbage\n\x01\x02:\nMemTotal:\t2048 kB"), &m), 0);
	ck_assert_uint_eq(m.total_kb, 2048);
}
END_TEST

START_TEST(loadavg_uptime_pidstat)
{
	double l[3], up;
	ck_assert_int_eq(host_parse_loadavg(S("0.52 1.25 2.00 3/456 7890\n"), l), 0);
	ck_assert(fabs(l[0] - 0.52) < 1e-9 && fabs(l[1] - 1.25) < 1e-9 && fabs(l[2] - 2.0) < 1e-9);
	ck_assert_int_eq(host_parse_loadavg(S("0.52 1.25\n"), l), VD_EPROTO);
	ck_assert_int_eq(host_parse_loadavg(S("a b c"), l), VD_EPROTO);
	ck_assert_int_eq(host_parse_loadavg(S("-1 0 0"), l), VD_EPROTO);
	ck_assert_int_eq(host_parse_loadavg(S("nan 1 1"), l), VD_EPROTO);
	ck_assert_int_eq(host_parse_uptime(S("12345.67 54321.00\n"), &up), 0);
	ck_assert(fabs(up - 12345.67) < 1e-6);
	ck_assert_int_eq(host_parse_uptime(S("\n"), &up), VD_EPROTO);

	uint64_t ut, st;
	ck_assert_int_eq(host_parse_pid_stat(S("42 (a b) c)) S 1 42 42 0 -1 4194560 100 0 0 0 "
					       "17 9 0 0 20 0 1 0 100 0 0\n"), &ut, &st), 0);
	ck_assert_uint_eq(ut, 17);
	ck_assert_uint_eq(st, 9);
	ck_assert_int_eq(host_parse_pid_stat(S("42 (x) S 1 2 3"), &ut, &st), VD_EPROTO);
	ck_assert_int_eq(host_parse_pid_stat(S("no paren at all"), &ut, &st), VD_EPROTO);
	ck_assert_int_eq(host_parse_pid_stat(S("1 (x) S 1 1 1 0 -1 0 0 0 0 0 1x 2 0"), &ut, &st),
			 VD_EPROTO);
}
END_TEST

/* ---- /proc/net/dev ------------------------------------------------------- */

START_TEST(netdev_crafted)
{
	struct host_netdev nd[4];
	const char *t =
		"Inter-|   Receive                                                |  Transmit\n"
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
		"    lo:  123456     100    0    0    0     0          0         0   123456     100    0    0    0     0       0          0\n"
		"  eth0:1000 20 3 4 0 0 0 0 2000 30 5 6 0 0 0 0\n"
		"  bad0: 1 2 3\n"
		"nocolon 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
		"br-a.100: 18446744073709551615 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0";
	int n = host_parse_netdev(t, strlen(t), nd, 4);
	ck_assert_int_eq(n, 3);
	ck_assert_str_eq(nd[0].name, "lo");
	ck_assert_uint_eq(nd[0].rx_bytes, 123456);
	ck_assert_str_eq(nd[1].name, "eth0");
	ck_assert_uint_eq(nd[1].rx_bytes, 1000);
	ck_assert_uint_eq(nd[1].rx_errs, 3);
	ck_assert_uint_eq(nd[1].rx_drop, 4);
	ck_assert_uint_eq(nd[1].tx_bytes, 2000);
	ck_assert_uint_eq(nd[1].tx_errs, 5);
	ck_assert_uint_eq(nd[1].tx_drop, 6);
	ck_assert_str_eq(nd[2].name, "br-a.100");
	ck_assert_uint_eq(nd[2].rx_bytes, UINT64_MAX);
	ck_assert_uint_eq(nd[2].tx_bytes, 7);
	/* bounded by max */
	ck_assert_int_eq(host_parse_netdev(t, strlen(t), nd, 1), 1);
	ck_assert_int_eq(host_parse_netdev(S(""), nd, 4), 0);
	/* an over-long name is truncated, not overflowed */
	char big[300];
	memset(big, 'n', 200);
	snprintf(big + 200, 100, ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
	ck_assert_int_eq(host_parse_netdev(big, strlen(big), nd, 4), 1);
	ck_assert_uint_eq(strlen(nd[0].name), HOST_IFNAME_MAX - 1);
}
END_TEST

/* ---- /proc/cpuinfo, key=value --------------------------------------------- */

static void cpuinfo_text(struct vd_buf *b, unsigned sockets, unsigned cores, unsigned threads)
{
	unsigned p = 0;
	for (unsigned s = 0; s < sockets; s++)
		for (unsigned c = 0; c < cores; c++)
			for (unsigned t = 0; t < threads; t++, p++)
				buf_printf(b, "processor\t: %u\nvendor_id\t: GenuineIntel\n"
					   "cpu family\t: 6\nmodel name\t: Test CPU @ 2.00GHz\n"
					   "cpu MHz\t\t: 1999.999\nphysical id\t: %u\n"
					   "core id\t\t: %u\ncpu cores\t: %u\n"
					   "flags\t\t: fpu  vme de sse2 vmx\n\n",
					   p, s, c, cores);
}

START_TEST(cpuinfo_crafted)
{
	struct vd_buf b = VD_BUF_INIT;
	struct host_cpuinfo ci;
	cpuinfo_text(&b, 2, 4, 2);
	ck_assert_int_eq(host_parse_cpuinfo(b.data, b.len, &ci), 0);
	ck_assert_uint_eq(ci.threads, 16);
	ck_assert_uint_eq(ci.cores, 8);
	ck_assert_uint_eq(ci.sockets, 2);
	ck_assert_str_eq(ci.model, "Test CPU @ 2.00GHz");
	ck_assert_str_eq(ci.speed, "1999.999");
	ck_assert_str_eq(ci.flags, "fpu  vme de sse2 vmx");
	host_cpuinfo_free(&ci);

	/* aarch64 style: no physical/core id, BogoMIPS, Features */
	ck_assert_int_eq(host_parse_cpuinfo(S("processor\t: 0\nBogoMIPS\t: 50.00\n"
					      "Features\t: fp asimd\nCPU part\t: 0xd0c\n\n"
					      "processor\t: 1\nBogoMIPS\t: 50.00\n"), &ci), 0);
	ck_assert_uint_eq(ci.threads, 2);
	ck_assert_uint_eq(ci.cores, 2);
	ck_assert_uint_eq(ci.sockets, 1);
	ck_assert_str_eq(ci.speed, "50.00");
	ck_assert_str_eq(ci.flags, "fp asimd");
	ck_assert_str_eq(ci.model, "0xd0c");
	host_cpuinfo_free(&ci);

	/* junk */
	ck_assert_int_eq(host_parse_cpuinfo(S(":::\n\n:\nflags\n"), &ci), 0);
	ck_assert_uint_eq(ci.threads, 1);
	ck_assert_str_eq(ci.speed, "unavailable");
	ck_assert_ptr_null(ci.flags);
	host_cpuinfo_free(&ci);
	buf_free(&b);
}
END_TEST

START_TEST(keyval)
{
	char v[16];
	const char *t = "NAME=\"Debian GNU/Linux\"\nVERSION_ID='12'\nID=debian\nLONG=0123456789abcdefXYZ\n";
	ck_assert_int_eq(host_parse_keyval(t, strlen(t), "VERSION_ID", v, sizeof(v)), 0);
	ck_assert_str_eq(v, "12");
	ck_assert_int_eq(host_parse_keyval(t, strlen(t), "ID", v, sizeof(v)), 0);
	ck_assert_str_eq(v, "debian");
	ck_assert_int_eq(host_parse_keyval(t, strlen(t), "NAME", v, sizeof(v)), 0);
	ck_assert_str_eq(v, "Debian GNU/Linu");   /* truncated to fit */
	ck_assert_int_eq(host_parse_keyval(t, strlen(t), "LONG", v, sizeof(v)), 0);
	ck_assert_uint_eq(strlen(v), 15);
	ck_assert_int_eq(host_parse_keyval(t, strlen(t), "NOPE", v, sizeof(v)), VD_ENOENT);
	ck_assert_str_eq(v, "");
}
END_TEST

/* ---- the real /proc -------------------------------------------------------- */

START_TEST(real_proc)
{
	struct vd_buf b = VD_BUF_INIT;
	struct host_cpu_times c;
	uint64_t bt;
	ck_assert_int_eq(host_read_file("/proc/stat", 4u << 20, &b), 0);
	ck_assert_int_eq(host_parse_stat(b.data, b.len, &c, &bt), 0);
	ck_assert_uint_gt(host_cpu_total(&c), 0);
	ck_assert_uint_gt(bt, 1000000000ull);

	struct host_meminfo m;
	ck_assert_int_eq(host_read_file("/proc/meminfo", 65536, &b), 0);
	ck_assert_int_eq(host_parse_meminfo(b.data, b.len, &m), 0);
	ck_assert_uint_gt(m.total_kb, m.free_kb);

	double l[3];
	ck_assert_int_eq(host_read_file("/proc/loadavg", 65536, &b), 0);
	ck_assert_int_eq(host_parse_loadavg(b.data, b.len, l), 0);

	uint64_t ut, st;
	ck_assert_int_eq(host_read_file("/proc/self/stat", 65536, &b), 0);
	ck_assert_int_eq(host_parse_pid_stat(b.data, b.len, &ut, &st), 0);

	struct host_netdev *nd = calloc(HOST_MAX_IFACES, sizeof(*nd));
	ck_assert_int_eq(host_read_file("/proc/net/dev", 1u << 20, &b), 0);
	int n = host_parse_netdev(b.data, b.len, nd, HOST_MAX_IFACES);
	ck_assert_int_ge(n, 1);
	free(nd);

	struct host_cpuinfo ci;
	ck_assert_int_eq(host_read_file("/proc/cpuinfo", 16u << 20, &b), 0);
	ck_assert_int_eq(host_parse_cpuinfo(b.data, b.len, &ci), 0);
	ck_assert_uint_ge(ci.threads, 1);
	ck_assert_uint_ge(ci.threads, ci.cores);
	ck_assert_uint_ge(ci.cores, ci.sockets);
	host_cpuinfo_free(&ci);

	/* bounded read truncates */
	ck_assert_int_eq(host_read_file("/proc/cpuinfo", 10, &b), 0);
	ck_assert_uint_eq(b.len, 10);
	ck_assert_int_eq(b.data[10], '\0');
	ck_assert_int_eq(host_read_file("/nonexistent/x", 10, &b), VD_ENOENT);
	buf_free(&b);
}
END_TEST

/* ---- snapshot arithmetic ------------------------------------------------------ */

START_TEST(snapshot_cpu_math)
{
	struct host_raw a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.cpu_ok = b.cpu_ok = true;
	a.cpu = (struct host_cpu_times){ 100, 10, 50, 800, 20, 5, 5, 10 };
	/* +150 user, +50 nice, +100 system, +600 idle, +50 iowait, +25 irq,
	 * +25 softirq, +0 steal = 1000 jiffies */
	b.cpu = (struct host_cpu_times){ 250, 60, 150, 1400, 70, 30, 30, 10 };
	b.mem_ok = true;
	b.mem = (struct host_meminfo){ .total_kb = 1000 * 1024, .free_kb = 100 * 1024,
				       .buffers_kb = 50 * 1024, .cached_kb = 150 * 1024,
				       .sreclaimable_kb = 20 * 1024,
				       .swap_total_kb = 2048 * 1024, .swap_free_kb = 1024 * 1024 };
	b.load_ok = true;
	b.load[0] = 1.5;
	b.load[1] = 0.75;
	b.btime = 1600000000;
	struct host_snapshot *s = host_snapshot_build(&a, &b, "/nonexistent-root", 100, NULL);
	ck_assert(fabs(s->cpu_user - 20.0) < 1e-9);   /* (150+50)/1000 */
	ck_assert(fabs(s->cpu_sys - 15.0) < 1e-9);    /* (100+25+25)/1000 */
	ck_assert(fabs(s->cpu_idle - 65.0) < 1e-9);
	ck_assert(fabs(s->cpu_user + s->cpu_sys + s->cpu_idle - 100.0) < 1e-9);
	ck_assert(fabs(s->cpu_load - 0.75) < 1e-9);    /* the 5 minute average */
	ck_assert_int_eq(s->mem_used, 70);              /* 100 - 300/1000 */
	ck_assert_uint_eq(s->mem_free_mib, 320);
	ck_assert_uint_eq(s->swap_total_mib, 2048);
	ck_assert_uint_eq(s->swap_free_mib, 1024);
	ck_assert_uint_eq(s->boot_time, 1600000000);
	ck_assert_str_eq(s->thp_state, "never");
	host_snapshot_put(s);

	/* same sample twice, or counters going backwards: 0/0/100, no wrap */
	s = host_snapshot_build(&b, &b, "", 100, NULL);
	ck_assert(s->cpu_user == 0 && s->cpu_sys == 0 && s->cpu_idle == 100);
	host_snapshot_put(s);
	s = host_snapshot_build(&b, &a, "", 100, NULL);
	ck_assert(s->cpu_idle >= 0 && s->cpu_idle <= 100);
	ck_assert(fabs(s->cpu_user + s->cpu_sys + s->cpu_idle - 100.0) < 1e-9);
	host_snapshot_put(s);
	/* nothing read at all */
	memset(&a, 0, sizeof(a));
	s = host_snapshot_build(&a, &a, "", 100, NULL);
	ck_assert(s->cpu_idle == 100 && s->mem_free_mib == 0 && s->nif == 0);
	host_snapshot_put(s);
}
END_TEST

/* ---- a crafted root tree ---------------------------------------------------- */

static void put(const char *root, const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	/* mkdir -p of the parent */
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void rm_rf(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(crafted_root)
{
	char root[] = "/tmp/vdsmd-host-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(root));
	put(root, "proc/stat", "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400\n"
			       "cpu1 50 0 50 400\nbtime 1650000000\n");
	put(root, "sys/devices/system/node/node0/cpulist", "0\n");
	put(root, "sys/devices/system/node/node0/meminfo", "Node 0 MemTotal: 1048576 kB\n"
							   "Node 0 MemFree: 262144 kB\n");
	put(root, "sys/devices/system/node/node1/cpulist", "1\n");
	put(root, "sys/devices/system/node/node1/meminfo", "Node 1 MemTotal: 1048576 kB\n"
							   "Node 1 MemFree: 786432 kB\n");
	put(root, "sys/devices/system/node/nodeX/cpulist", "0-1\n");   /* not a node */
	put(root, "sys/devices/system/node/node0/distance", "10 21\n");
	put(root, "sys/devices/system/node/node1/distance", "21 10\n");
	put(root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0\n");
	put(root, "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0\n");
	put(root, "sys/kernel/mm/hugepages/junk/nr_hugepages", "0\n");
	put(root, "proc/sys/kernel/numa_balancing", "1\n");
	put(root, "proc/meminfo", "MemTotal: 2097152 kB\nMemFree: 1048576 kB\n"
				  "Buffers: 0 kB\nCached: 0 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n");
	put(root, "proc/loadavg", "0.10 0.20 0.30 1/2 3\n");
	put(root, "proc/uptime", "100.0 50.0\n");
	put(root, "proc/self/stat", "1 (vdsmd) S 1 1 1 0 -1 0 0 0 0 0 5 5 0 0\n");
	put(root, "proc/net/dev", "h1\nh2\n  eth0: 10 1 2 3 0 0 0 0 20 2 4 5 0 0 0 0\n"
				  "  ../x: 1 1 1 1 0 0 0 0 1 1 1 1 0 0 0 0\n");
	put(root, "sys/class/net/eth0/operstate", "up\n");
	put(root, "sys/class/net/eth0/speed", "10000\n");
	put(root, "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
	put(root, "proc/cpuinfo", "processor : 0\nmodel name : Crafted\ncpu MHz : 1234.5\n"
				  "physical id : 0\ncore id : 0\nflags : a b  c\n\n"
				  "processor : 1\nphysical id : 0\ncore id : 1\n");
	put(root, "etc/os-release", "NAME=\"Crafted Linux\"\nVERSION_ID=\"7.1\"\n"
				    "PRETTY_NAME=\"Crafted Linux 7.1\"\n");
	put(root, "etc/machine-id", "0123456789abcdef0123456789ABCDEF\n");
	put(root, "sys/devices/system/cpu/online", "0-1\n");

	struct host_opts o = { .root = root, .first_ms = 1 };
	struct host_state *h = host_state_new(NULL, &o);
	struct host_snapshot *s = host_snapshot_get(h);
	ck_assert_ptr_nonnull(s);
	/* the counters did not move between the two readings */
	ck_assert(s->cpu_idle == 100.0);
	ck_assert_uint_eq(s->mem_free_mib, 1024);
	ck_assert_int_eq(s->mem_used, 50);
	ck_assert(fabs(s->cpu_load - 0.20) < 1e-9);
	ck_assert_uint_eq(s->boot_time, 1650000000);
	ck_assert_str_eq(s->thp_state, "madvise");
	ck_assert_uint_eq(s->nif, 2);
	ck_assert_str_eq(s->ifs[0].name, "eth0");
	ck_assert_str_eq(s->ifs[0].state, "up");
	ck_assert_uint_eq(s->ifs[0].speed, 10000);
	ck_assert_uint_eq(s->ifs[0].rx, 10);
	ck_assert_uint_eq(s->ifs[0].tx, 20);
	ck_assert_uint_eq(s->ifs[0].rx_errors, 2);
	ck_assert_uint_eq(s->ifs[0].tx_dropped, 5);
	/* a path-like name is reported but never used as a path */
	ck_assert_str_eq(s->ifs[1].name, "../x");
	ck_assert_str_eq(s->ifs[1].state, "unknown");
	ck_assert_uint_eq(s->ifs[1].speed, 1000);
	ck_assert_uint_eq(s->rx_dropped, 4);
	ck_assert_uint_eq(s->tx_dropped, 6);

	ck_assert_uint_eq(s->ncpu, 2);
	ck_assert_uint_eq(s->cpus[0].node, 0);
	ck_assert_uint_eq(s->cpus[1].node, 1);
	ck_assert(s->cpus[1].idle == 100.0);
	ck_assert_uint_eq(s->nnode, 2);
	ck_assert_uint_eq(s->nodes[0].free_mib, 256);
	ck_assert_int_eq(s->nodes[0].percent, 75);
	ck_assert_uint_eq(s->nodes[1].id, 1);
	ck_assert_uint_eq(s->nodes[1].free_mib, 768);
	ck_assert_int_eq(s->nodes[1].percent, 25);
	host_snapshot_put(s);

	/* counters move: the next sample has percentages over that interval;
	 * a CPU that appears (hot-plug) is skipped until it has two readings */
	put(root, "proc/stat", "cpu  150 0 150 900 0 0 0 0 0 0\ncpu0 100 0 50 450\n"
			       "cpu1 50 0 100 450\ncpu2 1 1 1 1\nbtime 1650000000\n");
	host_sample_now(h);
	s = host_snapshot_get(h);
	ck_assert(fabs(s->cpu_user - 25.0) < 1e-9);
	ck_assert(fabs(s->cpu_sys - 25.0) < 1e-9);
	ck_assert(fabs(s->cpu_idle - 50.0) < 1e-9);
	ck_assert_uint_eq(s->ncpu, 2);
	ck_assert_uint_eq(s->cpus[0].id, 0);
	ck_assert(fabs(s->cpus[0].user - 50.0) < 1e-9);
	ck_assert(fabs(s->cpus[0].idle - 50.0) < 1e-9);
	ck_assert(fabs(s->cpus[1].sys - 50.0) < 1e-9);
	host_snapshot_put(s);

	struct host_caps *c = h->caps;
	ck_assert_str_eq(c->cpu.model, "Crafted");
	ck_assert_str_eq(c->cpu.speed, "1234.5");
	ck_assert_uint_eq(c->cpu.threads, 2);
	ck_assert_uint_eq(c->cpu.cores, 2);
	ck_assert_uint_eq(c->cpu.sockets, 1);
	ck_assert_str_eq(c->cpu_flags_csv, "a,b,c");
	ck_assert_str_eq(c->online_cpus, "0,1");
	ck_assert_uint_eq(c->mem_size_mib, 2048);
	ck_assert(!c->kvm);
	ck_assert_str_eq(c->os_name, "Crafted Linux");
	ck_assert_str_eq(c->os_version, "7.1");
	ck_assert_str_eq(c->os_pretty, "Crafted Linux 7.1");
	ck_assert_str_eq(c->uuid, "01234567-89ab-cdef-0123-456789ABCDEF");
	ck_assert_uint_eq(c->nnodes, 2);
	ck_assert_uint_eq(c->nodes[0].id, 0);
	ck_assert_uint_eq(c->nodes[0].total_mib, 1024);
	ck_assert_uint_eq(c->nodes[1].ncpus, 1);
	ck_assert_uint_eq(c->nodes[1].cpus[0], 1);
	ck_assert_uint_eq(c->nodes[1].ndist, 2);
	ck_assert_uint_eq(c->nodes[1].dist[0], 21);
	ck_assert_uint_eq(c->nhuge, 2);
	ck_assert_uint_eq(c->huge_kb[0], 2048);
	ck_assert_uint_eq(c->huge_kb[1], 1048576);
	ck_assert_int_eq(c->auto_numa, 1);
	host_state_free(h);

	/* every file empty or junk: no crash, neutral values */
	const char *files[] = { "proc/stat", "proc/meminfo", "proc/loadavg", "proc/uptime",
				"proc/self/stat", "proc/net/dev", "proc/cpuinfo",
				"etc/os-release", "etc/machine-id", "sys/devices/system/cpu/online",
				"sys/kernel/mm/transparent_hugepage/enabled",
				"sys/class/net/eth0/speed" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		put(root, files[i], i % 2 ? "" : "\x01\xff garbage :: [ ] 1-\n-5\n");
	h = host_state_new(NULL, &o);
	s = host_snapshot_get(h);
	ck_assert(s->cpu_idle == 100.0);
	ck_assert_uint_eq(s->mem_free_mib, 0);
	ck_assert_uint_eq(s->nif, 0);
	ck_assert_uint_eq(s->boot_time, 0);
	host_snapshot_put(s);
	ck_assert_uint_eq(h->caps->cpu.threads, 1);
	ck_assert_str_eq(h->caps->online_cpus, "0");
	ck_assert_str_eq(h->caps->uuid, "");
	ck_assert_uint_eq(h->caps->nnodes, 2);   /* the node tree was left alone */
	host_state_free(h);
	rm_rf(root);
}
END_TEST

/* ---- the real host ------------------------------------------------------------ */

static uint64_t meminfo_total_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	ck_assert_ptr_nonnull(f);
	char line[256];
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb / 1024;
}

/* "cpuN " lines of /proc/stat, counted independently of the parser */
static size_t proc_stat_cpu_lines(void)
{
	FILE *f = fopen("/proc/stat", "r");
	ck_assert_ptr_nonnull(f);
	char line[4096];
	size_t n = 0;
	unsigned id;
	char sp;
	while (fgets(line, sizeof(line), f))
		if (line[3] >= '0' && line[3] <= '9' && sscanf(line, "cpu%u%c", &id, &sp) == 2 && sp == ' ')
			n++;
	fclose(f);
	return n;
}

START_TEST(real_host)
{
	struct host_opts o = { .first_ms = 120 };
	struct host_state *h = host_state_new(NULL, &o);
	struct host_snapshot *s = host_snapshot_get(h);
	ck_assert(s->cpu_idle >= 0 && s->cpu_idle <= 100);
	ck_assert(s->cpu_user >= 0 && s->cpu_sys >= 0);
	ck_assert(fabs(s->cpu_user + s->cpu_sys + s->cpu_idle - 100.0) < 0.01);
	ck_assert_uint_gt(s->mem_free_mib, 0);
	ck_assert_int_ge(s->mem_used, 0);
	ck_assert_int_le(s->mem_used, 100);
	ck_assert_uint_gt(s->boot_time, 1000000000ull);
	ck_assert_uint_ge(s->nif, 1);
	ck_assert(s->cpu_load >= 0);
	ck_assert_uint_eq(s->ncpu, proc_stat_cpu_lines());
	for (size_t i = 0; i < s->ncpu; i++)
		ck_assert(fabs(s->cpus[i].user + s->cpus[i].sys + s->cpus[i].idle - 100.0) < 0.01);
	ck_assert_uint_ge(s->nnode, 1);
	ck_assert_uint_gt(s->nodes[0].free_mib, 0);
	host_snapshot_put(s);

	ck_assert_uint_eq(h->caps->mem_size_mib, meminfo_total_mib());
	ck_assert_uint_ge(h->caps->cpu.threads, 1);
	ck_assert(h->caps->kvm == (access("/dev/kvm", F_OK) == 0));
	ck_assert_str_ne(h->caps->hostname, "");
	ck_assert_str_ne(h->caps->os_name, "");
	ck_assert_uint_ge(h->caps->nnodes, 1);
	size_t node_cpus = 0;
	for (size_t i = 0; i < h->caps->nnodes; i++)
		node_cpus += h->caps->nodes[i].ncpus;
	ck_assert_uint_ge(node_cpus, 1);
	host_state_free(h);
}
END_TEST

/* ---- sampler thread ------------------------------------------------------------ */

START_TEST(sampler_thread_swaps)
{
	struct host_opts o = { .interval_ms = 5, .first_ms = 1, .start_thread = true };
	struct host_state *h = host_state_new(NULL, &o);
	/* readers hold and drop snapshots while the sampler swaps them */
	uint64_t deadline = vd_now_ms() + 5000;
	unsigned long seen_changes = 0;
	struct host_snapshot *prev = NULL;
	while (atomic_load(&h->samples) < 20 && vd_now_ms() < deadline) {
		struct host_snapshot *s = host_snapshot_get(h);
		ck_assert_ptr_nonnull(s);
		ck_assert(s->cpu_idle >= 0 && s->cpu_idle <= 100);
		if (prev && prev != s)
			seen_changes++;
		host_snapshot_put(prev);
		prev = s;   /* keep one across swaps: must stay valid */
	}
	host_snapshot_put(prev);
	ck_assert_uint_ge(atomic_load(&h->samples), 20);
	ck_assert_uint_ge(seen_changes, 1);
	/* fini stops a thread that waits for a long interval at once */
	uint64_t t0 = vd_now_ms();
	host_state_free(h);
	ck_assert_uint_lt(vd_now_ms() - t0, 1000);

	o.interval_ms = 60000;
	h = host_state_new(NULL, &o);
	t0 = vd_now_ms();
	host_state_free(h);
	ck_assert_uint_lt(vd_now_ms() - t0, 1000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("host_proc");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, stat_crafted);
	tcase_add_test(tc, stat_odd);
	tcase_add_test(tc, stat_per_cpu_and_node_meminfo);
	tcase_add_test(tc, meminfo_crafted);
	tcase_add_test(tc, meminfo_odd);
	tcase_add_test(tc, loadavg_uptime_pidstat);
	tcase_add_test(tc, netdev_crafted);
	tcase_add_test(tc, cpuinfo_crafted);
	tcase_add_test(tc, keyval);
	tcase_add_test(tc, real_proc);
	tcase_add_test(tc, snapshot_cpu_math);
	tcase_add_test(tc, crafted_root);
	tcase_add_test(tc, real_host);
	tcase_add_test(tc, sampler_thread_swaps);
	suite_add_tcase(s, tc);
	return check_run(s);
}
