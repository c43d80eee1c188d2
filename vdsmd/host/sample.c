/* vdsmd/host/sample.c - the host sampler: raw counters from /proc and /sys,
 * immutable reference-counted snapshots, and the thread that publishes one
 * every interval.  Only the pointer swap (and a reader's load + ref) happen
 * under snap_lock; all file reads and arithmetic happen outside it. */
#include "host_int.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../../common/log.h"

/* Upper bounds for the files we read (bigger files are truncated, which the
 * parsers tolerate). */
#define MAX_STAT (4u << 20)      /* /proc/stat grows with CPUs and IRQs */
#define MAX_SMALL (64u << 10)
#define MAX_NETDEV (1u << 20)

static void path_join(char *out, size_t outlen, const char *root, const char *rel)
{
	snprintf(out, outlen, "%s%s", root, rel);
}

void host_raw_alloc(struct host_raw *r)
{
	memset(r, 0, sizeof(*r));
	r->ifs = xmalloc(HOST_MAX_IFACES * sizeof(r->ifs[0]));
	r->cpus = xmalloc(HOST_MAX_CPUS * sizeof(r->cpus[0]));
	r->cpu_ids = xmalloc(HOST_MAX_CPUS * sizeof(r->cpu_ids[0]));
}

void host_raw_release(struct host_raw *r)
{
	free(r->ifs);
	free(r->cpus);
	free(r->cpu_ids);
	r->ifs = NULL;
	r->cpus = NULL;
	r->cpu_ids = NULL;
	r->nif = r->ncpu = 0;
}

void host_raw_read(const char *root, struct vd_buf *b, struct host_raw *r,
		   const struct host_topo *topo)
{
	struct host_netdev *ifs = r->ifs;
	struct host_cpu_times *cpus = r->cpus;
	unsigned *cpu_ids = r->cpu_ids;
	memset(r, 0, sizeof(*r));
	r->ifs = ifs;
	r->cpus = cpus;
	r->cpu_ids = cpu_ids;
	r->mono_ns = vd_now_ns();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	r->wall = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;

	if (host_read_rel(root, "/proc/stat", MAX_STAT, b) == 0) {
		r->cpu_ok = host_parse_stat(b->data, b->len, &r->cpu, &r->btime) == 0;
		if (cpus && cpu_ids) {
			int n = host_parse_stat_cpus(b->data, b->len, cpus, cpu_ids, HOST_MAX_CPUS);
			r->ncpu = n > 0 ? (size_t)n : 0;
		}
	}
	if (host_read_rel(root, "/proc/uptime", MAX_SMALL, b) == 0)
		host_parse_uptime(b->data, b->len, &r->uptime);
	if (host_read_rel(root, "/proc/meminfo", MAX_SMALL, b) == 0)
		r->mem_ok = host_parse_meminfo(b->data, b->len, &r->mem) == 0;
	if (host_read_rel(root, "/proc/loadavg", MAX_SMALL, b) == 0)
		r->load_ok = host_parse_loadavg(b->data, b->len, r->load) == 0;
	if (host_read_rel(root, "/proc/self/stat", MAX_SMALL, b) == 0)
		r->self_ok = host_parse_pid_stat(b->data, b->len, &r->self_utime,
						 &r->self_stime) == 0;
	if (ifs && host_read_rel(root, "/proc/net/dev", MAX_NETDEV, b) == 0) {
		int n = host_parse_netdev(b->data, b->len, ifs, HOST_MAX_IFACES);
		r->nif = n > 0 ? (size_t)n : 0;
	}
	for (unsigned i = 0; topo && i < topo->nnodes; i++) {
		char rel[96];
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%u/meminfo", topo->nodes[i]);
		struct host_node_raw *nr = &r->nodes[r->nnode];
		if (host_read_rel(root, rel, MAX_SMALL, b) == 0 &&
		    host_parse_node_meminfo(b->data, b->len, &nr->total_kb, &nr->free_kb) == 0) {
			nr->id = topo->nodes[i];
			snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%u/hugepages",
				 topo->nodes[i]);
			nr->nhuge = host_huge_read(root, rel, nr->huge, HOST_HUGE_SIZES);
			r->nnode++;
		}
	}
	host_ksm_read(root, &r->ksm);
	if (r->ksm.present) {
		int pid = host_ksmd_pid(root, 0);
		char rel[48];
		uint64_t ut, st;
		snprintf(rel, sizeof(rel), "/proc/%d/stat", pid);
		if (pid > 0 && host_read_rel(root, rel, MAX_SMALL, b) == 0 &&
		    host_parse_pid_stat(b->data, b->len, &ut, &st) == 0) {
			r->ksmd_ok = true;
			r->ksmd_ticks = ut + st;
		}
	}
	r->nhuge = host_huge_read(root, "/sys/kernel/mm/hugepages", r->huge, HOST_HUGE_SIZES);
	for (size_t i = 0; i < HOST_DISK_PATHS; i++)
		r->disk_free_mib[i] = host_disk_free_mib(root, host_disk_paths[i]);
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

void host_topo_read(const char *root, struct host_topo *t)
{
	memset(t, 0, sizeof(*t));
	char path[HOST_ROOT_MAX + 128];
	path_join(path, sizeof(path), root, "/sys/devices/system/node");
	DIR *dir = opendir(path);
	if (!dir)
		return;
	struct dirent *de;
	while ((de = readdir(dir)) != NULL && t->nnodes < HOST_MAX_NODES) {
		const char *n = de->d_name;
		if (strncmp(n, "node", 4) != 0 || !n[4] || strspn(n + 4, "0123456789") != strlen(n + 4) ||
		    strlen(n + 4) > 5)
			continue;
		t->nodes[t->nnodes++] = (unsigned)atoi(n + 4);
	}
	closedir(dir);
	qsort(t->nodes, t->nnodes, sizeof(t->nodes[0]), cmp_unsigned);
	struct vd_buf b = VD_BUF_INIT;
	for (unsigned i = 0; i < t->nnodes; i++) {
		char rel[96];
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%u/cpulist", t->nodes[i]);
		if (host_read_rel(root, rel, MAX_SMALL, &b) != 0)
			continue;
		/* "0-3,8-11" */
		const char *p = b.data;
		while (*p && *p != '\n') {
			char *e;
			long lo = strtol(p, &e, 10), hi;
			if (e == p || lo < 0)
				break;
			p = e;
			hi = lo;
			if (*p == '-') {
				hi = strtol(p + 1, &e, 10);
				if (e == p + 1 || hi < lo)
					break;
				p = e;
			}
			for (long c = lo; c <= hi && c < HOST_MAX_CPUS; c++)
				t->cpu_node[c] = (uint16_t)t->nodes[i];
			if (*p != ',')
				break;
			p++;
		}
	}
	buf_free(&b);
}

static void iface_sysfs(const char *root, struct host_iface *it)
{
	char rel[128], v[64];
	/* names come from /proc/net/dev: refuse anything path-like */
	if (strchr(it->name, '/') || strcmp(it->name, "..") == 0 || strcmp(it->name, ".") == 0) {
		snprintf(it->state, sizeof(it->state), "unknown");
		it->speed = 1000;
		return;
	}
	snprintf(rel, sizeof(rel), "/sys/class/net/%s/operstate", it->name);
	const char *st = "unknown";
	if (host_read_line(root, rel, v, sizeof(v)))
		st = strcmp(v, "up") == 0 ? "up" : strcmp(v, "down") == 0 ? "down" : "unknown";
	snprintf(it->state, sizeof(it->state), "%s", st);
	snprintf(rel, sizeof(rel), "/sys/class/net/%s/speed", it->name);
	long sp = 0;
	if (host_read_line(root, rel, v, sizeof(v))) {
		char *e;
		sp = strtol(v, &e, 10);
		if (e == v || sp <= 0 || sp > 100000000)
			sp = 0;
	}
	/* VDSM reports 1000 when the speed is unknown */
	it->speed = sp > 0 ? (unsigned)sp : 1000;
}

static void thp_state(const char *root, char *out, size_t outlen)
{
	char v[128];
	snprintf(out, outlen, "never");
	if (!host_read_line(root, "/sys/kernel/mm/transparent_hugepage/enabled", v, sizeof(v)))
		return;
	/* "always [madvise] never": the bracketed word is the mode */
	char *l = strchr(v, '['), *r = l ? strchr(l, ']') : NULL;
	if (l && r && r > l + 1) {
		*r = '\0';
		snprintf(out, outlen, "%s", l + 1);
	}
}

static double pct(uint64_t part, uint64_t total)
{
	return total ? 100.0 * (double)part / (double)total : 0.0;
}

/* Shares of one CPU's jiffies between two readings (VDSM: user+nice as user,
 * system+irq+softirq as sys, idle = the rest). */
static void cpu_shares(const struct host_cpu_times *a, const struct host_cpu_times *b,
		       double *user, double *sys, double *idle)
{
	uint64_t ta = host_cpu_total(a), tb = host_cpu_total(b);
	uint64_t dt = tb > ta ? tb - ta : 0;
#define D(f) (b->f >= a->f ? b->f - a->f : 0)
	uint64_t du = D(user) + D(nice);
	uint64_t ds = D(system) + D(irq) + D(softirq);
#undef D
	*user = pct(du, dt);
	*sys = pct(ds, dt);
	if (*user > 100.0)
		*user = 100.0;
	if (*sys > 100.0 - *user)
		*sys = 100.0 - *user;
	*idle = 100.0 - *user - *sys;
	if (*idle < 0)
		*idle = 0;
}

struct host_snapshot *host_snapshot_build(const struct host_raw *prev,
					  const struct host_raw *cur,
					  const char *root, long clk_tck,
					  const struct host_topo *topo)
{
	size_t ncpu = prev->cpus && cur->cpus ? cur->ncpu : 0;
	size_t nnode = cur->nnode ? cur->nnode : cur->mem_ok ? 1 : 0;
	size_t off_cpus = sizeof(struct host_snapshot) + cur->nif * sizeof(struct host_iface);
	size_t off_nodes = off_cpus + ncpu * sizeof(struct host_cpu_stat);
	struct host_snapshot *s = xcalloc(1, off_nodes + nnode * sizeof(struct host_node_mem));
	atomic_init(&s->refs, 1);
	s->cpus = (struct host_cpu_stat *)(void *)((char *)s + off_cpus);
	s->nodes = (struct host_node_mem *)(void *)((char *)s + off_nodes);
	s->sample_time = cur->wall;

	/* CPU: shares of the jiffies elapsed over all CPUs (VDSM: user+nice as
	 * user, system+irq+softirq as sys, idle = 100 - both). */
	if (prev->cpu_ok && cur->cpu_ok)
		cpu_shares(&prev->cpu, &cur->cpu, &s->cpu_user, &s->cpu_sys, &s->cpu_idle);
	else
		s->cpu_idle = 100.0;

	/* per CPU, for CPUs present in both readings (VDSM skips the others) */
	for (size_t i = 0; i < ncpu; i++) {
		unsigned id = cur->cpu_ids[i];
		size_t j = i < prev->ncpu && prev->cpu_ids[i] == id ? i : prev->ncpu;
		for (size_t k = 0; j == prev->ncpu && k < prev->ncpu; k++)
			if (prev->cpu_ids[k] == id)
				j = k;
		if (j == prev->ncpu)
			continue;
		struct host_cpu_stat *cs = &s->cpus[s->ncpu++];
		cs->id = id;
		cs->node = topo && id < HOST_MAX_CPUS ? topo->cpu_node[id] : 0;
		cpu_shares(&prev->cpus[j], &cur->cpus[i], &cs->user, &cs->sys, &cs->idle);
	}

	/* the agent's own CPU, in % of one CPU over wall time */
	if (prev->self_ok && cur->self_ok && cur->mono_ns > prev->mono_ns && clk_tck > 0) {
		double secs = (double)(cur->mono_ns - prev->mono_ns) / 1e9;
		uint64_t du = cur->self_utime >= prev->self_utime ? cur->self_utime - prev->self_utime : 0;
		uint64_t ds = cur->self_stime >= prev->self_stime ? cur->self_stime - prev->self_stime : 0;
		s->cpu_user_vdsmd = 100.0 * (double)du / (double)clk_tck / secs;
		s->cpu_sys_vdsmd = 100.0 * (double)ds / (double)clk_tck / secs;
	}

	if (cur->load_ok)
		s->cpu_load = cur->load[1];

	if (cur->mem_ok) {
		const struct host_meminfo *m = &cur->mem;
		uint64_t avail = m->free_kb + m->cached_kb + m->buffers_kb;
		/* VDSM: memUsed = 100 - int(100 * (free+cached+buffers) / total) */
		int used = 100 - (int)(100.0 * (double)avail / (double)m->total_kb);
		s->mem_used = used < 0 ? 0 : used > 100 ? 100 : used;
		uint64_t free_kb = avail + m->sreclaimable_kb;
		if (free_kb > m->total_kb)
			free_kb = m->total_kb;
		s->mem_free_mib = free_kb / 1024;
		s->swap_total_mib = m->swap_total_kb / 1024;
		s->swap_free_mib = VD_MIN(m->swap_free_kb, m->swap_total_kb) / 1024;
		s->anon_huge_mib = m->anon_huge_kb / 1024;
	}

	/* NUMA nodes' free memory (VDSM: used % is 100 for a node without
	 * memory); without node directories one node 0 from /proc/meminfo */
	for (size_t i = 0; i < cur->nnode; i++) {
		const struct host_node_raw *nr = &cur->nodes[i];
		struct host_node_mem *nm = &s->nodes[s->nnode++];
		nm->id = nr->id;
		uint64_t free_kb = VD_MIN(nr->free_kb, nr->total_kb);
		nm->free_mib = free_kb / 1024;
		nm->percent = nr->total_kb ? 100 - (int)(100.0 * (double)free_kb / (double)nr->total_kb) : 100;
		nm->nhuge = nr->nhuge;
		memcpy(nm->huge, nr->huge, sizeof(nm->huge));
	}
	if (!cur->nnode && cur->mem_ok) {
		struct host_node_mem *nm = &s->nodes[s->nnode++];
		uint64_t free_kb = VD_MIN(cur->mem.free_kb, cur->mem.total_kb);
		nm->id = 0;
		nm->free_mib = free_kb / 1024;
		nm->percent = 100 - (int)(100.0 * (double)free_kb / (double)cur->mem.total_kb);
	}

	if (cur->btime)
		s->boot_time = cur->btime;
	else if (cur->uptime > 0 && cur->wall > cur->uptime)
		s->boot_time = (uint64_t)(cur->wall - cur->uptime);

	for (size_t i = 0; i < cur->nif; i++) {
		const struct host_netdev *nd = &cur->ifs[i];
		struct host_iface *it = &s->ifs[s->nif++];
		snprintf(it->name, sizeof(it->name), "%s", nd->name);
		it->rx = nd->rx_bytes;
		it->tx = nd->tx_bytes;
		it->rx_dropped = nd->rx_drop;
		it->tx_dropped = nd->tx_drop;
		it->rx_errors = nd->rx_errs;
		it->tx_errors = nd->tx_errs;
		iface_sysfs(root, it);
		s->rx_dropped += nd->rx_drop;
		s->tx_dropped += nd->tx_drop;
	}
	thp_state(root, s->thp_state, sizeof(s->thp_state));

	/* KSM as MOM reports it; ksmd's CPU in % of one CPU over the interval */
	s->ksm = cur->ksm;
	if (prev->ksmd_ok && cur->ksmd_ok && cur->mono_ns > prev->mono_ns && clk_tck > 0 &&
	    cur->ksmd_ticks >= prev->ksmd_ticks) {
		double secs = (double)(cur->mono_ns - prev->mono_ns) / 1e9;
		double p = 100.0 * (double)(cur->ksmd_ticks - prev->ksmd_ticks) / (double)clk_tck / secs;
		s->ksm_cpu = p > 0 ? (int)(p + 0.5) : 0;
	}
	s->nhuge = cur->nhuge;
	memcpy(s->huge, cur->huge, sizeof(s->huge));
	memcpy(s->disk_free_mib, cur->disk_free_mib, sizeof(s->disk_free_mib));
	return s;
}

void host_snapshot_put(struct host_snapshot *s)
{
	if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
		free(s);
}

struct host_snapshot *host_snapshot_get(struct host_state *h)
{
	pthread_mutex_lock(&h->snap_lock);
	struct host_snapshot *s = h->snap;
	if (s)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&h->snap_lock);
	return s;
}

static void publish(struct host_state *h, struct host_snapshot *s)
{
	pthread_mutex_lock(&h->snap_lock);
	struct host_snapshot *old = h->snap;
	h->snap = s;
	pthread_mutex_unlock(&h->snap_lock);
	host_snapshot_put(old);
	atomic_fetch_add(&h->samples, 1);
}

static void raw_swap(struct host_raw *a, struct host_raw *b)
{
	struct host_raw t = *a;
	*a = *b;
	*b = t;
}

void host_sample_now(struct host_state *h)
{
	struct host_raw cur;
	host_raw_alloc(&cur);
	host_raw_read(h->root, &h->scratch, &cur, &h->topo);
	publish(h, host_snapshot_build(&h->prev, &cur, h->root, h->clk_tck, &h->topo));
	raw_swap(&h->prev, &cur);
	host_raw_release(&cur);
	buf_shrink(&h->scratch);
}

static void *sampler_main(void *arg)
{
	struct host_state *h = arg;
	pthread_mutex_lock(&h->stop_lock);
	while (!h->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += h->interval_ms / 1000;
		until.tv_nsec += (long)(h->interval_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		int rc = 0;
		while (!h->stop && rc != ETIMEDOUT)
			rc = pthread_cond_timedwait(&h->stop_cond, &h->stop_lock, &until);
		if (h->stop)
			break;
		pthread_mutex_unlock(&h->stop_lock);
		host_sample_now(h);
		pthread_mutex_lock(&h->stop_lock);
	}
	pthread_mutex_unlock(&h->stop_lock);
	return NULL;
}

struct host_state *host_state_new(struct vdsmd *d, const struct host_opts *o)
{
	struct host_state *h = xcalloc(1, sizeof(*h));
	h->d = d;
	h->start_ms = vd_now_ms();
	snprintf(h->root, sizeof(h->root), "%s", o->root ? o->root : "");
	/* "/" means the real root: paths are built as root + "/proc/..." */
	if (strcmp(h->root, "/") == 0)
		h->root[0] = '\0';
	h->interval_ms = o->interval_ms ? o->interval_ms : 15000;
	h->clk_tck = sysconf(_SC_CLK_TCK);
	pthread_mutex_init(&h->snap_lock, NULL);
	pthread_mutex_init(&h->stop_lock, NULL);
	pthread_mutex_init(&h->mom.lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->stop_cond, &ca);
	pthread_condattr_destroy(&ca);
	buf_init(&h->scratch);
	atomic_init(&h->samples, 0);


	/* first sample: two readings a short interval apart, so the first
	 * snapshot already has CPU percentages */
	host_topo_read(h->root, &h->topo);
	h->caps = host_caps_new(h->root, &h->topo,
				d ? d->cfg.libvirt_uri : o->libvirt_uri);
	host_raw_alloc(&h->prev);
	host_raw_read(h->root, &h->scratch, &h->prev, &h->topo);
	unsigned first = o->first_ms ? o->first_ms : 150;
	struct timespec ts = { first / 1000, (long)(first % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	host_sample_now(h);

	if (o->start_thread) {
		/* the sampler takes no signals: they stay with the loop thread */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (pthread_create(&h->thread, NULL, sampler_main, h) == 0)
			h->thread_started = true;
		else
			log_error("host: cannot start the sampler thread; stats stay at the first sample");
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return h;
}

void host_state_free(struct host_state *h)
{
	if (!h)
		return;
	if (h->thread_started) {
		pthread_mutex_lock(&h->stop_lock);
		h->stop = true;
		pthread_cond_signal(&h->stop_cond);
		pthread_mutex_unlock(&h->stop_lock);
		pthread_join(h->thread, NULL);
	}
	host_snapshot_put(h->snap);
	host_raw_release(&h->prev);
	buf_free(&h->scratch);
	host_caps_free(h->caps);
	pthread_cond_destroy(&h->stop_cond);
	pthread_mutex_destroy(&h->stop_lock);
	pthread_mutex_destroy(&h->snap_lock);
	pthread_mutex_destroy(&h->mom.lock);
	free(h);
}
