/* vdsmd/host/procfs.c - bounded reads and parsers for /proc text files.
 * Every parser works on (text, len), tolerates odd content and never reads
 * past len (see host_int.h). */
#include "host_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int host_read_file(const char *path, size_t max, struct vd_buf *out)
{
	buf_reset(out);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? VD_ENOENT : VD_EIO;
	int rc = 0;
	while (out->len < max) {
		size_t want = VD_MIN(max - out->len, (size_t)65536);
		buf_reserve(out, want + 1);
		ssize_t n = read(fd, out->data + out->len, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = VD_EIO;
			break;
		}
		if (n == 0)
			break;
		out->len += (size_t)n;
	}
	close(fd);
	buf_reserve(out, 1);
	out->data[out->len] = '\0';
	return rc;
}

int host_read_rel(const char *root, const char *rel, size_t max, struct vd_buf *out)
{
	char path[HOST_ROOT_MAX + 128];
	snprintf(path, sizeof(path), "%s%s", root, rel);
	return host_read_file(path, max, out);
}

bool host_read_line(const char *root, const char *rel, char *out, size_t outlen)
{
	char path[HOST_ROOT_MAX + 256], b[512];
	snprintf(path, sizeof(path), "%s%s", root, rel);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(b, sizeof(b), f) != NULL;
	fclose(f);
	if (!ok)
		return false;
	size_t n = strcspn(b, "\r\n");
	while (n && (b[n - 1] == ' ' || b[n - 1] == '\t'))
		n--;
	size_t s = strspn(b, " \t");
	if (s >= n)
		return false;
	snprintf(out, outlen, "%.*s", (int)(n - s), b + s);
	return true;
}

/* ---- small scanning helpers --------------------------------------------- */

struct scan {
	const char *p, *end;
};

/* Next line as [*ls, *le) (without '\n'); false at the end. */
static bool next_line(struct scan *s, const char **ls, const char **le)
{
	if (s->p >= s->end)
		return false;
	const char *nl = memchr(s->p, '\n', (size_t)(s->end - s->p));
	*ls = s->p;
	*le = nl ? nl : s->end;
	s->p = nl ? nl + 1 : s->end;
	return true;
}

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* Unsigned decimal at *pp (after blanks), saturating; false if no digit. */
static bool scan_u64(const char **pp, const char *end, uint64_t *out)
{
	const char *p = skip_blank(*pp, end);
	if (p >= end || *p < '0' || *p > '9')
		return false;
	uint64_t v = 0;
	while (p < end && *p >= '0' && *p <= '9') {
		unsigned dgt = (unsigned)(*p - '0');
		v = v > (UINT64_MAX - dgt) / 10 ? UINT64_MAX : v * 10 + dgt;
		p++;
	}
	*pp = p;
	*out = v;
	return true;
}

/* A number token (strtod syntax) at *pp after blanks; false if none. */
static bool scan_double(const char **pp, const char *end, double *out)
{
	const char *p = skip_blank(*pp, end);
	char tmp[64];
	size_t n = 0;
	while (p + n < end && n < sizeof(tmp) - 1 && p[n] != ' ' && p[n] != '\t' &&
	       p[n] != '\n' && p[n] != '\r')
		n++;
	if (n == 0)
		return false;
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	char *e;
	double v = strtod(tmp, &e);
	if (e == tmp || *e != '\0' || v != v)
		return false;
	*out = v;
	*pp = p + n;
	return true;
}

static bool starts_with(const char *ls, const char *le, const char *pfx)
{
	size_t n = strlen(pfx);
	return (size_t)(le - ls) >= n && memcmp(ls, pfx, n) == 0;
}

/* Copy [s, e) trimmed of blanks into out (truncated, NUL-terminated). */
static void copy_trim(const char *s, const char *e, char *out, size_t outlen)
{
	s = skip_blank(s, e);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		e--;
	size_t n = VD_MIN((size_t)(e - s), outlen - 1);
	memcpy(out, s, n);
	out[n] = '\0';
}

/* ---- /proc/stat ----------------------------------------------------------- */

uint64_t host_cpu_total(const struct host_cpu_times *t)
{
	return t->user + t->nice + t->system + t->idle + t->iowait + t->irq +
	       t->softirq + t->steal;
}

int host_parse_stat(const char *text, size_t len, struct host_cpu_times *cpu,
		    uint64_t *btime)
{
	struct scan s = { text, text + len };
	const char *ls, *le;
	bool have_cpu = false;
	memset(cpu, 0, sizeof(*cpu));
	*btime = 0;
	while (next_line(&s, &ls, &le)) {
		if (!have_cpu && starts_with(ls, le, "cpu ")) {
			const char *p = ls + 4;
			uint64_t *f[] = { &cpu->user, &cpu->nice, &cpu->system, &cpu->idle,
					  &cpu->iowait, &cpu->irq, &cpu->softirq, &cpu->steal };
			unsigned got = 0;
			for (size_t i = 0; i < VD_ARRAY_SIZE(f); i++) {
				if (!scan_u64(&p, le, f[i]))
					break;
				got++;
			}
			/* user, nice, system, idle at least (kernels since 2.4) */
			if (got >= 4)
				have_cpu = true;
			else
				memset(cpu, 0, sizeof(*cpu));
		} else if (starts_with(ls, le, "btime ")) {
			const char *p = ls + 6;
			uint64_t v;
			if (scan_u64(&p, le, &v))
				*btime = v;
		}
	}
	return have_cpu ? 0 : VD_EPROTO;
}

int host_parse_stat_cpus(const char *text, size_t len, struct host_cpu_times *out,
			 unsigned *ids, size_t max)
{
	struct scan s = { text, text + len };
	const char *ls, *le;
	size_t n = 0;
	while (n < max && next_line(&s, &ls, &le)) {
		if (!starts_with(ls, le, "cpu") || le - ls < 4 || ls[3] < '0' || ls[3] > '9')
			continue;
		const char *p = ls + 3;
		uint64_t id;
		if (!scan_u64(&p, le, &id) || id > UINT32_MAX || p >= le || (*p != ' ' && *p != '\t'))
			continue;
		struct host_cpu_times t;
		memset(&t, 0, sizeof(t));
		uint64_t *f[] = { &t.user, &t.nice, &t.system, &t.idle,
				  &t.iowait, &t.irq, &t.softirq, &t.steal };
		unsigned got = 0;
		for (size_t i = 0; i < VD_ARRAY_SIZE(f); i++) {
			if (!scan_u64(&p, le, f[i]))
				break;
			got++;
		}
		if (got < 4)
			continue;
		ids[n] = (unsigned)id;
		out[n++] = t;
	}
	return (int)n;
}

/* ---- /proc/meminfo ------------------------------------------------------ */

int host_parse_meminfo(const char *text, size_t len, struct host_meminfo *m)
{
	static const struct { const char *key; size_t off; } keys[] = {
		{ "MemTotal:", offsetof(struct host_meminfo, total_kb) },
		{ "MemFree:", offsetof(struct host_meminfo, free_kb) },
		{ "Buffers:", offsetof(struct host_meminfo, buffers_kb) },
		{ "Cached:", offsetof(struct host_meminfo, cached_kb) },
		{ "SReclaimable:", offsetof(struct host_meminfo, sreclaimable_kb) },
		{ "SwapTotal:", offsetof(struct host_meminfo, swap_total_kb) },
		{ "SwapFree:", offsetof(struct host_meminfo, swap_free_kb) },
		{ "AnonHugePages:", offsetof(struct host_meminfo, anon_huge_kb) },
	};
	struct scan s = { text, text + len };
	const char *ls, *le;
	memset(m, 0, sizeof(*m));
	while (next_line(&s, &ls, &le)) {
		for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++) {
			if (!starts_with(ls, le, keys[i].key))
				continue;
			const char *p = ls + strlen(keys[i].key);
			uint64_t v;
			if (!scan_u64(&p, le, &v))
				break;
			/* values are in kB; a unit-less line is taken as bytes */
			p = skip_blank(p, le);
			if (p >= le)
				v /= 1024;
			*(uint64_t *)(void *)((char *)m + keys[i].off) = v;
			break;
		}
	}
	return m->total_kb > 0 ? 0 : VD_EPROTO;
}

int host_parse_node_meminfo(const char *text, size_t len, uint64_t *total_kb, uint64_t *free_kb)
{
	struct scan s = { text, text + len };
	const char *ls, *le;
	*total_kb = *free_kb = 0;
	bool have_total = false;
	while (next_line(&s, &ls, &le)) {
		/* "Node 0 MemTotal:       16318436 kB" */
		const char *p = skip_blank(ls, le);
		if (!starts_with(p, le, "Node "))
			continue;
		p += 5;
		uint64_t node;
		if (!scan_u64(&p, le, &node))
			continue;
		p = skip_blank(p, le);
		uint64_t v;
		if (starts_with(p, le, "MemTotal:")) {
			p += 9;
			if (scan_u64(&p, le, &v)) {
				*total_kb = v;
				have_total = true;
			}
		} else if (starts_with(p, le, "MemFree:")) {
			p += 8;
			if (scan_u64(&p, le, &v))
				*free_kb = v;
		}
	}
	return have_total ? 0 : VD_EPROTO;
}

/* ---- /proc/loadavg, /proc/uptime, /proc/<pid>/stat ------------------------ */

int host_parse_loadavg(const char *text, size_t len, double load[3])
{
	const char *p = text, *end = text + len;
	for (int i = 0; i < 3; i++) {
		if (!scan_double(&p, end, &load[i]) || load[i] < 0) {
			load[0] = load[1] = load[2] = 0;
			return VD_EPROTO;
		}
	}
	return 0;
}

int host_parse_uptime(const char *text, size_t len, double *uptime)
{
	const char *p = text;
	if (!scan_double(&p, text + len, uptime) || *uptime < 0) {
		*uptime = 0;
		return VD_EPROTO;
	}
	return 0;
}

int host_parse_pid_stat(const char *text, size_t len, uint64_t *utime, uint64_t *stime)
{
	*utime = *stime = 0;
	/* comm may hold anything: the fields start after the last ')' */
	const char *end = text + len, *p = NULL;
	for (const char *q = text; q < end; q++)
		if (*q == ')')
			p = q + 1;
	if (!p)
		return VD_EPROTO;
	/* fields after comm: 3 state, 4 ppid ... 14 utime, 15 stime */
	for (int field = 3; field <= 15; field++) {
		p = skip_blank(p, end);
		if (p >= end || *p == '\n')
			return VD_EPROTO;
		const char *tok = p;
		while (p < end && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
		if (field == 14 || field == 15) {
			const char *t = tok;
			uint64_t v;
			if (!scan_u64(&t, p, &v) || t != p)
				return VD_EPROTO;
			*(field == 14 ? utime : stime) = v;
		}
	}
	return 0;
}

/* ---- /proc/net/dev -------------------------------------------------------- */

int host_parse_netdev(const char *text, size_t len, struct host_netdev *out, size_t max)
{
	struct scan s = { text, text + len };
	const char *ls, *le;
	size_t n = 0;
	while (n < max && next_line(&s, &ls, &le)) {
		const char *colon = memchr(ls, ':', (size_t)(le - ls));
		if (!colon)
			continue;   /* the two header lines, or junk */
		struct host_netdev nd;
		memset(&nd, 0, sizeof(nd));
		copy_trim(ls, colon, nd.name, sizeof(nd.name));
		if (nd.name[0] == '\0' || strchr(nd.name, '|') || strchr(nd.name, ' '))
			continue;
		uint64_t v[16];
		const char *p = colon + 1;
		size_t got = 0;
		while (got < 16 && scan_u64(&p, le, &v[got]))
			got++;
		if (got < 16)
			continue;
		nd.rx_bytes = v[0];
		nd.rx_packets = v[1];
		nd.rx_errs = v[2];
		nd.rx_drop = v[3];
		nd.tx_bytes = v[8];
		nd.tx_packets = v[9];
		nd.tx_errs = v[10];
		nd.tx_drop = v[11];
		out[n++] = nd;
	}
	return (int)n;
}

/* ---- /proc/cpuinfo -------------------------------------------------------- */

#define CPUINFO_MAX_IDS 4096

struct id_set {
	uint64_t ids[CPUINFO_MAX_IDS];
	unsigned n;
};

static void id_add(struct id_set *s, uint64_t id)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->ids[i] == id)
			return;
	if (s->n < CPUINFO_MAX_IDS)
		s->ids[s->n++] = id;
}

void host_cpuinfo_free(struct host_cpuinfo *ci)
{
	free(ci->flags);
	ci->flags = NULL;
}

int host_parse_cpuinfo(const char *text, size_t len, struct host_cpuinfo *ci)
{
	memset(ci, 0, sizeof(*ci));
	struct id_set *sockets = xcalloc(1, sizeof(*sockets));
	struct id_set *cores = xcalloc(1, sizeof(*cores));
	struct scan s = { text, text + len };
	const char *ls, *le;
	bool have_phys = false, have_core = false;
	uint64_t phys = 0;
	while (next_line(&s, &ls, &le)) {
		const char *colon = memchr(ls, ':', (size_t)(le - ls));
		if (!colon)
			continue;
		char key[64];
		copy_trim(ls, colon, key, sizeof(key));
		const char *val = skip_blank(colon + 1, le);
		if (strcmp(key, "processor") == 0) {
			ci->threads++;
			have_phys = false;
		} else if (strcmp(key, "physical id") == 0) {
			const char *p = val;
			if (scan_u64(&p, le, &phys)) {
				have_phys = true;
				id_add(sockets, phys);
			}
		} else if (strcmp(key, "core id") == 0) {
			const char *p = val;
			uint64_t core;
			if (scan_u64(&p, le, &core)) {
				have_core = true;
				id_add(cores, ((have_phys ? phys : 0) << 32) ^ core);
			}
		} else if (!ci->model[0] && (strcmp(key, "model name") == 0 ||
					     strcmp(key, "CPU part") == 0 ||
					     strcmp(key, "cpu") == 0)) {
			copy_trim(val, le, ci->model, sizeof(ci->model));
		} else if (!ci->speed[0] && (strcmp(key, "cpu MHz") == 0 ||
					     strcmp(key, "BogoMIPS") == 0 ||
					     strcmp(key, "cpu MHz dynamic") == 0)) {
			copy_trim(val, le, ci->speed, sizeof(ci->speed));
		} else if (!ci->flags && (strcmp(key, "flags") == 0 ||
					  strcmp(key, "Features") == 0 ||
					  strcmp(key, "features") == 0)) {
			char *f = xmalloc((size_t)(le - val) + 1);
			copy_trim(val, le, f, (size_t)(le - val) + 1);
			ci->flags = f;
		}
	}
	if (!ci->speed[0])
		snprintf(ci->speed, sizeof(ci->speed), "unavailable");
	if (ci->threads == 0)
		ci->threads = 1;
	ci->sockets = sockets->n ? sockets->n : 1;
	ci->cores = have_core && cores->n ? cores->n : ci->threads;
	/* keep threads >= cores >= sockets whatever the file says */
	if (ci->cores > ci->threads)
		ci->cores = ci->threads;
	if (ci->sockets > ci->cores)
		ci->sockets = ci->cores;
	free(sockets);
	free(cores);
	return 0;
}

/* ---- KEY=value files -------------------------------------------------------- */

int host_parse_keyval(const char *text, size_t len, const char *key, char *out, size_t outlen)
{
	struct scan s = { text, text + len };
	const char *ls, *le;
	size_t klen = strlen(key);
	while (next_line(&s, &ls, &le)) {
		ls = skip_blank(ls, le);
		if ((size_t)(le - ls) <= klen || memcmp(ls, key, klen) != 0 || ls[klen] != '=')
			continue;
		const char *v = ls + klen + 1, *ve = le;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
			ve--;
		if (ve - v >= 2 && (*v == '"' || *v == '\'') && ve[-1] == *v) {
			v++;
			ve--;
		}
		size_t n = VD_MIN((size_t)(ve - v), outlen - 1);
		memcpy(out, v, n);
		out[n] = '\0';
		return 0;
	}
	if (outlen)
		out[0] = '\0';
	return VD_ENOENT;
}
