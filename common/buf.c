/* common/buf.c - growable byte buffer. */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>

void buf_init(struct vd_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_free(struct vd_buf *b)
{
	free(b->data);
	buf_init(b);
}

void buf_grow(struct vd_buf *b, size_t n)
{
	size_t need = b->len + n;
	if (need < b->len)
		abort(); /* size_t overflow: a caller skipped its limit check */
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap * 2 > cap ? cap * 2 : need;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

void buf_consume(struct vd_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void buf_shrink(struct vd_buf *b)
{
	if (b->len == 0 && b->cap > 0) {
		free(b->data);
		b->data = NULL;
		b->cap = 0;
	} else if (b->cap > 65536 && b->len < b->cap / 4) {
		b->data = xrealloc(b->data, b->len);
		b->cap = b->len;
	}
}

void buf_vprintf(struct vd_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(b->data ? b->data + b->len : NULL, b->cap - b->len, fmt, ap);
	if (n < 0) {
		va_end(ap2);
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		buf_grow(b, (size_t)n + 1);
		vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap2);
	}
	va_end(ap2);
	b->len += (size_t)n;
}

void buf_printf(struct vd_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}
