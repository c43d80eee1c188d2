/* bench/storage.c - in-process storage benchmarks on real files (a temp dir
 * under /tmp, or $STORAGE_BENCH_DIR):
 *
 *   1. Volume.create (RAW sparse) tasks/s through the core: create + task
 *      executor + atomic metadata (fsync) until finished; one at a time and
 *      with 64 in flight.
 *   2. Volume.getInfo req/s through the real rpc engine (JSON in, JSON out):
 *      served from the in-memory index, versus the same verb bound to a
 *      handler that reads and verifies the .meta file and stats the data
 *      file on every call (what a disk-backed agent does).
 *
 *   storage [--volumes N] [--seconds S] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../rpc/rpc.h"
#include "../rpc/schema.h"
#include "../vdsmd/storage/st.h"
#include "../vdsmd/storage/st_verbs.h"
#include "../vdsmd/storage/storage.h"
#include "../vdsmd/vdsmd.h"

#define SD "11111111-1111-1111-1111-111111111111"
#define IMG "aaaaaaaa-0000-0000-0000-000000000001"
#define BLANK "00000000-0000-0000-0000-000000000000"

static double now_s(void)
{
	return (double)vd_now_ns() / 1e9;
}

static void vol_id(char out[37], int i)
{
	snprintf(out, 37, "bbbbbbbb-0000-0000-0000-%012d", i);
}

/* Volume.getInfo from disk: parse + verify the .meta, stat the data. */
static int disk_get_info(struct rpc_call *c)
{
	struct vdsmd *d = c->app;
	struct storage_state *s = d->storage;
	const char *sd = rpc_arg_str(c, "storagedomainID", NULL);
	const char *img = rpc_arg_str(c, "imageID", NULL);
	const char *vol = rpc_arg_str(c, "volumeID", NULL);
	pthread_mutex_lock(&s->lock);
	struct st_domain *dom = map_get(&s->domains, sd);
	char *dir = dom ? xstrdup(dom->dir) : NULL;
	pthread_mutex_unlock(&s->lock);
	if (!dir)
		return rpc_fail(c, RPC_E_NO_DOMAIN, "%s", sd);
	struct st_domain tmp = { 0 };
	snprintf(tmp.uuid, sizeof(tmp.uuid), "%s", sd);
	tmp.dir = dir;
	struct st_volume v = { 0 };
	snprintf(v.uuid, sizeof(v.uuid), "%s", vol);
	snprintf(v.image, sizeof(v.image), "%s", img);
	int ifd = st_img_open(&tmp, img, false);
	char name[48];
	snprintf(name, sizeof(name), "%.36s.meta", vol);
	int rc = ifd < 0 ? -1 : st_vol_read_meta_at(ifd, name, &v);
	if (ifd >= 0)
		close(ifd);
	if (rc) {
		free(dir);
		return rpc_fail(c, RPC_E_NO_VOLUME, "%s", vol);
	}
	st_vol_stat(&tmp, img, vol, &v.apparent, &v.truesize);
	map_init(&tmp.images);
	verb_write_volume_info(c->w, s, &tmp, &v);
	map_free(&tmp.images);
	free(v.description);
	free(dir);
	return 0;
}

static int n_replies;

static void on_reply(void *ctx, const struct rpc_response *r)
{
	(void)ctx;
	if (r->bytes && memmem(r->bytes, r->len, "\"result\"", 8))
		n_replies++;
}

static double run_getinfo(struct rpc_engine *e, const struct vd_codec *j, int nvol, double secs)
{
	char body[512];
	struct rpc_request_info info = { j, NULL, "bench", NULL };
	n_replies = 0;
	long calls = 0;
	double t0 = now_s(), t;
	do {
		for (int k = 0; k < 256; k++, calls++) {
			char vol[37];
			vol_id(vol, (int)(calls % nvol));
			int n = snprintf(body, sizeof(body),
					 "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"Volume.getInfo\","
					 "\"params\":[\"%s\",\"" BLANK "\",\"" SD "\",\"" IMG "\"]}",
					 calls, vol);
			rpc_dispatch(e, &info, body, (size_t)n, on_reply, NULL);
		}
		t = now_s();
	} while (t - t0 < secs);
	if (n_replies != calls)
		fprintf(stderr, "storage bench: %ld calls, %d results\n", calls, n_replies);
	return (double)calls / (t - t0);
}

static struct rpc_engine *engine(struct vdsmd *d, const struct rpc_binding *b)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	char why[256] = "";
	if (rpc_engine_declare(e, rpc_schema_storage) < 0 || rpc_engine_bind(e, b, d) < 0 ||
	    rpc_engine_seal(e, why, sizeof(why)) < 0) {
		fprintf(stderr, "engine: %s\n", why);
		exit(1);
	}
	rpc_engine_set_ready(e, true);
	return e;
}

int main(int argc, char **argv)
{
	int nvol = 1000;
	double secs = 2.0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--volumes"))
			nvol = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			secs = atof(argv[i + 1]);
	}
	static struct vd_log bench_log;
	log_open(&bench_log, NULL, VD_LOG_ERROR);
	const char *base = getenv("STORAGE_BENCH_DIR") ? getenv("STORAGE_BENCH_DIR") : "/tmp";
	char *root = st_pathf("%s/vdsmd-bench-st-XXXXXX", base);
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	struct vdsmd d;
	memset(&d, 0, sizeof(d));
	d.cfg.storage_root = st_path(root, "state");
	if (storage_init(&d) != 0 || !d.storage) {
		fprintf(stderr, "storage_init failed\n");
		return 1;
	}
	struct storage_state *s = d.storage;
	struct st_err err = { 0 };
	if (st_domain_create(s, SD, ST_DT_LOCALFS, root, "bench", ST_DC_DATA, 5, &err) < 0) {
		fprintf(stderr, "domain: %s\n", err.msg);
		return 1;
	}

	/* 1. create tasks/s */
	char (*tids)[37] = calloc((size_t)nvol, sizeof(*tids));
	int seq_n = nvol / 4 < 100 ? nvol / 4 : 100;
	double t0 = now_s();
	for (int i = 0; i < seq_n; i++) {
		char vol[37];
		vol_id(vol, i);
		struct st_volreq r = { SD, IMG, vol, 1 << 20, ST_FMT_RAW, ST_SPARSE, "DATA", "", NULL, NULL,
				       false, false, 0, 0 };
		if (st_volume_create(s, &r, tids[i], &err) < 0 ||
		    st_task_wait(s, tids[i], 10000, NULL) < 0) {
			fprintf(stderr, "create: %s\n", err.msg);
			return 1;
		}
	}
	double seq_rate = seq_n / (now_s() - t0);
	t0 = now_s();
	for (int i = seq_n; i < nvol; i++) {
		char vol[37];
		vol_id(vol, i);
		struct st_volreq r = { SD, IMG, vol, 1 << 20, ST_FMT_RAW, ST_SPARSE, "DATA", "", NULL, NULL,
				       false, false, 0, 0 };
		while (st_volume_create(s, &r, tids[i], &err) < 0) {
			if (err.code != RPC_E_NO_RESOURCES) {
				fprintf(stderr, "create: %s\n", err.msg);
				return 1;
			}
			usleep(1000);
		}
		if (i - seq_n >= 64)
			st_task_wait(s, tids[i - 64], 10000, NULL);
	}
	for (int i = seq_n; i < nvol; i++)
		st_task_wait(s, tids[i], 10000, NULL);
	double par_rate = (nvol - seq_n) / (now_s() - t0);
	printf("storage: Volume.create RAW sparse (in-process, fsync'd metadata): "
	       "%.0f tasks/s one at a time, %.0f tasks/s with 64 in flight\n", seq_rate, par_rate);

	/* 2. getInfo from the index vs from disk */
	const struct vd_codec *j = codec_find("yajl");
	struct rpc_engine *e_index = engine(&d, storage_bindings);
	static struct rpc_binding disk_bindings[64];
	size_t nb = 0;
	for (const struct rpc_binding *b = storage_bindings; b->name; b++)
		disk_bindings[nb++] = (struct rpc_binding){
			b->name, strcmp(b->name, "Volume.getInfo") == 0 ? disk_get_info : b->fn };
	disk_bindings[nb] = (struct rpc_binding){ NULL, NULL };
	struct rpc_engine *e_disk = engine(&d, disk_bindings);
	double idx = run_getinfo(e_index, j, nvol, secs);
	double dsk = run_getinfo(e_disk, j, nvol, secs);
	printf("storage: Volume.getInfo over %d volumes via rpc_dispatch (yajl, one thread): "
	       "%.0f req/s from the index, %.0f req/s reading metadata from disk (%.1fx)\n",
	       nvol, idx, dsk, dsk > 0 ? idx / dsk : 0.0);
	rpc_engine_free(e_index);
	rpc_engine_free(e_disk);
	free(tids);
	storage_fini(&d);
	free(d.cfg.storage_root);
	st_rmtree(root);
	free(root);
	return 0;
}
