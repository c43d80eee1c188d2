/* tests/unit/test_codec.c - codec basics: decoding into the value tree,
 * number rules, escapes, limits with offsets, the streaming writers. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "check_main.h"

static const char *const json_codecs[] = { "yajl", "fallback", "auto" };
#define NJSON 3

static struct vd_arena arena;

static void setup(void) { arena_init(&arena, 0); }
static void teardown(void) { arena_free(&arena); }

static int dec(const char *codec, const char *s, struct vd_value **v, struct vd_codec_error *e)
{
	const struct vd_codec *c = codec_find(codec);
	ck_assert_ptr_nonnull(c);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	memset(e, 0, sizeof(*e));
	return c->decode(&arena, s, strlen(s), &lim, v, e);
}

/* Encode v with codec into a NUL-terminated arena string. */
static const char *enc(const char *codec, const struct vd_value *v)
{
	const struct vd_codec *c = codec_find(codec);
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	c->writer_init(&w, &b);
	vw_value(&w, v);
	ck_assert_int_eq(w.error, 0);
	ck_assert_int_eq(w.depth, 0);
	const char *r = arena_strndup(&arena, b.data ? b.data : "", b.len);
	buf_free(&b);
	return r;
}

START_TEST(test_decode_object)
{
	const char *codec = json_codecs[_i];
	struct vd_value *v;
	struct vd_codec_error e;
	const char *doc = " {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"VM.getStats\","
			  "\"params\":{\"vmID\":\"x\",\"l\":[true,false,null,-1.5,\"a\\nb\"]}} ";
	ck_assert_int_eq(dec(codec, doc, &v, &e), 0);
	ck_assert_int_eq(v->type, VD_OBJECT);
	ck_assert_uint_eq(v->v.obj.n, 4);
	ck_assert(vd_str_eq(vd_obj_get(v, "jsonrpc"), "2.0"));
	ck_assert_int_eq(vd_obj_get(v, "id")->type, VD_INT);
	ck_assert_int_eq(vd_obj_get(v, "id")->v.i, 7);
	const struct vd_value *l = vd_obj_get(vd_obj_get(v, "params"), "l");
	ck_assert_int_eq(l->type, VD_ARRAY);
	ck_assert_uint_eq(l->v.arr.n, 5);
	ck_assert(l->v.arr.items[0].type == VD_BOOL && l->v.arr.items[0].v.b);
	ck_assert(l->v.arr.items[1].type == VD_BOOL && !l->v.arr.items[1].v.b);
	ck_assert_int_eq(l->v.arr.items[2].type, VD_NULL);
	ck_assert(l->v.arr.items[3].type == VD_DOUBLE && l->v.arr.items[3].v.d == -1.5);
	ck_assert(vd_str_eq(&l->v.arr.items[4], "a\nb"));
	/* unescaped strings point into the input */
	const struct vd_value *m = vd_obj_get(v, "method");
	ck_assert(m->v.s.ptr > doc && m->v.s.ptr < doc + strlen(doc));
	ck_assert_str_eq(enc(codec, v),
			 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"VM.getStats\","
			 "\"params\":{\"vmID\":\"x\",\"l\":[true,false,null,-1.5,\"a\\nb\"]}}");
}
END_TEST

START_TEST(test_numbers)
{
	const char *codec = json_codecs[_i];
	struct vd_value *v;
	struct vd_codec_error e;
	static const struct { const char *in; enum vd_type t; const char *out; } cases[] = {
		{ "0", VD_INT, "0" },
		{ "-0", VD_INT, "0" },
		{ "-0.0", VD_DOUBLE, "-0.0" },
		{ "0.1", VD_DOUBLE, "0.1" },
		{ "1.0", VD_DOUBLE, "1.0" },
		{ "1e2", VD_DOUBLE, "100.0" },
		{ "1E+300", VD_DOUBLE, "1e+300" },
		{ "2.5e-7", VD_DOUBLE, "2.5e-07" },
		{ "9223372036854775807", VD_INT, "9223372036854775807" },
		{ "-9223372036854775808", VD_INT, "-9223372036854775808" },
		{ "9223372036854775808", VD_UINT, "9223372036854775808" },
		{ "18446744073709551615", VD_UINT, "18446744073709551615" },
		{ "18446744073709551616", VD_DOUBLE, "1.8446744073709552e+19" },
		{ "-9223372036854775809", VD_DOUBLE, "-9.223372036854776e+18" },
		{ "0.30000000000000004", VD_DOUBLE, "0.30000000000000004" },
		{ "123456789.123456789", VD_DOUBLE, "123456789.12345679" },
		{ "1e-400", VD_DOUBLE, "0.0" },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		ck_assert_msg(dec(codec, cases[k].in, &v, &e) == 0, "%s: %s", codec, cases[k].in);
		ck_assert_msg(v->type == cases[k].t, "%s: %s type %s", codec, cases[k].in,
			      vd_type_name(v->type));
		ck_assert_str_eq(enc(codec, v), cases[k].out);
	}
	ck_assert_int_eq(dec(codec, "0.1", &v, &e), 0);
	ck_assert(v->v.d == 0.1);
	static const char *const bad[] = { "01", "-", "1.", ".5", "1e", "+1", "1e400", "-1e400",
					   "0x10", "NaN", "Infinity", "1.5e+" };
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		ck_assert_msg(dec(codec, bad[k], &v, &e) == VD_EPROTO, "%s accepted %s", codec,
			      bad[k]);
}
END_TEST

START_TEST(test_strings)
{
	const char *codec = json_codecs[_i];
	struct vd_value *v;
	struct vd_codec_error e;
	ck_assert_int_eq(dec(codec, "\"\\u00e9\\ud83d\\ude00\\u0000x\\/\"", &v, &e), 0);
	ck_assert_uint_eq(v->v.s.len, 2 + 4 + 1 + 1 + 1);
	ck_assert(memcmp(v->v.s.ptr, "\xc3\xa9\xf0\x9f\x98\x80\0x/", 9) == 0);
	ck_assert_str_eq(enc(codec, v), "\"\xc3\xa9\xf0\x9f\x98\x80\\u0000x/\"");
	static const char *const bad[] = {
		"\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\x\"", "\"\\u12\"",
		"\"a\nb\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xff\"",
		"\"abc", "\"\xc3\"",
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		ck_assert_msg(dec(codec, bad[k], &v, &e) == VD_EPROTO, "%s accepted case %zu",
			      codec, k);
	/* an overlong form (yajl lets it through, cj_is_ascii must flag it) at
	 * every place of keys and values of 1 to 17 bytes: the short paths
	 * (bytewise, two overlapping 4-byte words, 8-byte words) */
	for (size_t n = 2; n <= 17; n++) {
		for (size_t at = 0; at + 2 <= n; at++) {
			char str[20], doc[64];
			memset(str, 'a', n);
			memcpy(str + at, "\xc1\x81", 2);
			str[n] = '\0';
			snprintf(doc, sizeof(doc), "{\"%s\":1}", str);
			ck_assert_msg(dec(codec, doc, &v, &e) == VD_EPROTO, "%s key %zu/%zu", codec, at, n);
			ck_assert_uint_eq(e.offset, 2 + at);
			snprintf(doc, sizeof(doc), "[\"%s\"]", str);
			ck_assert_msg(dec(codec, doc, &v, &e) == VD_EPROTO, "%s value %zu/%zu", codec, at, n);
			ck_assert_uint_eq(e.offset, 2 + at);
		}
	}
	/* offset of the offending byte */
	ck_assert_int_eq(dec(codec, "[\"ok\", \"a\x01\"]", &v, &e), VD_EPROTO);
	ck_assert_ptr_nonnull(e.reason);
}
END_TEST

START_TEST(test_structure_errors)
{
	const char *codec = json_codecs[_i];
	struct vd_value *v;
	struct vd_codec_error e;
	static const char *const bad[] = { "", " ", "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}",
					   "{1:2}", "[", "]", "{\"a\":1}x", "1 2", "\xef\xbb\xbf{}",
					   "[tru]", "nul", "{'a':1}", "[1,,2]", "/*c*/1" };
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		ck_assert_msg(dec(codec, bad[k], &v, &e) == VD_EPROTO, "%s accepted %s", codec,
			      bad[k]);
		ck_assert_int_eq(e.code, VD_EPROTO);
		ck_assert_ptr_nonnull(e.reason);
		ck_assert_uint_le(e.offset, strlen(bad[k]));
	}
	ck_assert_int_eq(dec(codec, "[1,2,]", &v, &e), VD_EPROTO);
	ck_assert(e.offset == 5 || e.offset == 6); /* yajl reports the byte after */
}
END_TEST

START_TEST(test_limits)
{
	const char *codec = json_codecs[_i];
	const struct vd_codec *c = codec_find(codec);
	struct vd_value *v;
	struct vd_codec_error e;
	char doc[300];
	/* 64 levels are fine, 65 are not */
	memset(doc, '[', 64);
	memset(doc + 64, ']', 64);
	doc[128] = 0;
	ck_assert_int_eq(dec(codec, doc, &v, &e), 0);
	memset(doc, '[', 65);
	memset(doc + 65, ']', 65);
	doc[130] = 0;
	ck_assert_int_eq(dec(codec, doc, &v, &e), VD_EDEPTH);
	ck_assert_int_eq(e.code, VD_EDEPTH);
	ck_assert_uint_eq(e.offset, 64);
	struct vd_limits lim = { 64, 10, 0 };
	ck_assert_int_eq(c->decode(&arena, "[1,2,3,4,5]", 11, &lim, &v, &e), VD_ETOOBIG);
	ck_assert_int_eq(e.code, VD_ETOOBIG);
	lim.max_size = 11;
	ck_assert_int_eq(c->decode(&arena, "[1,2,3,4,5]", 11, &lim, &v, &e), 0);
	/* the input is not NUL-terminated: never read past len */
	ck_assert_int_eq(c->decode(&arena, "123456", 3, &lim, &v, &e), 0);
	ck_assert_int_eq(v->v.i, 123);
	ck_assert_int_eq(c->decode(&arena, "\"ab\"", 3, &lim, &v, &e), VD_EPROTO);
}
END_TEST

START_TEST(test_writer)
{
	const struct vd_codec *c = codec_find(json_codecs[_i]);
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	c->writer_init(&w, &b);
	vw_begin_object(&w);
	vw_kstr(&w, "a\"b", "q\\\t\x01\xff\xc3\xa9");
	vw_kint(&w, "i", -42);
	vw_keyz(&w, "u");
	vw_uint(&w, UINT64_MAX);
	vw_keyz(&w, "d");
	vw_begin_array(&w);
	vw_double(&w, 0.1);
	vw_double(&w, 1e21);
	vw_double(&w, NAN);
	vw_double(&w, 5.0);
	vw_end_array(&w);
	vw_keyz(&w, "r");
	vw_raw(&w, "[1]", 3);
	vw_keyz(&w, "e");
	vw_begin_object(&w);
	vw_end_object(&w);
	vw_kstrf(&w, "f", "%d%%", 50);
	vw_end_object(&w);
	ck_assert_int_eq(w.error, 0);
	buf_putc(&b, 0);
	ck_assert_str_eq(b.data, "{\"a\\\"b\":\"q\\\\\\t\\u0001\xef\xbf\xbd\xc3\xa9\",\"i\":-42,"
			 "\"u\":18446744073709551615,\"d\":[0.1,1e+21,null,5.0],\"r\":[1],"
			 "\"e\":{},\"f\":\"50%\"}");
	/* misuse: a value where a key is due */
	c->writer_init(&w, &b);
	vw_begin_object(&w);
	vw_int(&w, 1);
	ck_assert_int_eq(w.error, VD_EINVAL);
	c->writer_init(&w, &b);
	vw_end_array(&w);
	ck_assert_int_eq(w.error, VD_EINVAL);
	buf_free(&b);
}
END_TEST

/* A writer struct copy plus out->len is a checkpoint to roll back to. */
START_TEST(test_writer_checkpoint)
{
	const struct vd_codec *c = codec_list()[_i];
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w, saved;
	c->writer_init(&w, &b);
	vw_begin_object(&w);
	vw_kint(&w, "a", 1);
	saved = w;
	size_t len = b.len;
	vw_keyz(&w, "dropped");
	vw_begin_array(&w);
	vw_strz(&w, "x");
	w = saved;
	b.len = len;
	vw_kint(&w, "b", 2);
	vw_keyz(&w, "raw");
	/* vw_raw: bytes already encoded by this codec count as one value */
	struct vd_buf r = VD_BUF_INIT;
	struct vd_writer rw;
	c->writer_init(&rw, &r);
	vw_begin_array(&rw);
	vw_int(&rw, 7);
	vw_end_array(&rw);
	vw_raw(&w, r.data, r.len);
	vw_end_object(&w);
	ck_assert_int_eq(w.error, 0);
	struct vd_value *v, *expect;
	struct vd_codec_error e;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	ck_assert_int_eq(c->decode(&arena, b.data, b.len, &lim, &v, &e), 0);
	ck_assert_int_eq(dec("fallback", "{\"a\":1,\"b\":2,\"raw\":[7]}", &expect, &e), 0);
	ck_assert(vd_value_equal(v, expect));
	buf_free(&r);
	buf_free(&b);
}
END_TEST

/* vw_mark/vw_rewind: the partial checkpoint run_verb uses.  Rewinding from
 * inside nested containers (an object with a non-empty array, a msgpack
 * header to be compacted) gives the same document as never writing them;
 * a mark at depth 2 (inside an array of the object) too. */
START_TEST(test_writer_mark)
{
	const struct vd_codec *c = codec_list()[_i];
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	struct vd_writer_mark m, m2;
	c->writer_init(&w, &b);
	ck_assert(vw_mark(&w, &m));        /* depth 0: nothing written yet */
	vw_begin_object(&w);
	vw_keyz(&w, "gone");
	vw_int(&w, 5);
	vw_rewind(&w, &m);
	ck_assert_uint_eq(b.len, 0);
	vw_begin_object(&w);
	vw_kint(&w, "a", 1);
	ck_assert(vw_mark(&w, &m));
	vw_keyz(&w, "dropped");
	vw_begin_array(&w);
	vw_strz(&w, "x");
	vw_begin_object(&w);
	vw_kint(&w, "deep", 3);
	vw_rewind(&w, &m);
	ck_assert_uint_eq(w.depth, 1);
	vw_keyz(&w, "list");
	vw_begin_array(&w);
	vw_int(&w, 1);
	ck_assert(vw_mark(&w, &m2));
	vw_int(&w, 2);
	vw_begin_array(&w);
	vw_rewind(&w, &m2);
	vw_int(&w, 3);
	vw_end_array(&w);
	vw_kint(&w, "b", 2);
	vw_end_object(&w);
	ck_assert_int_eq(w.error, 0);
	ck_assert_uint_eq(w.depth, 0);
	struct vd_value *v, *expect;
	struct vd_codec_error e;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	ck_assert_int_eq(c->decode(&arena, b.data, b.len, &lim, &v, &e), 0);
	ck_assert_int_eq(dec("fallback", "{\"a\":1,\"list\":[1,3],\"b\":2}", &expect, &e), 0);
	ck_assert(vd_value_equal(v, expect));
	/* an error set after the mark is cleared by the rewind; past
	 * VW_MARK_DEPTH the mark refuses */
	vw_begin_array(&w);
	ck_assert(vw_mark(&w, &m));
	vw_keyz(&w, "key in an array");
	ck_assert_int_ne(w.error, 0);
	vw_rewind(&w, &m);
	ck_assert_int_eq(w.error, 0);
	for (int i = 1; i < VW_MARK_DEPTH; i++)
		vw_begin_array(&w);
	ck_assert_uint_eq(w.depth, VW_MARK_DEPTH);
	ck_assert(vw_mark(&w, &m));
	vw_begin_array(&w);
	ck_assert(!vw_mark(&w, &m));
	buf_free(&b);
}
END_TEST

/* Big and escape-heavy values through every writer and back. */
START_TEST(test_writer_large)
{
	const struct vd_codec *c = codec_list()[_i];
	size_t n = 100000;
	char *s = xmalloc(n);
	for (size_t k = 0; k < n; k++)
		s[k] = (char)(k % 3 == 0 ? '\n' : k % 3 == 1 ? '"' : 'a' + k % 26);
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	c->writer_init(&w, &b);
	vw_begin_array(&w);
	vw_string(&w, s, n);               /* one element, body > 4 KiB */
	vw_end_array(&w);
	ck_assert_int_eq(w.error, 0);
	struct vd_value *v;
	struct vd_codec_error e;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	ck_assert_int_eq(c->decode(&arena, b.data, b.len, &lim, &v, &e), 0);
	ck_assert(v->type == VD_ARRAY && v->v.arr.n == 1);
	ck_assert(v->v.arr.items[0].v.s.len == n && memcmp(v->v.arr.items[0].v.s.ptr, s, n) == 0);
	/* containers past the one-byte header: 70000 elements, 20 keys */
	buf_reset(&b);
	c->writer_init(&w, &b);
	vw_begin_object(&w);
	for (int k = 0; k < 20; k++) {
		char key[8];
		snprintf(key, sizeof(key), "k%d", k);
		vw_keyz(&w, key);
		if (k == 3) {
			vw_begin_array(&w);
			for (int j = 0; j < 70000; j++)
				vw_int(&w, j - 35000);
			vw_end_array(&w);
		} else {
			vw_uint(&w, (uint64_t)k << 60);
		}
	}
	vw_end_object(&w);
	ck_assert_int_eq(w.error, 0);
	ck_assert_int_eq(c->decode(&arena, b.data, b.len, &lim, &v, &e), 0);
	ck_assert(v->type == VD_OBJECT && v->v.obj.n == 20);
	const struct vd_value *arr = vd_obj_get(v, "k3");
	ck_assert(arr->type == VD_ARRAY && arr->v.arr.n == 70000);
	ck_assert_int_eq(arr->v.arr.items[69999].v.i, 34999);
	ck_assert_int_eq(vd_obj_get(v, "k15")->type, VD_UINT);
	ck_assert(vd_obj_get(v, "k15")->v.u == (uint64_t)15 << 60);
	free(s);
	buf_free(&b);
}
END_TEST

/* A huge configured depth is clamped to VD_HARD_MAX_DEPTH in every decoder. */
START_TEST(test_hard_depth)
{
	const struct vd_codec *c = codec_list()[_i];
	size_t n = VD_HARD_MAX_DEPTH + 10;
	char *doc = xmalloc(2 * n);
	memset(doc, c->is_json ? '[' : (char)0x91, n);
	memset(doc + n, c->is_json ? ']' : (char)0xc0, n);
	struct vd_limits lim = { 1000000, (size_t)16 << 20, 0 };
	struct vd_value *v;
	struct vd_codec_error e;
	ck_assert_int_eq(c->decode(&arena, doc, c->is_json ? 2 * n : n + 1, &lim, &v, &e),
			 VD_EDEPTH);
	ck_assert_uint_eq(e.offset, VD_HARD_MAX_DEPTH);
	free(doc);
}
END_TEST

#ifdef WITH_MSGPACK
START_TEST(test_msgpack)
{
	const struct vd_codec *mp = codec_find("msgpack");
	ck_assert_ptr_nonnull(mp);
	ck_assert_ptr_eq(codec_find_content_type("application/msgpack", 19), mp);
	struct vd_value *v, *back;
	struct vd_codec_error e;
	const char *doc = "{\"a\":[1,-1,-200,300,70000,-70000,5000000000,9223372036854775808,"
			  "0.5,true,false,null,\"\",\"x\\u00e9\"],\"big\":{\"k1\":1,\"k2\":2,\"k3\":3,"
			  "\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,\"k10\":10,\"k11\":11,"
			  "\"k12\":12,\"k13\":13,\"k14\":14,\"k15\":15,\"k16\":16},\"e\":[]}";
	ck_assert_int_eq(dec("fallback", doc, &v, &e), 0);
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	mp->writer_init(&w, &b);
	vw_value(&w, v);
	ck_assert_int_eq(w.error, 0);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	ck_assert_int_eq(mp->decode(&arena, b.data, b.len, &lim, &back, &e), 0);
	ck_assert(vd_value_equal(v, back));
	/* a claimed count larger than the input is refused before allocating */
	ck_assert_int_eq(mp->decode(&arena, "\xdd\xff\xff\xff\xff", 5, &lim, &back, &e),
			 VD_EPROTO);
	ck_assert_uint_eq(e.offset, 0);
	ck_assert_int_eq(mp->decode(&arena, "\x81\x01\x02", 3, &lim, &back, &e), VD_EPROTO);
	ck_assert_int_eq(mp->decode(&arena, "\xc1", 1, &lim, &back, &e), VD_EPROTO);
	ck_assert_int_eq(mp->decode(&arena, "\x01\x02", 2, &lim, &back, &e), VD_EPROTO);
	ck_assert_int_eq(mp->decode(&arena, "\xa2\xc0\x80", 3, &lim, &back, &e), VD_EPROTO);
	static const struct { const char *in; size_t len; int rc; } cases[] = {
		{ "\xc4\x01x", 3, VD_EPROTO },                 /* bin8 */
		{ "\xd4\x01\x02", 3, VD_EPROTO },             /* fixext1 */
		{ "\xcb\x7f\xf8\0\0\0\0\0\0", 9, VD_EPROTO }, /* NaN */
		{ "\xca\x7f\x80\0\0", 5, VD_EPROTO },         /* float32 inf */
		{ "\x81\xa1\xff\x01", 4, VD_EPROTO },         /* key not UTF-8 */
		{ "\xdb\0\0\0\x05" "ab", 7, VD_EPROTO },        /* str32 truncated */
		{ "\xdf\x80\0\0\0", 5, VD_EPROTO },          /* map count > input */
		{ "\xcd\x01", 2, VD_EPROTO },                 /* uint16 truncated */
		{ "", 0, VD_EPROTO },
		{ "\xca\x3f\xc0\0\0", 5, 0 },                 /* float32 1.5 */
		{ "\xd3\x80\0\0\0\0\0\0\0", 9, 0 },          /* int64 min */
		{ "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9, 0 }, /* uint64 max */
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		ck_assert_msg(mp->decode(&arena, cases[k].in, cases[k].len, &lim, &back, &e) ==
			      cases[k].rc, "msgpack case %zu", k);
	ck_assert_int_eq(mp->decode(&arena, "\xca\x3f\xc0\0\0", 5, &lim, &back, &e), 0);
	ck_assert(back->type == VD_DOUBLE && back->v.d == 1.5);
	ck_assert_int_eq(mp->decode(&arena, "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9, &lim,
					&back, &e), 0);
	ck_assert(back->type == VD_UINT && back->v.u == UINT64_MAX);
	/* depth: 64 nested arrays decode, 65 do not */
	char deep[66];
	memset(deep, 0x91, 65);
	deep[65] = (char)0xc0;
	ck_assert_int_eq(mp->decode(&arena, deep + 1, 65, &lim, &back, &e), 0);
	ck_assert_int_eq(mp->decode(&arena, deep, 66, &lim, &back, &e), VD_EDEPTH);
	ck_assert_uint_eq(e.offset, 64);
	/* 63 nested array32 headers, each claiming every byte left of a 1 MiB
	 * body: refused (truncated) with arena use proportional to the input,
	 * not to the claims (reserving them up front took ~1.5 GB here) */
	size_t big = (size_t)1 << 20;
	unsigned char *nest = calloc(1, big);
	for (size_t i = 0; i < 63; i++) {
		uint32_t left = (uint32_t)(big - 5 * (i + 1));
		nest[5 * i] = 0xdd;
		nest[5 * i + 1] = (unsigned char)(left >> 24);
		nest[5 * i + 2] = (unsigned char)(left >> 16);
		nest[5 * i + 3] = (unsigned char)(left >> 8);
		nest[5 * i + 4] = (unsigned char)left;
	}
	memset(nest + 5 * 63, 0xc0, big - 5 * 63 - 1);  /* nils, then one byte short */
	nest[big - 1] = 0xdd;
	arena_reset(&arena);
	ck_assert_int_eq(mp->decode(&arena, (const char *)nest, big, &lim, &back, &e), VD_EPROTO);
	ck_assert_uint_lt(arena.total, 64 * big);
	free(nest);
	buf_free(&b);
}
END_TEST
#endif

/* max_elements: a body with more values is refused before the tree is
 * built, by every codec, with the reason the engine answers -32600. */
START_TEST(test_max_elements)
{
	struct vd_limits lim = { 64, (size_t)16 << 20, 10 };
	struct vd_value *v;
	struct vd_codec_error e;
	const char *ok = "{\"a\":[1,2,3],\"s\":\"x,y,[z{,\\\",\",\"b\":null}";
	const char *bad = "[0,1,2,3,4,5,6,7,8,9,10]";
	for (size_t i = 0; i < NJSON; i++) {
		const struct vd_codec *c = codec_find(json_codecs[i]);
		ck_assert_int_eq(c->decode(&arena, ok, strlen(ok), &lim, &v, &e), 0);
		ck_assert_int_eq(c->decode(&arena, bad, strlen(bad), &lim, &v, &e), VD_ETOOBIG);
		ck_assert_ptr_eq(e.reason, vd_reason_too_many_values);
		/* commas behind an escaped quote are inside the string; after an
		 * escaped backslash the quote ends it (the count skips strings in
		 * one pass, issue 27) */
		const char *esc_ok = "[\"\\\",,,,,,,,,,,,,,\\\\\",1]";
		const char *esc_bad = "[\"\\\\\",0,0,0,0,0,0,0,0,0,0,0]";
		ck_assert_int_eq(c->decode(&arena, esc_ok, strlen(esc_ok), &lim, &v, &e), 0);
		ck_assert_int_eq(c->decode(&arena, esc_bad, strlen(esc_bad), &lim, &v, &e),
				 VD_ETOOBIG);
		/* a body shorter than max_elements cannot hold more values (at most
		 * one per byte, plus one) and is not counted; one of max_elements
		 * bytes still is: ten '[' are eleven values */
		ck_assert_int_eq(c->decode(&arena, "[[[[[[[[[[", 10, &lim, &v, &e), VD_ETOOBIG);
		ck_assert_ptr_eq(e.reason, vd_reason_too_many_values);
		ck_assert_int_eq(c->decode(&arena, "[[[[[[[[[", 9, &lim, &v, &e), VD_EPROTO);
		lim.max_elements = 0;
		ck_assert_int_eq(c->decode(&arena, bad, strlen(bad), &lim, &v, &e), 0);
		lim.max_elements = 10;
		/* nesting past max_depth is the depth error, not a count */
		char deep[200];
		memset(deep, '[', sizeof(deep));
		lim.max_elements = 100;
		ck_assert_int_eq(c->decode(&arena, deep, sizeof(deep), &lim, &v, &e), VD_EDEPTH);
		lim.max_elements = 10;
	}
#ifdef WITH_MSGPACK
	const struct vd_codec *mp = codec_find("msgpack");
	char arr[12] = { (char)0x9b };  /* fixarray of 11 zeros: 12 values */
	ck_assert_int_eq(mp->decode(&arena, arr, 12, &lim, &v, &e), VD_ETOOBIG);
	ck_assert_ptr_eq(e.reason, vd_reason_too_many_values);
	arr[0] = (char)0x99;             /* 9 zeros: 10 values */
	ck_assert_int_eq(mp->decode(&arena, arr, 10, &lim, &v, &e), 0);
#endif
}
END_TEST

/* A large body dense with escapes (yajl hands it to the fallback parser,
 * issue 27) decodes to the same value in both codecs; a broken one is
 * refused by both. */
START_TEST(test_escape_heavy)
{
	size_t n = 200 * 1024;
	char *body = malloc(n + 64);
	size_t o = (size_t)sprintf(body, "{\"k\":\"");
	for (size_t i = 0; i < n / 2; i++) {
		body[o++] = '\\';
		body[o++] = i % 3 ? 'n' : '"';
	}
	o += (size_t)sprintf(body + o, "\",\"u\":\"\\u00e9\"}");
	struct vd_value *v1, *v2;
	struct vd_codec_error e;
	const struct vd_codec *yj = codec_find("yajl"), *fb = codec_find("fallback");
	ck_assert_int_eq(yj->decode(&arena, body, o, NULL, &v1, &e), 0);
	ck_assert_int_eq(fb->decode(&arena, body, o, NULL, &v2, &e), 0);
	ck_assert(vd_value_equal(v1, v2));
	const struct vd_value *k = vd_obj_get(v1, "k");
	ck_assert_ptr_nonnull(k);
	ck_assert_uint_eq(k->v.s.len, n / 2);
	ck_assert_int_eq(k->v.s.ptr[0], '"');
	ck_assert_int_eq(k->v.s.ptr[1], '\n');
	body[o - 2] = '\x01';   /* a raw control character inside a string */
	ck_assert_int_eq(yj->decode(&arena, body, o, NULL, &v1, &e), VD_EPROTO);
	ck_assert_int_eq(fb->decode(&arena, body, o, NULL, &v2, &e), VD_EPROTO);
	free(body);
}
END_TEST

/* auto: a small body is the fallback parser's, a large one yajl's; the
 * error of a refused body is yajl's whatever its size (a small one the
 * fallback refuses is decoded again by yajl); replies are written by the
 * one JSON emitter, byte for byte yajl's. */
START_TEST(test_auto)
{
	const struct vd_codec *au = codec_find("auto"), *yj = codec_find("yajl"),
			      *fb = codec_find("fallback");
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v1, *v2;
	struct vd_codec_error ea, ey, ef;
	static const char *const bad[] = { "[1,2,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}",
					   "[tru]", "nul", "{'a':1}", "[\"\\x\"]", "[1,,2]", "",
					   "{\"a\":[1}", "\"\\ud800\"", "[01]", "1 2" };
	size_t differ = 0;
	for (size_t k = 0; k < VD_ARRAY_SIZE(bad); k++) {
		size_t n = strlen(bad[k]);
		int ra = au->decode(&arena, bad[k], n, &lim, &v1, &ea);
		int ry = yj->decode(&arena, bad[k], n, &lim, &v2, &ey);
		int rf = fb->decode(&arena, bad[k], n, &lim, &v2, &ef);
		ck_assert_msg(ra == ry && ra < 0 && rf < 0, "%s: auto %d yajl %d", bad[k], ra, ry);
		ck_assert_msg(ea.code == ey.code && ea.offset == ey.offset &&
			      strcmp(ea.reason, ey.reason) == 0,
			      "%s: auto '%s' at %zu, yajl '%s' at %zu", bad[k], ea.reason, ea.offset,
			      ey.reason, ey.offset);
		if (ef.offset != ey.offset || strcmp(ef.reason, ey.reason) != 0)
			differ++;
	}
	/* the two parsers word errors differently, so this test sees a
	 * missing re-decode */
	ck_assert_uint_ge(differ, 5);
	/* a large refused body: yajl's error too */
	size_t n = 8192;
	char *big = malloc(n);
	big[0] = '[';
	for (size_t i = 1; i + 1 < n; i += 2)
		memcpy(big + i, "1,", 2);
	big[n - 1] = ']';   /* "...,1,]": a trailing comma */
	ck_assert_int_eq(au->decode(&arena, big, n, &lim, &v1, &ea), VD_EPROTO);
	ck_assert_int_eq(yj->decode(&arena, big, n, &lim, &v2, &ey), VD_EPROTO);
	ck_assert(ea.offset == ey.offset && strcmp(ea.reason, ey.reason) == 0);
	big[n - 2] = '1';
	ck_assert_int_eq(au->decode(&arena, big, n, &lim, &v1, &ea), 0);
	ck_assert_int_eq(yj->decode(&arena, big, n, &lim, &v2, &ey), 0);
	ck_assert(vd_value_equal(v1, v2));
	free(big);
	/* accepted small bodies: the same values as both */
	const char *ok = "{\"jsonrpc\":\"2.0\",\"method\":\"Host.ping2\",\"id\":\"a\\u00e9\","
			 "\"params\":{\"x\":[1.5,-2,true,null]}}";
	ck_assert_int_eq(au->decode(&arena, ok, strlen(ok), &lim, &v1, &ea), 0);
	ck_assert_int_eq(yj->decode(&arena, ok, strlen(ok), &lim, &v2, &ey), 0);
	ck_assert(vd_value_equal(v1, v2));
	/* the limits answer as in the others: too deep, too many values */
	struct vd_limits small = { 2, 1 << 20, 4 };
	ck_assert_int_eq(au->decode(&arena, "[[[1]]]", 7, &small, &v1, &ea), VD_EDEPTH);
	ck_assert_int_eq(au->decode(&arena, "[1,2,3,4,5]", 11, &small, &v1, &ea), VD_ETOOBIG);
	ck_assert_ptr_eq(ea.reason, vd_reason_too_many_values);
	/* one emitter: the writer auto sets up is yajl's and fallback's */
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer wa, wy, wf;
	au->writer_init(&wa, &b);
	yj->writer_init(&wy, &b);
	fb->writer_init(&wf, &b);
	ck_assert_ptr_eq(wa.ops, wy.ops);
	ck_assert_ptr_eq(wa.ops, wf.ops);
	buf_free(&b);
}
END_TEST

START_TEST(test_registry)
{
	ck_assert_ptr_nonnull(codec_find("yajl"));
	ck_assert_ptr_nonnull(codec_find("fallback"));
	ck_assert_ptr_nonnull(codec_find("auto"));
	ck_assert_ptr_null(codec_find("xml"));
	ck_assert(codec_known("msgpack") && codec_known("yajl") && codec_known("auto") &&
		  !codec_known("xml") && !codec_known(""));
	ck_assert(codec_known(VD_CODEC_DEFAULT));
	/* every name, built in or not, in one list for messages and --help */
	char names[128];
	codec_names(names, sizeof(names));
	ck_assert_str_eq(names, "auto, yajl, fallback or msgpack");
	codec_names(names, 10);   /* cut to fit, still a string */
	ck_assert_str_eq(names, "auto, yaj");
	/* one codec behind the JSON content type: auto, the default */
	const char *ct = "application/json; charset=utf-8";
	const struct vd_codec *c = codec_find_content_type(ct, strlen(ct));
	ck_assert_ptr_eq(c, codec_find("auto"));
	ck_assert_ptr_null(codec_find_content_type("", 0));
	ck_assert_ptr_null(codec_find_content_type("text/plain", 10));
	for (const struct vd_codec *const *l = codec_list(); *l; l++)
		ck_assert_ptr_eq(codec_find((*l)->name), *l);
}
END_TEST

static Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_registry);
	tcase_add_test(tc, test_auto);
	tcase_add_test(tc, test_max_elements);
	tcase_add_test(tc, test_escape_heavy);
	tcase_add_loop_test(tc, test_decode_object, 0, NJSON);
	tcase_add_loop_test(tc, test_numbers, 0, NJSON);
	tcase_add_loop_test(tc, test_strings, 0, NJSON);
	tcase_add_loop_test(tc, test_structure_errors, 0, NJSON);
	tcase_add_loop_test(tc, test_limits, 0, NJSON);
	tcase_add_loop_test(tc, test_writer, 0, NJSON);
	int ncodecs = 0;
	while (codec_list()[ncodecs])
		ncodecs++;
	tcase_add_loop_test(tc, test_writer_checkpoint, 0, ncodecs);
	tcase_add_loop_test(tc, test_writer_mark, 0, ncodecs);
	tcase_add_loop_test(tc, test_writer_large, 0, ncodecs);
	tcase_add_loop_test(tc, test_hard_depth, 0, ncodecs);
#ifdef WITH_MSGPACK
	tcase_add_test(tc, test_msgpack);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(codec_suite());
}
