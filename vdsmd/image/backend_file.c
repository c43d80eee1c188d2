/* vdsmd/image/backend_file.c - the file:// backend: a raw volume file, as
 * Image.prepare gives its path, resolved beneath an allowed root.
 *
 * Semantics follow ovirt-imageio's backends/file.py FileBackend: one writer
 * (max_writers 1), max_connections readers; zero either releases space
 * (sparse tickets: PUNCH_HOLE|KEEP_SIZE, growing the file first when the
 * range ends past it) or keeps it allocated (ZERO_RANGE, else punch +
 * allocate, else allocate past the end), falling back to writing zeroes when
 * the file system supports none; each fallocate mode found unsupported is
 * not tried again on this backend.  Where we differ: the file is opened
 * without O_DIRECT (buffered I/O; flush is fdatasync), and extents come from
 * SEEK_DATA/SEEK_HOLE (holes are zero extents with hole false, as imageio's
 * NBD backend reports a raw file) where imageio's file backend reports the
 * whole file as one data extent. */
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


struct file_backend {
	struct img_backend base;
	int fd;
	bool can_zero_range;
	bool can_punch_hole;
	bool can_fallocate;
	char path[PATH_MAX];
};

static struct file_backend *fb(struct img_backend *be)
{
	return (struct file_backend *)be;
}

static int sys_fail(struct img_backend *be, int err)
{
	be->err_no = errno;
	return err;
}

static int file_size(struct img_backend *be, uint64_t *size)
{
	struct stat st;
	if (fstat(fb(be)->fd, &st) < 0)
		return sys_fail(be, VD_EIO);
	*size = (uint64_t)st.st_size;
	return 0;
}

static bool range_ok(uint64_t off, uint64_t len)
{
	return off <= (uint64_t)INT64_MAX && len <= (uint64_t)INT64_MAX - off;
}

static long file_pread(struct img_backend *be, void *buf, size_t len, uint64_t off)
{
	if (!range_ok(off, len) || len > (size_t)LONG_MAX)
		return VD_EINVAL;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fb(be)->fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sys_fail(be, VD_EIO);
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (long)done;
}

static int file_pwrite(struct img_backend *be, const void *buf, size_t len, uint64_t off)
{
	if (!be->writable)
		return VD_EPERM;
	if (!range_ok(off, len))
		return VD_EINVAL;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fb(be)->fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sys_fail(be, VD_EIO);
		}
		if (n == 0) {
			errno = EIO;
			return sys_fail(be, VD_EIO);
		}
		done += (size_t)n;
	}
	return 0;
}

/* fallocate(2) wrapper: 0 done, 1 this mode is not supported here, -errno. */
static int try_fallocate(int fd, int mode, uint64_t off, uint64_t len)
{
	for (;;) {
		if (fallocate(fd, mode, (off_t)off, (off_t)len) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EOPNOTSUPP || errno == ENOSYS)
			return 1;
		return -errno;
	}
}

static int write_zeros(struct img_backend *be, uint64_t off, uint64_t len)
{
	size_t chunk = (size_t)VD_MIN(len, (uint64_t)1 << 20);
	char *z = xcalloc(1, chunk ? chunk : 1);
	int rc = 0;
	while (len && rc == 0) {
		size_t n = (size_t)VD_MIN(len, (uint64_t)chunk);
		rc = file_pwrite(be, z, n, off);
		off += n;
		len -= n;
	}
	free(z);
	return rc;
}

/* One fallocate attempt; *can is cleared when the mode is unsupported.
 * Returns 0 done, 1 not done (try the next way), or a vd_err. */
static int attempt(struct img_backend *be, bool *can, int mode, uint64_t off, uint64_t len)
{
	if (!*can)
		return 1;
	int rc = try_fallocate(fb(be)->fd, mode, off, len);
	if (rc == 1) {
		*can = false;
		return 1;
	}
	if (rc < 0) {
		be->err_no = -rc;
		return VD_EIO;
	}
	return 0;
}

static int zero_sparse(struct img_backend *be, uint64_t off, uint64_t len, uint64_t size)
{
	struct file_backend *f = fb(be);
	if (off + len > size) {
		if (ftruncate(f->fd, (off_t)(off + len)) < 0)
			return sys_fail(be, VD_EIO);
		if (off >= size)
			return 0; /* all of it is new, unallocated space */
	}
	int rc = attempt(be, &f->can_punch_hole, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
	return rc == 1 ? write_zeros(be, off, len) : rc;
}

static int zero_alloc(struct img_backend *be, uint64_t off, uint64_t len, uint64_t size)
{
	struct file_backend *f = fb(be);
	int rc = attempt(be, &f->can_zero_range, FALLOC_FL_ZERO_RANGE, off, len);
	if (rc != 1)
		return rc;
	if (f->can_punch_hole && f->can_fallocate) {
		rc = attempt(be, &f->can_punch_hole, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
			     len);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			rc = attempt(be, &f->can_fallocate, 0, off, len);
			if (rc != 1)
				return rc;
			/* The hole reads as zeroes already; it stays a hole. */
			return 0;
		}
	}
	if (off >= size) {
		rc = attempt(be, &f->can_fallocate, 0, off, len);
		if (rc != 1)
			return rc;
	}
	return write_zeros(be, off, len);
}

static int file_zero(struct img_backend *be, uint64_t off, uint64_t len, bool punch)
{
	if (!be->writable)
		return VD_EPERM;
	if (!range_ok(off, len))
		return VD_EINVAL;
	if (len == 0)
		return 0;
	uint64_t size;
	int rc = file_size(be, &size);
	if (rc < 0)
		return rc;
	return punch ? zero_sparse(be, off, len, size) : zero_alloc(be, off, len, size);
}

static int file_flush(struct img_backend *be)
{
	while (fdatasync(fb(be)->fd) < 0) {
		if (errno != EINTR)
			return sys_fail(be, VD_EIO);
	}
	return 0;
}

/* Extents from SEEK_DATA/SEEK_HOLE: data extents (zero false) and holes
 * (zero true; hole false, since a raw file has no backing chain). */
static int file_extents(struct img_backend *be, enum img_extent_context ctx,
			struct img_extents *out)
{
	if (ctx != IMG_EXTENTS_ZERO)
		return VD_EUNSUPP;
	out->n = 0;
	uint64_t size;
	int rc = file_size(be, &size);
	if (rc < 0)
		return rc;
	int fd = fb(be)->fd;
	uint64_t pos = 0;
	while (pos < size) {
		off_t data = lseek(fd, (off_t)pos, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO) /* only a hole up to the end */
				return img_extents_add(out, pos, size - pos, true, false, false);
			/* no SEEK_DATA here: all of it is data */
			out->n = 0;
			return img_extents_add(out, 0, size, false, false, false);
		}
		uint64_t d = VD_MIN((uint64_t)data, size);
		if ((rc = img_extents_add(out, pos, d - pos, true, false, false)) < 0)
			return rc;
		if (d >= size)
			break;
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return sys_fail(be, VD_EIO);
		uint64_t h = VD_MIN((uint64_t)hole, size);
		if (h <= d) /* cannot happen; never loop forever on it */
			h = size;
		if ((rc = img_extents_add(out, d, h - d, false, false, false)) < 0)
			return rc;
		pos = h;
	}
	return 0;
}

static void file_close(struct img_backend *be)
{
	struct file_backend *f = fb(be);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

static int file_fd(struct img_backend *be)
{
	return fb(be)->fd;
}

static const struct img_backend_ops file_ops = {
	.name = "file",
	.size = file_size,
	.pread = file_pread,
	.pwrite = file_pwrite,
	.zero = file_zero,
	.flush = file_flush,
	.extents = file_extents,
	.close = file_close,
	.fd = file_fd,
};

/* Is path p beneath directory root (both resolved, absolute)? */
static bool beneath(const char *p, const char *root)
{
	size_t rl = strlen(root);
	if (rl == 1 && root[0] == '/')
		return p[0] == '/';
	return strncmp(p, root, rl) == 0 && p[rl] == '/';
}

/* Any "." or ".." component?  Refused before anything is resolved. */
static bool has_dot_component(const char *p)
{
	const char *s = p;
	while (*s) {
		while (*s == '/')
			s++;
		const char *e = s;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - s);
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return true;
		s = e;
	}
	return false;
}

int img_backend_file_open(const char *url, const struct img_backend_opts *opts,
			  struct img_backend **out)
{
	*out = NULL;
	if ((!opts->root || opts->root[0] != '/') && !opts->allowed)
		return VD_EINVAL;
	if (strncmp(url, "file://", 7) != 0)
		return VD_EINVAL;
	const char *path = url + 7;
	if (path[0] != '/') /* file://host/... */
		return VD_EINVAL;
	if (strlen(path) >= PATH_MAX)
		return VD_ETOOBIG;
	if (has_dot_component(path))
		return VD_EPERM;
	char root[PATH_MAX], real[PATH_MAX];
	if (!realpath(path, real))
		return errno == ENOENT || errno == ENOTDIR ? VD_ENOENT : VD_EPERM;
	bool ok = false;
	if (opts->root && opts->root[0] == '/' && realpath(opts->root, root))
		ok = beneath(real, root);
	if (!ok && opts->allowed)
		ok = opts->allowed(opts->allowed_ctx, real);
	if (!ok)
		return VD_EPERM;
	int flags = (opts->writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
	int fd = open(real, flags);
	if (fd < 0)
		return errno == ENOENT ? VD_ENOENT
		       : errno == ELOOP ? VD_EPERM
		       : errno == EISDIR ? VD_EINVAL : VD_EIO;
	struct file_backend *f = NULL;
	int rc;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		rc = VD_EIO;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = VD_EINVAL;
		goto out;
	}
	/* A directory swapped for a symlink between realpath() and open():
	 * what was opened must still be the resolved path. */
	char proc[64], now[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, now, sizeof(now) - 1);
	if (n < 0) {
		rc = VD_EIO;
		goto out;
	}
	now[n] = '\0';
	if (strcmp(now, real) != 0) {
		rc = VD_EPERM;
		goto out;
	}
	f = xcalloc(1, sizeof(*f));
	f->base.ops = &file_ops;
	f->base.max_readers = opts->max_connections ? opts->max_connections : 8;
	f->base.max_writers = 1;
	f->base.writable = opts->writable;
	f->fd = fd;
	f->can_zero_range = f->can_punch_hole = f->can_fallocate = true;
	memcpy(f->path, real, strlen(real) + 1);
	*out = &f->base;
	return 0;
out:
	close(fd);
	return rc;
}
