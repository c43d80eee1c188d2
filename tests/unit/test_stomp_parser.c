/* tests/unit/test_stomp_parser.c - STOMP frame parser and writer.
 *
 * Every test input is parsed whole, then fed one byte at a time, then at
 * every two-chunk split; the frames (or the error) must be identical. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "stomp/stomp.h"
#include "check_main.h"

#define S(lit) lit, sizeof(lit) - 1

/* Render parsed frames canonically: "CMD\nname=value\n...body[len]=bytes\n". */
static void render(struct vd_buf *r, const struct stomp_frame *f)
{
	buf_puts(r, stomp_cmd_name(f->cmd));
	buf_putc(r, '\n');
	for (unsigned i = 0; i < f->nhdr; i++) {
		ck_assert_int_eq(f->hdr[i].name[f->hdr[i].nlen], '\0');
		ck_assert_int_eq(f->hdr[i].value[f->hdr[i].vlen], '\0');
		buf_append(r, f->hdr[i].name, f->hdr[i].nlen);
		buf_putc(r, '=');
		buf_append(r, f->hdr[i].value, f->hdr[i].vlen);
		buf_putc(r, '\n');
	}
	ck_assert_int_eq(f->body[f->body_len], '\0');
	buf_printf(r, "body[%zu]=", f->body_len);
	buf_append(r, f->body, f->body_len);
	buf_putc(r, '\n');
}

/* Feed data in chunks: chunk sizes a, then b, ... (cuts[] are the split
 * offsets, ascending).  Renders every frame; an error appends "ERR <code>".
 * Returns the rendered text (caller frees). */
static char *run_cuts(const struct stomp_limits *lim, const char *data, size_t len,
		      const size_t *cuts, size_t ncuts, size_t *rlen)
{
	struct vd_buf in = VD_BUF_INIT, r = VD_BUF_INIT;
	struct stomp_parser p;
	struct stomp_header hdr[256];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 256 };
	stomp_parser_init(&p);
	size_t fed = 0;
	for (size_t c = 0; c <= ncuts; c++) {
		size_t upto = c < ncuts ? cuts[c] : len;
		buf_append(&in, data + fed, upto - fed);
		fed = upto;
		for (;;) {
			const char *why = NULL;
			long n = stomp_parse(&p, lim, in.data, in.len, &f, &why);
			if (n == VD_AGAIN)
				break;
			if (n < 0) {
				ck_assert_ptr_nonnull(why);
				buf_printf(&r, "ERR %ld\n", n);
				goto out;
			}
			ck_assert_int_gt(n, 0);
			ck_assert_uint_le((size_t)n, in.len);
			if (f.cmd != STOMP_NONE)
				render(&r, &f);
			buf_consume(&in, (size_t)n);
			if (in.len == 0)
				break;
		}
	}
	if (in.len)
		buf_printf(&r, "LEFT %zu\n", in.len);
out:
	buf_free(&in);
	buf_putc(&r, '\0');
	*rlen = r.len - 1;
	return r.data;
}

/* The whole input from an exact-size heap copy, consumed by advancing a
 * pointer: under ASan any read past the bytes given is caught. */
static void run_exact(const struct stomp_limits *lim, const char *data, size_t len,
		      const char *expect, size_t elen)
{
	struct vd_buf r = VD_BUF_INIT;
	struct stomp_parser p;
	struct stomp_header hdr[256];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 256 };
	char *copy = malloc(len ? len : 1);
	memcpy(copy, data, len);
	stomp_parser_init(&p);
	size_t pos = 0;
	while (pos < len) {
		long n = stomp_parse(&p, lim, copy + pos, len - pos, &f, NULL);
		if (n == VD_AGAIN)
			break;
		if (n < 0) {
			buf_printf(&r, "ERR %ld\n", n);
			goto out;
		}
		if (f.cmd != STOMP_NONE)
			render(&r, &f);
		pos += (size_t)n;
	}
	if (pos < len)
		buf_printf(&r, "LEFT %zu\n", len - pos);
out:
	if (r.len != elen || (elen && memcmp(r.data, expect, elen)))
		ck_abort_msg("exact-size parse:\n%.*s\nexpected:\n%s", (int)r.len, r.data, expect);
	buf_free(&r);
	free(copy);
}

/* Whole, 1 byte at a time, every 2-chunk split: all equal expect. */
static void check_all_splits(const struct stomp_limits *lim, const char *data, size_t len,
			     const char *expect, size_t elen)
{
	size_t rlen;
	run_exact(lim, data, len, expect, elen);
	char *whole = run_cuts(lim, data, len, NULL, 0, &rlen);
	if (rlen != elen || memcmp(whole, expect, elen))
		ck_abort_msg("whole parse:\n%s\nexpected:\n%s", whole, expect);
	free(whole);

	size_t *cuts = malloc((len + 1) * sizeof(*cuts));
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	char *bytes = run_cuts(lim, data, len, cuts, len ? len - 1 : 0, &rlen);
	if (rlen != elen || memcmp(bytes, expect, elen))
		ck_abort_msg("byte-at-a-time:\n%s\nexpected:\n%s", bytes, expect);
	free(bytes);
	for (size_t k = 0; k <= len; k++) {
		size_t cut = k;
		char *two = run_cuts(lim, data, len, &cut, 1, &rlen);
		if (rlen != elen || memcmp(two, expect, elen))
			ck_abort_msg("split at %zu:\n%s\nexpected:\n%s", k, two, expect);
		free(two);
	}
	free(cuts);
}

static const struct stomp_limits deflim = STOMP_LIMITS_DEFAULT;

struct good_case {
	const char *in;
	size_t inlen;
	const char *out;
	size_t outlen;
};

static const struct good_case good[] = {
	/* CONNECT: no unescaping, raw ':' in a value (IPv6 host) */
	{ S("CONNECT\naccept-version:1.2\nhost:[::1]\nlogin:a\\b\n\n\0"),
	  S("CONNECT\naccept-version=1.2\nhost=[::1]\nlogin=a\\b\nbody[0]=\n") },
	{ S("STOMP\nhost:a\\cb\n\n\0"),
	  S("STOMP\nhost=a\\cb\nbody[0]=\n") },
	/* escapes */
	{ S("SEND\ndestination:/q\\cx\nk\\\\\\c:v\\n\\r\\c\\\\\n\n{\"a\":1}\0"),
	  S("SEND\ndestination=/q:x\nk\\:=v\n\r:\\\nbody[7]={\"a\":1}\n") },
	/* raw ':' in a value of an escaped frame */
	{ S("SEND\nhost:a:b::c\n\n\0"), S("SEND\nhost=a:b::c\nbody[0]=\n") },
	/* CRLF everywhere */
	{ S("SEND\r\ndestination:a\r\nx:\r\n\r\nhello\0"),
	  S("SEND\ndestination=a\nx=\nbody[5]=hello\n") },
	/* content-length with NULs in the body */
	{ S("SEND\ndestination:a\ncontent-length:5\n\na\0b\0c\0"),
	  S("SEND\ndestination=a\ncontent-length=5\nbody[5]=a\0b\0c\n") },
	{ S("MESSAGE\ncontent-length:0\n\n\0"), S("MESSAGE\ncontent-length=0\nbody[0]=\n") },
	/* heart-beats before, between and after frames */
	{ S("\n\r\n\nSUBSCRIBE\nid:1\ndestination:x\n\n\0\n\r\nACK\nid:1\n\n\0\n\n"),
	  S("SUBSCRIBE\nid=1\ndestination=x\nbody[0]=\nACK\nid=1\nbody[0]=\n") },
	/* repeated headers kept in order (first wins via stomp_frame_get) */
	{ S("SEND\nfoo:1\nfoo:2\n\nxy\0"), S("SEND\nfoo=1\nfoo=2\nbody[2]=xy\n") },
	/* several frames back to back, every command */
	{ S("DISCONNECT\nreceipt:7\n\n\0BEGIN\ntransaction:t\n\n\0COMMIT\n\n\0ABORT\n\n\0"
	    "NACK\n\n\0UNSUBSCRIBE\nid:3\n\n\0CONNECTED\nversion:1.2\n\n\0RECEIPT\nreceipt-id:7\n\n\0"
	    "ERROR\nmessage:x\\cy\n\nbad\0"),
	  S("DISCONNECT\nreceipt=7\nbody[0]=\nBEGIN\ntransaction=t\nbody[0]=\nCOMMIT\nbody[0]=\n"
	    "ABORT\nbody[0]=\nNACK\nbody[0]=\nUNSUBSCRIBE\nid=3\nbody[0]=\n"
	    "CONNECTED\nversion=1.2\nbody[0]=\nRECEIPT\nreceipt-id=7\nbody[0]=\n"
	    "ERROR\nmessage=x:y\nbody[3]=bad\n") },
	/* body containing '\n' and '\r' without content-length */
	{ S("SEND\n\n\n\r\nx\r\0"), S("SEND\nbody[5]=\n\r\nx\r\n") },
	/* only heart-beats */
	{ S("\n\n\r\n"), S("") },
	/* incomplete frame is left over */
	{ S("SEND\na:b\n\nxx"), S("LEFT 12\n") },
};

START_TEST(test_good_frames)
{
	const struct good_case *g = &good[_i];
	check_all_splits(&deflim, g->in, g->inlen, g->out, g->outlen);
}
END_TEST

struct bad_case {
	const char *in;
	size_t inlen;
	long err;
};

static const struct bad_case bad[] = {
	{ S("SEND\na:\\t\n\n\0"), VD_EPROTO },          /* unknown escape */
	{ S("SEND\na:b\\\n\n\0"), VD_EPROTO },          /* trailing backslash */
	{ S("SEND\na\\x:b\n\n\0"), VD_EPROTO },         /* escape in a name */
	{ S("FOO\n\n\0"), VD_EPROTO },                  /* unknown command */
	{ S("send\n\n\0"), VD_EPROTO },                 /* commands are case-sensitive */
	{ S("SEND\ncontent-length:2\n\nabc\0"), VD_EPROTO }, /* no NUL after body */
	{ S("SEND\ncontent-length:x\n\n\0"), VD_EPROTO },
	{ S("SEND\ncontent-length:\n\n\0"), VD_EPROTO },
	{ S("SEND\ncontent-length:-1\n\n\0"), VD_EPROTO },
	{ S("SEND\nabc\n\n\0"), VD_EPROTO },           /* header without ':' */
	{ S("SEND\na:b\0\n\n"), VD_EPROTO },            /* NUL in headers */
	{ S("SEND\0"), VD_EPROTO },
	{ S("SEND\ncontent-length:99999999999999999999999\n\n\0"), VD_EPROTO },
	{ S("SEND\ncontent-length:16777216\n\n"), VD_ETOOBIG }, /* at once */
};

START_TEST(test_bad_frames)
{
	const struct bad_case *b = &bad[_i];
	char expect[32];
	snprintf(expect, sizeof(expect), "ERR %ld\n", b->err);
	check_all_splits(&deflim, b->in, b->inlen, expect, strlen(expect));
}
END_TEST

START_TEST(test_limits)
{
	struct stomp_limits lim = { 64, 3, 16 };
	/* header line of exactly 16 is fine, 17 is not */
	check_all_splits(&lim, S("SEND\n0123456789abcdef\n\n\0"), S("ERR -2\n"));
	check_all_splits(&lim, S("SEND\n0123456:89abcdef\n\n\0"),
			 S("SEND\n0123456=89abcdef\nbody[0]=\n"));
	check_all_splits(&lim, S("SEND\n0123456:89abcdefg\n\n\0"), S("ERR -3\n"));
	/* a long line is refused before its EOL arrives */
	check_all_splits(&lim, S("SEND\n0123456:89abcdefgh"), S("ERR -3\n"));
	check_all_splits(&lim, S("SENDSENDSENDSENDSEND"), S("ERR -3\n"));
	/* CRLF does not count against the line */
	check_all_splits(&lim, S("SEND\r\n0123456:89abcdef\r\n\r\n\0"),
			 S("SEND\n0123456=89abcdef\nbody[0]=\n"));
	/* frame size reached while still in the headers */
	struct stomp_limits lim3 = { 40, 3, 16 };
	check_all_splits(&lim3, S("SEND\na:1234567890123\nb:1234567890123\nc:1"), S("ERR -3\n"));
	check_all_splits(&lim3, S("SEND\na:1234567890123\nb:1234567890123\nc:"), S("LEFT 39\n"));
	/* header count */
	check_all_splits(&lim, S("SEND\na:1\nb:2\nc:3\n\n\0"),
			 S("SEND\na=1\nb=2\nc=3\nbody[0]=\n"));
	check_all_splits(&lim, S("SEND\na:1\nb:2\nc:3\nd:4\n"), S("ERR -3\n"));
	/* frame size: exactly 64 bytes ok */
	check_all_splits(&lim, S("SEND\n\n012345678901234567890123456789012345678901234567890123456\0"),
			 S("SEND\nbody[57]=012345678901234567890123456789012345678901234567890123456\n"));
	check_all_splits(&lim, S("SEND\n\n0123456789012345678901234567890123456789012345678901234567\0"), S("ERR -3\n"));
	/* without the NUL: refused once it cannot fit, not buffered on */
	check_all_splits(&lim, S("SEND\n\n0123456789012345678901234567890123456789012345678901234567"), S("ERR -3\n"));
	check_all_splits(&lim, S("SEND\n\n012345678901234567890123456789012345678901234567890123456"), S("LEFT 63\n"));
	/* content-length over the limit is refused before the body arrives */
	struct stomp_limits lim2 = { 64, 3, 32 };
	check_all_splits(&lim2, S("SEND\ncontent-length:40\n\n"), S("ERR -3\n"));
	check_all_splits(&lim2, S("SEND\ncontent-length:39\n\n"), S("LEFT 24\n"));
	/* header array smaller than the limit */
	struct stomp_parser p;
	struct stomp_header hdr[2];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 2 };
	char buf[] = "SEND\na:1\nb:2\nc:3\n\n";
	const char *why = NULL;
	stomp_parser_init(&p);
	ck_assert_int_eq(stomp_parse(&p, &lim, buf, sizeof(buf), &f, &why), VD_ETOOBIG);
	ck_assert_ptr_nonnull(why);
}
END_TEST

START_TEST(test_first_wins)
{
	struct stomp_parser p;
	struct stomp_header hdr[8];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 8 };
	char buf[] = "SEND\ncontent-length:1\nfoo:1\nfoo:2\ncontent-length:3\n\nx\0";
	stomp_parser_init(&p);
	ck_assert_int_eq(stomp_parse(&p, &deflim, buf, sizeof(buf) - 1, &f, NULL),
			 (long)sizeof(buf) - 1);
	size_t vl = 0;
	ck_assert_str_eq(stomp_frame_get(&f, "foo", &vl), "1");
	ck_assert_uint_eq(vl, 1);
	ck_assert_ptr_null(stomp_frame_get(&f, "bar", NULL));
	ck_assert_uint_eq(f.body_len, 1);
}
END_TEST

/* A long body without content-length arriving in small chunks is scanned
 * once: the parser's resume offset tracks the buffered length. */
START_TEST(test_resume_no_rescan)
{
	struct stomp_parser p;
	struct stomp_header hdr[4];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 4 };
	size_t total = 1 << 20;
	char *buf = malloc(total + 16);
	memcpy(buf, "SEND\n\n", 6);
	memset(buf + 6, 'x', total - 6);
	stomp_parser_init(&p);
	for (size_t len = 6; len < total; len += 4096) {
		ck_assert_int_eq(stomp_parse(&p, &deflim, buf, len, &f, NULL), VD_AGAIN);
		ck_assert_uint_eq(p.scanned, len);
	}
	buf[total] = '\0';
	ck_assert_int_eq(stomp_parse(&p, &deflim, buf, total + 1, &f, NULL), (long)total + 1);
	ck_assert_uint_eq(f.body_len, total - 6);
	free(buf);
}
END_TEST

static long parse_one(char *buf, size_t len, struct stomp_frame *f)
{
	struct stomp_parser p;
	stomp_parser_init(&p);
	return stomp_parse(&p, &deflim, buf, len, f, NULL);
}

START_TEST(test_writer_roundtrip)
{
	struct vd_buf out = VD_BUF_INIT;
	struct stomp_header h[] = {
		{ "destination", 11, "a:b\\c\nd\re", 9 },
		{ "we:ird\n", 7, "v", 1 },
		{ "content-length", 0, "999", 3 },   /* replaced by the real one */
		{ "skipped", 7, NULL, 0 },
		{ "empty", 5, "", 0 },
	};
	stomp_write_frame(&out, STOMP_SEND, h, 5, "x\0y", 3);
	const char expect[] = "SEND\ndestination:a\\cb\\\\c\\nd\\re\nwe\\cird\\n:v\nempty:\n"
			      "content-length:3\n\nx\0y";
	ck_assert_uint_eq(out.len, sizeof(expect));
	ck_assert_mem_eq(out.data, expect, sizeof(expect));
	struct stomp_header hdr[8];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 8 };
	ck_assert_int_eq(parse_one(out.data, out.len, &f), (long)out.len);
	ck_assert_int_eq(f.cmd, STOMP_SEND);
	ck_assert_str_eq(stomp_frame_get(&f, "destination", NULL), "a:b\\c\nd\re");
	ck_assert_str_eq(stomp_frame_get(&f, "we:ird\n", NULL), "v");
	ck_assert_str_eq(stomp_frame_get(&f, "content-length", NULL), "3");
	ck_assert_uint_eq(f.body_len, 3);
	ck_assert_mem_eq(f.body, "x\0y", 3);

	/* CONNECT is not escaped; no body, no content-length */
	buf_reset(&out);
	struct stomp_header c[] = { { "host", 4, "[::1]", 5 } };
	stomp_write_frame(&out, STOMP_CONNECT, c, 1, NULL, 0);
	ck_assert_uint_eq(out.len, sizeof("CONNECT\nhost:[::1]\n\n"));
	ck_assert_mem_eq(out.data, "CONNECT\nhost:[::1]\n\n", out.len);

	/* empty body still carries content-length */
	buf_reset(&out);
	stomp_write_frame(&out, STOMP_MESSAGE, NULL, 0, "", 0);
	ck_assert_mem_eq(out.data, "MESSAGE\ncontent-length:0\n\n", out.len);
	buf_free(&out);
	ck_assert_str_eq(stomp_cmd_name(STOMP_UNSUBSCRIBE), "UNSUBSCRIBE");
}
END_TEST

/* Header escapes at every place of values of 1 to 24 bytes (the 8-byte
 * fast path of the escaper, its tail, a match past a plain word), against
 * the escapes written out one byte at a time here. */
START_TEST(test_writer_escapes_everywhere)
{
	static const char specials[] = "\\\n\r:";
	struct vd_buf out = VD_BUF_INIT;
	for (size_t n = 1; n <= 24; n++) {
		for (size_t at = 0; at < n; at++) {
			for (size_t k = 0; k < 4; k++) {
				char v[32], want[80];
				memset(v, 'a' + (char)(n % 7), n);
				v[at] = specials[k];
				size_t wl = 0;
				memcpy(want, "SEND\nh:", 7);
				wl = 7;
				for (size_t i = 0; i < n; i++) {
					switch (v[i]) {
					case '\\': want[wl++] = '\\'; want[wl++] = '\\'; break;
					case '\n': want[wl++] = '\\'; want[wl++] = 'n'; break;
					case '\r': want[wl++] = '\\'; want[wl++] = 'r'; break;
					case ':': want[wl++] = '\\'; want[wl++] = 'c'; break;
					default: want[wl++] = v[i];
					}
				}
				memcpy(want + wl, "\n\n", 3);   /* and the NUL */
				wl += 3;
				struct stomp_header h = { "h", 1, v, n };
				buf_reset(&out);
				stomp_write_frame(&out, STOMP_SEND, &h, 1, NULL, 0);
				ck_assert_uint_eq(out.len, wl);
				ck_assert_msg(!memcmp(out.data, want, wl), "n %zu at %zu char %zu", n, at, k);
			}
		}
	}
	buf_free(&out);
}
END_TEST

/* stomp_u64_digits and stomp_put_u64 against printf at every power of ten
 * and of two (each side of it), 0 and UINT64_MAX. */
START_TEST(test_u64_digits)
{
	uint64_t vals[200];
	size_t n = 0;
	vals[n++] = 0;
	vals[n++] = UINT64_MAX;
	uint64_t p = 1;
	for (int k = 0; k < 20; k++, p *= 10) {
		vals[n++] = p - 1;
		vals[n++] = p;
		vals[n++] = p + 1;
	}
	for (int k = 1; k < 64; k++) {
		vals[n++] = ((uint64_t)1 << k) - 1;
		vals[n++] = (uint64_t)1 << k;
	}
	for (size_t i = 0; i < n; i++) {
		char want[32], got[32];
		int wl = snprintf(want, sizeof(want), "%llu", (unsigned long long)vals[i]);
		ck_assert_uint_eq(stomp_u64_digits(vals[i]), (unsigned)wl);
		char *e = stomp_put_u64(got, vals[i]);
		ck_assert_int_eq((int)(e - got), wl);
		*e = '\0';
		ck_assert_str_eq(got, want);
	}
}
END_TEST

START_TEST(test_writer_content_length)
{
	static const size_t sizes[] = { 0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 10000, 12345, 99999 };
	char *body = calloc(1, 100000);
	for (size_t i = 0; i < VD_ARRAY_SIZE(sizes); i++) {
		struct vd_buf out = VD_BUF_INIT;
		stomp_write_frame(&out, STOMP_SEND, NULL, 0, body, sizes[i]);
		struct stomp_header hdr[4];
		struct stomp_frame f = { .hdr = hdr, .hdr_cap = 4 };
		ck_assert_int_eq(parse_one(out.data, out.len, &f), (long)out.len);
		char want[32];
		snprintf(want, sizeof(want), "%zu", sizes[i]);
		ck_assert_str_eq(stomp_frame_get(&f, "content-length", NULL), want);
		ck_assert_uint_eq(f.body_len, sizes[i]);
		buf_free(&out);
	}
	free(body);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stomp_parser");
	TCase *tc = tcase_create("parser");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_good_frames, 0, (int)(sizeof(good) / sizeof(good[0])));
	tcase_add_loop_test(tc, test_bad_frames, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_first_wins);
	tcase_add_test(tc, test_resume_no_rescan);
	tcase_add_test(tc, test_writer_roundtrip);
	tcase_add_test(tc, test_writer_content_length);
	tcase_add_test(tc, test_u64_digits);
	tcase_add_test(tc, test_writer_escapes_everywhere);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
