/* vdsmd/storage/st_safe.c - symlink-safe file access under a domain.
 *
 * Whoever can write inside a storage domain (another host on the same NFS
 * export, a guest-facing tool, an admin's mistake) can plant a symlink at any
 * name: images/, images/<img>/, <vol>, <vol>.meta, <vol>.meta.tmp, dom_md/,
 * dom_md/metadata.  Every access below the domain directory therefore goes
 * through a directory descriptor: the domain directory itself is opened with
 * O_NOFOLLOW, and every path under it with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS) (or, on kernels without openat2, component by
 * component with O_NOFOLLOW).  A symlink anywhere fails with ELOOP/EXDEV;
 * nothing is ever read or written outside the domain.  Removal uses
 * unlinkat() on the entry itself, which never follows a link.
 * Outside the domains, under storage_root (local, not shared), tasks/ and
 * the mount root mnt/ (and each mount point in it) must be real directories
 * (st_open, st_conn.c): a link there is refused, never followed.  Tests:
 * test_storage_safety.c (names inside images/ and dom_md/) and
 * test_storage_links.c (the domain directory, dom_md/metadata[.tmp],
 * dom_md/spm_lease[.tmp], a copy's source, tasks/, mnt/ and a mount point). */
#include "st_model.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Component-wise fallback: no "..", ".", empty or absolute parts. */
static int open_walk(int dfd, const char *rel, int flags, mode_t mode)
{
	char *copy = xstrdup(rel), *save = NULL;
	int cur = dfd, rc = -1;
	char *part = strtok_r(copy, "/", &save);
	while (part) {
		char *next = strtok_r(NULL, "/", &save);
		if (strcmp(part, "..") == 0 || strcmp(part, ".") == 0) {
			errno = EXDEV;
			break;
		}
		int fd = next ? openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			      : openat(cur, part, flags | O_NOFOLLOW | O_CLOEXEC, mode);
		if (cur != dfd) {
			int e = errno;
			close(cur);
			errno = e;
		}
		if (fd < 0) {
			cur = dfd;
			break;
		}
		cur = fd;
		if (!next) {
			rc = fd;
			cur = dfd;
			break;
		}
		part = next;
	}
	if (cur != dfd)
		close(cur);
	free(copy);
	return rc;
}

int st_open_beneath(int dfd, const char *rel, int flags, mode_t mode)
{
	if (!rel || !*rel || rel[0] == '/') {
		errno = EXDEV;
		return -1;
	}
	struct open_how how = {
		.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
		return (int)fd;
	return open_walk(dfd, rel, flags, mode);   /* seccomp or an old kernel */
}

int st_dom_open(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? vd_sys(errno) : fd;
}

int st_dir_at(const char *dir, const char *rel)
{
	int dfd = st_dom_open(dir);
	if (dfd < 0 || !rel)
		return dfd;
	int fd = st_open_beneath(dfd, rel, O_RDONLY | O_DIRECTORY, 0);
	int e = errno;
	close(dfd);
	errno = e;
	return fd < 0 ? vd_sys(e) : fd;
}

int st_img_open(const struct st_domain *d, const char *img, bool create)
{
	int images = st_dir_at(d->dir, "images");
	if (images < 0)
		return images;
	if (create) {
		if (mkdirat(images, img, 0755) == 0) {
			if (fsync(images) < 0) {
				int e = errno;
				close(images);
				return vd_sys(e);
			}
		} else if (errno != EEXIST) {
			int e = errno;
			close(images);
			return vd_sys(e);
		}
	}
	int fd = openat(images, img, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(images);
	return fd < 0 ? vd_sys(e) : fd;
}

void st_img_rmdir(const struct st_domain *d, const char *img)
{
	int images = st_dir_at(d->dir, "images");
	if (images < 0)
		return;
	if (unlinkat(images, img, AT_REMOVEDIR) == 0)
		fsync(images);
	close(images);
}

int st_vol_open(const struct st_domain *d, const char *img, const char *vol, int flags,
		struct stat *st)
{
	int ifd = st_img_open(d, img, false);
	if (ifd < 0)
		return ifd;
	int fd = openat(ifd, vol, flags | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(ifd);
	if (fd < 0)
		return vd_sys(e);
	if (st && (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))) {
		close(fd);
		return VD_ESYS(EINVAL);
	}
	return fd;
}

int st_write_atomic_at(int dirfd, const char *name, const void *data, size_t len)
{
	char tmp[300];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= (int)sizeof(tmp))
		return VD_ESYS(ENAMETOOLONG);
	/* A planted <name>.tmp (a symlink, say) is removed, never followed. */
	if (unlinkat(dirfd, tmp, 0) < 0 && errno != ENOENT)
		return vd_sys(errno);
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return vd_sys(errno);
	int rc = st_write_sync_close(fd, data, len);
	if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = vd_sys(errno);
	if (rc) {
		unlinkat(dirfd, tmp, 0);
		return rc;
	}
	return fsync(dirfd) < 0 ? vd_sys(errno) : 0;
}

int kv_write_at(const struct st_kv *kv, int dirfd, const char *name)
{
	struct vd_buf b = VD_BUF_INIT;
	kv_format(kv, &b);
	int rc = st_write_atomic_at(dirfd, name, b.data, b.len);
	buf_free(&b);
	return rc;
}

int kv_read_at(struct st_kv *kv, int dirfd, const char *rel)
{
	kv_init(kv);
	int fd = st_open_beneath(dirfd, rel, O_RDONLY, 0);
	if (fd < 0)
		return errno == ENOENT ? VD_ENOENT
		       : (errno == ELOOP || errno == EXDEV || errno == ENOTDIR) ? VD_EPROTO : VD_EIO;
	return kv_read_fd(kv, fd);
}
