/* common/buf.h - growable byte buffer used for connection I/O and for every
 * encoder's output.
 *
 * Ownership: the buffer owns data; buf_free() releases it.  data may be NULL
 * while cap == 0.  Growth aborts on allocation failure (see vd.h), so callers
 * must bound every wire-supplied length before appending it. */
#ifndef VD_COMMON_BUF_H
#define VD_COMMON_BUF_H

#include <stdarg.h>
#include <string.h>
#include "vd.h"

struct vd_buf {
	char *data;
	size_t len;
	size_t cap;
};

#define VD_BUF_INIT { NULL, 0, 0 }

void buf_init(struct vd_buf *b);
void buf_free(struct vd_buf *b);
/* Grow capacity so that at least n more bytes fit after len. */
void buf_grow(struct vd_buf *b, size_t n);
/* Drop the first n bytes (consumed input); keeps the rest at data[0]. */
void buf_consume(struct vd_buf *b, size_t n);
/* Release memory beyond len when the buffer is idle and large (keeps idle
 * connections small). */
void buf_shrink(struct vd_buf *b);
void buf_printf(struct vd_buf *b, const char *fmt, ...) VD_PRINTF(2, 3);
void buf_vprintf(struct vd_buf *b, const char *fmt, va_list ap);

static inline void buf_reserve(struct vd_buf *b, size_t n)
{
	if (VD_UNLIKELY(b->cap - b->len < n))
		buf_grow(b, n);
}

static inline void buf_append(struct vd_buf *b, const void *p, size_t n)
{
	buf_reserve(b, n);
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

static inline void buf_puts(struct vd_buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

static inline void buf_putc(struct vd_buf *b, char c)
{
	buf_reserve(b, 1);
	b->data[b->len++] = c;
}

static inline void buf_reset(struct vd_buf *b)
{
	b->len = 0;
}

#endif
