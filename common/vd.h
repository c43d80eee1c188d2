/* common/vd.h - error codes, allocation helpers and small macros shared by
 * every module.  Nothing here knows about sockets, codecs or the daemon.
 *
 * Errors: 0 is success, negative enum vd_err values are failures.  Parsers
 * return the number of bytes consumed (>= 0) or a negative vd_err.  A
 * system call's failure that must travel as a value is vd_sys(errno): the
 * range below VD_ESYS_BASE, disjoint from the named codes (a bare -errno
 * would collide: -ENOENT == VD_EPROTO, -EAGAIN == VD_EBUSY).  Compare with
 * VD_ESYS(EEXIST), decode with vd_sys_errno(); vd_strerror() tells both.
 *
 * Memory: xmalloc() and friends abort the process on allocation failure.  That
 * is only safe because every length read from the wire is checked against a
 * configured limit before any buffer grows. */
#ifndef VD_COMMON_VD_H
#define VD_COMMON_VD_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

enum vd_err {
	VD_OK = 0,
	VD_AGAIN = -1,     /* need more input / try again later */
	VD_EPROTO = -2,    /* malformed input */
	VD_ETOOBIG = -3,   /* over a configured size limit */
	VD_EDEPTH = -4,    /* nesting too deep */
	VD_EINVAL = -5,    /* bad argument */
	VD_ENOENT = -6,    /* no such object */
	VD_EEXIST = -7,    /* already exists */
	VD_EIO = -8,       /* I/O error (see errno where relevant) */
	VD_ECLOSED = -9,   /* peer closed / session closed */
	VD_ETIMEDOUT = -10,
	VD_EBUSY = -11,    /* queue full / resource exhausted */
	VD_EUNSUPP = -12,  /* not supported / not built in */
	VD_EPERM = -13,
	VD_ECANCELED = -14, /* stopped on request (Task.stop, an abort) */
	VD_ESYS_BASE = -1000, /* below: VD_ESYS(errnum), a system call's failure */
};

/* The vd_err for a system call's errno (errnum > 0), as a constant
 * expression usable in comparisons and case labels. */
#define VD_ESYS(errnum) (VD_ESYS_BASE - (errnum))

#define VD_ESYS_MAX 4095   /* the largest errnum the range holds */

/* vd_sys(errno): the value a failed call travels as.  An errnum outside
 * 1..VD_ESYS_MAX (none that a failed call sets) becomes EIO's, so a
 * failure never reads as success or as a named code. */
static inline int vd_sys(int errnum)
{
	return VD_ESYS(errnum > 0 && errnum <= VD_ESYS_MAX ? errnum : EIO);
}

/* The errno that rc carries, or 0 when rc is not in the VD_ESYS range. */
static inline int vd_sys_errno(int rc)
{
	return rc < VD_ESYS_BASE && rc >= VD_ESYS(VD_ESYS_MAX) ? VD_ESYS_BASE - rc : 0;
}

/* Text for an error code: static for the named codes ("need more input",
 * "malformed input", ...), the system's (strerror_r into a thread-local
 * buffer) for the VD_ESYS range. */
const char *vd_strerror(int err);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

#define VD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define VD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VD_MAX(a, b) ((a) > (b) ? (a) : (b))
#define VD_LIKELY(x) __builtin_expect(!!(x), 1)
#define VD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VD_UNUSED __attribute__((unused))
#define VD_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Monotonic clock in milliseconds / nanoseconds. */
uint64_t vd_now_ms(void);
uint64_t vd_now_ns(void);

/* True when s[0..len) is a canonical 36-character UUID (8-4-4-4-12 hex). */
bool vd_is_uuid(const char *s, size_t len);
/* Writes a random (version 4) UUID and a terminating NUL into out[37]. */
void vd_uuid_generate(char out[37]);

#endif
