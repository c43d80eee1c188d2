/* vdsmd/host/verbs.c - handlers of the Host family declared in
 * api/Host.yaml.  They run on the loop thread and never block: getStats
 * reads the latest snapshot (a mutex-guarded pointer load + reference),
 * getCapabilities copies its cached encoding.  The engine binds them with
 * app = the struct vdsmd (d->host is the backend state).
 *
 * Value types follow VDSM (host/api.py + host/stats.py): floats go out as
 * "%.2f" strings, integer stats VDSM converts with str() as decimal strings;
 * memFree/swapTotal/swapFree/vm counts as JSON integers, sampleTime as a
 * float. */
#include "host_int.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static struct host_state *state_of(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	return d ? d->host : NULL;
}

/* "%.2f" of a non-negative value below 1e15 (percentages, loads). */
static void kstr_2f(struct vd_writer *w, const char *k, double v)
{
	if (!(v >= 0) || v >= 1e15) {
		vw_kstrf(w, k, "%.2f", v);
		return;
	}
	uint64_t c = (uint64_t)(v * 100.0 + 0.5);
	char b[32];
	size_t i = sizeof(b);
	b[--i] = (char)('0' + c % 10);
	c /= 10;
	b[--i] = (char)('0' + c % 10);
	c /= 10;
	b[--i] = '.';
	do {
		b[--i] = (char)('0' + c % 10);
		c /= 10;
	} while (c);
	vw_keyz(w, k);
	vw_string(w, b + i, sizeof(b) - i);
}

/* Host.ping2 / Host.confirmConnectivity: nothing written → true. */
static int host_ping2(struct rpc_call *c)
{
	(void)c;
	return 0;
}

/* Its meaning lives in the network backend (a setupNetworks waiting for the
 * engine's confirmation), handed over by the daemon in host_peers. */
static int host_confirm_connectivity(struct rpc_call *c)
{
	struct host_state *h = state_of(c);
	const struct host_peers *peers = h ? atomic_load(&h->peers) : NULL;
	if (peers && peers->confirm_connectivity)
		peers->confirm_connectivity(peers->ctx);
	return 0;
}

static void write_network(struct vd_writer *w, const struct host_snapshot *s)
{
	vw_keyz(w, "network");
	vw_begin_object(w);
	for (size_t i = 0; i < s->nif; i++) {
		const struct host_iface *it = &s->ifs[i];
		vw_keyz(w, it->name);
		vw_begin_object(w);
		vw_kstr(w, "name", it->name);
		vw_kstr_u64(w, "speed", it->speed);
		vw_kstr_u64(w, "rxDropped", it->rx_dropped);
		vw_kstr_u64(w, "txDropped", it->tx_dropped);
		vw_kstr_u64(w, "rxErrors", it->rx_errors);
		vw_kstr_u64(w, "txErrors", it->tx_errors);
		vw_kstr(w, "state", it->state);
		vw_kstr_u64(w, "rx", it->rx);
		vw_kstr_u64(w, "tx", it->tx);
		vw_keyz(w, "sampleTime");
		vw_double(w, s->sample_time);
		vw_end_object(w);
	}
	vw_end_object(w);
}

/* cpuStatistics: {"<cpu>": {nodeIndex, cpuUser, cpuSys, cpuIdle}} (VDSM
 * CpuCoreStatsMap); numaNodeMemFree: {"<node>": {memFree, memPercent}}. */
static void write_cpu_numa(struct vd_writer *w, const struct host_snapshot *s)
{
	vw_keyz(w, "cpuStatistics");
	vw_begin_object(w);
	for (size_t i = 0; i < s->ncpu; i++) {
		const struct host_cpu_stat *c = &s->cpus[i];
		host_key_u(w, c->id);
		vw_begin_object(w);
		vw_kint(w, "nodeIndex", c->node);
		kstr_2f(w, "cpuUser", c->user);
		kstr_2f(w, "cpuSys", c->sys);
		kstr_2f(w, "cpuIdle", c->idle);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "numaNodeMemFree");
	vw_begin_object(w);
	for (size_t i = 0; i < s->nnode; i++) {
		host_key_u(w, s->nodes[i].id);
		vw_begin_object(w);
		vw_kstr_u64(w, "memFree", s->nodes[i].free_mib);
		vw_kint(w, "memPercent", s->nodes[i].percent);
		if (s->nodes[i].nhuge) {
			vw_keyz(w, "hugepages");
			vw_begin_object(w);
			for (size_t k = 0; k < s->nodes[i].nhuge; k++) {
				char sz[24];
				snprintf(sz, sizeof(sz), "%llu",
					 (unsigned long long)s->nodes[i].huge[k].size_kb);
				vw_keyz(w, sz);
				vw_begin_object(w);
				vw_kint(w, "freePages", (int64_t)s->nodes[i].huge[k].free);
				vw_end_object(w);
			}
			vw_end_object(w);
		}
		vw_end_object(w);
	}
	vw_end_object(w);
}

/* ksmState/ksmPages/ksmMergeAcrossNodes/memShared/ksmCpu as VDSM's
 * MomClient.getKsmStats() shapes them; absent when the kernel has no KSM
 * (VDSM leaves them out when it cannot read them). */
static void write_ksm(struct vd_writer *w, const struct host_snapshot *s)
{
	if (!s->ksm.present)
		return;
	long page = sysconf(_SC_PAGESIZE);
	vw_kbool(w, "ksmState", s->ksm.run);
	vw_kint(w, "ksmPages", (int64_t)s->ksm.pages_to_scan);
	vw_kbool(w, "ksmMergeAcrossNodes", s->ksm.merge_across_nodes);
	vw_kint(w, "memShared",
		(int64_t)(s->ksm.pages_sharing * (uint64_t)(page > 0 ? page : 4096) / (1024 * 1024)));
	vw_kint(w, "ksmCpu", s->ksm_cpu);
}

/* hugepages: {"<size kB>": {free_hugepages, nr_hugepages, resv_hugepages,
 * surplus_hugepages, vm.free_hugepages}} (VDSM hugepages.state(), no pages
 * reserved for the host); diskStats: {"<path>": {"free": "<MiB>"}}. */
static void write_huge_disk(struct vd_writer *w, const struct host_snapshot *s)
{
	vw_keyz(w, "hugepages");
	vw_begin_object(w);
	for (size_t i = 0; i < s->nhuge; i++) {
		const struct host_huge *hp = &s->huge[i];
		char k[24];
		snprintf(k, sizeof(k), "%llu", (unsigned long long)hp->size_kb);
		vw_keyz(w, k);
		vw_begin_object(w);
		vw_kint(w, "nr_hugepages", (int64_t)hp->nr);
		vw_kint(w, "free_hugepages", (int64_t)hp->free);
		vw_kint(w, "resv_hugepages", (int64_t)hp->resv);
		vw_kint(w, "surplus_hugepages", (int64_t)hp->surplus);
		vw_kint(w, "vm.free_hugepages", (int64_t)hp->free);
		vw_end_object(w);
	}
	vw_end_object(w);
	vw_keyz(w, "diskStats");
	vw_begin_object(w);
	for (size_t i = 0; i < HOST_DISK_PATHS; i++) {
		vw_keyz(w, host_disk_paths[i]);
		vw_begin_object(w);
		vw_kstrf(w, "free", "%lld", (long long)s->disk_free_mib[i]);
		vw_end_object(w);
	}
	vw_end_object(w);
}

static void write_ha_stats(struct vd_writer *w)
{
	/* no Hosted Engine agent: VDSM's defaults */
	vw_keyz(w, "haStats");
	vw_begin_object(w);
	vw_kbool(w, "configured", false);
	vw_kbool(w, "active", false);
	vw_kint(w, "score", 0);
	vw_kbool(w, "globalMaintenance", false);
	vw_kbool(w, "localMaintenance", false);
	vw_end_object(w);
}

static int host_get_stats(struct rpc_call *c)
{
	struct host_state *h = state_of(c);
	struct host_snapshot *s = h ? host_snapshot_get(h) : NULL;
	if (!s)
		return rpc_fail(c, RPC_E_RECOVERING, "host statistics not sampled yet");
	struct vdsmd *d = h->d;
	struct vd_writer *w = c->w;
	const struct host_peers *peers = atomic_load(&h->peers);

	struct host_vm_counts vms = { 0 };
	if (peers && peers->vm_counts)
		peers->vm_counts(peers->ctx, &vms);
	uint64_t start = d && d->start_ms ? d->start_ms : h->start_ms;
	uint64_t now_ms = vd_now_ms();
	uint64_t elapsed = now_ms > start ? (now_ms - start) / 1000 : 0;
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);

	vw_begin_object(w);
	kstr_2f(w, "cpuUser", s->cpu_user);
	kstr_2f(w, "cpuSys", s->cpu_sys);
	kstr_2f(w, "cpuIdle", s->cpu_idle);
	kstr_2f(w, "cpuUserVdsmd", s->cpu_user_vdsmd);
	kstr_2f(w, "cpuSysVdsmd", s->cpu_sys_vdsmd);
	kstr_2f(w, "cpuLoad", s->cpu_load);
	vw_kstr_u64(w, "memUsed", (uint64_t)s->mem_used);
	vw_kint(w, "memFree", (int64_t)s->mem_free_mib);
	vw_kint(w, "swapTotal", (int64_t)s->swap_total_mib);
	vw_kint(w, "swapFree", (int64_t)s->swap_free_mib);
	vw_kstr_u64(w, "anonHugePages", s->anon_huge_mib);
	vw_kstr(w, "thpState", s->thp_state);
	vw_kint(w, "vmCount", vms.count);
	vw_kint(w, "vmActive", vms.active);
	vw_kint(w, "vmMigrating", vms.migrating);
	vw_kint(w, "incomingVmMigrations", vms.incoming);
	vw_kint(w, "outgoingVmMigrations", vms.outgoing);
	vw_kstr_u64(w, "elapsedTime", elapsed);
	if (s->boot_time)
		vw_kstr_u64(w, "bootTime", s->boot_time);
	vw_kstrf(w, "dateTime", "%04d-%02d-%02dT%02d:%02d:%02d GMT", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	vw_kstr_u64(w, "rxDropped", s->rx_dropped);
	vw_kstr_u64(w, "txDropped", s->tx_dropped);
	write_network(w, s);
	write_cpu_numa(w, s);
	vw_keyz(w, "storageDomains");
	if (peers && peers->write_domain_stats) {
		peers->write_domain_stats(peers->ctx, w);
	} else {
		vw_begin_object(w);
		vw_end_object(w);
	}
	/* no MOM runs beside vdsmd: "disabled" (VDSM's MOMStatus for a host
	 * without MOM); KSM is read from sysfs, as MOM would report it */
	vw_kstr(w, "momStatus", "disabled");
	write_ksm(w, s);
	write_huge_disk(w, s);
	host_mom_write(h, w);
	bool dirty = peers && peers->net_config_dirty && peers->net_config_dirty(peers->ctx);
	vw_kstr(w, "netConfigDirty", dirty ? "True" : "False");
	write_ha_stats(w);
	/* VDSM's v2v.get_jobs_status(): vdsmd runs no virt-v2v imports */
	vw_keyz(w, "v2vJobs");
	vw_begin_object(w);
	vw_end_object(w);
	vw_end_object(w);
	host_snapshot_put(s);
	return 0;
}

/* The codec whose writer uses ops: probed through codec_list(). */
static const struct vd_codec *codec_of(const struct vd_writer_ops *ops)
{
	for (const struct vd_codec *const *cl = codec_list(); *cl; cl++) {
		struct vd_writer tw;
		struct vd_buf tb = VD_BUF_INIT;
		(*cl)->writer_init(&tw, &tb);
		bool same = tw.ops == ops;
		buf_free(&tb);
		if (same)
			return *cl;
	}
	return NULL;
}

void host_caps_write(struct host_caps *c, struct vd_writer *w, const char *local_addr)
{
	if (atomic_load(&c->peers) || local_addr) {
		/* the network sections and lastClientIface change: encode
		 * everything each time */
		host_caps_encode(c, w, local_addr);
		return;
	}
	unsigned n = atomic_load_explicit(&c->nenc, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (c->enc[i].ops == w->ops) {
			vw_raw(w, c->enc[i].bytes, c->enc[i].len);
			return;
		}
	pthread_mutex_lock(&c->enc_lock);
	n = atomic_load_explicit(&c->nenc, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++)
		if (c->enc[i].ops == w->ops) {
			pthread_mutex_unlock(&c->enc_lock);
			vw_raw(w, c->enc[i].bytes, c->enc[i].len);
			return;
		}
	const struct vd_codec *codec = n < HOST_CAPS_CODECS ? codec_of(w->ops) : NULL;
	if (!codec) {
		/* not a registered codec's writer: encode in place, uncached */
		pthread_mutex_unlock(&c->enc_lock);
		host_caps_encode(c, w, NULL);
		return;
	}
	struct vd_writer tw;
	struct vd_buf tb = VD_BUF_INIT;
	codec->writer_init(&tw, &tb);
	host_caps_encode(c, &tw, NULL);
	c->enc[n].ops = w->ops;
	c->enc[n].len = tb.len;
	c->enc[n].bytes = tb.data;   /* owned now */
	atomic_store_explicit(&c->nenc, n + 1, memory_order_release);
	pthread_mutex_unlock(&c->enc_lock);
	vw_raw(w, c->enc[n].bytes, c->enc[n].len);
}

static int host_get_capabilities(struct rpc_call *c)
{
	struct host_state *h = state_of(c);
	if (!h || !h->caps)
		return rpc_fail(c, RPC_E_RECOVERING, "host capabilities not gathered yet");
	host_caps_write(h->caps, c->w, c->local_addr);
	return 0;
}

const struct rpc_binding host_bindings[] = {
	{ "Host.ping2", host_ping2 },
	{ "Host.confirmConnectivity", host_confirm_connectivity },
	{ "Host.getStats", host_get_stats },
	{ "Host.getCapabilities", host_get_capabilities },
	{ "Host.ping", host_ping },
	{ "Host.getHardwareInfo", host_get_hardware_info },
	{ "Host.setMOMPolicyParameters", host_set_mom_policy_parameters },
	{ "Host.getJobs", host_get_jobs },
	{ "Host.hostdevListByCaps", host_hostdev_list_by_caps },
	{ NULL, NULL },
};
