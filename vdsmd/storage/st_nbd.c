/* vdsmd/storage/st_nbd.c - NBD.start_server / NBD.stop_server: a volume
 * exported by qemu-nbd on a unix socket, <run_dir>/nbd/<server_id>.sock.
 *
 * As VDSM's storage/nbd.py: the config is checked first (a bitmap only
 * read-only and over the whole chain; it must be on the volume, with no
 * hole, in-use or disabled copy in the chain: 947 / 946), then qemu-nbd
 * runs persistent, shared by 8 clients, with an empty export name,
 * O_DIRECT with native AIO (buffered with threads where the file system
 * refuses O_DIRECT), allocation depth for qcow2, --read-only or the
 * discard / detect-zeroes modes asked for, --bitmap; its image is a json:
 * spec whose chain comes from our metadata (st_chain_json), the backing
 * null for backing_chain=false.  The verb answers once the socket accepts
 * a connection (10 s, VDSM's bound) and returns nbd:unix:<socket>.
 *
 * Where we differ: VDSM runs qemu-nbd as a systemd transient unit, which
 * outlives vdsm; here it is vdsmd's child (posix_spawn, explicit argv, no
 * shell), so the daemon notices its exit: one thread per server reads its
 * output and waits for it; a server that dies on its own is logged and
 * its entry and socket removed.  stop_server sends SIGTERM, waits 5 s,
 * then SIGKILL; vdsmd's shutdown stops them all.  A server left by a
 * vdsmd killed with SIGKILL is found by its pid file <id>.pid when the
 * engine stops it (checked against /proc/<pid>/cmdline before a signal).
 * A bitmap present in more than one volume of the chain is merged, as
 * VDSM does, into a qcow2 overlay <id>.overlay over the chain, removed once
 * qemu-nbd has it open. */
#include "st_ops.h"
#include "../../common/log.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define NBD_START_MS 10000   /* VDSM's _wait_for_socket bound */
#define NBD_TERM_MS 5000     /* SIGTERM, then SIGKILL */
#define NBD_CHAIN_MAX 128
#define NBD_OUT 512

struct st_nbd {
	struct storage_state *s;
	char id[37];
	char *sock, *pidfile;
	pid_t pid;
	int outfd;                 /* the child's stdout+stderr */
	pthread_t thr;
	bool thr_started;
	pthread_cond_t cond;       /* exited (with s->lock) */
	bool exited;
	bool held;                 /* a caller owns it (starting, stopping) */
	bool running;              /* started: stop_server may take it */
	int status;
	char out[NBD_OUT];
	size_t nout;
	struct st_nbd *next;       /* s->nbd_dead */
};

static const char *run_dir(const struct storage_state *s)
{
	return s->run_dir && *s->run_dir ? s->run_dir : "/run/vdsmd";
}

static void nbd_free(struct st_nbd *n)
{
	if (n->thr_started)
		pthread_join(n->thr, NULL);
	pthread_cond_destroy(&n->cond);
	free(n->sock);
	free(n->pidfile);
	free(n);
}

/* Entries whose qemu-nbd exited on its own: join and free (no lock held). */
static void reap_dead(struct storage_state *s)
{
	pthread_mutex_lock(&s->lock);
	struct st_nbd *n = s->nbd_dead;
	s->nbd_dead = NULL;
	pthread_mutex_unlock(&s->lock);
	while (n) {
		struct st_nbd *next = n->next;
		nbd_free(n);
		n = next;
	}
}

static void describe_exit(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "exit %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* One per server: the child's output (the last NBD_OUT bytes kept), its
 * exit.  An exit nobody asked for removes the entry and the socket. */
static void *nbd_main(void *arg)
{
	struct st_nbd *n = arg;
	struct storage_state *s = n->s;
	char tmp[512];
	for (;;) {
		ssize_t r = read(n->outfd, tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		pthread_mutex_lock(&s->lock);
		for (ssize_t i = 0; i < r; i++) {
			if (n->nout == sizeof(n->out) - 1) {
				memmove(n->out, n->out + 1, n->nout - 1);
				n->nout--;
			}
			n->out[n->nout++] = tmp[i] == '\n' ? ' ' : tmp[i];
		}
		n->out[n->nout] = '\0';
		pthread_mutex_unlock(&s->lock);
	}
	close(n->outfd);
	n->outfd = -1;
	/* wait without reaping, then reap under the lock: nobody signals a
	 * pid that is free again (kill() is sent under the lock, !exited) */
	siginfo_t si;
	while (waitid(P_PID, (id_t)n->pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&s->lock);
	int status = 0;
	while (waitpid(n->pid, &status, 0) < 0 && errno == EINTR)
		;
	n->exited = true;
	n->status = status;
	bool orphaned = !n->held;
	if (orphaned) {
		/* started and not being stopped: this thread ends the entry */
		if (map_get(&s->nbd, n->id) == n)
			map_del(&s->nbd, n->id);
		n->next = s->nbd_dead;
		s->nbd_dead = n;
	}
	pthread_cond_broadcast(&n->cond);
	if (orphaned && n->sock) {
		unlink(n->sock);
		unlink(n->pidfile);
		char how[48];
		describe_exit(status, how, sizeof(how));
		log_warn("storage: NBD server %s: qemu-nbd (pid %d) exited by itself (%s): %s",
			 n->id, (int)n->pid, how, n->nout ? n->out : "(no output)");
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- checks ------------------------------------------------------------- */

static int bitmap_flags_check(const struct st_qbitmap *b, const char *vol, struct st_err *e)
{
	if (b->flags & ST_QBM_IN_USE)
		return st_fail(e, RPC_E_BITMAP_CHAIN, "{'bitmap': '%.64s', 'filename': '%s', "
			       "'reason': 'Bitmap in use'}", b->name, vol);
	if (!(b->flags & ST_QBM_AUTO))
		return st_fail(e, RPC_E_BITMAP_CHAIN, "{'bitmap': '%.64s', 'filename': '%s', "
			       "'reason': 'Bitmap is disabled'}", b->name, vol);
	return 0;
}

/* VDSM's _find_bitmap over the chain from our metadata: how many volumes
 * hold a usable copy of the bitmap (*found: they are ids[0..found), the top
 * first, as a hole fails); a copy that is in use or disabled, or one below
 * a volume lacking it, is 946. */
static int find_bitmap(struct storage_state *s, const char *sd, const char *vol,
		       const char *bitmap, char ids[NBD_CHAIN_MAX][2][37], size_t *found,
		       struct st_err *e)
{
	size_t n = 0, missing = 0;
	*found = 0;
	pthread_mutex_lock(&s->lock);
	struct st_domain *d = map_get(&s->domains, sd);
	const struct st_volume *v = d ? map_get(&d->volumes, vol) : NULL;
	while (v && v->format == ST_FMT_COW && n < NBD_CHAIN_MAX) {
		snprintf(ids[n][0], 37, "%s", v->image);
		snprintf(ids[n][1], 37, "%s", v->uuid);
		n++;
		v = strcmp(v->parent, ST_BLANK_UUID) == 0 ? NULL : map_get(&d->volumes, v->parent);
	}
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct st_qinfo q;
		if (st_volume_qemu_info(s, sd, ids[i][0], ids[i][1], &q, e) < 0)
			return -1;
		const struct st_qbitmap *b = NULL;
		for (size_t k = 0; k < q.nbitmaps && !b; k++)
			if (strcmp(q.bitmaps[k].name, bitmap) == 0)
				b = &q.bitmaps[k];
		int rc = 0;
		if (b && (rc = bitmap_flags_check(b, ids[i][1], e)) == 0 && missing)
			rc = st_fail(e, RPC_E_BITMAP_CHAIN, "{'bitmap': '%s', 'reason': 'Bitmap is "
				     "missing in %zu volume(s) above %s'}", bitmap, missing, ids[i][1]);
		st_qinfo_free(&q);
		if (rc < 0)
			return -1;
		if (b)
			(*found)++;
		else
			missing++;
	}
	return 0;
}

/* O_DIRECT works on the volume's file system (not on tmpfs). */
static bool direct_io_ok(const struct st_domain *d, const char *img, const char *vol)
{
	int ifd = st_img_open(d, img, false);
	if (ifd < 0)
		return false;
	int fd = openat(ifd, vol, O_RDONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
	close(ifd);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* ---- the child ---------------------------------------------------------- */

static int spawn(struct st_nbd *n, char *const argv[], char *err, size_t errlen)
{
	char *exe = st_find_exe("qemu-nbd");
	if (!exe) {
		snprintf(err, errlen, "qemu-nbd not found in PATH (install qemu-utils)");
		return -1;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		free(exe);
		return -1;
	}
	pid_t pid = -1;
	int serr = st_spawn_tool(exe, argv, pfd[1], -1, &pid);
	free(exe);
	close(pfd[1]);
	if (serr != 0) {
		close(pfd[0]);
		snprintf(err, errlen, "cannot run qemu-nbd: %s", strerror(serr));
		return -1;
	}
	n->pid = pid;
	n->outfd = pfd[0];
	if (pthread_create(&n->thr, NULL, nbd_main, n) != 0) {
		/* nobody would reap it: stop it here */
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(pfd[0]);
		snprintf(err, errlen, "cannot start the qemu-nbd supervisor thread");
		return -1;
	}
	n->thr_started = true;
	return 0;
}

/* Does the server behind path speak NBD yet?  A connect alone is not
 * enough: qemu-nbd listens before it has opened its image, and the kernel
 * completes a connect into the backlog; only the greeting ("NBDMAGIC"),
 * sent once the export exists, says the image is open (the bitmap overlay
 * may then be removed). */
static bool sock_accepts(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	bool ok = false;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		char magic[8];
		size_t got = 0;
		while (got < sizeof(magic)) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (poll(&p, 1, 200) != 1)
				break;
			ssize_t r = read(fd, magic + got, sizeof(magic) - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		ok = got == sizeof(magic) && memcmp(magic, "NBDMAGIC", sizeof(magic)) == 0;
	}
	close(fd);
	return ok;
}

/* Until the socket accepts (0) or the child exits / the bound passes (-1,
 * the reason in err). */
static int wait_ready(struct st_nbd *n, char *err, size_t errlen)
{
	struct storage_state *s = n->s;
	uint64_t until = vd_now_ms() + NBD_START_MS;
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool exited = n->exited;
		if (exited) {
			char how[48];
			describe_exit(n->status, how, sizeof(how));
			snprintf(err, errlen, "qemu-nbd exited (%s): %s", how,
				 n->nout ? n->out : "(no output)");
		}
		pthread_mutex_unlock(&s->lock);
		if (exited)
			return -1;
		if (sock_accepts(n->sock))
			return 0;
		if (vd_now_ms() >= until) {
			snprintf(err, errlen, "Timeout starting NBD server %s: its socket %s does "
				 "not accept connections after %d ms", n->id, n->sock, NBD_START_MS);
			return -1;
		}
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* SIGTERM, NBD_TERM_MS, SIGKILL; then the thread is joined. */
static void terminate(struct st_nbd *n)
{
	struct storage_state *s = n->s;
	pthread_mutex_lock(&s->lock);
	n->held = true;
	if (!n->exited)
		kill(n->pid, SIGTERM);
	struct timespec dl;
	st_deadline(&dl, NBD_TERM_MS);
	while (!n->exited)
		if (pthread_cond_timedwait(&n->cond, &s->lock, &dl) == ETIMEDOUT)
			break;
	if (!n->exited) {
		log_warn("storage: NBD server %s: qemu-nbd (pid %d) ignored SIGTERM for %d ms, "
			 "killing it", n->id, (int)n->pid, NBD_TERM_MS);
		kill(n->pid, SIGKILL);
	}
	pthread_mutex_unlock(&s->lock);
	if (n->thr_started)
		pthread_join(n->thr, NULL);
	n->thr_started = false;
}

static void write_pidfile(const struct st_nbd *n)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%d\n", (int)n->pid);
	if (st_write_atomic(n->pidfile, buf, (size_t)len) < 0)
		log_warn("storage: NBD server %s: cannot write %s", n->id, n->pidfile);
}

/* ---- the verbs' work ---------------------------------------------------- */

static int check_cfg(const struct st_nbd_cfg *c, struct st_err *e)
{
	if (!st_is_uuid(c->sd) || !st_is_uuid(c->img) || !st_is_uuid(c->vol))
		return st_fail(e, RPC_E_PARAMS, "config: sd_id, img_id and vol_id must be UUIDs");
	if (c->bitmap && !st_is_uuid(c->bitmap))
		return st_fail(e, RPC_E_PARAMS, "config.bitmap: not a UUID");
	if (c->bitmap && !c->backing_chain)
		return st_fail(e, RPC_E_ST_UNSUPPORTED, "reason=Cannot export bitmap with "
			       "backing_chain=False, context={}");
	if (c->bitmap && !c->readonly)
		return st_fail(e, RPC_E_ST_UNSUPPORTED, "reason=Cannot export bitmap for writing, "
			       "context={}");
	return 0;
}

/* VDSM's _create_overlay: a bitmap in several volumes of the chain is
 * exported from a qcow2 overlay over the chain holding the merge of every
 * copy.  Replaces *spec by the overlay's (its backing the chain's spec);
 * the file goes once qemu-nbd holds it open. */
static int make_overlay(struct storage_state *s, struct st_domain *d, const char *overlay,
			const char *bitmap, char ids[NBD_CHAIN_MAX][2][37], size_t found,
			int64_t size, char **spec, struct st_err *e)
{
	if (strpbrk(overlay, "\"\\") || strlen(overlay) > 200)
		return st_fail(e, RPC_E_GENERAL, "run_dir unusable in a json: spec: %s", overlay);
	char sz[32], err[256];
	snprintf(sz, sizeof(sz), "%lld", (long long)size);
	unlink(overlay);
	char *create[] = { (char *)"qemu-img", (char *)"create", (char *)"-q", (char *)"-f",
			   (char *)"qcow2", (char *)"-u", (char *)"-F", (char *)"qcow2",
			   (char *)"-b", *spec, (char *)overlay, sz, NULL };
	char *add[] = { (char *)"qemu-img", (char *)"bitmap", (char *)"--add", (char *)"-f",
			(char *)"qcow2", (char *)"--", (char *)overlay, (char *)bitmap, NULL };
	if (st_run_qemu_img(NULL, create, -1, err, sizeof(err)) < 0 ||
	    st_run_qemu_img(NULL, add, -1, err, sizeof(err)) < 0)
		goto fail;
	for (size_t i = 0; i < found; i++) {
		char *src = st_chain_json_top(s, d, ids[i][1], err, sizeof(err));
		if (!src)
			goto fail;
		char *merge[] = { (char *)"qemu-img", (char *)"bitmap", (char *)"--merge",
				  (char *)bitmap, (char *)"-F", (char *)"qcow2", (char *)"-b", src,
				  (char *)"-f", (char *)"qcow2", (char *)"--", (char *)overlay,
				  (char *)bitmap, NULL };
		int rc = st_run_qemu_img(NULL, merge, -1, err, sizeof(err));
		free(src);
		if (rc < 0)
			goto fail;
	}
	char *ov = st_pathf("json:{\"driver\":\"qcow2\",\"file\":{\"driver\":\"file\","
			    "\"filename\":\"%s\"},\"backing\":%s}", overlay, *spec + 5);
	free(*spec);
	*spec = ov;
	return 0;
fail:
	unlink(overlay);
	return st_fail(e, RPC_E_GENERAL, "merging bitmap %s of %zu volumes into an overlay: %s",
		       bitmap, found, err);
}

/* The volume, its format and image spec; the bitmap checked (merged into
 * the overlay file when several volumes have it: *used_overlay). */
static int resolve(struct storage_state *s, const struct st_nbd_cfg *c, const char *overlay,
		   char **spec, bool *cow, bool *direct, bool *used_overlay, struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	if (!s->pool_connected) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_POOL_NOT_CONN, "no storage pool is connected");
	}
	struct st_volume *v = st_find_volume(s, c->sd, c->img, c->vol, &d, e);
	*cow = v && v->format == ST_FMT_COW;
	int64_t size = v ? v->capacity : 0;
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return -1;
	char (*ids)[2][37] = NULL;
	size_t found = 0;
	if (c->bitmap) {
		if (!*cow)
			return st_fail(e, RPC_E_ST_UNSUPPORTED, "reason=Cannot export bitmap from RAW "
				       "volume, context={}");
		ids = xcalloc(NBD_CHAIN_MAX, sizeof(*ids));
		if (find_bitmap(s, c->sd, c->vol, c->bitmap, ids, &found, e) < 0)
			goto fail;
		if (found == 0) {
			st_fail(e, RPC_E_NO_BITMAP, "{'reason': 'Bitmap does not exist in volume "
				"%s', 'bitmap': '%s'}", c->vol, c->bitmap);
			goto fail;
		}
	}
	char err[256];
	*spec = c->backing_chain ? st_chain_json(s, d, c->vol, err, sizeof(err))
				 : st_chain_json_top(s, d, c->vol, err, sizeof(err));
	if (!*spec) {
		st_fail(e, RPC_E_GENERAL, "%s", err);
		goto fail;
	}
	*used_overlay = found > 1;
	if (*used_overlay &&
	    make_overlay(s, d, overlay, c->bitmap, ids, found, size, spec, e) < 0) {
		free(*spec);
		*spec = NULL;
		goto fail;
	}
	free(ids);
	*direct = direct_io_ok(d, c->img, c->vol);
	return 0;
fail:
	free(ids);
	return -1;
}

/* Reserve the id (an entry without a child), or fail. */
static struct st_nbd *reserve(struct storage_state *s, const char *id, struct st_err *e)
{
	struct sockaddr_un sa;
	char *dir = st_pathf("%s/nbd", run_dir(s));
	char *sock = st_pathf("%s/%s.sock", dir, id);
	if (strlen(sock) >= sizeof(sa.sun_path)) {
		st_fail(e, RPC_E_GENERAL, "NBD socket path %s is longer than %zu bytes (run_dir)",
			sock, sizeof(sa.sun_path) - 1);
		free(dir);
		free(sock);
		return NULL;
	}
	int rc = st_mkdir_p(dir, 0750);
	free(dir);
	if (rc < 0) {
		st_fail_rc(e, RPC_E_GENERAL, rc, "cannot make %s/nbd", run_dir(s));
		free(sock);
		return NULL;
	}
	struct st_nbd *n = xcalloc(1, sizeof(*n));
	n->s = s;
	snprintf(n->id, sizeof(n->id), "%s", id);
	n->sock = sock;
	n->pidfile = st_pathf("%s/nbd/%s.pid", run_dir(s), id);
	n->outfd = -1;
	n->held = true;
	pthread_cond_init(&n->cond, NULL);
	pthread_mutex_lock(&s->lock);
	bool taken = map_get(&s->nbd, id) != NULL;
	if (!taken)
		map_put(&s->nbd, n->id, n);
	pthread_mutex_unlock(&s->lock);
	if (taken) {
		st_fail(e, RPC_E_GENERAL, "NBD server %s is already running", id);
		nbd_free(n);
		return NULL;
	}
	return n;
}

static void unreserve(struct storage_state *s, struct st_nbd *n)
{
	pthread_mutex_lock(&s->lock);
	if (map_get(&s->nbd, n->id) == n)
		map_del(&s->nbd, n->id);
	pthread_mutex_unlock(&s->lock);
	nbd_free(n);
}

int st_nbd_start(struct storage_state *s, const char *id, const struct st_nbd_cfg *c,
		 char **url, struct st_err *e)
{
	*url = NULL;
	reap_dead(s);
	if (!st_is_uuid(id))
		return st_fail(e, RPC_E_PARAMS, "server_id: not a UUID");
	if (check_cfg(c, e) < 0)
		return -1;
	struct st_nbd *n = reserve(s, id, e);
	if (!n)
		return -1;
	char *spec = NULL;
	bool cow = false, direct = false, overlay = false;
	char *ovpath = st_pathf("%s/nbd/%s.overlay", run_dir(s), id);
	if (resolve(s, c, ovpath, &spec, &cow, &direct, &overlay, e) < 0) {
		free(ovpath);
		unreserve(s, n);
		return -1;
	}
	/* a socket left by a server of a vdsmd that was killed */
	if (unlink(n->sock) == 0)
		log_warn("storage: NBD server %s: removed a stale socket %s", id, n->sock);
	char sockopt[160], bitmapopt[64];
	snprintf(sockopt, sizeof(sockopt), "--socket=%s", n->sock);
	snprintf(bitmapopt, sizeof(bitmapopt), "--bitmap=%s", c->bitmap ? c->bitmap : "");
	const char *argv[16];
	size_t k = 0;
	argv[k++] = "qemu-nbd";
	argv[k++] = sockopt;
	argv[k++] = "--persistent";
	argv[k++] = "--shared=8";
	argv[k++] = "--export-name=";
	argv[k++] = direct ? "--cache=none" : "--cache=writeback";
	argv[k++] = direct ? "--aio=native" : "--aio=threads";
	if (cow)
		argv[k++] = "--allocation-depth";
	if (c->readonly)
		argv[k++] = "--read-only";
	if (!c->readonly && c->discard)
		argv[k++] = "--discard=unmap";
	if (!c->readonly && c->detect_zeroes)
		argv[k++] = c->discard ? "--detect-zeroes=unmap" : "--detect-zeroes=on";
	if (c->bitmap)
		argv[k++] = bitmapopt;
	argv[k++] = spec;
	argv[k] = NULL;
	char err[NBD_OUT + 128];
	int rc = spawn(n, (char *const *)argv, err, sizeof(err));
	free(spec);
	if (rc == 0) {
		write_pidfile(n);
		rc = wait_ready(n, err, sizeof(err));
	}
	/* qemu-nbd has the overlay open once it serves (VDSM removes it too) */
	if (overlay)
		unlink(ovpath);
	free(ovpath);
	if (rc < 0 && !n->thr_started) {
		unreserve(s, n);
		return st_fail(e, RPC_E_GENERAL, "NBD server %s: %s", id, err);
	}
	if (rc == 0) {
		/* from here its exit is the supervisor's to handle */
		pthread_mutex_lock(&s->lock);
		if (n->exited)
			snprintf(err, sizeof(err), "qemu-nbd exited once started: %s",
				 n->nout ? n->out : "(no output)");
		else {
			n->held = false;
			n->running = true;
		}
		rc = n->exited ? -1 : 0;
		pthread_mutex_unlock(&s->lock);
	}
	if (rc < 0) {
		terminate(n);
		unlink(n->sock);
		unlink(n->pidfile);
		unreserve(s, n);
		return st_fail(e, RPC_E_GENERAL, "NBD server %s: %s", id, err);
	}
	if (chmod(n->sock, 0660) < 0)
		log_warn("storage: NBD server %s: chmod %s: %s", id, n->sock, strerror(errno));
	log_info("storage: NBD server %s: qemu-nbd (pid %d) serves %s/%s/%s%s%s on %s", id,
		 (int)n->pid, c->sd, c->img, c->vol, c->readonly ? " read-only" : "",
		 c->backing_chain ? "" : " without its backing chain", n->sock);
	*url = st_pathf("nbd:unix:%s", n->sock);
	return 0;
}

/* A qemu-nbd of ours serving sock (its cmdline has --socket=<sock>). */
static bool is_our_server(pid_t pid, const char *sock)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return false;
	buf[r] = '\0';
	char want[160];
	snprintf(want, sizeof(want), "--socket=%s", sock);
	const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
	if (strcmp(base, "qemu-nbd") != 0)
		return false;
	for (ssize_t i = 0; i < r; i += (ssize_t)strlen(buf + i) + 1)
		if (strcmp(buf + i, want) == 0)
			return true;
	return false;
}

/* stop_server of an id we do not run: a server a killed vdsmd left. */
static void stop_leftover(struct storage_state *s, const char *id)
{
	char *sock = st_pathf("%s/nbd/%s.sock", run_dir(s), id);
	char *pidfile = st_pathf("%s/nbd/%s.pid", run_dir(s), id);
	char buf[32] = "";
	int fd = open(pidfile, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t r = read(fd, buf, sizeof(buf) - 1);
		buf[r > 0 ? r : 0] = '\0';
		close(fd);
		long pid = strtol(buf, NULL, 10);
		if (pid > 1 && is_our_server((pid_t)pid, sock)) {
			log_warn("storage: NBD server %s: stopping qemu-nbd (pid %ld) left by an "
				 "earlier vdsmd", id, pid);
			kill((pid_t)pid, SIGTERM);
			for (int i = 0; i < NBD_TERM_MS / 20 && kill((pid_t)pid, 0) == 0; i++) {
				struct timespec ts = { 0, 20 * 1000 * 1000 };
				nanosleep(&ts, NULL);
			}
			if (kill((pid_t)pid, 0) == 0)
				kill((pid_t)pid, SIGKILL);
		}
		unlink(pidfile);
		unlink(sock);
	} else {
		log_info("storage: NBD server %s is not running", id);
	}
	free(sock);
	free(pidfile);
}

int st_nbd_stop(struct storage_state *s, const char *id, struct st_err *e)
{
	reap_dead(s);
	if (!st_is_uuid(id))
		return st_fail(e, RPC_E_PARAMS, "server_id: not a UUID");
	pthread_mutex_lock(&s->lock);
	struct st_nbd *n = map_get(&s->nbd, id);
	if (n && !n->running) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_GENERAL, "NBD server %s is starting", id);
	}
	if (n) {
		map_del(&s->nbd, id);
		n->held = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (!n) {
		stop_leftover(s, id);
		return 0;
	}
	terminate(n);
	unlink(n->sock);
	unlink(n->pidfile);
	char how[48];
	describe_exit(n->status, how, sizeof(how));
	log_info("storage: NBD server %s stopped (qemu-nbd pid %d, %s)", id, (int)n->pid, how);
	nbd_free(n);
	return 0;
}

void st_nbd_stop_all(struct storage_state *s)
{
	for (;;) {
		pthread_mutex_lock(&s->lock);
		struct st_map_ent *it = map_first(&s->nbd);
		char id[37] = "";
		for (; it && !id[0]; it = map_next(&s->nbd, it)) {
			const struct st_nbd *n = map_val(it);
			if (n->running)
				snprintf(id, sizeof(id), "%s", n->id);
		}
		pthread_mutex_unlock(&s->lock);
		if (!id[0])
			break;
		struct st_err e = { 0 };
		st_nbd_stop(s, id, &e);
	}
	reap_dead(s);
}
