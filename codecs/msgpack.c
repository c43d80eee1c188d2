/* codecs/msgpack.c - the msgpack codec (content type application/msgpack),
 * built when msgpack-c is found.
 *
 * Encoding: msgpack-c's packer (msgpack_pack_*) appends scalars to the output
 * buffer.  A streaming writer does not know a container's size when it opens
 * it, so begin_* reserves a 32-bit header (array32/map32) whose count is
 * patched by end_*; a small container (at most 15 elements and 4 KiB) is
 * then compacted to the one-byte fix header.
 *
 * Decoding is our own, straight into the arena tree.  msgpack-c's C unpacker
 * cannot serve here: it has a fixed 32-level stack (our limit is 64) and it
 * allocates a container's claimed element count before reading the elements,
 * which lets 5 bytes of input demand gigabytes.  Here a claimed count is
 * checked against the bytes left (every element takes at least one byte)
 * before anything is allocated.
 *
 * Value rules, the same as the JSON codecs: map keys must be strings, strings
 * must be well-formed UTF-8, non-finite floats are refused, bin and ext types
 * are refused (JSON has no equivalent), positive integers above INT64_MAX are
 * uint64, float32 widens to double. */
#include "codec_int.h"

#include <math.h>
#include <msgpack.h>

/* --- decoder ------------------------------------------------------------ */

struct mp_dec {
	struct vd_arena *a;
	const uint8_t *base, *p, *end;
	unsigned max_depth;
	size_t values, max_values;   /* max_values 0: no limit */
	int code;
	size_t off;
	const char *reason;
};

static bool mp_fail(struct mp_dec *d, const uint8_t *at, int code, const char *reason)
{
	d->code = code;
	d->off = (size_t)(at - d->base);
	d->reason = reason;
	return false;
}

static inline uint64_t be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Read an n-byte big-endian length/value after the tag at d->p. */
static inline bool mp_need(struct mp_dec *d, size_t n)
{
	if ((size_t)(d->end - d->p) < n)
		return mp_fail(d, d->p, VD_EPROTO, "truncated input");
	return true;
}

static inline bool mp_str(struct mp_dec *d, const uint8_t *tag, size_t n, const char **s, size_t *len)
{
	if (!mp_need(d, n))
		return mp_fail(d, tag, VD_EPROTO, "truncated string");
	const char *p = (const char *)d->p;
	if (VD_UNLIKELY(!cj_is_ascii(p, n))) {
		size_t bad = cj_utf8_check(p, n);
		if (bad != n)
			return mp_fail(d, d->p + bad, VD_EPROTO, "invalid UTF-8 in string");
	}
	*s = p;
	*len = n;
	d->p += n;
	return true;
}

/* Length of the str at d->p (tag consumed); false when it is not a str. */
static inline bool mp_strlen(struct mp_dec *d, uint8_t t, size_t *n)
{
	if (t >= 0xa0 && t <= 0xbf) {
		*n = t & 0x1f;
		return true;
	}
	int w = t == 0xd9 ? 1 : t == 0xda ? 2 : t == 0xdb ? 4 : 0;
	if (!w)
		return false;
	if (!mp_need(d, (size_t)w))
		return false;
	*n = (size_t)be(d->p, w);
	d->p += w;
	return true;
}

static bool mp_value(struct mp_dec *d, struct vd_value *v, unsigned depth);

/* Room for the claimed count is never reserved up front: 63 nested
 * array32 headers each claiming the bytes left would reserve gigabytes from
 * a few hundred bytes of input.  Storage grows (doubling, in the arena) as
 * elements are actually decoded, so it stays proportional to the input
 * consumed: at most twice the final size plus the first MP_FIRST. */
#define MP_FIRST 16

static void *mp_grow(struct mp_dec *d, void *old, size_t have, size_t *cap, size_t max,
		     size_t elsz)
{
	if (have < *cap)
		return old;
	size_t ncap = VD_MIN(*cap ? *cap * 2 : MP_FIRST, max);
	void *p = arena_alloc(d->a, ncap * elsz);
	if (have)
		memcpy(p, old, have * elsz);
	*cap = ncap;
	return p;
}

static bool mp_array(struct mp_dec *d, const uint8_t *tag, size_t n, struct vd_value *v,
		     unsigned depth)
{
	if (depth >= d->max_depth)
		return mp_fail(d, tag, VD_EDEPTH, "nesting too deep");
	if (n > (size_t)(d->end - d->p))
		return mp_fail(d, tag, VD_EPROTO, "array count larger than the input");
	v->type = VD_ARRAY;
	v->v.arr.n = 0;
	v->v.arr.items = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < n; i++) {
		v->v.arr.items = mp_grow(d, v->v.arr.items, i, &cap, n, sizeof(struct vd_value));
		if (!mp_value(d, &v->v.arr.items[i], depth + 1))
			return false;
		v->v.arr.n = i + 1;
	}
	return true;
}

static bool mp_map(struct mp_dec *d, const uint8_t *tag, size_t n, struct vd_value *v,
		   unsigned depth)
{
	if (depth >= d->max_depth)
		return mp_fail(d, tag, VD_EDEPTH, "nesting too deep");
	if (n > (size_t)(d->end - d->p) / 2)
		return mp_fail(d, tag, VD_EPROTO, "map count larger than the input");
	v->type = VD_OBJECT;
	v->v.obj.n = 0;
	v->v.obj.members = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < n; i++) {
		v->v.obj.members = mp_grow(d, v->v.obj.members, i, &cap, n,
					   sizeof(struct vd_member));
		v->v.obj.n = i;
		struct vd_member *m = &v->v.obj.members[i];
		const uint8_t *ktag = d->p;
		size_t kn;
		if (d->p >= d->end)
			return mp_fail(d, d->p, VD_EPROTO, "truncated input");
		uint8_t t = *d->p++;
		if (!mp_strlen(d, t, &kn))
			return d->code ? false : mp_fail(d, ktag, VD_EPROTO, "map key is not a string");
		if (!mp_str(d, ktag, kn, &m->key, &m->klen))
			return false;
		if (!mp_value(d, &m->val, depth + 1))
			return false;
	}
	v->v.obj.n = n;
	return true;
}

static bool mp_value(struct mp_dec *d, struct vd_value *v, unsigned depth)
{
	const uint8_t *tag = d->p;
	if (tag >= d->end)
		return mp_fail(d, tag, VD_EPROTO, "truncated input");
	if (VD_UNLIKELY(++d->values > d->max_values) && d->max_values)
		return mp_fail(d, tag, VD_ETOOBIG, vd_reason_too_many_values);
	uint8_t t = *d->p++;
	size_t n;
	if (t <= 0x7f) {
		v->type = VD_INT;
		v->v.i = t;
		return true;
	}
	if (t >= 0xe0) {
		v->type = VD_INT;
		v->v.i = (int8_t)t;
		return true;
	}
	if (t <= 0x8f)
		return mp_map(d, tag, t & 0x0f, v, depth);
	if (t <= 0x9f)
		return mp_array(d, tag, t & 0x0f, v, depth);
	if (mp_strlen(d, t, &n)) {
		v->type = VD_STRING;
		return mp_str(d, tag, n, &v->v.s.ptr, &v->v.s.len);
	}
	if (d->code)
		return false;
	switch (t) {
	case 0xc0:
		v->type = VD_NULL;
		return true;
	case 0xc2:
	case 0xc3:
		v->type = VD_BOOL;
		v->v.b = t == 0xc3;
		return true;
	case 0xca: case 0xcb: {
		int w = t == 0xca ? 4 : 8;
		if (!mp_need(d, (size_t)w))
			return false;
		uint64_t bits = be(d->p, w);
		double x;
		if (w == 4) {
			uint32_t b32 = (uint32_t)bits;
			float f;
			memcpy(&f, &b32, 4);
			x = f;
		} else {
			memcpy(&x, &bits, 8);
		}
		if (!isfinite(x))
			return mp_fail(d, tag, VD_EPROTO, "number out of double range");
		d->p += w;
		v->type = VD_DOUBLE;
		v->v.d = x;
		return true;
	}
	case 0xcc: case 0xcd: case 0xce: case 0xcf: {
		int w = 1 << (t - 0xcc);
		if (!mp_need(d, (size_t)w))
			return false;
		uint64_t u = be(d->p, w);
		d->p += w;
		vd_set_uint(v, u);
		return true;
	}
	case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
		int w = 1 << (t - 0xd0);
		if (!mp_need(d, (size_t)w))
			return false;
		uint64_t u = be(d->p, w);
		d->p += w;
		int64_t i;
		if (w == 1)
			i = (int8_t)u;
		else if (w == 2)
			i = (int16_t)u;
		else if (w == 4)
			i = (int32_t)u;
		else
			memcpy(&i, &u, 8);
		v->type = VD_INT;
		v->v.i = i;
		return true;
	}
	case 0xdc: case 0xdd: case 0xde: case 0xdf: {
		int w = (t & 1) ? 4 : 2;
		if (!mp_need(d, (size_t)w))
			return false;
		n = (size_t)be(d->p, w);
		d->p += w;
		return t <= 0xdd ? mp_array(d, tag, n, v, depth) : mp_map(d, tag, n, v, depth);
	}
	case 0xc1:
		return mp_fail(d, tag, VD_EPROTO, "invalid type byte 0xc1");
	default:
		return mp_fail(d, tag, VD_EPROTO, "bin and ext types are not supported");
	}
}

static int mp_decode(struct vd_arena *a, const char *bytes, size_t len,
		     const struct vd_limits *lim, struct vd_value **out,
		     struct vd_codec_error *err)
{
	int rc = cj_decode_begin(&bytes, len, &lim, err);
	if (rc < 0)
		return rc;
	struct mp_dec d = {
		.a = a, .base = (const uint8_t *)bytes, .p = (const uint8_t *)bytes,
		.end = (const uint8_t *)bytes + len, .max_depth = cj_max_depth(lim),
		.max_values = lim->max_elements,
	};
	struct vd_value v;
	if (len == 0) {
		mp_fail(&d, d.p, VD_EPROTO, "empty input, value expected");
	} else if (mp_value(&d, &v, 0) && d.p != d.end) {
		mp_fail(&d, d.p, VD_EPROTO, "trailing bytes after the value");
	}
	if (d.code) {
		cj_set_err(err, d.code, d.off, d.reason);
		return d.code;
	}
	*out = arena_alloc(a, sizeof(**out));
	**out = v;
	return 0;
}

/* --- writer ------------------------------------------------------------- */

#define MK_OBJ 2        /* the container at this depth is a map */
#define MP_COMPACT_MAX 4096

static int mp_write_cb(void *data, const char *buf, size_t len)
{
	buf_append(data, buf, len);
	return 0;
}

/* Account for one value in the current container; false on misuse. */
static inline bool mp_pre_value(struct vd_writer *w)
{
	if (w->after_key) {
		w->after_key = false;
		return true;
	}
	if (w->depth == 0)
		return true;
	if (VD_UNLIKELY(w->nonempty[w->depth] & MK_OBJ)) {
		w->error = VD_EINVAL;
		return false;
	}
	w->count[w->depth]++;
	return true;
}

static void m_begin(struct vd_writer *w, uint8_t kind)
{
	if (VD_UNLIKELY(w->depth + 1 >= VW_MAX_DEPTH)) {
		w->error = VD_EINVAL;
		return;
	}
	if (!mp_pre_value(w))
		return;
	struct vd_buf *out = w->out;
	buf_reserve(out, 5);
	w->depth++;
	w->nonempty[w->depth] = kind;
	w->hdr_pos[w->depth] = out->len;
	w->count[w->depth] = 0;
	out->len += 5;
}

static void m_end(struct vd_writer *w, uint8_t kind)
{
	if (VD_UNLIKELY(w->depth == 0 || (w->nonempty[w->depth] & MK_OBJ) != kind ||
			w->after_key)) {
		w->error = VD_EINVAL;
		return;
	}
	struct vd_buf *out = w->out;
	size_t pos = w->hdr_pos[w->depth];
	uint32_t n = w->count[w->depth];
	w->depth--;
	uint8_t *h = (uint8_t *)out->data + pos;
	size_t body = out->len - pos - 5;
	if (n <= 15 && body <= MP_COMPACT_MAX) {
		h[0] = (uint8_t)((kind ? 0x80 : 0x90) | n);
		memmove(h + 1, h + 5, body);
		out->len -= 4;
		return;
	}
	h[0] = kind ? 0xdf : 0xdd;
	h[1] = (uint8_t)(n >> 24);
	h[2] = (uint8_t)(n >> 16);
	h[3] = (uint8_t)(n >> 8);
	h[4] = (uint8_t)n;
}

static void m_begin_object(struct vd_writer *w) { m_begin(w, MK_OBJ); }
static void m_end_object(struct vd_writer *w) { m_end(w, MK_OBJ); }
static void m_begin_array(struct vd_writer *w) { m_begin(w, 0); }
static void m_end_array(struct vd_writer *w) { m_end(w, 0); }

static void m_str(struct vd_writer *w, const char *s, size_t n)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, w->out, mp_write_cb);
	buf_reserve(w->out, n + 5);
	msgpack_pack_str(&pk, n);
	if (n)
		msgpack_pack_str_body(&pk, s, n);
}

static void m_key(struct vd_writer *w, const char *k, size_t n)
{
	if (VD_UNLIKELY(w->depth == 0 || !(w->nonempty[w->depth] & MK_OBJ) || w->after_key)) {
		w->error = VD_EINVAL;
		return;
	}
	w->count[w->depth]++;
	w->after_key = true;
	m_str(w, k, n);
}

static void m_string(struct vd_writer *w, const char *s, size_t n)
{
	if (mp_pre_value(w))
		m_str(w, s, n);
}

static void m_int64(struct vd_writer *w, int64_t i)
{
	if (!mp_pre_value(w))
		return;
	msgpack_packer pk;
	msgpack_packer_init(&pk, w->out, mp_write_cb);
	msgpack_pack_int64(&pk, i);
}

static void m_uint64(struct vd_writer *w, uint64_t u)
{
	if (!mp_pre_value(w))
		return;
	msgpack_packer pk;
	msgpack_packer_init(&pk, w->out, mp_write_cb);
	msgpack_pack_uint64(&pk, u);
}

static void m_double(struct vd_writer *w, double x)
{
	if (!mp_pre_value(w))
		return;
	msgpack_packer pk;
	msgpack_packer_init(&pk, w->out, mp_write_cb);
	if (isfinite(x))
		msgpack_pack_double(&pk, x);
	else
		msgpack_pack_nil(&pk);   /* as the JSON writers do */
}

static void m_bool(struct vd_writer *w, bool b)
{
	if (!mp_pre_value(w))
		return;
	buf_putc(w->out, (char)(b ? 0xc3 : 0xc2));
}

static void m_null(struct vd_writer *w)
{
	if (!mp_pre_value(w))
		return;
	buf_putc(w->out, (char)0xc0);
}

static void m_raw(struct vd_writer *w, const void *bytes, size_t n)
{
	if (!mp_pre_value(w))
		return;
	buf_append(w->out, bytes, n);
}

/* vw_value for this writer: the same calls, direct instead of through ops. */
static void m_value(struct vd_writer *w, const struct vd_value *v)
{
	switch (v->type) {
	case VD_NULL: m_null(w); break;
	case VD_BOOL: m_bool(w, v->v.b); break;
	case VD_INT: m_int64(w, v->v.i); break;
	case VD_UINT: m_uint64(w, v->v.u); break;
	case VD_DOUBLE: m_double(w, v->v.d); break;
	case VD_STRING: m_string(w, v->v.s.ptr, v->v.s.len); break;
	case VD_ARRAY:
		m_begin(w, 0);
		for (size_t i = 0; i < v->v.arr.n; i++)
			m_value(w, &v->v.arr.items[i]);
		m_end(w, 0);
		break;
	case VD_OBJECT:
		m_begin(w, MK_OBJ);
		for (size_t i = 0; i < v->v.obj.n; i++) {
			m_key(w, v->v.obj.members[i].key, v->v.obj.members[i].klen);
			m_value(w, &v->v.obj.members[i].val);
		}
		m_end(w, MK_OBJ);
		break;
	}
}

static const struct vd_writer_ops msgpack_ops = {
	.begin_object = m_begin_object,
	.end_object = m_end_object,
	.begin_array = m_begin_array,
	.end_array = m_end_array,
	.key = m_key,
	.string = m_string,
	.int64 = m_int64,
	.uint64 = m_uint64,
	.dbl = m_double,
	.boolean = m_bool,
	.null = m_null,
	.raw = m_raw,
	.value = m_value,
};

static void mp_writer_init(struct vd_writer *w, struct vd_buf *out)
{
	w->ops = &msgpack_ops;
	w->out = out;
	w->depth = 0;
	w->error = 0;
	w->after_key = false;
	w->nonempty[0] = 0;
}

const struct vd_codec codec_msgpack = {
	.name = "msgpack",
	.content_type = "application/msgpack",
	.is_json = false,
	.decode = mp_decode,
	.writer_init = mp_writer_init,
};
