/* vdsmd/storage/st_meta.c - key=value metadata files with a SHA-1 checksum,
 * atomic file replacement and path helpers.
 *
 * Format (one pair per line, as VDSM's metadata):
 *     KEY=value
 *     ...
 *     _SHA_CKSUM=<sha1 hex of every "KEY=value" line, newlines excluded>
 * A file without a valid checksum line is rejected (VD_EPROTO): a torn or
 * tampered file is never served. */
#include "st_file.h"
#include "../../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>

#define CKSUM_KEY "_SHA_CKSUM"
#define META_MAX_SIZE (256 * 1024)

int st_fail(struct st_err *e, enum rpc_err code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		e->code = code;
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Storage's own outcomes replaced an errno that told them before
 * (-ECANCELED, -EBUSY, -EIO, -ENOENT no pool or volume, -EINVAL a bad
 * qcow2 header, a torn lease's -EBADMSG) and keep its text: what the wire
 * and the logs say does not change with the encoding. */
static const struct {
	int rc, errnum;
} own_text[] = {
	{ VD_ECANCELED, ECANCELED }, { VD_EBUSY, EBUSY },   { VD_EIO, EIO },
	{ VD_ENOENT, ENOENT },       { VD_EINVAL, EINVAL }, { VD_EPROTO, EBADMSG },
};

const char *st_rc_text(int rc)
{
	for (size_t i = 0; i < VD_ARRAY_SIZE(own_text); i++)
		if (own_text[i].rc == rc)
			return vd_strerror(VD_ESYS(own_text[i].errnum));
	return vd_strerror(rc);   /* the system's text for the VD_ESYS range */
}

/* "<context>: <system text>" into buf. */
static void rc_msg(char *buf, size_t len, int rc, const char *fmt, va_list ap)
{
	int n = vsnprintf(buf, len, fmt, ap);
	size_t at = n < 0 ? 0 : VD_MIN((size_t)n, len - 1);
	snprintf(buf + at, len - at, ": %s", st_rc_text(rc));
}

int st_fail_rc(struct st_err *e, enum rpc_err code, int rc, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		e->code = code;
		rc_msg(e->msg, sizeof(e->msg), rc, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int st_errf(char *buf, size_t len, int rc, const char *fmt, ...)
{
	if (buf && len) {
		va_list ap;
		va_start(ap, fmt);
		rc_msg(buf, len, rc, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int st_fsync_fd(int fd)
{
	return fsync(fd) < 0 ? vd_sys(errno) : 0;
}

int st_mkdir(const char *path, mode_t mode)
{
	return mkdir(path, mode) < 0 ? vd_sys(errno) : 0;
}

void st_remove_record(const char *path, const char *dir)
{
	if (unlink(path) == 0)
		st_fsync_dir(dir);
	else if (errno != ENOENT)
		log_error("storage: cannot remove %s: %s", path, st_rc_text(vd_sys(errno)));
}

int st_rmdir(const char *path)
{
	return rmdir(path) < 0 ? vd_sys(errno) : 0;
}

void kv_init(struct st_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
}

void kv_free(struct st_kv *kv)
{
	for (size_t i = 0; i < kv->n; i++) {
		free(kv->keys[i]);
		free(kv->vals[i]);
	}
	free(kv->keys);
	free(kv->vals);
	memset(kv, 0, sizeof(*kv));
}

static char *clean_value(const char *v)
{
	char *c = xstrdup(v ? v : "");
	for (char *p = c; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return c;
}

void kv_set(struct st_kv *kv, const char *k, const char *v)
{
	for (size_t i = 0; i < kv->n; i++)
		if (strcmp(kv->keys[i], k) == 0) {
			free(kv->vals[i]);
			kv->vals[i] = clean_value(v);
			return;
		}
	if (kv->n == kv->cap) {
		kv->cap = kv->cap ? kv->cap * 2 : 16;
		kv->keys = xrealloc(kv->keys, kv->cap * sizeof(char *));
		kv->vals = xrealloc(kv->vals, kv->cap * sizeof(char *));
	}
	kv->keys[kv->n] = xstrdup(k);
	kv->vals[kv->n] = clean_value(v);
	kv->n++;
}

void kv_setf(struct st_kv *kv, const char *k, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	kv_set(kv, k, tmp);
}

const char *kv_get(const struct st_kv *kv, const char *k)
{
	for (size_t i = 0; i < kv->n; i++)
		if (strcmp(kv->keys[i], k) == 0)
			return kv->vals[i];
	return NULL;
}

int64_t kv_get_int(const struct st_kv *kv, const char *k, int64_t dflt)
{
	const char *v = kv_get(kv, k);
	if (!v || !*v)
		return dflt;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || *end)
		return dflt;
	return x;
}

static void sha1_hex(const char *data, size_t len, char out[41])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_Digest(data, len, md, &mdlen, EVP_sha1(), NULL);
	for (unsigned i = 0; i < mdlen && i < 20; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	out[40] = '\0';
}

void kv_format(const struct st_kv *kv, struct vd_buf *out)
{
	struct vd_buf sum = VD_BUF_INIT;
	for (size_t i = 0; i < kv->n; i++) {
		buf_printf(out, "%s=%s\n", kv->keys[i], kv->vals[i]);
		buf_printf(&sum, "%s=%s", kv->keys[i], kv->vals[i]);
	}
	char hex[41];
	sha1_hex(sum.data ? sum.data : "", sum.len, hex);
	buf_printf(out, CKSUM_KEY "=%s\n", hex);
	buf_free(&sum);
}

int kv_parse(struct st_kv *kv, const char *text, size_t len)
{
	struct vd_buf sum = VD_BUF_INIT;
	const char *p = text, *end = text + len;
	bool have_sum = false;
	char want[41] = "";
	int rc = 0;
	kv_init(kv);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl) {       /* a last line without newline: torn write */
			rc = VD_EPROTO;
			goto out;
		}
		const char *eq = memchr(p, '=', (size_t)(nl - p));
		/* text only: a NUL would silently shorten a key or value */
		if (!eq || eq == p || have_sum || memchr(p, '\0', (size_t)(nl - p))) {
			rc = VD_EPROTO;
			goto out;
		}
		char *k = xstrndup(p, (size_t)(eq - p));
		char *v = xstrndup(eq + 1, (size_t)(nl - eq - 1));
		if (strcmp(k, CKSUM_KEY) == 0) {
			have_sum = true;
			snprintf(want, sizeof(want), "%s", v);
		} else {
			kv_set(kv, k, v);
			buf_append(&sum, p, (size_t)(nl - p));
		}
		free(k);
		free(v);
		p = nl + 1;
	}
	if (!have_sum) {
		rc = VD_EPROTO;
		goto out;
	}
	char hex[41];
	sha1_hex(sum.data ? sum.data : "", sum.len, hex);
#ifndef VD_FUZZING   /* let the fuzzer past the checksum to the rest */
	if (strcmp(hex, want) != 0)
		rc = VD_EPROTO;
#endif
out:
	buf_free(&sum);
	if (rc)
		kv_free(kv);
	return rc;
}

int kv_read_fd(struct st_kv *kv, int fd)
{
	kv_init(kv);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > META_MAX_SIZE) {
		close(fd);
		return VD_EPROTO;
	}
	char *data = xmalloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, data + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	int rc = kv_parse(kv, data, got);
	free(data);
	return rc;
}

int kv_read_file(struct st_kv *kv, const char *path)
{
	kv_init(kv);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? VD_ENOENT : VD_EIO;
	return kv_read_fd(kv, fd);
}

int st_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return vd_sys(errno);
	int rc = fsync(fd) < 0 ? vd_sys(errno) : 0;
	close(fd);
	return rc;
}

int st_write_sync_close(int fd, const void *data, size_t len)
{
	int rc = 0;
	const char *p = data;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = vd_sys(errno);
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (rc == 0 && fsync(fd) < 0)
		rc = vd_sys(errno);
	if (close(fd) < 0 && rc == 0)
		rc = vd_sys(errno);
	return rc;
}

void st_deadline(struct timespec *dl, unsigned ms)
{
	clock_gettime(CLOCK_REALTIME, dl);
	dl->tv_sec += ms / 1000;
	dl->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}

int st_write_atomic(const char *path, const void *data, size_t len)
{
	char *tmp = st_pathf("%s.tmp", path);
	int rc = 0;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		rc = vd_sys(errno);
		goto out;
	}
	rc = st_write_sync_close(fd, data, len);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = vd_sys(errno);
	if (rc) {
		unlink(tmp);
		goto out;
	}
	char *dcopy = xstrdup(path);
	rc = st_fsync_dir(dirname(dcopy));
	free(dcopy);
out:
	free(tmp);
	return rc;
}

int kv_write_file(const struct st_kv *kv, const char *path)
{
	struct vd_buf b = VD_BUF_INIT;
	kv_format(kv, &b);
	int rc = st_write_atomic(path, b.data, b.len);
	buf_free(&b);
	return rc;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	int r = (flag == FTW_DP || flag == FTW_D) ? rmdir(p) : unlink(p);
	return r < 0 && errno != ENOENT ? vd_sys(errno) : 0;
}

int st_rmtree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : vd_sys(errno);
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? vd_sys(errno) : 0;
	/* rm_one's failure comes back as it is; -1 is nftw's own */
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	return rc == -1 ? vd_sys(errno) : rc;
}

char *st_path(const char *a, const char *b)
{
	return st_pathf("%s/%s", a, b);
}

char *st_pathf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	return s;
}

bool st_is_uuid(const char *s)
{
	return s && vd_is_uuid(s, strlen(s));
}

char *st_clean_text(const char *s, size_t max)
{
	if (!s)
		s = "";
	size_t n = strlen(s);
	if (n > max)
		n = max;
	char *c = xstrndup(s, n);
	for (char *p = c; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	return c;
}

int st_mkdir_p(const char *path, mode_t mode)
{
	char *p = xstrdup(path);
	int rc = 0;
	for (char *q = p + 1; ; q++) {
		if (*q == '/' || *q == '\0') {
			char c = *q;
			*q = '\0';
			if (mkdir(p, mode) < 0 && errno != EEXIST) {
				rc = vd_sys(errno);
				break;
			}
			*q = c;
			if (!c)
				break;
		}
	}
	free(p);
	return rc;
}
