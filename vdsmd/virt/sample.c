/* vdsmd/virt/sample.c - one VM sample.
 *
 * Phase 1 (no lock): statistics for every domain.  virConnectGetAllDomainStats
 * first (one call for the whole host on real libvirt); whatever group it does
 * not return for an active domain (the test driver returns only the state)
 * is read with the per-domain calls: virDomainGetInfo, virDomainGetCPUStats,
 * virDomainMemoryStats, virDomainBlockStats + virDomainGetBlockInfo,
 * virDomainInterfaceStats.  The domain XML (disks, NICs, displays) is read
 * once per domain start, not every sample.
 * Phase 2 (s->lock): merge into the tracker (rates from the previous sample,
 * Down VMs kept with their exit info until VM.destroy) and build the
 * immutable snapshot. */
#include "virt_int.h"
#include "../../rpc/event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

/* Rates need at least this much time between two samples; a sample taken
 * sooner (after a lifecycle change) keeps the previous rates. */
#define MIN_RATE_INTERVAL_MS 500
#define NIC_SPEED_MBPS 1000

struct rblock {
	char name[32];
	uint64_t rd_reqs, rd_bytes, rd_times, wr_reqs, wr_bytes, wr_times, fl_reqs, fl_times;
	uint64_t alloc, cap, phys;
	bool have_times, have_info;
};

struct rnet {
	char name[64];
	uint64_t rx_bytes, rx_errs, rx_drop, tx_bytes, tx_errs, tx_drop;
};

enum { MS_SWAP_IN, MS_SWAP_OUT, MS_MAJFLT, MS_MINFLT, MS_UNUSED, MS_AVAILABLE,
       MS_USABLE, MS_CACHES, MS__N };

struct raw {
	virDomainPtr dom;      /* borrowed */
	char uuid[VIR_UUID_STRING_BUFLEN];
	const char *name;      /* libvirt-owned while dom lives */
	int id;
	bool has_state, has_cpu, has_cpu_us, has_balloon, has_memstats, has_vcpu;
	bool has_block, has_net;
	int state, reason;
	uint64_t cpu_time, cpu_user, cpu_sys;
	uint64_t bal_cur, bal_max;
	uint64_t ms[MS__N];
	unsigned vcpus;
	struct rblock *blocks;
	unsigned nblocks;
	struct rnet *nets;
	unsigned nnets;
	/* XML read in this sample (when the tracker had none for this id) */
	bool xml_new;
	struct virt_domxml xml;
};

static uint64_t tp_u64(const virTypedParameter *p)
{
	switch (p->type) {
	case VIR_TYPED_PARAM_INT: return p->value.i < 0 ? 0 : (uint64_t)p->value.i;
	case VIR_TYPED_PARAM_UINT: return p->value.ui;
	case VIR_TYPED_PARAM_LLONG: return p->value.l < 0 ? 0 : (uint64_t)p->value.l;
	case VIR_TYPED_PARAM_ULLONG: return p->value.ul;
	case VIR_TYPED_PARAM_DOUBLE: return p->value.d < 0 ? 0 : (uint64_t)p->value.d;
	case VIR_TYPED_PARAM_BOOLEAN: return p->value.b ? 1 : 0;
	default: return 0;
	}
}

/* "block.3.rd.reqs" with prefix "block." → index 3, *rest = "rd.reqs". */
static bool split_indexed(const char *field, const char *prefix, unsigned *idx,
			  const char **rest)
{
	size_t pl = strlen(prefix);
	if (strncmp(field, prefix, pl) != 0)
		return false;
	char *end;
	unsigned long i = strtoul(field + pl, &end, 10);
	if (end == field + pl || *end != '.' || i > 4096)
		return false;
	*idx = (unsigned)i;
	*rest = end + 1;
	return true;
}

static void parse_block_field(struct raw *r, unsigned i, const char *k,
			      const virTypedParameter *p)
{
	if (i >= r->nblocks)
		return;
	struct rblock *b = &r->blocks[i];
	uint64_t v = tp_u64(p);
	if (strcmp(k, "name") == 0 && p->type == VIR_TYPED_PARAM_STRING)
		snprintf(b->name, sizeof b->name, "%s", p->value.s);
	else if (strcmp(k, "rd.reqs") == 0) b->rd_reqs = v;
	else if (strcmp(k, "rd.bytes") == 0) b->rd_bytes = v;
	else if (strcmp(k, "rd.times") == 0) { b->rd_times = v; b->have_times = true; }
	else if (strcmp(k, "wr.reqs") == 0) b->wr_reqs = v;
	else if (strcmp(k, "wr.bytes") == 0) b->wr_bytes = v;
	else if (strcmp(k, "wr.times") == 0) b->wr_times = v;
	else if (strcmp(k, "fl.reqs") == 0) b->fl_reqs = v;
	else if (strcmp(k, "fl.times") == 0) b->fl_times = v;
	else if (strcmp(k, "allocation") == 0) { b->alloc = v; b->have_info = true; }
	else if (strcmp(k, "capacity") == 0) { b->cap = v; b->have_info = true; }
	else if (strcmp(k, "physical") == 0) { b->phys = v; b->have_info = true; }
}

static void parse_net_field(struct raw *r, unsigned i, const char *k,
			    const virTypedParameter *p)
{
	if (i >= r->nnets)
		return;
	struct rnet *n = &r->nets[i];
	uint64_t v = tp_u64(p);
	if (strcmp(k, "name") == 0 && p->type == VIR_TYPED_PARAM_STRING)
		snprintf(n->name, sizeof n->name, "%s", p->value.s);
	else if (strcmp(k, "rx.bytes") == 0) n->rx_bytes = v;
	else if (strcmp(k, "rx.errs") == 0) n->rx_errs = v;
	else if (strcmp(k, "rx.drop") == 0) n->rx_drop = v;
	else if (strcmp(k, "tx.bytes") == 0) n->tx_bytes = v;
	else if (strcmp(k, "tx.errs") == 0) n->tx_errs = v;
	else if (strcmp(k, "tx.drop") == 0) n->tx_drop = v;
}

static const struct { const char *field; int ms; } balloon_fields[] = {
	{ "balloon.swap_in", MS_SWAP_IN }, { "balloon.swap_out", MS_SWAP_OUT },
	{ "balloon.major_fault", MS_MAJFLT }, { "balloon.minor_fault", MS_MINFLT },
	{ "balloon.unused", MS_UNUSED }, { "balloon.available", MS_AVAILABLE },
	{ "balloon.usable", MS_USABLE }, { "balloon.disk_caches", MS_CACHES },
};

static void parse_record(struct raw *r, const virDomainStatsRecord *rec)
{
	for (int j = 0; j < rec->nparams; j++) {
		const virTypedParameter *p = &rec->params[j];
		const char *f = p->field;
		unsigned idx;
		const char *rest;
		if (strcmp(f, "state.state") == 0) { r->state = (int)tp_u64(p); r->has_state = true; }
		else if (strcmp(f, "state.reason") == 0) r->reason = (int)tp_u64(p);
		else if (strcmp(f, "cpu.time") == 0) { r->cpu_time = tp_u64(p); r->has_cpu = true; }
		else if (strcmp(f, "cpu.user") == 0) { r->cpu_user = tp_u64(p); r->has_cpu_us = true; }
		else if (strcmp(f, "cpu.system") == 0) { r->cpu_sys = tp_u64(p); r->has_cpu_us = true; }
		else if (strcmp(f, "balloon.current") == 0) { r->bal_cur = tp_u64(p); r->has_balloon = true; }
		else if (strcmp(f, "balloon.maximum") == 0) r->bal_max = tp_u64(p);
		else if (strcmp(f, "vcpu.current") == 0) { r->vcpus = (unsigned)tp_u64(p); r->has_vcpu = true; }
		else if (strcmp(f, "block.count") == 0) {
			r->nblocks = (unsigned)VD_MIN(tp_u64(p), 256);
			r->blocks = xcalloc(r->nblocks ? r->nblocks : 1, sizeof *r->blocks);
			r->has_block = true;
		} else if (strcmp(f, "net.count") == 0) {
			r->nnets = (unsigned)VD_MIN(tp_u64(p), 256);
			r->nets = xcalloc(r->nnets ? r->nnets : 1, sizeof *r->nets);
			r->has_net = true;
		} else if (split_indexed(f, "block.", &idx, &rest)) {
			parse_block_field(r, idx, rest, p);
		} else if (split_indexed(f, "net.", &idx, &rest)) {
			parse_net_field(r, idx, rest, p);
		} else if (strncmp(f, "balloon.", 8) == 0) {
			for (size_t k = 0; k < VD_ARRAY_SIZE(balloon_fields); k++)
				if (strcmp(f, balloon_fields[k].field) == 0) {
					r->ms[balloon_fields[k].ms] = tp_u64(p);
					r->has_memstats = true;
				}
		}
	}
}

/* The device names the per-domain calls need, copied from xml: the
 * tracker's XML may be freed by VM.destroy on a worker as soon as s->lock is
 * released, so the caller holds the lock while xml is the tracker's. */
static void take_dev_names(struct raw *r, const struct virt_domxml *xml)
{
	if (!xml)
		return;
	if (!r->has_block) {
		r->nblocks = xml->ndisks;
		r->blocks = xcalloc(r->nblocks ? r->nblocks : 1, sizeof *r->blocks);
		for (unsigned i = 0; i < xml->ndisks; i++)
			snprintf(r->blocks[i].name, sizeof r->blocks[i].name, "%s", xml->disks[i].dev);
	}
	if (!r->has_net) {
		r->nnets = xml->nnics;
		r->nets = xcalloc(r->nnets ? r->nnets : 1, sizeof *r->nets);
		for (unsigned i = 0; i < xml->nnics; i++)
			snprintf(r->nets[i].name, sizeof r->nets[i].name, "%s", xml->nics[i].ifname);
	}
}

/* Per-domain calls for whatever the bulk call did not return (device names
 * from take_dev_names). */
static void fill_per_domain(struct raw *r)
{
	virDomainPtr d = r->dom;
	if (!r->has_state) {
		if (virDomainGetState(d, &r->state, &r->reason, 0) == 0)
			r->has_state = true;
	}
	bool active = r->state != VIR_DOMAIN_SHUTOFF && r->state != VIR_DOMAIN_CRASHED;
	virDomainInfo info;
	if ((!r->has_cpu || !r->has_balloon || !r->has_vcpu) &&
	    virDomainGetInfo(d, &info) == 0) {
		if (!r->has_cpu) { r->cpu_time = info.cpuTime; r->has_cpu = active; }
		if (!r->has_balloon) { r->bal_cur = info.memory; r->bal_max = info.maxMem; r->has_balloon = true; }
		if (!r->has_vcpu) { r->vcpus = info.nrVirtCpu; r->has_vcpu = true; }
	}
	if (!active)
		return;
	if (!r->has_cpu_us) {
		virTypedParameter tp[8];
		int n = virDomainGetCPUStats(d, tp, 8, -1, 1, 0);
		for (int i = 0; i < n; i++) {
			if (strcmp(tp[i].field, VIR_DOMAIN_CPU_STATS_USERTIME) == 0) {
				r->cpu_user = tp_u64(&tp[i]);
				r->has_cpu_us = true;
			} else if (strcmp(tp[i].field, VIR_DOMAIN_CPU_STATS_SYSTEMTIME) == 0) {
				r->cpu_sys = tp_u64(&tp[i]);
			}
		}
		if (n > 0)
			virTypedParamsClear(tp, n);
	}
	if (!r->has_memstats) {
		virDomainMemoryStatStruct ms[VIR_DOMAIN_MEMORY_STAT_NR];
		int n = virDomainMemoryStats(d, ms, VIR_DOMAIN_MEMORY_STAT_NR, 0);
		for (int i = 0; i < n; i++) {
			int k = -1;
			switch (ms[i].tag) {
			case VIR_DOMAIN_MEMORY_STAT_SWAP_IN: k = MS_SWAP_IN; break;
			case VIR_DOMAIN_MEMORY_STAT_SWAP_OUT: k = MS_SWAP_OUT; break;
			case VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT: k = MS_MAJFLT; break;
			case VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT: k = MS_MINFLT; break;
			case VIR_DOMAIN_MEMORY_STAT_UNUSED: k = MS_UNUSED; break;
			case VIR_DOMAIN_MEMORY_STAT_AVAILABLE: k = MS_AVAILABLE; break;
			case VIR_DOMAIN_MEMORY_STAT_USABLE: k = MS_USABLE; break;
			case VIR_DOMAIN_MEMORY_STAT_DISK_CACHES: k = MS_CACHES; break;
			case VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON: r->bal_cur = ms[i].val; break;
			default: break;
			}
			if (k >= 0) {
				r->ms[k] = ms[i].val;
				r->has_memstats = true;
			}
		}
	}
	if (!r->has_block && r->blocks) {
		for (unsigned i = 0; i < r->nblocks; i++) {
			struct rblock *b = &r->blocks[i];
			virDomainBlockStatsStruct bs;
			if (virDomainBlockStats(d, b->name, &bs, sizeof bs) == 0) {
				b->rd_reqs = bs.rd_req > 0 ? (uint64_t)bs.rd_req : 0;
				b->rd_bytes = bs.rd_bytes > 0 ? (uint64_t)bs.rd_bytes : 0;
				b->wr_reqs = bs.wr_req > 0 ? (uint64_t)bs.wr_req : 0;
				b->wr_bytes = bs.wr_bytes > 0 ? (uint64_t)bs.wr_bytes : 0;
			}
			virDomainBlockInfo bi;
			if (virDomainGetBlockInfo(d, b->name, &bi, 0) == 0) {
				b->cap = bi.capacity;
				b->alloc = bi.allocation;
				b->phys = bi.physical;
				b->have_info = true;
			}
		}
		r->has_block = true;
	}
	if (!r->has_net && r->nets) {
		for (unsigned i = 0; i < r->nnets; i++) {
			struct rnet *n = &r->nets[i];
			virDomainInterfaceStatsStruct is;
			if (virDomainInterfaceStats(d, n->name, &is, sizeof is) == 0) {
				n->rx_bytes = is.rx_bytes > 0 ? (uint64_t)is.rx_bytes : 0;
				n->rx_errs = is.rx_errs > 0 ? (uint64_t)is.rx_errs : 0;
				n->rx_drop = is.rx_drop > 0 ? (uint64_t)is.rx_drop : 0;
				n->tx_bytes = is.tx_bytes > 0 ? (uint64_t)is.tx_bytes : 0;
				n->tx_errs = is.tx_errs > 0 ? (uint64_t)is.tx_errs : 0;
				n->tx_drop = is.tx_drop > 0 ? (uint64_t)is.tx_drop : 0;
			}
		}
		r->has_net = true;
	}
}

static void raw_free(struct raw *r)
{
	free(r->blocks);
	free(r->nets);
	if (r->xml_new)
		domxml_free(&r->xml);
}

/* ---- building the snapshot -------------------------------------------- */

static int64_t read_pid(const char *name)
{
	char path[320];
	snprintf(path, sizeof path, "/run/libvirt/qemu/%s.pid", name);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	long long pid = 0;
	if (fscanf(f, "%lld", &pid) != 1)
		pid = 0;
	fclose(f);
	return pid;
}

/* Milliseconds since process pid started (0 when unknown). */
static uint64_t proc_age_ms(int64_t pid)
{
	if (pid <= 0)
		return 0;
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* field 22 (starttime, clock ticks after boot) counts from after the
	 * command name, which may contain spaces: start at the last ')' */
	const char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long start = 0;
	int field = 2;
	for (p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (field != 22 || sscanf(p, "%llu", &start) != 1)
		return 0;
	double up = 0;
	f = fopen("/proc/uptime", "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lf", &up) != 1)
		up = 0;
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	double age_s = up - (double)start / (double)(hz > 0 ? hz : 100);
	return age_s > 0 ? (uint64_t)(age_s * 1000.0) : 0;
}

static double rate(uint64_t now, uint64_t prev, double dt_s)
{
	return now >= prev && dt_s > 0 ? (double)(now - prev) / dt_s : 0.0;
}

static void vm_from_raw(struct virt_vm *vm, struct raw *r, struct virt_track *t,
			uint64_t now_ms, bool is_qemu)
{
	struct virt_domxml *x = &t->xml;
	snprintf(vm->uuid, sizeof vm->uuid, "%s", r->uuid);
	vm->name = xstrdup(r->name ? r->name : "");
	vm->lv_state = r->state;
	vm->lv_reason = r->reason;
	vm->status = virt_status_from_libvirt(r->state, r->reason);
	vm->active = vm->status != VS_DOWN;
	vm->domid = r->id;
	vm->vcpus = r->vcpus;
	vm->cpu_time_ns = r->cpu_time;
	vm->mem_kib = r->bal_cur;
	vm->max_mem_kib = r->bal_max;
	vm->balloon_cur_kib = r->bal_cur;
	vm->have_memstats = r->has_memstats;
	vm->ms_swap_in = r->ms[MS_SWAP_IN];
	vm->ms_swap_out = r->ms[MS_SWAP_OUT];
	vm->ms_majflt = r->ms[MS_MAJFLT];
	vm->ms_minflt = r->ms[MS_MINFLT];
	vm->ms_unused = r->ms[MS_UNUSED];
	vm->ms_available = r->ms[MS_AVAILABLE];
	vm->ms_usable = r->ms[MS_USABLE];
	vm->ms_caches = r->ms[MS_CACHES];
	if (r->ms[MS_AVAILABLE] && r->ms[MS_UNUSED] <= r->ms[MS_AVAILABLE])
		vm->mem_usage = (unsigned)(100 * (r->ms[MS_AVAILABLE] - r->ms[MS_UNUSED]) /
					   r->ms[MS_AVAILABLE]);
	vm->hash = x->hash;
	vm->ndisplays = x->ndisplays;
	memcpy(vm->displays, x->displays, sizeof vm->displays);
	vm->pid = vm->active && is_qemu ? read_pid(vm->name) : 0;
	if (!vm->active)
		return;

	/* per device counters, keyed by the XML's devices */
	vm->ndisks = x->ndisks;
	vm->disks = xcalloc(x->ndisks ? x->ndisks : 1, sizeof *vm->disks);
	for (unsigned i = 0; i < x->ndisks; i++) {
		struct virt_disk_stats *ds = &vm->disks[i];
		snprintf(ds->dev, sizeof ds->dev, "%s", x->disks[i].dev);
		ds->path = xstrdup(x->disks[i].path ? x->disks[i].path : "");
		snprintf(ds->image_id, sizeof ds->image_id, "%s", x->disks[i].image_id);
		for (unsigned j = 0; j < r->nblocks; j++) {
			const struct rblock *b = &r->blocks[j];
			if (strcmp(b->name, ds->dev) != 0)
				continue;
			ds->rd_bytes = b->rd_bytes;
			ds->wr_bytes = b->wr_bytes;
			ds->rd_reqs = b->rd_reqs;
			ds->wr_reqs = b->wr_reqs;
			ds->capacity = b->cap;
			ds->allocation = b->alloc;
			ds->physical = b->phys;
			/* keep the raw latency totals in the *_lat fields until rates */
			ds->rd_lat_ns = b->rd_times;
			ds->wr_lat_ns = b->wr_times;
			ds->fl_lat_ns = b->fl_times;
			break;
		}
	}
	vm->nnics = x->nnics;
	vm->nics = xcalloc(x->nnics ? x->nnics : 1, sizeof *vm->nics);
	for (unsigned i = 0; i < x->nnics; i++) {
		struct virt_nic_stats *ns = &vm->nics[i];
		snprintf(ns->ifname, sizeof ns->ifname, "%s", x->nics[i].ifname);
		snprintf(ns->mac, sizeof ns->mac, "%s", x->nics[i].mac);
		ns->sample_time = (double)now_ms / 1000.0;
		for (unsigned j = 0; j < r->nnets; j++) {
			const struct rnet *n = &r->nets[j];
			if (strcmp(n->name, ns->ifname) != 0)
				continue;
			ns->rx_bytes = n->rx_bytes;
			ns->tx_bytes = n->tx_bytes;
			ns->rx_errs = n->rx_errs;
			ns->tx_errs = n->tx_errs;
			ns->rx_drop = n->rx_drop;
			ns->tx_drop = n->tx_drop;
			break;
		}
	}
}

/* Rates against the tracker's previous counters; updates them. */
static void vm_rates(struct virt_vm *vm, struct raw *r, struct virt_track *t, uint64_t now_ms)
{
	/* raw latency totals parked in the disk stats; replaced below */
	uint64_t *rd_t = xcalloc(vm->ndisks + 1, sizeof *rd_t * 3);
	for (unsigned i = 0; i < vm->ndisks; i++) {
		rd_t[3 * i] = vm->disks[i].rd_lat_ns;
		rd_t[3 * i + 1] = vm->disks[i].wr_lat_ns;
		rd_t[3 * i + 2] = vm->disks[i].fl_lat_ns;
		vm->disks[i].rd_lat_ns = vm->disks[i].wr_lat_ns = vm->disks[i].fl_lat_ns = 0;
	}
	uint64_t dt_ms = t->have_prev ? now_ms - t->prev_ms : 0;
	if (t->have_prev && dt_ms < MIN_RATE_INTERVAL_MS) {
		/* too soon after the last sample: keep the last rates */
		vm->cpu_user = t->last_cpu_user;
		vm->cpu_sys = t->last_cpu_sys;
		vm->have_rates = true;
		free(rd_t);
		return;
	}
	if (t->have_prev) {
		double dt = (double)dt_ms / 1000.0;
		double ncpu = vm->vcpus ? vm->vcpus : 1;
		vm->cpu_user = rate(r->cpu_user, t->prev_cpu_user, dt) / 1e7 / ncpu;
		vm->cpu_sys = rate(r->cpu_sys, t->prev_cpu_sys, dt) / 1e7 / ncpu;
		for (unsigned i = 0; i < vm->ndisks; i++) {
			struct virt_disk_stats *ds = &vm->disks[i];
			for (unsigned j = 0; j < t->prev_ndisks; j++) {
				const struct virt_disk_stats *p = &t->prev_disks[j];
				if (strcmp(p->dev, ds->dev) != 0)
					continue;
				ds->rd_rate = rate(ds->rd_bytes, p->rd_bytes, dt);
				ds->wr_rate = rate(ds->wr_bytes, p->wr_bytes, dt);
				/* prev rd_lat_ns etc. hold the previous raw totals */
				if (ds->rd_reqs > p->rd_reqs && rd_t[3 * i] >= p->rd_lat_ns)
					ds->rd_lat_ns = (rd_t[3 * i] - p->rd_lat_ns) / (ds->rd_reqs - p->rd_reqs);
				if (ds->wr_reqs > p->wr_reqs && rd_t[3 * i + 1] >= p->wr_lat_ns)
					ds->wr_lat_ns = (rd_t[3 * i + 1] - p->wr_lat_ns) / (ds->wr_reqs - p->wr_reqs);
				break;
			}
		}
		for (unsigned i = 0; i < vm->nnics; i++) {
			struct virt_nic_stats *ns = &vm->nics[i];
			for (unsigned j = 0; j < t->prev_nnics; j++) {
				const struct virt_nic_stats *p = &t->prev_nics[j];
				if (strcmp(p->ifname, ns->ifname) != 0)
					continue;
				double bps = NIC_SPEED_MBPS * 1e6 / 8;
				ns->rx_rate = 100.0 * rate(ns->rx_bytes, p->rx_bytes, dt) / bps;
				ns->tx_rate = 100.0 * rate(ns->tx_bytes, p->tx_bytes, dt) / bps;
				break;
			}
		}
		vm->have_rates = true;
	}
	t->last_cpu_user = vm->cpu_user;
	t->last_cpu_sys = vm->cpu_sys;
	t->have_prev = true;
	t->prev_ms = now_ms;
	t->prev_cpu_user = r->cpu_user;
	t->prev_cpu_sys = r->cpu_sys;
	free(t->prev_disks);
	t->prev_ndisks = vm->ndisks;
	t->prev_disks = xcalloc(vm->ndisks + 1, sizeof *t->prev_disks);
	for (unsigned i = 0; i < vm->ndisks; i++) {
		t->prev_disks[i] = vm->disks[i];
		t->prev_disks[i].path = NULL;
		t->prev_disks[i].rd_lat_ns = rd_t[3 * i];
		t->prev_disks[i].wr_lat_ns = rd_t[3 * i + 1];
		t->prev_disks[i].fl_lat_ns = rd_t[3 * i + 2];
	}
	free(t->prev_nics);
	t->prev_nnics = vm->nnics;
	t->prev_nics = xcalloc(vm->nnics + 1, sizeof *t->prev_nics);
	if (vm->nnics)
		memcpy(t->prev_nics, vm->nics, vm->nnics * sizeof *vm->nics);
	free(rd_t);
}

static void vm_down_from_track(struct virt_vm *vm, const struct virt_track *t)
{
	vm->status = VS_DOWN;
	vm->exit_code = t->exit_code;
	vm->exit_reason = t->exit_reason;
	vm->exit_message = xstrdup(t->exit_message ? t->exit_message : "");
}

static void snapshot_add_vm(struct virt_snapshot *snap, unsigned *cap, struct virt_vm **out)
{
	if (snap->nvms == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		snap->vms = xrealloc(snap->vms, *cap * sizeof *snap->vms);
	}
	*out = &snap->vms[snap->nvms++];
	memset(*out, 0, sizeof **out);
}

static void merge(struct virt_state *s, struct virt_snapshot *snap, struct raw *raws,
		  unsigned n, uint64_t now_ms, bool is_qemu, uint64_t seq0)
{
	unsigned cap = 0;
	TRACK_FOREACH(s, t)
		t->seen = false;
	for (unsigned i = 0; i < n; i++) {
		struct raw *r = &raws[i];
		if (!r->uuid[0] || tomb_has(s, r->uuid))
			continue;   /* just destroyed: the sample raced VM.destroy */
		struct virt_track *t = track_get(s, r->uuid, r->name);
		t->seen = true;
		t->gone = false;
		if (r->xml_new) {
			domxml_free(&t->xml);
			t->xml = r->xml;
			r->xml_new = false;
			t->have_xml = true;
			t->xml_domid = r->id;
		}
		struct virt_vm *vm;
		snapshot_add_vm(snap, &cap, &vm);
		vm_from_raw(vm, r, t, now_ms, is_qemu);
		virt_blockjobs_copy(s, vm);
		vm->balloon_target_kib = t->balloon_target_kib;
		vm->balloon_min_kib = t->balloon_min_kib;
		/* A lifecycle event handled after this raw state was read is
		 * newer: a stale "running" must not undo its Down (and its exit
		 * reason), nor a stale "off" its start. */
		if (t->event_seq > seq0 && t->status != VS_UNKNOWN)
			vm->status = t->status;
		enum virt_status prev = t->status;
		if (vm->status == VS_DOWN) {
			if (!t->down_reported) {
				/* no STOPPED event yet: libvirt's shutoff reason
				 * says the same as the event will */
				if (prev == VS_UNKNOWN || prev == VS_DOWN)
					track_set_down(t, VIRT_EXIT_NORMAL, VIRT_REASON_SUCCESS, "Down");
				else if (r->state == VIR_DOMAIN_SHUTOFF && r->reason > 0)
					track_stopped(t, r->reason - 1);
				else   /* admin shut down, else lost the qemu process */
					track_stopped(t, VIR_DOMAIN_EVENT_STOPPED_DESTROYED);
			}
			vm_down_from_track(vm, t);
			t->start_ms = 0;
		} else {
			if (prev == VS_DOWN || prev == VS_UNKNOWN || !t->start_ms) {
				/* a VM already running when we first see it: its
				 * QEMU process tells how long it has been up */
				uint64_t age = prev == VS_UNKNOWN ? proc_age_ms(vm->pid) : 0;
				t->start_ms = age < now_ms ? now_ms - age : now_ms;
			}
			t->down_reported = false;
			/* a VM seen running again after being down has no shutdown
			 * of ours in progress, unless VM.shutdown/destroy marked it
			 * after this state was read.  A VM still running keeps the
			 * mark: a guest may take several sample intervals to act on
			 * an ACPI shutdown, and its STOPPED event must still say
			 * admin (not user) shutdown. */
			if (prev == VS_DOWN && t->admin_seq <= seq0) {
				t->admin_shutdown = false;
				t->powering_down = false;
			}
			/* VDSM: "Powering down" from VM.shutdown until Down */
			if (t->powering_down && vm->status == VS_UP)
				vm->status = VS_POWERING_DOWN;
			/* migrating away (paused at the end too), or arriving */
			if (t->migrating && (vm->status == VS_UP || vm->status == VS_PAUSED))
				vm->status = VS_MIGRATION_SOURCE;
			if (t->saving)   /* VM.hibernate until the domain stops */
				vm->status = VS_SAVING_STATE;
			if (t->incoming) {
				if (vm->status == VS_UP && r->state == VIR_DOMAIN_RUNNING)
					t->incoming = false;
				else
					vm->status = VS_MIGRATION_DESTINATION;
			}
			t->status = vm->status;
			vm->elapsed_s = (now_ms - t->start_ms) / 1000;
			vm_rates(vm, r, t, now_ms);
		}
	}
	/* domains libvirt no longer has (transient ones that stopped) */
	unsigned wait_s = s->d->cfg.incoming_migration_timeout;
	struct vd_buf expired = VD_BUF_INIT;
	TRACK_FOREACH(s, t) {
		if (t->seen)
			continue;
		if (t->incoming && wait_s && now_ms - t->incoming_ms >= (uint64_t)wait_s * 1000) {
			/* VM.migrationCreate with no migration after it: forgotten,
			 * not kept for ever (issue 27: 3261 such phantoms in one
			 * run); a VM.destroy of it then answers noVM */
			log_warn("virt: %s: no migration arrived within %u s "
				 "(incoming_migration_timeout); dropped", t->uuid, wait_s);
			buf_append(&expired, t->uuid, sizeof t->uuid);
			continue;
		}
		if (((t->launching || t->restoring) && !t->created) || t->incoming) {
			/* VM.create still in libvirt, or a migration not arrived
			 * yet: WaitForLaunch / Migration Destination, not gone */
			struct virt_vm *vm;
			snapshot_add_vm(snap, &cap, &vm);
			snprintf(vm->uuid, sizeof vm->uuid, "%s", t->uuid);
			vm->name = xstrdup(t->name ? t->name : "");
			vm->status = t->launching ? VS_WAIT_FOR_LAUNCH
				   : t->restoring ? VS_RESTORING_STATE : VS_MIGRATION_DESTINATION;
			continue;
		}
		t->gone = true;
		if (!t->down_reported)   /* saved (VM.hibernate), admin shut down, else lost qemu */
			track_stopped(t, t->saving ? VIR_DOMAIN_EVENT_STOPPED_SAVED
					     : VIR_DOMAIN_EVENT_STOPPED_DESTROYED);
		struct virt_vm *vm;
		snapshot_add_vm(snap, &cap, &vm);
		snprintf(vm->uuid, sizeof vm->uuid, "%s", t->uuid);
		vm->name = xstrdup(t->name ? t->name : "");
		vm->lv_state = VIR_DOMAIN_SHUTOFF;
		vm_down_from_track(vm, t);
	}
	for (size_t off = 0; off < expired.len; off += sizeof(((struct virt_track *)0)->uuid))
		track_remove(s, expired.data + off);
	buf_free(&expired);
	snapshot_sort(snap);
}

struct virt_snapshot *virt_sample(struct virt_state *s, virConnectPtr c)
{
	uint64_t t0 = vd_now_ns();
	pthread_mutex_lock(&s->lock);
	uint64_t seq0 = s->event_seq;  /* events after this are newer than the sample */
	pthread_mutex_unlock(&s->lock);
	struct raw *raws = NULL;
	unsigned n = 0;
	virDomainStatsRecordPtr *recs = NULL;
	virDomainPtr *doms = NULL;
	int nrec = -1;

	if (!s->bulk_unsupported) {
		unsigned stats = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_CPU_TOTAL |
				 VIR_DOMAIN_STATS_BALLOON | VIR_DOMAIN_STATS_VCPU |
				 VIR_DOMAIN_STATS_INTERFACE | VIR_DOMAIN_STATS_BLOCK;
		/* NOWAIT: a domain busy with another job (a hung QEMU monitor)
		 * reports what it can instead of stalling the whole sample */
		unsigned flags = s->bulk_no_nowait ? 0 : VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT;
		nrec = virConnectGetAllDomainStats(c, stats, &recs, flags);
		if (nrec < 0 && flags && virt_last_error_code() == VIR_ERR_INVALID_ARG) {
			s->bulk_no_nowait = true;
			nrec = virConnectGetAllDomainStats(c, stats, &recs, 0);
		}
		if (nrec < 0 && virt_last_error_code() == VIR_ERR_NO_SUPPORT) {
			log_info("virt: virConnectGetAllDomainStats not supported; per-domain calls");
			s->bulk_unsupported = true;
		}
	}
	if (nrec >= 0) {
		n = (unsigned)nrec;
		raws = xcalloc(n + 1, sizeof *raws);
		for (unsigned i = 0; i < n; i++) {
			raws[i].dom = recs[i]->dom;
			parse_record(&raws[i], recs[i]);
		}
	} else {
		int nd = virConnectListAllDomains(c, &doms, 0);
		if (nd < 0) {
			log_warn("virt: listing domains failed: %s", virt_last_error());
			return NULL;
		}
		n = (unsigned)nd;
		raws = xcalloc(n + 1, sizeof *raws);
		for (unsigned i = 0; i < n; i++)
			raws[i].dom = doms[i];
	}
	for (unsigned i = 0; i < n; i++) {
		struct raw *r = &raws[i];
		if (virDomainGetUUIDString(r->dom, r->uuid) < 0)
			r->uuid[0] = '\0';
		r->name = virDomainGetName(r->dom);
		r->id = (int)virDomainGetID(r->dom);
	}

	/* which domains need their XML (re)read: first seen, or a new domain id */
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < n; i++) {
		struct virt_track *t = track_find(s, raws[i].uuid);
		raws[i].xml_new = !t || !t->have_xml || t->xml_domid != raws[i].id ||
				  t->xml_stale;
		if (t)
			t->xml_stale = false;   /* a change after this point marks it again */
	}
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < n; i++) {
		struct raw *r = &raws[i];
		if (!r->xml_new)
			continue;
		char *xml = virDomainGetXMLDesc(r->dom, 0);
		if (!xml || domxml_parse(xml, &r->xml) < 0) {
			domxml_free(&r->xml);
			memset(&r->xml, 0, sizeof r->xml);
		}
		free(xml);
	}
	/* per-domain calls need the device names: copied from this sample's XML
	 * or, under the lock, from the tracker's (VM.destroy on a worker frees
	 * it: nothing of a tracker is read outside s->lock) */
	for (unsigned i = 0; i < n; i++) {
		struct raw *r = &raws[i];
		if (r->xml_new) {
			take_dev_names(r, &r->xml);
		} else {
			pthread_mutex_lock(&s->lock);
			struct virt_track *t = track_find(s, r->uuid);
			take_dev_names(r, t ? &t->xml : NULL);
			pthread_mutex_unlock(&s->lock);
		}
		fill_per_domain(r);
	}

#ifdef VD_TEST_HOOKS
	pthread_mutex_lock(&s->lock);
	void (*hook)(struct virt_state *, void *) = s->sample_read_hook;
	void *hook_arg = s->sample_read_hook_arg;
	pthread_mutex_unlock(&s->lock);
	if (hook)
		hook(s, hook_arg);
#endif
	uint64_t now_ms = vd_now_ms();
	struct virt_snapshot *snap = snapshot_new();
	snap->taken_ms = now_ms;
	snap->status_time = rpc_event_time_ms();  /* the clock of notify_time */
	snap->connected = true;
	const char *uri = s->d->cfg.libvirt_uri;
	bool is_qemu = uri && strncmp(uri, "qemu", 4) == 0;
	pthread_mutex_lock(&s->lock);
	merge(s, snap, raws, n, now_ms, is_qemu, seq0);
	pthread_mutex_unlock(&s->lock);

	for (unsigned i = 0; i < n; i++)
		raw_free(&raws[i]);
	free(raws);
	if (recs)
		virDomainStatsRecordListFree(recs);
	if (doms) {
		for (unsigned i = 0; i < n; i++)
			virDomainFree(doms[i]);
		free(doms);
	}
	snap->sample_ms = (double)(vd_now_ns() - t0) / 1e6;
	return snap;
}
