/* vdsmd/virt/encode.c - VM stats objects with VDSM's field names and types
 * (most numbers as strings, as VDSM sends them), and the per-codec encoded
 * cache of Host.getAllVmStats: the list is encoded once per snapshot per
 * codec and later calls copy the bytes in with vw_raw().
 *
 * Units: memory in KiB strings (balloonInfo, memoryStats) as VDSM; cpuUser/
 * cpuSys percent of the VM's vCPUs over the last interval; cpuUsage the
 * cumulative CPU time in ns; disk readRate/writeRate bytes/s; read/write/
 * flush latency ns per operation over the last interval; readOps/writeOps/
 * readBytes/writtenBytes cumulative counters; network rxRate/txRate percent
 * of the link speed (VDSM's convention), rx/tx cumulative bytes.
 *
 * Also the VM objects other verbs answer with: the VmDefinition of
 * Host.getVMFullList / VM.getInfo and of the device verbs, and VM.create's
 * status object. */
#include "virt_int.h"

#include <stdlib.h>
#include <string.h>

#include "../../rpc/event.h"

/* Decimal digits of v, written backwards ending at end; returns the start. */
static char *u64_digits(char *end, uint64_t v)
{
	char *p = end;
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return p;
}

/* Number strings without printf: the 1000-VM list holds ~60000 of them. */
static void kstr_u64(struct vd_writer *w, const char *k, uint64_t v)
{
	char buf[24];
	char *end = buf + sizeof buf;
	char *p = u64_digits(end, v);
	vw_keyz(w, k);
	vw_string(w, p, (size_t)(end - p));
}

/* "%.<decimals>f" for 0 <= v < 1e15 (decimals 1 or 2); printf otherwise. */
static void kstr_fixed(struct vd_writer *w, const char *k, double v, unsigned decimals)
{
	if (!(v >= 0.0 && v < 1e15)) {
		vw_kstrf(w, k, decimals == 1 ? "%.1f" : "%.2f", v);
		return;
	}
	uint64_t scale = decimals == 1 ? 10 : 100;
	uint64_t x = (uint64_t)(v * (double)scale + 0.5);
	char buf[32];
	char *end = buf + sizeof buf;
	char *p = end;
	uint64_t frac = x % scale;
	for (unsigned i = 0; i < decimals; i++) {
		*--p = (char)('0' + frac % 10);
		frac /= 10;
	}
	*--p = '.';
	p = u64_digits(p, x / scale);
	vw_keyz(w, k);
	vw_string(w, p, (size_t)(end - p));
}

static void encode_disks(struct vd_writer *w, const struct virt_vm *vm)
{
	vw_keyz(w, "disks");
	vw_begin_object(w);
	for (unsigned i = 0; i < vm->ndisks; i++) {
		const struct virt_disk_stats *d = &vm->disks[i];
		vw_keyz(w, d->dev);
		vw_begin_object(w);
		kstr_fixed(w, "readRate", d->rd_rate, 2);
		kstr_fixed(w, "writeRate", d->wr_rate, 2);
		kstr_u64(w, "readBytes", d->rd_bytes);
		kstr_u64(w, "writtenBytes", d->wr_bytes);
		kstr_u64(w, "readOps", d->rd_reqs);
		kstr_u64(w, "writeOps", d->wr_reqs);
		kstr_u64(w, "readLatency", d->rd_lat_ns);
		kstr_u64(w, "writeLatency", d->wr_lat_ns);
		kstr_u64(w, "flushLatency", d->fl_lat_ns);
		kstr_u64(w, "apparentsize", d->physical);
		kstr_u64(w, "truesize", d->allocation);
		if (d->image_id[0])  /* a UUID or nothing (VmDiskStats) */
			vw_kstr(w, "imageID", d->image_id);
		vw_end_object(w);
	}
	vw_end_object(w);
}

static void encode_network(struct vd_writer *w, const struct virt_vm *vm)
{
	vw_keyz(w, "network");
	vw_begin_object(w);
	for (unsigned i = 0; i < vm->nnics; i++) {
		const struct virt_nic_stats *n = &vm->nics[i];
		vw_keyz(w, n->ifname);
		vw_begin_object(w);
		vw_kstr(w, "name", n->ifname);
		kstr_fixed(w, "rxRate", n->rx_rate, 1);
		kstr_fixed(w, "txRate", n->tx_rate, 1);
		kstr_u64(w, "rxErrors", n->rx_errs);
		kstr_u64(w, "txErrors", n->tx_errs);
		kstr_u64(w, "rxDropped", n->rx_drop);
		kstr_u64(w, "txDropped", n->tx_drop);
		kstr_u64(w, "rx", n->rx_bytes);
		kstr_u64(w, "tx", n->tx_bytes);
		vw_kstr(w, "macAddr", n->mac);
		vw_kstr(w, "state", "unknown");
		vw_kstr(w, "speed", "1000");
		vw_keyz(w, "sampleTime");
		vw_double(w, n->sample_time);
		vw_end_object(w);
	}
	vw_end_object(w);
}

static void encode_display(struct vd_writer *w, const struct virt_vm *vm)
{
	vw_keyz(w, "displayInfo");
	vw_begin_array(w);
	for (unsigned i = 0; i < vm->ndisplays; i++) {
		const struct virt_xdisplay *g = &vm->displays[i];
		vw_begin_object(w);
		vw_kstr(w, "type", g->type);
		vw_kstr(w, "port", g->port[0] ? g->port : "-1");
		vw_kstr(w, "tlsPort", g->tls_port[0] ? g->tls_port : "-1");
		vw_kstr(w, "ipAddress", g->listen);
		vw_end_object(w);
	}
	vw_end_array(w);
	/* the legacy single-display keys the engine reads when displayInfo is
	 * absent (older engines); taken from the first display */
	if (vm->ndisplays > 0) {
		const struct virt_xdisplay *g = &vm->displays[0];
		vw_kstr(w, "displayType", strcmp(g->type, "spice") == 0 ? "qxl" : "vnc");
		vw_kstr(w, "displayPort", g->port[0] ? g->port : "-1");
		vw_kstr(w, "displaySecurePort", g->tls_port[0] ? g->tls_port : "-1");
		vw_kstr(w, "displayIp", g->listen);
	}
}

/* What VDSM reports for the guest when no guest agent answers (guestagent.py
 * getGuestInfo defaults): no agent channel is read by vdsmd. */
static void encode_guest(struct vd_writer *w)
{
	vw_kstr(w, "username", "Unknown");
	vw_kstr(w, "session", "Unknown");
	vw_kint(w, "guestCPUCount", -1);
	vw_kstr(w, "guestIPs", "");
	vw_kstr(w, "guestFQDN", "");
	vw_keyz(w, "appsList");
	vw_begin_array(w);
	vw_end_array(w);
	vw_keyz(w, "disksUsage");
	vw_begin_array(w);
	vw_end_array(w);
	vw_keyz(w, "netIfaces");
	vw_begin_array(w);
	vw_end_array(w);
}

static void encode_memory(struct vd_writer *w, const struct virt_vm *vm)
{
	vw_keyz(w, "balloonInfo");
	vw_begin_object(w);
	kstr_u64(w, "balloon_max", vm->max_mem_kib);
	kstr_u64(w, "balloon_min", vm->balloon_min_kib);
	kstr_u64(w, "balloon_cur", vm->balloon_cur_kib);
	kstr_u64(w, "balloon_target", vm->balloon_target_kib ? vm->balloon_target_kib : vm->mem_kib);
	vw_kbool(w, "ballooning_enabled", true);
	vw_end_object(w);
	/* only with the balloon's readings (GuestMemoryStats' keys are all
	 * required); a VM without them has no memoryStats, as VDSM without agent */
	if (vm->have_memstats) {
		vw_keyz(w, "memoryStats");
		vw_begin_object(w);
		kstr_u64(w, "mem_total", vm->ms_available);
		kstr_u64(w, "mem_unused", vm->ms_unused);
		kstr_u64(w, "mem_free", vm->ms_usable ? vm->ms_usable : vm->ms_unused);
		kstr_u64(w, "mem_cached", vm->ms_caches);
		vw_kstr(w, "mem_buffers", "0");
		/* the fault and swap counters are JSON ints, as VDSM sends them
		 * (GuestMemoryStats); the mem_* sizes stay strings */
		vw_kint(w, "swap_in", (int64_t)VD_MIN(vm->ms_swap_in, (uint64_t)INT64_MAX));
		vw_kint(w, "swap_out", (int64_t)VD_MIN(vm->ms_swap_out, (uint64_t)INT64_MAX));
		vw_kint(w, "majflt", (int64_t)VD_MIN(vm->ms_majflt, (uint64_t)INT64_MAX));
		vw_kint(w, "minflt", (int64_t)VD_MIN(vm->ms_minflt, (uint64_t)INT64_MAX));
		vw_kint(w, "pageflt", (int64_t)VD_MIN(vm->ms_majflt + vm->ms_minflt,
						       (uint64_t)INT64_MAX));
		vw_end_object(w);
	}
	kstr_u64(w, "memUsage", vm->mem_usage);
}

/* VM.merge's block jobs of vm (merge.c), as VDSM's vmJobs. */
static void encode_jobs(struct vd_writer *w, const struct virt_vm *vm)
{
	vw_keyz(w, "vmJobs");
	vw_begin_object(w);
	for (unsigned i = 0; i < vm->nbjobs; i++) {
		const struct virt_blockjob *j = &vm->bjobs[i];
		vw_keyz(w, j->id);
		vw_begin_object(w);
		vw_kstr(w, "id", j->id);
		vw_kstr(w, "jobType", "block");
		vw_kstr(w, "blockJobType", "commit");
		vw_kstr(w, "imgUUID", j->image);
		vw_kstr(w, "drive", j->dev);
		vw_kint(w, "bandwidth", (int64_t)j->bandwidth);
		/* VDSM sends cur and end as strings */
		vw_kstrf(w, "cur", "%llu", (unsigned long long)j->cur);
		vw_kstrf(w, "end", "%llu", (unsigned long long)j->end);
		vw_end_object(w);
	}
	vw_end_object(w);
}

void virt_encode_vm_stats(struct vd_writer *w, const struct virt_snapshot *snap,
			  const struct virt_vm *vm)
{
	vw_begin_object(w);
	vw_kstr(w, "vmId", vm->uuid);
	vw_kstr(w, "vmName", vm->name ? vm->name : "");
	vw_kstr(w, "status", virt_status_name(vm->status));
	kstr_u64(w, "statusTime", snap->status_time);
	if (vm->status == VS_DOWN) {
		vw_kint(w, "exitCode", vm->exit_code);
		vw_kstr(w, "exitMessage", vm->exit_message ? vm->exit_message : "");
		vw_kint(w, "exitReason", vm->exit_reason);
		vw_kstr(w, "timeOffset", "0");
		vw_end_object(w);
		return;
	}
	if (vm->status == VS_PAUSED)
		vw_kstr(w, "pauseCode", "NOERR");
	kstr_u64(w, "elapsedTime", vm->elapsed_s);
	kstr_u64(w, "pid", vm->pid > 0 ? (uint64_t)vm->pid : 0);
	kstr_u64(w, "vcpuCount", vm->vcpus);
	kstr_fixed(w, "cpuUser", vm->cpu_user, 2);
	kstr_fixed(w, "cpuSys", vm->cpu_sys, 2);
	kstr_u64(w, "cpuUsage", vm->cpu_time_ns);
	/* VDSM: cpuUser/cpuSys are real rates only after two samples */
	vw_kbool(w, "cpuActual", vm->have_rates);
	encode_memory(w, vm);
	encode_disks(w, vm);
	encode_network(w, vm);
	encode_display(w, vm);
	encode_guest(w);
	kstr_u64(w, "hash", vm->hash & 0x7fffffffffffffffull);
	encode_jobs(w, vm);
	vw_kstr(w, "vmType", "kvm");
	vw_kstr(w, "kvmEnable", "true");
	vw_kstr(w, "acpiEnable", "true");
	vw_kstr(w, "monitorResponse", "0");
	vw_kstr(w, "timeOffset", "0");
	vw_kstr(w, "clientIp", "");
	vw_end_object(w);
}

void virt_encode_all_stats(struct vd_writer *w, const struct virt_snapshot *snap)
{
	vw_begin_array(w);
	for (unsigned i = 0; i < snap->nvms; i++)
		virt_encode_vm_stats(w, snap, &snap->vms[i]);
	vw_end_array(w);
}

/* The codec whose writer uses ops (codec_list order), or NULL. */
static const struct vd_codec *codec_for_ops(const struct vd_writer_ops *ops)
{
	const struct vd_codec *const *list = codec_list();
	for (size_t i = 0; list[i]; i++) {
		struct vd_buf tmp = VD_BUF_INIT;
		struct vd_writer probe;
		memset(&probe, 0, sizeof probe);
		list[i]->writer_init(&probe, &tmp);
		buf_free(&tmp);
		if (probe.ops == ops)
			return list[i];
	}
	return NULL;
}

/* The cached encoding of snap's list for the codec whose writer uses ops
 * (encoded now on first use), or NULL when it cannot be cached (caching off,
 * unknown writer, no free slot).  Lives as long as snap. */
static const char *cached_list(struct virt_state *s, const struct vd_writer_ops *ops,
			       struct virt_snapshot *snap, size_t *len)
{
	if (s && s->no_cache)
		return NULL;
	pthread_mutex_lock(&snap->cache_lock);
	struct virt_enc_cache *slot = NULL;
	for (unsigned i = 0; i < VIRT_MAX_CODECS; i++) {
		if (snap->cache[i].ops == ops) {
			slot = &snap->cache[i];
			break;
		}
		if (!snap->cache[i].ops && !slot)
			slot = &snap->cache[i];
	}
	const struct vd_codec *codec = NULL;
	if (slot && slot->ops != ops)
		codec = codec_for_ops(ops);
	if (!slot || (slot->ops != ops && !codec)) {
		pthread_mutex_unlock(&snap->cache_lock);
		return NULL;
	}
	if (slot->ops != ops) {
		struct vd_buf out = VD_BUF_INIT;
		struct vd_writer cw;
		memset(&cw, 0, sizeof cw);
		codec->writer_init(&cw, &out);
		virt_encode_all_stats(&cw, snap);
		slot->bytes = out.data;
		slot->len = out.len;
		slot->ops = ops;
	}
	const char *bytes = slot->bytes;
	*len = slot->len;
	pthread_mutex_unlock(&snap->cache_lock);
	return bytes;
}

void virt_write_all_stats_cached(struct virt_state *s, struct vd_writer *w,
				 struct virt_snapshot *snap)
{
	size_t len;
	const char *bytes = cached_list(s, w->ops, snap, &len);
	if (!bytes) {
		virt_encode_all_stats(w, snap);
		return;
	}
	/* the bytes live as long as the snapshot, which the caller holds; grow
	 * the output once to its final size rather than by doubling copies */
	if (w->out)
		buf_reserve(w->out, len + 256);
	vw_raw(w, bytes, len);
}

static void snapshot_release(void *snap)
{
	snapshot_put(snap);
}

void virt_reply_all_stats(struct rpc_call *c, struct virt_state *s, struct virt_snapshot *snap)
{
	size_t len;
	const char *bytes = cached_list(s, c->w->ops, snap, &len);
	if (!bytes) {
		virt_encode_all_stats(c->w, snap);
		snapshot_put(snap);
		return;
	}
	/* the reply goes out from the cache itself where the transport can
	 * (rpc_result_borrow): the snapshot reference is kept until then */
	rpc_result_borrow(c, bytes, len, snapshot_release, snap);
}

/* ---- the VM objects of the verbs' answers ----------------------------------- */

void virt_encode_vm_full(struct vd_writer *w, const struct virt_snapshot *snap,
			 const struct virt_vm *vm)
{
	vw_begin_object(w);
	vw_kstr(w, "vmId", vm->uuid);
	vw_kstr(w, "vmName", vm->name ? vm->name : "");
	vw_kstr(w, "status", virt_status_name(vm->status));
	vw_kstrf(w, "statusTime", "%llu", (unsigned long long)snap->status_time);
	vw_kint(w, "memSize", (int64_t)(vm->max_mem_kib / 1024));
	vw_kstrf(w, "smp", "%u", vm->vcpus ? vm->vcpus : 1);
	vw_kstr(w, "vmType", "kvm");
	vw_kstr(w, "kvmEnable", "true");
	vw_kstr(w, "acpiEnable", "true");
	vw_kstrf(w, "pid", "%lld", (long long)vm->pid);
	vw_kstr(w, "clientIp", "");
	if (vm->status == VS_DOWN) {
		vw_kint(w, "exitCode", vm->exit_code);
		vw_kstr(w, "exitMessage", vm->exit_message ? vm->exit_message : "");
		vw_kint(w, "exitReason", vm->exit_reason);
	}
	vw_end_object(w);
}

void virt_write_definition(struct rpc_call *c, struct virt_state *s, const char *id)
{
	struct virt_snapshot *snap = s ? virt_snapshot_get(s) : NULL;
	const struct virt_vm *vm = snap ? snapshot_find(snap, id) : NULL;
	if (vm) {
		virt_encode_vm_full(c->w, snap, vm);
	} else {
		vw_begin_object(c->w);
		vw_kstr(c->w, "vmId", id);
		vw_end_object(c->w);
	}
	if (snap)
		snapshot_put(snap);
}

void virt_write_created(struct rpc_call *c, const char *id, const char *name,
			enum virt_status st, int64_t mem_mib, int64_t smp)
{
	vw_begin_object(c->w);
	vw_kstr(c->w, "vmId", id);
	vw_kstr(c->w, "vmName", name);
	vw_kstr(c->w, "status", virt_status_name(st));
	vw_kstrf(c->w, "statusTime", "%llu", (unsigned long long)rpc_event_time_ms());
	vw_kstr(c->w, "vmType", "kvm");
	vw_kstr(c->w, "kvmEnable", "true");
	vw_kstr(c->w, "acpiEnable", "true");
	vw_kint(c->w, "memSize", mem_mib);
	vw_kstrf(c->w, "smp", "%lld", (long long)smp);
	vw_end_object(c->w);
}
