/* vdsmd/host/verbs.c - handlers of the Host family declared in
 * rpc/schema_host.c.  They run on the loop thread and never block: getStats
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
#include "../virt/virt.h"
#include "../storage/storage.h"

static struct host_state *state_of(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	return d ? d->host : NULL;
}

/* Host.ping2 / Host.confirmConnectivity: nothing written → true. */
static int host_ping2(struct rpc_call *c)
{
	(void)c;
	return 0;
}

static int host_confirm_connectivity(struct rpc_call *c)
{
	(void)c;
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
		vw_kstrf(w, "speed", "%u", it->speed);
		vw_kstrf(w, "rxDropped", "%llu", (unsigned long long)it->rx_dropped);
		vw_kstrf(w, "txDropped", "%llu", (unsigned long long)it->tx_dropped);
		vw_kstrf(w, "rxErrors", "%llu", (unsigned long long)it->rx_errors);
		vw_kstrf(w, "txErrors", "%llu", (unsigned long long)it->tx_errors);
		vw_kstr(w, "state", it->state);
		vw_kstrf(w, "rx", "%llu", (unsigned long long)it->rx);
		vw_kstrf(w, "tx", "%llu", (unsigned long long)it->tx);
		vw_keyz(w, "sampleTime");
		vw_double(w, s->sample_time);
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

	unsigned vm_count = 0, vm_active = 0;
	if (d && d->virt)
		virt_vm_counts(d, &vm_count, &vm_active);
	uint64_t start = d && d->start_ms ? d->start_ms : h->start_ms;
	uint64_t now_ms = vd_now_ms();
	uint64_t elapsed = now_ms > start ? (now_ms - start) / 1000 : 0;
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);

	vw_begin_object(w);
	vw_kstrf(w, "cpuUser", "%.2f", s->cpu_user);
	vw_kstrf(w, "cpuSys", "%.2f", s->cpu_sys);
	vw_kstrf(w, "cpuIdle", "%.2f", s->cpu_idle);
	vw_kstrf(w, "cpuUserVdsmd", "%.2f", s->cpu_user_vdsmd);
	vw_kstrf(w, "cpuSysVdsmd", "%.2f", s->cpu_sys_vdsmd);
	vw_kstrf(w, "cpuLoad", "%.2f", s->cpu_load);
	vw_kstrf(w, "memUsed", "%d", s->mem_used);
	vw_kint(w, "memFree", (int64_t)s->mem_free_mib);
	vw_kint(w, "swapTotal", (int64_t)s->swap_total_mib);
	vw_kint(w, "swapFree", (int64_t)s->swap_free_mib);
	vw_kstrf(w, "anonHugePages", "%llu", (unsigned long long)s->anon_huge_mib);
	vw_kstr(w, "thpState", s->thp_state);
	vw_kint(w, "vmCount", vm_count);
	vw_kint(w, "vmActive", vm_active);
	vw_kint(w, "vmMigrating", 0);
	vw_kint(w, "incomingVmMigrations", 0);
	vw_kint(w, "outgoingVmMigrations", 0);
	vw_kstrf(w, "elapsedTime", "%llu", (unsigned long long)elapsed);
	if (s->boot_time)
		vw_kstrf(w, "bootTime", "%llu", (unsigned long long)s->boot_time);
	vw_kstrf(w, "dateTime", "%04d-%02d-%02dT%02d:%02d:%02d GMT", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	vw_kstrf(w, "rxDropped", "%llu", (unsigned long long)s->rx_dropped);
	vw_kstrf(w, "txDropped", "%llu", (unsigned long long)s->tx_dropped);
	write_network(w, s);
	vw_keyz(w, "storageDomains");
	if (d && d->storage) {
		storage_write_domain_stats(d, w);
	} else {
		vw_begin_object(w);
		vw_end_object(w);
	}
	vw_kstr(w, "momStatus", "disabled");
	vw_kbool(w, "ksmState", false);
	vw_kint(w, "ksmPages", 0);
	vw_kint(w, "ksmCpu", 0);
	vw_kint(w, "memShared", 0);
	vw_kstr(w, "netConfigDirty", "False");
	write_ha_stats(w);
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

void host_caps_write(struct host_caps *c, struct vd_writer *w)
{
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
		host_caps_encode(c, w);
		return;
	}
	struct vd_writer tw;
	struct vd_buf tb = VD_BUF_INIT;
	codec->writer_init(&tw, &tb);
	host_caps_encode(c, &tw);
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
	host_caps_write(h->caps, c->w);
	return 0;
}

const struct rpc_binding host_bindings[] = {
	{ "Host.ping2", host_ping2 },
	{ "Host.confirmConnectivity", host_confirm_connectivity },
	{ "Host.getStats", host_get_stats },
	{ "Host.getCapabilities", host_get_capabilities },
	{ NULL, NULL },
};
