/* common/vd.c - error strings, aborting allocators, clocks, UUID helpers. */
#include "vd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

const char *vd_strerror(int err)
{
	switch (err) {
	case VD_OK: return "ok";
	case VD_AGAIN: return "need more input";
	case VD_EPROTO: return "malformed input";
	case VD_ETOOBIG: return "over the size limit";
	case VD_EDEPTH: return "nesting too deep";
	case VD_EINVAL: return "invalid argument";
	case VD_ENOENT: return "no such object";
	case VD_EEXIST: return "already exists";
	case VD_EIO: return "I/O error";
	case VD_ECLOSED: return "closed";
	case VD_ETIMEDOUT: return "timed out";
	case VD_EBUSY: return "resource busy";
	case VD_EUNSUPP: return "not supported";
	case VD_EPERM: return "permission denied";
	case VD_ECANCELED: return "cancelled";
	}
	int errnum = vd_sys_errno(err);
	if (errnum) {
		/* GNU strerror_r: the static text, or buf for an unknown number */
		static _Thread_local char buf[64];
		return strerror_r(errnum, buf, sizeof(buf));
	}
	return "unknown error";
}

static void oom(size_t n)
{
	fprintf(stderr, "vdsmd: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

uint64_t vd_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t vd_now_ms(void)
{
	return vd_now_ns() / 1000000u;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool vd_is_uuid(const char *s, size_t len)
{
	if (!s || len != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!is_hex(s[i])) {
			return false;
		}
	}
	return true;
}

void vd_uuid_generate(char out[37])
{
	unsigned char b[16];
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t r = getrandom(b + got, sizeof(b) - got, 0);
		if (r <= 0)
			abort();
		got += (size_t)r;
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
		 b[11], b[12], b[13], b[14], b[15]);
}
