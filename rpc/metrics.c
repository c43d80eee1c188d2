/* rpc/metrics.c - per-verb request counts by result and a latency histogram,
 * kept in relaxed atomic counters and printed as Prometheus text. */
#include "rpc_int.h"

#include <inttypes.h>

/* Bucket upper bounds in microseconds; RPC_HIST_BUCKETS of them, then +Inf. */
static const uint64_t bucket_us[RPC_HIST_BUCKETS] = {
	10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000,
	100000, 250000, 1000000, 2500000, 10000000,
};

void rpc_metrics_record(struct rpc_verb_rt *v, enum rpc_err res, uint64_t ns)
{
	if ((unsigned)res >= RPC_E__COUNT)
		res = RPC_E_INTERNAL;
	rpc_counter_inc(&v->m.by_result[res]);
	uint64_t us = ns / 1000;
	size_t b = 0;
	while (b < RPC_HIST_BUCKETS && us > bucket_us[b])
		b++;
	rpc_counter_inc(&v->m.hist[b]);
	__atomic_fetch_add(&v->m.sum_ns, ns, __ATOMIC_RELAXED);
}

static void print_le(struct vd_buf *out, uint64_t us)
{
	buf_printf(out, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
}

void rpc_metrics_format(const struct rpc_engine *e, struct vd_buf *out)
{
	buf_puts(out, "# HELP vdsmd_rpc_requests_total JSON-RPC requests by verb and result.\n"
		      "# TYPE vdsmd_rpc_requests_total counter\n");
	for (size_t k = 0; k < e->nverbs; k++) {
		const struct rpc_verb_rt *v = &e->verbs[k];
		for (unsigned r = 0; r < RPC_E__COUNT; r++) {
			uint64_t n = rpc_counter_get(&v->m.by_result[r]);
			if (r == RPC_OK)
				buf_printf(out, "vdsmd_rpc_requests_total{verb=\"%s\",result=\"ok\"} %" PRIu64 "\n",
					   v->decl->name, n);
			else if (n)
				buf_printf(out, "vdsmd_rpc_requests_total{verb=\"%s\",result=\"error\",code=\"%d\"} %" PRIu64 "\n",
					   v->decl->name, rpc_err_code((enum rpc_err)r), n);
		}
	}
	buf_puts(out, "# HELP vdsmd_rpc_invalid_requests_total Requests rejected before a verb was found, by code.\n"
		      "# TYPE vdsmd_rpc_invalid_requests_total counter\n");
	buf_printf(out, "vdsmd_rpc_invalid_requests_total{code=\"%d\"} %" PRIu64 "\n",
		   rpc_err_code(RPC_E_PARSE), rpc_counter_get(&e->em.parse_errors));
	buf_printf(out, "vdsmd_rpc_invalid_requests_total{code=\"%d\"} %" PRIu64 "\n",
		   rpc_err_code(RPC_E_INVALID_REQ), rpc_counter_get(&e->em.invalid_requests));
	buf_printf(out, "vdsmd_rpc_invalid_requests_total{code=\"%d\"} %" PRIu64 "\n",
		   rpc_err_code(RPC_E_NO_METHOD), rpc_counter_get(&e->em.unknown_methods));
	buf_puts(out, "# HELP vdsmd_rpc_batches_total JSON-RPC batches of several requests.\n"
		      "# TYPE vdsmd_rpc_batches_total counter\n");
	buf_printf(out, "vdsmd_rpc_batches_total %" PRIu64 "\n", rpc_counter_get(&e->em.batches));

	buf_puts(out, "# HELP vdsmd_rpc_request_duration_seconds Time from dispatch to reply, by verb.\n"
		      "# TYPE vdsmd_rpc_request_duration_seconds histogram\n");
	for (size_t k = 0; k < e->nverbs; k++) {
		const struct rpc_verb_rt *v = &e->verbs[k];
		uint64_t cum = 0;
		uint64_t counts[RPC_HIST_BUCKETS + 1];
		for (size_t b = 0; b <= RPC_HIST_BUCKETS; b++)
			counts[b] = rpc_counter_get(&v->m.hist[b]);
		uint64_t total = 0;
		for (size_t b = 0; b <= RPC_HIST_BUCKETS; b++)
			total += counts[b];
		if (!total)
			continue;
		for (size_t b = 0; b < RPC_HIST_BUCKETS; b++) {
			cum += counts[b];
			buf_printf(out, "vdsmd_rpc_request_duration_seconds_bucket{verb=\"%s\",le=\"",
				   v->decl->name);
			print_le(out, bucket_us[b]);
			buf_printf(out, "\"} %" PRIu64 "\n", cum);
		}
		buf_printf(out, "vdsmd_rpc_request_duration_seconds_bucket{verb=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
			   v->decl->name, total);
		uint64_t sum = rpc_counter_get(&v->m.sum_ns);
		buf_printf(out, "vdsmd_rpc_request_duration_seconds_sum{verb=\"%s\"} %" PRIu64 ".%09" PRIu64 "\n",
			   v->decl->name, sum / 1000000000u, sum % 1000000000u);
		buf_printf(out, "vdsmd_rpc_request_duration_seconds_count{verb=\"%s\"} %" PRIu64 "\n",
			   v->decl->name, total);
	}
}
