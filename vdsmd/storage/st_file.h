/* vdsmd/storage/st_file.h - the file primitives of the storage backend:
 * what wraps system calls and owns errno.
 *
 * Owns: key=value files with a checksum and atomic replace (st_meta.c),
 * symlink-safe opens beneath a domain directory (st_safe.c), the volume
 * files and running a tool such as qemu-img (st_volume.c, st_run_*) under
 * a struct st_io, and struct st_err, the failure a verb's core reports (an
 * rpc_err and a message).  Knows nothing of domains but their directory
 * (st_img_open, st_vol_open).
 *
 * The error idiom.  Every storage function returns 0 (or a value: an fd,
 * a count) or a negative enum vd_err (common/vd.h).  The primitive files
 * are st_meta.c, st_safe.c and st_volume.c: they make the system calls on
 * storage files whose failure matters, and only they turn a failed call
 * into a value, vd_sys(errno), the VD_ESYS range that no named vd_err
 * shares (a bare -errno did: -ENOENT == VD_EPROTO), or into text.  What a
 * primitive returns is documented per function; the system's failures it
 * names are compared as VD_ESYS(EEXIST), VD_ESYS(ENOENT), VD_ESYS(EINVAL),
 * ..., and its own outcomes are named codes: VD_ECANCELED (io said stop),
 * VD_EIO (a tool failed; err says how), VD_EPROTO / VD_ENOENT / VD_EIO of
 * a metadata read.  Everywhere else in storage an rc is passed up,
 * compared with those constants (an operation that stops or fails by
 * itself uses named codes too: VD_ECANCELED, VD_EIO, VD_EBUSY a lease
 * held by a live host, VD_ENOENT no such pool or volume), or told with its
 * context by
 *     st_fail_rc(e, code, rc, "creating volume %s", vol)   -> struct st_err
 *     st_errf(err, errlen, rc, "creating volume %s", vol)  -> a char buffer
 * both giving "creating volume X: No such file or directory" (the text of
 * st_rc_text(rc) after ": "), or st_rc_text(rc) where the text sits inside
 * a longer message or a log line.  st_rc_text decodes the VD_ESYS range to
 * the system's text; storage's named outcomes keep the system's text of
 * the errno they replaced (VD_ECANCELED "Operation canceled", VD_EBUSY
 * "Device or resource busy", VD_EIO "Input/output error", VD_EPROTO "Bad
 * message", VD_ENOENT "No such file or directory", ...), so the wire does
 * not change with the encoding; any other code reads as vd_strerror.
 * `make lint` (tests/lint.sh) fails on `strerror(-`, `-errno` or a literal
 * `-E...` errno constant in storage outside the primitive files.  Left
 * outside: child process bookkeeping (EINTR loops in st_nbd.c,
 * st_jobs_sparsify.c) and best-effort clean-ups whose failure is only
 * logged or ignored. */
#ifndef VD_VDSMD_STORAGE_ST_FILE_H
#define VD_VDSMD_STORAGE_ST_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "../../common/vd.h"
#include "../../rpc/rpc.h"

/* Failure description filled by core operations: an rpc_err value (mapped
 * to the wire by rpc/errors.c) and a detail message. */
struct st_err {
	enum rpc_err code;
	char msg[256];
};
int st_fail(struct st_err *e, enum rpc_err code, const char *fmt, ...) VD_PRINTF(3, 4);
/* st_fail with "<fmt...>: <st_rc_text(rc)>" (rc a negative vd_err: a
 * primitive's failure or a named outcome); -1 as st_fail. */
int st_fail_rc(struct st_err *e, enum rpc_err code, int rc, const char *fmt, ...)
	VD_PRINTF(4, 5);
/* The same text into buf (len bytes, truncated as snprintf); returns rc. */
int st_errf(char *buf, size_t len, int rc, const char *fmt, ...) VD_PRINTF(4, 5);
/* The text for rc: the system's for the VD_ESYS range and for storage's
 * named outcomes that replaced an errno (the header comment), vd_strerror
 * otherwise.  Static or thread-local; never NULL. */
const char *st_rc_text(int rc);

/* ---- st_meta.c ---------------------------------------------------------- */

/* A parsed key=value file (keys and values owned by the struct). */
struct st_kv {
	size_t n, cap;
	char **keys, **vals;
};
void kv_init(struct st_kv *kv);
void kv_free(struct st_kv *kv);
void kv_set(struct st_kv *kv, const char *k, const char *v);
void kv_setf(struct st_kv *kv, const char *k, const char *fmt, ...) VD_PRINTF(3, 4);
const char *kv_get(const struct st_kv *kv, const char *k);
int64_t kv_get_int(const struct st_kv *kv, const char *k, int64_t dflt);
/* Serialize with a trailing _SHA_CKSUM line; value newlines become spaces. */
void kv_format(const struct st_kv *kv, struct vd_buf *out);
/* Parse and verify the checksum: 0, VD_EPROTO (bad/missing checksum or
 * syntax), VD_ENOENT, VD_EIO (errno kept; the read functions). */
int kv_parse(struct st_kv *kv, const char *text, size_t len);
int kv_read_file(struct st_kv *kv, const char *path);
/* Reads (and closes) fd. */
int kv_read_fd(struct st_kv *kv, int fd);
/* Atomic replace: path.tmp, fsync, rename, fsync the directory.  Returns 0
 * or vd_sys(errno). */
int st_write_atomic(const char *path, const void *data, size_t len);
int kv_write_file(const struct st_kv *kv, const char *path);
/* Write all of data to fd, fsync, close fd (always): 0 or vd_sys(errno). */
int st_write_sync_close(int fd, const void *data, size_t len);
/* CLOCK_REALTIME now + ms, for pthread_cond_timedwait. */
void st_deadline(struct timespec *dl, unsigned ms);
int st_fsync_dir(const char *dir);
/* fsync(fd): 0 or vd_sys(errno). */
int st_fsync_fd(int fd);
/* mkdir(path, mode), no parents: 0 or vd_sys(errno) (VD_ESYS(EEXIST):
 * already there). */
int st_mkdir(const char *path, mode_t mode);
/* rmdir(path): 0 or vd_sys(errno) (VD_ESYS(ENOENT): not there). */
int st_rmdir(const char *path);
/* A record file removed for good: unlink(path), then dir synced; one
 * already gone is no failure, any other is logged. */
void st_remove_record(const char *path, const char *dir);
/* Remove a tree without following symlinks; 0 or vd_sys(errno). */
int st_rmtree(const char *path);
/* "<a>/<b>" into a fresh string. */
char *st_path(const char *a, const char *b);
char *st_pathf(const char *fmt, ...) VD_PRINTF(1, 2);
bool st_is_uuid(const char *s);
/* Sanitized copy (no control characters, at most max bytes). */
char *st_clean_text(const char *s, size_t max);
int st_mkdir_p(const char *path, mode_t mode);

/* ---- st_safe.c: symlink-safe access below a domain directory ------------ */

/* openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) of rel under dfd (a symlink
 * anywhere fails, ELOOP/EXDEV); -1 with errno. */
int st_open_beneath(int dfd, const char *rel, int flags, mode_t mode);
/* The domain directory itself, O_NOFOLLOW; vd_sys(errno) on failure. */
int st_dom_open(const char *dir);
/* dir (O_NOFOLLOW) then rel beneath it as a directory; vd_sys(errno) on
 * failure (errno kept). */
int st_dir_at(const char *dir, const char *rel);
struct st_domain;
/* images/<img> of a domain as a directory fd (made first when create);
 * vd_sys(errno) on failure. */
int st_img_open(const struct st_domain *d, const char *img, bool create);
/* images/<img> removed when it is empty (then the directory synced); a
 * failure (not empty, gone) is ignored. */
void st_img_rmdir(const struct st_domain *d, const char *img);
struct stat;
/* The data file <vol> of images/<img>, openat(flags | O_NOFOLLOW |
 * O_CLOEXEC): the fd, or vd_sys(errno) (of the image directory or the
 * file).  With st non-NULL the file is fstat'ed into it and must be a
 * regular file (VD_ESYS(EINVAL) otherwise). */
int st_vol_open(const struct st_domain *d, const char *img, const char *vol, int flags,
		struct stat *st);
/* Atomic replace of dirfd/name (name.tmp, fsync, renameat, fsync dir): 0
 * or vd_sys(errno) (VD_ESYS(ENAMETOOLONG): name too long for name.tmp). */
int st_write_atomic_at(int dirfd, const char *name, const void *data, size_t len);
int kv_write_at(const struct st_kv *kv, int dirfd, const char *name);
int kv_read_at(struct st_kv *kv, int dirfd, const char *rel);

/* What long volume and image I/O needs from whoever runs it (a task, a
 * host job), as callbacks on ctx: whether it must stop (why filled:
 * "Task is aborted: ..."), the progress in percent, and the child process
 * it runs (pid, 0 once reaped), which the owner kills when it is stopped.
 * A NULL io (or NULL member) means: never stopped, no progress. */
struct st_io {
	void *ctx;
	bool (*stopped)(void *ctx, char *why, size_t len);
	void (*progress)(void *ctx, int pct);
	void (*child)(void *ctx, pid_t pid);
	const char *crash_step;    /* test builds: st_crash_point() once a tool is spawned */
};
/* ---- volume files and tools (st_volume.c) -------------------------------- */

/* A data file fd of old bytes to size (ftruncate), the new part allocated
 * when prealloc (a filesystem without fallocate leaves it sparse); on
 * failure cut back to old (logged with name when that fails too).  0 or
 * vd_sys(errno). */
int st_file_grow(int fd, const char *name, off_t old, off_t size, bool prealloc);

/* Run qemu-img (posix_spawn); datafd, when >= 0, becomes the child's fd 3.
 * The pid goes to io->child while it runs (its owner kills it when the
 * work is stopped); io may be NULL.  0, or err filled and: VD_ECANCELED
 * (io said stop), VD_EIO (it failed), VD_ESYS(ENOSPC) / VD_ESYS(EFBIG)
 * (its output or signal says so), VD_ESYS(ENOENT) (not in PATH), or
 * vd_sys(errno) of the pipe or the spawn. */
int st_run_qemu_img(const struct st_io *io, char *const argv[], int datafd, char *err,
		    size_t errlen);
/* The same, keeping up to 1 MiB of its stdout+stderr in *output. */
int st_run_tool_out(const struct st_io *io, const char *tool, const char *pkg,
		    char *const argv[], int datafd, struct vd_buf *output, char *err,
		    size_t errlen);
/* The same, calling cb with every chunk of output as it comes (progress). */
int st_run_tool_cb(const struct st_io *io, const char *tool, const char *pkg,
		   char *const argv[], int datafd, struct vd_buf *output,
		   void (*cb)(void *ctx, const char *data, size_t n), void *ctx, char *err,
		   size_t errlen);
/* Start exe with argv, stdin /dev/null, stdout and stderr on outfd,
 * datafd (when >= 0) as fd 3, every signal default and unblocked: 0 and
 * *pid, or posix_spawn's error number. */
int st_spawn_tool(const char *exe, char *const argv[], int outfd, int datafd, pid_t *pid);
/* The executable name in PATH (a fresh string), or NULL. */
char *st_find_exe(const char *name);
/* The same for any tool found in PATH (mount, umount). */
int st_run_tool(const struct st_io *io, const char *tool, const char *pkg, char *const argv[],
		int datafd, char *err, size_t errlen);

#endif
