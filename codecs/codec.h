/* codecs/codec.h - the codec interface: decoder into the value model and a
 * streaming writer that appends encoded bytes to a struct vd_buf.
 *
 * Handlers write responses through the vw_* functions below; nothing builds a
 * tree just to encode it.  A writer is plain data: copying the struct (and
 * remembering out->len) is a valid checkpoint to roll back to.
 *
 * Writer usage: inside an object, call vw_key() then exactly one value (or a
 * begin_*).  vw_raw() inserts bytes already encoded by the same codec as one
 * value.  Misuse (depth past VW_MAX_DEPTH, a value where a key is due) sets
 * w->error to VD_EINVAL and is otherwise ignored; it is a programmer error. */
#ifndef VD_CODECS_CODEC_H
#define VD_CODECS_CODEC_H

#include <stdarg.h>
#include "../common/buf.h"
#include "../common/arena.h"
#include "value.h"

#define VD_DEFAULT_MAX_DEPTH 64
#define VW_MAX_DEPTH 128
/* Decoders never nest deeper than this, whatever the limits say (the msgpack
 * decoder recurses). */
#define VD_HARD_MAX_DEPTH 4096

/* Limits every decoder enforces. */
struct vd_limits {
	unsigned max_depth;   /* nesting of arrays/objects; default 64, at most
			       * VD_HARD_MAX_DEPTH (larger values are clamped) */
	size_t max_size;      /* input bytes; default 16 MiB */
	size_t max_elements;  /* values (scalars, arrays, objects, members) in one
			       * document, checked before the tree is built; 0 =
			       * no limit (the daemon sets max_elements) */
};

#define VD_LIMITS_DEFAULT { VD_DEFAULT_MAX_DEPTH, (size_t)16 << 20, 0 }

/* The reason of a decode that failed on max_elements (VD_ETOOBIG): compare
 * the pointer (the engine answers it -32600, not -32700). */
extern const char vd_reason_too_many_values[];

/* Why a decode failed: byte offset into the input and a reason. */
struct vd_codec_error {
	size_t offset;
	const char *reason;   /* static text, or yajl's own message copied into
			       * the decode arena (valid until its reset) */
	int code;             /* VD_EPROTO, VD_EDEPTH or VD_ETOOBIG */
};

struct vd_writer;

struct vd_writer_ops {
	void (*begin_object)(struct vd_writer *w);
	void (*end_object)(struct vd_writer *w);
	void (*begin_array)(struct vd_writer *w);
	void (*end_array)(struct vd_writer *w);
	void (*key)(struct vd_writer *w, const char *k, size_t n);
	void (*string)(struct vd_writer *w, const char *s, size_t n);
	void (*int64)(struct vd_writer *w, int64_t i);
	void (*uint64)(struct vd_writer *w, uint64_t u);
	void (*dbl)(struct vd_writer *w, double d);
	void (*boolean)(struct vd_writer *w, bool b);
	void (*null)(struct vd_writer *w);
	void (*raw)(struct vd_writer *w, const void *bytes, size_t n);
	/* Optional: a whole decoded value (vw_value), without an indirect call
	 * per node.  NULL: vw_value walks the tree through the ops above. */
	void (*value)(struct vd_writer *w, const struct vd_value *v);
};

struct vd_writer {
	const struct vd_writer_ops *ops;
	struct vd_buf *out;
	unsigned depth;
	int error;
	/* JSON: per depth, whether the container already has an element; and
	 * whether a key was just written */
	bool after_key;
	uint8_t nonempty[VW_MAX_DEPTH];
	/* msgpack: per depth, offset of the container header and its count */
	size_t hdr_pos[VW_MAX_DEPTH];
	uint32_t count[VW_MAX_DEPTH];
};

struct vd_codec {
	const char *name;          /* "auto", "yajl", "fallback", "msgpack" */
	const char *content_type;  /* "application/json", "application/msgpack" */
	bool is_json;
	/* Decode the whole input into a tree allocated in a.  Returns 0 and sets
	 * *out, or a negative vd_err and fills *err.  Never reads past len. */
	int (*decode)(struct vd_arena *a, const char *bytes, size_t len,
		      const struct vd_limits *lim, struct vd_value **out,
		      struct vd_codec_error *err);
	/* Prepare w to append to out (out is not reset). */
	void (*writer_init)(struct vd_writer *w, struct vd_buf *out);
};

/* Registry (codecs/registry.c). */
const struct vd_codec *codec_find(const char *name);
/* By content type; NULL/empty → NULL (callers pick their default). Ignores
 * parameters such as "; charset=utf-8".  application/json is auto (the
 * first JSON codec of the list), application/msgpack msgpack. */
const struct vd_codec *codec_find_content_type(const char *ct, size_t len);
/* NULL-terminated list of the codecs compiled in. */
const struct vd_codec *const *codec_list(void);
/* Names of every codec known to the source, built in or not ("msgpack" is
 * listed even when absent), so callers can say "not built in". */
bool codec_known(const char *name);
/* Those names for a message or help text, "auto, yajl, fallback or
 * msgpack", into buf (size > 0; cut to fit). */
void codec_names(char *buf, size_t size);
/* The codec a daemon runs when none is configured. */
#define VD_CODEC_DEFAULT "auto"
/* auto decodes bodies shorter than this with the fallback parser, the
 * others with yajl (codecs/auto.c). */
#define VD_AUTO_SMALL_BODY 4096

/* Streaming writer entry points. */
static inline void vw_begin_object(struct vd_writer *w) { w->ops->begin_object(w); }
static inline void vw_end_object(struct vd_writer *w) { w->ops->end_object(w); }
static inline void vw_begin_array(struct vd_writer *w) { w->ops->begin_array(w); }
static inline void vw_end_array(struct vd_writer *w) { w->ops->end_array(w); }
static inline void vw_key(struct vd_writer *w, const char *k, size_t n) { w->ops->key(w, k, n); }
static inline void vw_string(struct vd_writer *w, const char *s, size_t n) { w->ops->string(w, s, n); }
static inline void vw_int(struct vd_writer *w, int64_t i) { w->ops->int64(w, i); }
static inline void vw_uint(struct vd_writer *w, uint64_t u) { w->ops->uint64(w, u); }
static inline void vw_double(struct vd_writer *w, double d) { w->ops->dbl(w, d); }
static inline void vw_bool(struct vd_writer *w, bool b) { w->ops->boolean(w, b); }
static inline void vw_null(struct vd_writer *w) { w->ops->null(w); }
static inline void vw_raw(struct vd_writer *w, const void *p, size_t n) { w->ops->raw(w, p, n); }

/* Conveniences for NUL-terminated keys and strings. */
static inline void vw_keyz(struct vd_writer *w, const char *k) { vw_key(w, k, strlen(k)); }
static inline void vw_strz(struct vd_writer *w, const char *s) { vw_string(w, s, strlen(s)); }
static inline void vw_kstr(struct vd_writer *w, const char *k, const char *s) { vw_keyz(w, k); vw_strz(w, s); }
static inline void vw_kint(struct vd_writer *w, const char *k, int64_t i) { vw_keyz(w, k); vw_int(w, i); }
static inline void vw_kbool(struct vd_writer *w, const char *k, bool b) { vw_keyz(w, k); vw_bool(w, b); }
/* A key and a string built with printf formatting (VDSM sends most numbers as
 * strings). */
void vw_kstrf(struct vd_writer *w, const char *k, const char *fmt, ...) VD_PRINTF(3, 4);
/* An unsigned integer as a decimal string (what "%llu" gives, without printf;
 * VDSM sends counters and sizes as str(int)); vw_kstr_u64 with its key. */
void vw_u64str(struct vd_writer *w, uint64_t v);
void vw_kstr_u64(struct vd_writer *w, const char *k, uint64_t v);
/* Write a decoded value (any type, recursively). */
void vw_value(struct vd_writer *w, const struct vd_value *v);

/* A checkpoint of a writer at depth <= VW_MARK_DEPTH without copying the
 * whole struct (its per-depth arrays are ~1.7 KiB; the copy was a tenth of
 * the instructions of a Host.ping2 request): the scalar state and the
 * per-depth entries 0..depth, the only ones a later rewind needs (deeper
 * entries are set again by the begin_* that opens their container).
 * vw_mark() returns false when w is deeper than that; the caller then
 * copies the whole struct. */
#define VW_MARK_DEPTH 7
struct vd_writer_mark {
	unsigned depth;
	int error;
	bool after_key;
	uint8_t nonempty[VW_MARK_DEPTH + 1];
	uint32_t count[VW_MARK_DEPTH + 1];
	size_t hdr_pos[VW_MARK_DEPTH + 1];
	size_t len;   /* out->len */
};

static inline bool vw_mark(const struct vd_writer *w, struct vd_writer_mark *m)
{
	m->depth = w->depth;
	m->error = w->error;
	m->after_key = w->after_key;
	m->len = w->out->len;
	if (w->depth > VW_MARK_DEPTH)
		return false;
	for (unsigned i = 0; i <= w->depth; i++) {
		m->nonempty[i] = w->nonempty[i];
		m->count[i] = w->count[i];
		m->hdr_pos[i] = w->hdr_pos[i];
	}
	return true;
}

/* Back to the state of vw_mark(w, m), out->len included. */
static inline void vw_rewind(struct vd_writer *w, const struct vd_writer_mark *m)
{
	w->depth = m->depth;
	w->error = m->error;
	w->after_key = m->after_key;
	w->out->len = m->len;
	for (unsigned i = 0; i <= m->depth; i++) {
		w->nonempty[i] = m->nonempty[i];
		w->count[i] = m->count[i];
		w->hdr_pos[i] = m->hdr_pos[i];
	}
}

#endif
