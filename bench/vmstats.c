/* bench/vmstats.c - in-process costs of the VM stats path on a libvirt
 * test-driver fleet:
 *
 *   vmstats URI [PAYLOAD_OUT]
 *
 *   - sampling: wall time of one full sample (bulk/per-domain libvirt calls,
 *     rates, snapshot build), mean of several, and per 1000 VMs;
 *   - Host.getAllVmStats result for every codec built in: a fresh encode vs
 *     the per-snapshot cached bytes (what a repeated poll costs: vw_raw, a
 *     memcpy into the output buffer);
 *   - PAYLOAD_OUT: the JSON result, for bench/run.sh to time Python's
 *     json.dumps on the very same payload (what VDSM pays on every poll).
 * Lines starting with RESULT are machine-readable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../vdsmd/virt/virt_int.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct virt_snapshot *wait_snapshot(struct virt_state *s)
{
	for (int i = 0; i < 30000; i++) {
		struct virt_snapshot *snap = virt_snapshot_get(s);
		if (snap)
			return snap;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Repeat fn until ~0.3 s passed; returns seconds per call. */
#define TIME_LOOP(per_call, body) do { \
	unsigned long n_ = 0; double t0_ = now_s(), t_; \
	do { body; n_++; t_ = now_s() - t0_; } while (t_ < 0.3 || n_ < 5); \
	(per_call) = t_ / (double)n_; \
} while (0)

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: vmstats URI [PAYLOAD_OUT]\n");
		return 2;
	}
	struct vdsmd d;
	memset(&d, 0, sizeof d);
	d.cfg.libvirt_uri = argv[1];
	d.cfg.vm_sample_interval = 3600;
	if (virt_init(&d) != 0)
		return 1;
	struct virt_state *s = d.virt;
	struct virt_snapshot *snap = wait_snapshot(s);
	if (!snap) {
		fprintf(stderr, "vmstats: no sample from %s\n", argv[1]);
		return 1;
	}
	double first_ms = snap->sample_ms;
	snapshot_put(snap);
	/* more samples: steady state (XML cached, rates from two samples) */
	double total_ms = 0;
	int rounds = 5;
	for (int i = 0; i < rounds; i++) {
		struct timespec gap = { 0, 550 * 1000000L };  /* > MIN_RATE_INTERVAL */
		if (i == 0)
			nanosleep(&gap, NULL);
		uint64_t t = virt_kick(s);
		virt_wait_kick(s, t, 60000);
		snap = virt_snapshot_get(s);
		total_ms += snap->sample_ms;
		snapshot_put(snap);
	}
	snap = virt_snapshot_get(s);
	unsigned n = snap->nvms;
	double sample_ms = total_ms / rounds;
	printf("vmstats: %u VMs: first sample %.1f ms (reads every domain XML), then %.2f ms "
	       "per sample = %.1f ms per 1000 VMs\n", n, first_ms, sample_ms,
	       n ? sample_ms * 1000.0 / n : 0.0);
	printf("RESULT vms=%u sample_ms=%.3f sample_ms_per_1000=%.3f first_sample_ms=%.3f\n",
	       n, sample_ms, n ? sample_ms * 1000.0 / n : 0.0, first_ms);

	const struct vd_codec *const *list = codec_list();
	bool dumped = false;
	for (size_t k = 0; list[k]; k++) {
		/* auto writes with the emitter of yajl and fallback (the same
		 * writer_init): its rows would repeat theirs */
		if (!strcmp(list[k]->name, "auto"))
			continue;
		struct vd_buf out = VD_BUF_INIT;
		struct vd_writer w;
		double enc_s, cached_s;
		TIME_LOOP(enc_s, {
			buf_reset(&out);
			memset(&w, 0, sizeof w);
			list[k]->writer_init(&w, &out);
			virt_encode_all_stats(&w, snap);
		});
		size_t bytes = out.len;
		if (!dumped && argc > 2 && list[k]->is_json) {
			dumped = true;
			FILE *f = fopen(argv[2], "w");
			if (f) {
				fwrite(out.data, 1, out.len, f);
				fclose(f);
			}
		}
		TIME_LOOP(cached_s, {
			buf_reset(&out);
			memset(&w, 0, sizeof w);
			list[k]->writer_init(&w, &out);
			virt_write_all_stats_cached(s, &w, snap);
		});
		printf("vmstats: %u VMs, codec %-8s %8zu bytes: encode %9.1f us, cached %7.2f us "
		       "(%.0fx)\n", n, list[k]->name, bytes, enc_s * 1e6, cached_s * 1e6,
		       cached_s > 0 ? enc_s / cached_s : 0.0);
		printf("RESULT vms=%u codec=%s bytes=%zu encode_us=%.2f cached_us=%.3f\n", n,
		       list[k]->name, bytes, enc_s * 1e6, cached_s * 1e6);
		buf_free(&out);
	}
	snapshot_put(snap);
	virt_fini(&d);
	return 0;
}
