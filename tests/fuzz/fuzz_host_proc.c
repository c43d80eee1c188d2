/* tests/fuzz/fuzz_host_proc.c - the host backend's /proc text parsers.
 *
 * Input: byte 0 selects the parser (mod 8), the rest is the file text.
 * Selector 7 splits the text at its first NUL into two /proc/stat readings
 * and builds a snapshot from them.  Oracles besides the sanitizers: bounded
 * outputs (interface count and names), cpuinfo keeps threads >= cores >=
 * sockets >= 1, and CPU percentages stay in [0, 100] and sum to 100. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vdsmd/host/host_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned sel = data[0] % 8;
	/* an exact-size heap copy so ASan catches any read past len */
	size_t len = size - 1;
	char *t = malloc(len ? len : 1);
	memcpy(t, data + 1, len);

	switch (sel) {
	case 0: {
		struct host_cpu_times c;
		uint64_t bt;
		if (host_parse_stat(t, len, &c, &bt) != 0 && host_cpu_total(&c) != 0)
			abort();
		struct host_cpu_times cs[4];
		unsigned ids[4];
		int n = host_parse_stat_cpus(t, len, cs, ids, 4);
		if (n < 0 || n > 4)
			abort();
		break;
	}
	case 1: {
		struct host_meminfo m;
		if (host_parse_meminfo(t, len, &m) == 0 && m.total_kb == 0)
			abort();
		uint64_t tot, fr;
		host_parse_node_meminfo(t, len, &tot, &fr);
		break;
	}
	case 2: {
		double l[3], up;
		if (host_parse_loadavg(t, len, l) == 0 && (l[0] < 0 || l[1] < 0 || l[2] < 0))
			abort();
		if (host_parse_uptime(t, len, &up) == 0 && !(up >= 0))
			abort();
		break;
	}
	case 3: {
		uint64_t ut, st;
		host_parse_pid_stat(t, len, &ut, &st);
		break;
	}
	case 4: {
		struct host_netdev nd[8];
		int n = host_parse_netdev(t, len, nd, 8);
		if (n < 0 || n > 8)
			abort();
		for (int i = 0; i < n; i++)
			if (nd[i].name[0] == '\0' || strnlen(nd[i].name, HOST_IFNAME_MAX) >= HOST_IFNAME_MAX)
				abort();
		break;
	}
	case 5: {
		struct host_cpuinfo ci;
		host_parse_cpuinfo(t, len, &ci);
		if (ci.sockets < 1 || ci.cores < ci.sockets || ci.threads < ci.cores)
			abort();
		if (ci.model[sizeof(ci.model) - 1] != '\0' && strnlen(ci.model, sizeof(ci.model)) == sizeof(ci.model))
			abort();
		host_cpuinfo_free(&ci);
		break;
	}
	case 6: {
		char v[32];
		if (host_parse_keyval(t, len, "NAME", v, sizeof(v)) == 0 && strlen(v) >= sizeof(v))
			abort();
		break;
	}
	case 7: {
		const char *nul = memchr(t, '\0', len);
		size_t l1 = nul ? (size_t)(nul - t) : len;
		struct host_raw a, b;
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		a.cpu_ok = host_parse_stat(t, l1, &a.cpu, &a.btime) == 0;
		if (nul)
			b.cpu_ok = host_parse_stat(nul + 1, len - l1 - 1, &b.cpu, &b.btime) == 0;
		struct host_snapshot *s = host_snapshot_build(&a, &b, "/nonexistent", 100, NULL);
		double u = s->cpu_user, y = s->cpu_sys, i = s->cpu_idle;
		if (!(u >= 0 && u <= 100 && y >= 0 && y <= 100 && i >= 0 && i <= 100))
			abort();
		if (fabs(u + y + i - 100.0) > 1e-6)
			abort();
		host_snapshot_put(s);
		break;
	}
	}
	free(t);
	return 0;
}
