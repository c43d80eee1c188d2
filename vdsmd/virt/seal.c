/* vdsmd/virt/seal.c - VM.seal: virt-sysprep over a template's disks, as a
 * host job (VDSM's lib/vdsm/virt/jobs/seal.py).
 *
 * As VDSM: the verb checks its parameters, adds the job (Host.getJobs,
 * job_type "virt", description "seal_vm") and answers true at once; it
 * does not look the VM up (a template being sealed does not run here).
 * The job prepares every image with allowIllegal (the engine marks the
 * template's disks ILLEGAL before sealing), then runs
 *   virt-sysprep --hostname localhost --selinux-relabel -a <path>...
 * over all of them together (virtsysprep.py; VDSM adds -v -x for its log).
 * Any failure fails the job with code 100 (VDSM's GeneralException for an
 * image that cannot be prepared or a command that fails): virt-sysprep
 * missing (libguestfs is not installed) is said in the job's error, never
 * in the verb's answer.  A stop of the daemon kills a running
 * virt-sysprep and fails the job. */
#include "virt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"

#define SEAL_MAX_IMAGES 64
#define SEAL_PATH_MAX 1024

extern char **environ;

struct seal_image {
	char sd[37], img[37], vol[37];
};

struct seal_job {
	struct virt_state *s;
	char id[37], vm[37], pool[37];
	size_t n;
	struct seal_image imgs[SEAL_MAX_IMAGES];
};

/* The executable name in $PATH (else /usr/bin) into out; false if none. */
static bool find_tool(const char *name, char *out, size_t outlen)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/bin:/bin";
	for (const char *p = path; *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		if (n && n + strlen(name) + 2 <= outlen) {
			snprintf(out, outlen, "%.*s/%s", (int)n, p, name);
			if (access(out, X_OK) == 0)
				return true;
		}
		p += n + (colon ? 1 : 0);
	}
	snprintf(out, outlen, "/usr/bin/%s", name);
	return access(out, X_OK) == 0;
}

/* Run argv; 0 when it exits 0, else a message in why.  Polls for a stop of
 * the daemon (the child is killed then). */
static int run_tool(struct virt_state *s, char *const argv[], char *why, size_t whylen)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		snprintf(why, whylen, "%s: cannot run: %s", argv[0], strerror(rc));
		return -1;
	}
	int st = 0;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			snprintf(why, whylen, "%s: waitpid: %s", argv[0], strerror(errno));
			return -1;
		}
		if (virt_stopping(s)) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			snprintf(why, whylen, "%s: killed: vdsmd is stopping", argv[0]);
			return -1;
		}
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st))
		snprintf(why, whylen, "%s failed with exit code %d", argv[0], WEXITSTATUS(st));
	else
		snprintf(why, whylen, "%s killed by signal %d", argv[0], WTERMSIG(st));
	return -1;
}

static void *seal_main(void *arg)
{
	struct seal_job *j = arg;
	struct virt_state *s = j->s;
	virt_job_set(s, j->id, VJ_RUNNING, 0, NULL);
	char why[512] = "";
	char (*paths)[SEAL_PATH_MAX] = xcalloc(j->n, sizeof *paths);
	char *argv[6 + 2 * SEAL_MAX_IMAGES + 1];
	char tool[512];
	int rc = 0;
	struct virt_deps deps;
	pthread_mutex_lock(&s->lock);
	deps = s->deps;
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < j->n && rc == 0; i++) {
		const struct seal_image *im = &j->imgs[i];
		char w2[256] = "no storage";
		if (!deps.prepare_image_illegal ||
		    deps.prepare_image_illegal(deps.prepare_ctx, j->pool, im->sd, im->img, im->vol,
					       paths[i], SEAL_PATH_MAX, w2, sizeof w2) < 0) {
			snprintf(why, sizeof why, "Cannot prepare image %s/%s/%s: %s", im->sd, im->img,
				 im->vol, w2);
			rc = -1;
		}
	}
	if (rc == 0 && !find_tool("virt-sysprep", tool, sizeof tool)) {
		snprintf(why, sizeof why, "virt-sysprep: not installed (libguestfs; Debian package "
			 "guestfs-tools)");
		rc = -1;
	}
	if (rc == 0) {
		size_t n = 0;
		argv[n++] = tool;
		argv[n++] = (char *)"--hostname";
		argv[n++] = (char *)"localhost";
		argv[n++] = (char *)"--selinux-relabel";
		for (size_t i = 0; i < j->n; i++) {
			argv[n++] = (char *)"-a";
			argv[n++] = paths[i];
		}
		argv[n] = NULL;
		rc = run_tool(s, argv, why, sizeof why);
	}
	if (rc == 0) {
		log_info("virt: %s: seal job %s done (%zu disk(s))", j->vm, j->id, j->n);
		virt_job_set(s, j->id, VJ_DONE, 0, NULL);
	} else {
		log_warn("virt: %s: seal job %s failed: %s", j->vm, j->id, why);
		virt_job_set(s, j->id, VJ_FAILED, rpc_err_code(RPC_E_GENERAL), why);
	}
	free(paths);
	virt_bg_done(s, j);
	return NULL;
}

static bool uuid_field(const struct vd_value *o, const char *key, char out[37])
{
	const struct vd_value *v = vd_obj_get(o, key);
	if (!v || v->type != VD_STRING || !vd_is_uuid(v->v.s.ptr, v->v.s.len))
		return false;
	memcpy(out, v->v.s.ptr, 36);
	out[36] = '\0';
	return true;
}

/* VM.seal {vmID, job_id, sp_id, images: [{sd_id, img_id, vol_id}]}. */
int virt_verb_seal(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	if (!s)
		return rpc_fail(c, RPC_E_RECOVERING, "virt backend not started");
	const struct vd_value *imgs = rpc_arg(c, "images");
	if (!imgs || imgs->type != VD_ARRAY || imgs->v.arr.n == 0 ||
	    imgs->v.arr.n > SEAL_MAX_IMAGES)
		return rpc_fail(c, RPC_E_PARAMS, "images: 1 to %d of {sd_id, img_id, vol_id}",
				SEAL_MAX_IMAGES);
	struct seal_job *j = xcalloc(1, sizeof *j);
	j->s = s;
	for (size_t i = 0; i < imgs->v.arr.n; i++) {
		const struct vd_value *im = &imgs->v.arr.items[i];
		struct seal_image *o = &j->imgs[i];
		if (im->type != VD_OBJECT || !uuid_field(im, "sd_id", o->sd) ||
		    !uuid_field(im, "img_id", o->img) || !uuid_field(im, "vol_id", o->vol)) {
			free(j);
			return rpc_fail(c, RPC_E_PARAMS, "images[%zu]: {sd_id, img_id, vol_id} UUIDs",
					i);
		}
	}
	j->n = imgs->v.arr.n;
	const char *vm = rpc_arg_str(c, "vmID", NULL), *job = rpc_arg_str(c, "job_id", NULL);
	const char *sp = rpc_arg_str(c, "sp_id", NULL);   /* all required UUIDs */
	snprintf(j->vm, sizeof j->vm, "%s", vm ? vm : "");
	snprintf(j->id, sizeof j->id, "%s", job ? job : "");
	snprintf(j->pool, sizeof j->pool, "%s", sp ? sp : "");
	int jr = virt_job_add(s, j->id, j->vm, "seal_vm");
	if (jr < 0) {
		free(j);
		j = NULL;
		return rpc_fail(c, RPC_E_GENERAL, jr == VD_EEXIST ? "job %s exists"
				: "too many jobs (%s)", job ? job : "");
	}
	log_info("virt: seal job %s for %s (%zu disk(s))", j->id, j->vm, j->n);
	if (virt_bg_spawn(s, seal_main, j) < 0) {
		virt_job_set(s, j->id, VJ_FAILED, rpc_err_code(RPC_E_GENERAL), "no thread");
		free(j);
		return rpc_fail(c, RPC_E_GENERAL, "cannot start the seal job");
	}
	return 0;   /* j is the thread's now */
}
