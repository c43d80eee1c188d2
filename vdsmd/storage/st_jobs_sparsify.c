/* vdsmd/storage/st_jobs_sparsify.c - host job SDM.sparsify_volume.
 *
 * As VDSM's sdm/api/sparsify_volume.py: the volume must be a leaf (a
 * SHARED template volume or one with children fails the job with VDSM's
 * VolumeIsNotLeafException, code 0, "Volume to be sparsified is not a leaf
 * volume"), vol_info.generation must match (911, volume.operation), the
 * legality is left as it is (set_illegal=False) and a done job bumps the
 * generation.  Unknown domain, image or volume fail the job (358, 268, 201).
 *
 * Where we differ: VDSM runs libguestfs' `virt-sparsify --in-place`, which
 * boots an appliance, mounts the guest's file systems and trims their free
 * space.  vdsmd never looks inside a guest file system.  It reclaims what
 * reads as zeros: every cluster-aligned run of the volume's own allocated
 * data (the top layer; never the backing chain) that reads as all zeros is
 * written again as zeros with unmapping allowed.  qemu then makes qcow2
 * zero clusters (which keep reading zeros over a backing file) and frees
 * their host clusters, or punches holes in a raw file.  Guest-visible data
 * is unchanged; free space inside a guest file system that still holds old
 * data is not reclaimed (VDSM's would be).
 *
 * The work: qemu-nbd (not persistent: it exits when we disconnect) serves
 * the data file, opened here with O_NOFOLLOW under its image directory and
 * passed as /proc/self/fd/3, with the backing chain from our metadata
 * (never from the qcow2 header), --discard=unmap, on a private socket
 * <run_dir>/sparsify/<job>.sock.  Through libnbd we walk the allocation of
 * the top layer (qcow2: qemu:allocation-depth 1; raw: base:allocation not a
 * hole), read it in SP_CHUNK requests (SP_INFLIGHT in flight) and send
 * one NBD_CMD_WRITE_ZEROES without NO_HOLE for each run of adjacent
 * all-zero aligned grains (64 KiB, or the qcow2's cluster when larger: a
 * part of a cluster cannot be freed).  A volume in use (a running VM)
 * fails the job: qemu-nbd cannot take its write lock.  Each request
 * is idempotent and keeps the data: a kill -9 of vdsmd or qemu-nbd at any
 * point leaves the volume reading the same, at worst with leaked qcow2
 * clusters (qemu-img check reports leaks, never corruption), and the
 * generation the old one.  As for every host job, a job lost with vdsmd is
 * gone from Host.getJobs after a restart. */
#include "st_crash.h"
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <libnbd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SP_CHUNK (4u << 20)        /* bytes per NBD read */
#define SP_INFLIGHT 4              /* reads in flight */
/* zero runs are aligned grains: 64 KiB (qcow2's default cluster), or a
 * qcow2's larger cluster size */
#define SP_GRAIN 65536u
#define SP_RUN_MAX (1u << 30)      /* bytes per write-zeroes request */
#define SP_WINDOW (1ull << 30)     /* bytes per block-status request */
#define SP_EXTENTS 4096            /* extents kept per block-status reply */
#define SP_START_MS 10000          /* qemu-nbd must serve within this */
#define SP_EXIT_MS 10000           /* qemu-nbd must exit within this once we disconnect */
#define SP_OUT 512                 /* qemu-nbd output kept for a message */

static const char not_leaf[] = "Volume to be sparsified is not a leaf volume";

struct sp_ext {
	uint64_t off, len;
	bool top;                  /* allocated in the volume itself */
};

struct sp_walk {
	const char *ctx;           /* the meta context we read */
	bool cow;
	struct sp_ext ext[SP_EXTENTS];
	size_t n;
};

/* The volume's spec on fd 3: raw, or qcow2 with the parent's chain. */
static char *sparsify_spec(struct storage_state *s, struct st_domain *d,
			   const struct st_volume *v, char *err, size_t errlen)
{
	if (v->format != ST_FMT_COW)
		return st_pathf("json:{\"driver\":\"raw\",\"file\":{\"driver\":\"file\","
				"\"filename\":\"/proc/self/fd/3\"}}");
	char *pspec = NULL;
	if (strcmp(v->parent, ST_BLANK_UUID) != 0) {
		pspec = st_chain_json(s, d, v->parent, err, errlen);
		if (!pspec)
			return NULL;
	}
	char *out = st_pathf("json:{\"driver\":\"qcow2\",\"file\":{\"driver\":\"file\","
			     "\"filename\":\"/proc/self/fd/3\"},\"backing\":%s}",
			     pspec ? pspec + strlen("json:") : "null");
	free(pspec);
	return out;
}

static const char *run_dir(const struct storage_state *s)
{
	return s->run_dir && *s->run_dir ? s->run_dir : "/run/vdsmd";
}

/* The child's output so far (non-blocking read end), for a message. */
static void drain(int outfd, char *out, size_t len)
{
	size_t n = strlen(out);
	char tmp[256];
	ssize_t r;
	while ((r = read(outfd, tmp, sizeof(tmp))) > 0)
		for (ssize_t i = 0; i < r; i++) {
			if (n + 1 >= len) {
				memmove(out, out + 1, n - 1);
				n--;
			}
			out[n++] = tmp[i] == '\n' ? ' ' : tmp[i];
		}
	out[n] = '\0';
}

/* Reap the child: it exits by itself once the client left; SIGKILL after
 * SP_EXIT_MS.  j->child is cleared first (nobody signals a reaped pid). */
static int reap(struct st_job *j, pid_t pid)
{
	st_job_child(j, 0);
	int status = 0;
	uint64_t until = vd_now_ms() + SP_EXIT_MS;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR))
			break;
		if (r == 0 && vd_now_ms() >= until) {
			log_warn("storage: job %s: qemu-nbd (pid %d) did not exit, killing it",
				 j->info.id, (int)pid);
			kill(pid, SIGKILL);
			until = UINT64_MAX;
		}
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return status;
}

static int extent_cb(void *user, const char *metacontext, uint64_t offset, uint32_t *entries,
		     size_t nr, int *error)
{
	(void)error;
	struct sp_walk *w = user;
	if (strcmp(metacontext, w->ctx) != 0)
		return 0;
	for (size_t i = 0; i + 1 < nr && w->n < SP_EXTENTS; i += 2) {
		uint32_t flags = entries[i + 1];
		struct sp_ext *x = &w->ext[w->n++];
		x->off = offset;
		x->len = entries[i];
		x->top = w->cow ? flags == 1 : !(flags & LIBNBD_STATE_HOLE);
		offset += entries[i];
	}
	return 0;
}

static bool grain_zero(const unsigned char *p, size_t n)
{
	static const unsigned char zero[4096];
	for (size_t i = 0; i < n; i += sizeof(zero)) {
		size_t k = n - i < sizeof(zero) ? n - i : sizeof(zero);
		if (memcmp(p + i, zero, k) != 0)
			return false;
	}
	return true;
}

struct sp_run {
	struct st_job *j;
	struct nbd_handle *h;
	uint64_t size;
	unsigned char *buf;
	size_t grain;              /* SP_GRAIN or the qcow2 cluster size */
	pid_t pid;                 /* qemu-nbd */
	uint64_t zeroed;           /* bytes sent as write-zeroes */
	uint64_t run_off, run_len; /* the zero run not sent yet */
	uint64_t scanned;          /* allocated bytes read */
	char err[256];
};

/* A crash point while qemu-nbd runs.  In test builds the step that is
 * armed first SIGKILLs qemu-nbd and waits for it to be gone, as systemd
 * kills vdsmd's cgroup at once: nothing it cached (qcow2 tables) reaches
 * the file, the worst case; left alone it would flush and exit when its
 * client went away. */
static void crash_serving(struct sp_run *r, const char *step)
{
#ifdef VD_TEST_HOOKS
	const char *at = getenv("VDSMD_TEST_CRASH_AT");
	if (at && strcmp(at, step) == 0 && r->pid > 0) {
		kill(r->pid, SIGKILL);
		siginfo_t si;
		while (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
			;
	}
#endif
	(void)r;
	ST_CRASH(step);
}

static int nbd_err(struct sp_run *r, const char *what)
{
	snprintf(r->err, sizeof(r->err), "%s: %s", what,
		 nbd_get_error() ? nbd_get_error() : "(no message)");
	return -1;
}

/* The pending zero run sent as one write-zeroes request (none: 0). */
static int flush_run(struct sp_run *r)
{
	if (!r->run_len)
		return 0;
	if (nbd_zero(r->h, r->run_len, r->run_off, 0) < 0)
		return nbd_err(r, "write zeroes");
	r->zeroed += r->run_len;
	r->run_len = 0;
	crash_serving(r, "sparsify.zeroed");
	return 0;
}

/* The all-zero grains of buf (read at off, len bytes) joined to the
 * pending run; each other grain ends it. */
static int zero_runs(struct sp_run *r, const unsigned char *buf, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t g = len - i < r->grain ? len - i : r->grain;
		if (!grain_zero(buf + i, g)) {
			if (flush_run(r) < 0)
				return -1;
		} else if (r->run_len && r->run_off + r->run_len == off + i &&
			   r->run_len + g <= SP_RUN_MAX) {
			r->run_len += g;
		} else {
			if (flush_run(r) < 0)
				return -1;
			r->run_off = off + i;
			r->run_len = g;
		}
		i += g;
	}
	return 0;
}

/* Read one allocated extent, SP_INFLIGHT reads of SP_CHUNK in flight (qemu
 * reads the next while we look at one), looked at in order; the unaligned
 * head and tail grains (shared with data outside it) are left alone. */
static int scan_extent(struct sp_run *r, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	uint64_t a = (off + r->grain - 1) / r->grain * r->grain;
	uint64_t b = end == r->size ? end : end / r->grain * r->grain;
	struct { uint64_t off; size_t n; int64_t cookie; } q[SP_INFLIGHT] = { { 0, 0, 0 } };
	unsigned head = 0, used = 0;
	for (uint64_t next = a; next < b || used;) {
		while (next < b && used < SP_INFLIGHT) {
			unsigned k = (head + used) % SP_INFLIGHT;
			q[k].off = next;
			q[k].n = b - next < SP_CHUNK ? (size_t)(b - next) : SP_CHUNK;
			q[k].cookie = nbd_aio_pread(r->h, r->buf + (size_t)k * SP_CHUNK, q[k].n, next,
						    NBD_NULL_COMPLETION, 0);
			if (q[k].cookie < 0)
				return nbd_err(r, "read");
			next += q[k].n;
			used++;
		}
		int done;
		while ((done = nbd_aio_command_completed(r->h, (uint64_t)q[head].cookie)) == 0)
			if (nbd_poll(r->h, -1) < 0)
				return nbd_err(r, "read");
		if (done < 0)
			return nbd_err(r, "read");
		char why[96];
		if (st_job_stopped(r->j, why, sizeof(why))) {
			snprintf(r->err, sizeof(r->err), "%s", why);
			return -1;
		}
		r->scanned += q[head].n;
		if (zero_runs(r, r->buf + (size_t)head * SP_CHUNK, q[head].off, q[head].n) < 0)
			return -1;
		uint64_t p = q[head].off + q[head].n;
		head = (head + 1) % SP_INFLIGHT;
		used--;
		pthread_mutex_lock(&r->j->s->lock);
		r->j->info.progress = (int)(p * 99 / r->size);
		pthread_mutex_unlock(&r->j->s->lock);
	}
	return flush_run(r);
}

static int walk(struct sp_run *r, bool cow)
{
	struct sp_walk *w = xcalloc(1, sizeof(*w));
	w->cow = cow;
	w->ctx = cow ? "qemu:allocation-depth" : LIBNBD_CONTEXT_BASE_ALLOCATION;
	int rc = 0;
	for (uint64_t off = 0; off < r->size && rc == 0;) {
		uint64_t want = r->size - off < SP_WINDOW ? r->size - off : SP_WINDOW;
		w->n = 0;
		nbd_extent_callback cb = { .callback = extent_cb, .user_data = w };
		if (nbd_block_status(r->h, want, off, cb, 0) < 0) {
			rc = nbd_err(r, "block status");
			break;
		}
		uint64_t next = off;
		for (size_t i = 0; i < w->n && rc == 0; i++) {
			struct sp_ext *x = &w->ext[i];
			if (x->off != next || x->len == 0)
				break;
			uint64_t len = x->off + x->len > r->size ? r->size - x->off : x->len;
			if (x->top)
				rc = scan_extent(r, x->off, len);
			next = x->off + len;
		}
		if (rc == 0 && next == off) {
			snprintf(r->err, sizeof(r->err), "block status at %llu: no extent",
				 (unsigned long long)off);
			rc = -1;
		}
		off = next;
	}
	free(w);
	return rc;
}

/* The grain for a qcow2 on fd: its cluster size (header: magic "QFI\xfb",
 * cluster_bits a big-endian u32 at byte 20) when larger than SP_GRAIN.  An
 * unreadable header keeps SP_GRAIN: qemu-nbd then refuses the file. */
static size_t grain_of(int fd)
{
	unsigned char h[24];
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h, "QFI\xfb", 4) != 0)
		return SP_GRAIN;
	uint32_t bits = (uint32_t)h[20] << 24 | (uint32_t)h[21] << 16 | (uint32_t)h[22] << 8 | h[23];
	if (bits > 21 || (1u << bits) <= SP_GRAIN)
		return SP_GRAIN;
	return (size_t)1 << bits;
}

/* A libnbd handle connected to sock, retried until qemu-nbd serves (the
 * child exiting or SP_START_MS ends it). */
static struct nbd_handle *connect_nbd(struct sp_run *r, const char *sock, bool cow, pid_t pid,
				      int outfd, char *out, size_t outlen)
{
	uint64_t until = vd_now_ms() + SP_START_MS;
	for (;;) {
		struct nbd_handle *h = nbd_create();
		if (!h) {
			nbd_err(r, "libnbd");
			return NULL;
		}
		if (nbd_add_meta_context(h, cow ? "qemu:allocation-depth"
					       : LIBNBD_CONTEXT_BASE_ALLOCATION) < 0 ||
		    nbd_set_request_structured_replies(h, true) < 0) {
			nbd_err(r, "libnbd");
			nbd_close(h);
			return NULL;
		}
		if (nbd_connect_unix(h, sock) == 0)
			return h;
		nbd_err(r, "connecting to qemu-nbd");
		nbd_close(h);
		drain(outfd, out, outlen);
		/* exited? (not reaped here: reap() does, after j->child is cleared) */
		siginfo_t si = { 0 };
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == pid) {
			snprintf(r->err, sizeof(r->err), "qemu-nbd exited: %.200s",
				 *out ? out : "(no output)");
			return NULL;
		}
		char why[96];
		if (st_job_stopped(r->j, why, sizeof(why))) {
			snprintf(r->err, sizeof(r->err), "%s", why);
			return NULL;
		}
		if (vd_now_ms() >= until) {
			snprintf(r->err, sizeof(r->err), "qemu-nbd does not serve %.80s after %d ms: "
				 "%.120s",
				 sock, SP_START_MS, *out ? out : "(no output)");
			return NULL;
		}
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* qemu-nbd on the data file (fd), the walk, the disconnect. */
static int run_sparsify(struct storage_state *s, struct st_job *j, struct st_domain *d,
			const struct st_volume *v, struct st_err *e)
{
	struct sp_run r = { .j = j, .size = (uint64_t)v->capacity, .grain = SP_GRAIN };
	char err[256] = "";
	char *spec = sparsify_spec(s, d, v, err, sizeof(err));
	if (!spec)
		return st_fail(e, RPC_E_GENERAL, "Cannot sparsify volume %s: %s", j->src[2], err);
	char *dir = st_pathf("%s/sparsify", run_dir(s));
	char *sock = st_pathf("%s/%s.sock", dir, j->info.id);
	struct sockaddr_un sa;
	int rc = strlen(sock) >= sizeof(sa.sun_path) ? VD_ESYS(ENAMETOOLONG) : st_mkdir_p(dir, 0700);
	free(dir);
	if (rc < 0) {
		st_fail_rc(e, RPC_E_GENERAL, rc, "Cannot sparsify volume %s: socket %s", j->src[2],
			   sock);
		goto out_spec;
	}
	unlink(sock);
	int fd = st_job_open_data(d, j, e);
	if (fd < 0) {
		rc = -1;
		goto out_spec;
	}
	if (v->format == ST_FMT_COW)
		r.grain = grain_of(fd);
	char *exe = st_find_exe("qemu-nbd");
	int pfd[2] = { -1, -1 };
	if (!exe || pipe2(pfd, O_CLOEXEC) < 0) {
		st_fail(e, RPC_E_GENERAL, "Cannot sparsify volume %s: %s", j->src[2],
			exe ? strerror(errno) : "qemu-nbd not found in PATH (install qemu-utils)");
		free(exe);
		close(fd);
		rc = -1;
		goto out_spec;
	}
	char sockopt[160];
	snprintf(sockopt, sizeof(sockopt), "--socket=%s", sock);
	char *argv[12];
	size_t k = 0;
	argv[k++] = (char *)"qemu-nbd";
	argv[k++] = sockopt;
	argv[k++] = (char *)"--export-name=";
	argv[k++] = (char *)"--cache=writeback";
	argv[k++] = (char *)"--aio=threads";
	argv[k++] = (char *)"--discard=unmap";
	if (v->format == ST_FMT_COW)
		argv[k++] = (char *)"--allocation-depth";
	argv[k++] = spec;
	argv[k] = NULL;
	pid_t pid = -1;
	int serr = st_spawn_tool(exe, argv, pfd[1], fd, &pid);
	free(exe);
	close(pfd[1]);
	close(fd);
	if (serr != 0) {
		close(pfd[0]);
		st_fail(e, RPC_E_GENERAL, "Cannot sparsify volume %s: cannot run qemu-nbd: %s",
			j->src[2], strerror(serr));
		rc = -1;
		goto out_spec;
	}
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	st_job_child(j, pid);
	r.pid = pid;
	crash_serving(&r, "sparsify.serving");
	char out[SP_OUT] = "";
	r.buf = xcalloc(SP_INFLIGHT, SP_CHUNK);
	r.h = connect_nbd(&r, sock, v->format == ST_FMT_COW, pid, pfd[0], out, sizeof(out));
	rc = -1;
	if (r.h) {
		int64_t sz = nbd_get_size(r.h);
		if (sz < 0)
			nbd_err(&r, "export size");
		else if ((uint64_t)sz < r.size)
			snprintf(r.err, sizeof(r.err), "the image is %lld bytes, smaller than the "
				 "volume's capacity %lld", (long long)sz, (long long)r.size);
		else
			rc = walk(&r, v->format == ST_FMT_COW);
		if (rc == 0 && nbd_flush(r.h, 0) < 0)
			rc = nbd_err(&r, "flush");
		nbd_shutdown(r.h, 0);
		nbd_close(r.h);
	}
	/* aborted: st_job_abort killed qemu-nbd already */
	int status = reap(j, pid);
	drain(pfd[0], out, sizeof(out));
	close(pfd[0]);
	if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		snprintf(r.err, sizeof(r.err), "qemu-nbd failed (status %d): %.200s", status,
			 *out ? out : "(no output)");
		rc = -1;
	}
	unlink(sock);
	free(r.buf);
	if (rc < 0) {
		st_fail(e, RPC_E_GENERAL, "Cannot sparsify volume %s: %s", j->src[2], r.err);
		goto out_spec;
	}
	log_info("storage: job %s: volume %s: %llu bytes of data read, %llu bytes of zeros "
		 "reclaimed", j->info.id, j->src[2], (unsigned long long)r.scanned,
		 (unsigned long long)r.zeroed);
out_spec:
	free(sock);
	free(spec);
	return rc;
}

/* The data file synced (qemu-nbd flushed through the page cache). */
static int sync_data(struct st_domain *d, struct st_job *j, struct st_err *e)
{
	int fd = st_job_open_data(d, j, e);
	if (fd < 0)
		return -1;
	int rc = st_fsync_fd(fd);
	close(fd);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "syncing volume %s", j->src[2]);
	return 0;
}

static int sparsify_work(struct storage_state *s, struct st_job *j, struct st_err *e)
{
	struct st_domain *d = NULL;
	struct st_volume copy;
	if (!st_job_vol_busy(s, j, &d, &copy, e))
		return -1;
	int rc = 0;
	if (copy.shared || copy.nchildren)
		rc = st_fail(e, RPC_OK, "%s", not_leaf);
	else if (j->gen >= 0 && (int64_t)copy.generation != j->gen)
		rc = st_fail(e, RPC_E_GEN_MISMATCH, "requested=%lld, actual=%u", (long long)j->gen,
			     copy.generation);
	if (rc == 0)
		rc = run_sparsify(s, j, d, &copy, e);
	if (rc == 0)
		rc = sync_data(d, j, e);
	if (rc == 0) {
		ST_CRASH("sparsify.synced");
		copy.generation = (copy.generation + 1) % (ST_MAX_GENERATION + 1);
		copy.mtime = (int64_t)time(NULL);
		int wrc = st_vol_write_meta(d, &copy);
		if (wrc < 0)
			rc = st_fail_rc(e, RPC_E_GENERAL, wrc, "writing volume metadata");
	}
	if (rc == 0)
		ST_CRASH("sparsify.meta");
	int64_t app = 0, tru = 0;
	bool sized = st_vol_stat(d, j->src[1], j->src[2], &app, &tru) == 0;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = map_get(&d->volumes, j->src[2]);
	if (rc == 0) {
		v->generation = copy.generation;
		v->mtime = copy.mtime;
	}
	if (sized) {
		v->apparent = app;
		v->truesize = tru;
	}
	pthread_mutex_unlock(&s->lock);
	st_job_vol_release(s, j, d);
	return rc;
}

static void *sparsify_main(void *arg)
{
	return st_job_thread(arg, sparsify_work);
}

int st_sparsify_job(struct storage_state *s, const char *job_id, const char *const ids[3],
		    int64_t gen, struct st_err *e)
{
	struct st_job *j = st_job_prep(s, job_id, ST_JOB_SPARSIFY, "sparsify_volume", ids, gen,
				       e);
	if (!j)
		return -1;
	return st_job_start(s, j, sparsify_main, e);
}
