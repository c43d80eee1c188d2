/* tests/unit/test_image_http.c - the image server's HTTP request parser and
 * response formatting (vdsmd/image/http_req.c, http_resp.c).
 *
 * The requests are what curl 7.88 and Python 3.11's http.client send (captured
 * from the wire); each is parsed at every split point from a heap copy of
 * exactly the bytes given, so a read past them is caught under ASan. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "vdsmd/image/http_req.h"
#include "vdsmd/image/http_resp.h"
#include "check_main.h"

#define TID "7ab8e1b2-3b7c-4a3e-9d0f-2f5e6c1d9a10"

static struct img_http_limits lim_default(void)
{
	struct img_http_limits l;
	img_http_limits_default(&l);
	return l;
}

/* Parses the first n bytes of s from an exact-size heap copy. */
static long parse_n(const char *s, size_t n, const struct img_http_limits *l,
		    struct img_http_req *r)
{
	char *copy = malloc(n ? n : 1);
	memcpy(copy, s, n);
	long rc = img_http_parse(copy, n, l, r);
	/* slices point into copy: keep them valid by re-pointing into s */
	if (rc > 0) {
		r->method_name.p = s + (r->method_name.p - copy);
		r->target.p = s + (r->target.p - copy);
		r->path.p = s + (r->path.p - copy);
		if (r->content_type.p)
			r->content_type.p = s + (r->content_type.p - copy);
	}
	free(copy);
	return rc;
}

static long parse(const char *s, struct img_http_req *r)
{
	struct img_http_limits l = lim_default();
	return parse_n(s, strlen(s), &l, r);
}

static bool slice_is(struct img_http_slice sl, const char *lit)
{
	return sl.n == strlen(lit) && memcmp(sl.p, lit, sl.n) == 0;
}

static const char curl_get[] = "GET /images/" TID " HTTP/1.1\r\nHost: 127.0.0.1:48049\r\n"
			       "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
static const char curl_range[] = "GET /images/" TID " HTTP/1.1\r\nHost: 127.0.0.1:48049\r\n"
				 "Range: bytes=2097152-2162687\r\nUser-Agent: curl/7.88.1\r\n"
				 "Accept: */*\r\n\r\n";
static const char curl_put[] = "PUT /images/" TID "?flush=n HTTP/1.1\r\nHost: 127.0.0.1:48049\r\n"
			       "User-Agent: curl/7.88.1\r\nAccept: */*\r\n"
			       "Content-Range: bytes 2097152-2097167/*\r\nContent-Length: 16\r\n"
			       "Expect: 100-continue\r\n\r\nxxxxxxxxxxxxxxxx";
static const char curl_patch[] = "PATCH /images/" TID " HTTP/1.1\r\nHost: 127.0.0.1:48049\r\n"
				 "User-Agent: curl/7.88.1\r\nAccept: */*\r\nContent-Length: 44\r\n"
				 "Content-Type: application/x-www-form-urlencoded\r\n\r\n"
				 "{\"op\": \"zero\", \"offset\": 4096, \"size\": 8192}";
static const char curl_options[] = "OPTIONS /images/* HTTP/1.1\r\nHost: 127.0.0.1:48049\r\n"
				   "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
static const char py_put[] = "PUT /images/" TID "?flush=y HTTP/1.1\r\nHost: 127.0.0.1:48049\r\n"
			     "Accept-Encoding: identity\r\nContent-Length: 16\r\n"
			     "Content-Range: bytes 0-15/*\r\n\r\nyyyyyyyyyyyyyyyy";
static const char py_extents[] = "GET /images/" TID "/extents?context=zero HTTP/1.1\r\n"
				 "Host: 127.0.0.1:48049\r\nAccept-Encoding: identity\r\n\r\n";
static const char py_patch[] = "PATCH /images/" TID " HTTP/1.1\r\nHost: 127.0.0.1:48049\r\n"
			       "Accept-Encoding: identity\r\nContent-Length: 15\r\n"
			       "Content-Type: application/json\r\n\r\n{\"op\": \"flush\"}";

static const char *const real_requests[] = {
	curl_get, curl_range, curl_put, curl_patch, curl_options, py_put, py_extents, py_patch,
};

/* The body begins after the header section; its length is Content-Length. */
static size_t header_len_of(const char *s)
{
	return (size_t)(strstr(s, "\r\n\r\n") - s) + 4;
}

START_TEST(every_split_point)
{
	const char *s = real_requests[_i];
	size_t hl = header_len_of(s), n = strlen(s);
	struct img_http_limits l = lim_default();
	struct img_http_req full;
	ck_assert_int_eq(parse_n(s, n, &l, &full), (long)hl);
	ck_assert_int_eq(full.status, 0);
	for (size_t k = 0; k <= n; k++) {
		struct img_http_req r;
		long rc = parse_n(s, k, &l, &r);
		if (k < hl) {
			ck_assert_msg(rc == VD_AGAIN, "request %d split %zu: %ld", _i, k, rc);
			continue;
		}
		ck_assert_int_eq(rc, (long)hl);
		ck_assert_int_eq(r.method, full.method);
		ck_assert_int_eq(r.resource, full.resource);
		ck_assert_str_eq(r.ticket_id, full.ticket_id);
		ck_assert_int_eq(r.content_length, full.content_length);
		ck_assert_int_eq(r.flush, full.flush);
		ck_assert_int_eq(r.keep_alive, full.keep_alive);
		ck_assert_int_eq(r.expect_continue, full.expect_continue);
		ck_assert_uint_eq(r.nheaders, full.nheaders);
	}
}
END_TEST

START_TEST(curl_and_python_fields)
{
	struct img_http_req r;
	ck_assert_int_gt(parse(curl_get, &r), 0);
	ck_assert_int_eq(r.method, IMG_HTTP_GET);
	ck_assert_int_eq(r.resource, IMG_RES_IMAGE);
	ck_assert_str_eq(r.ticket_id, TID);
	ck_assert(!r.range.present);
	ck_assert_int_eq(r.content_length, -1);
	ck_assert(r.keep_alive);
	ck_assert_uint_eq(r.nheaders, 3);
	ck_assert_int_eq(r.version_minor, 1);

	ck_assert_int_gt(parse(curl_range, &r), 0);
	ck_assert(r.range.present && !r.range.bad && !r.range.suffix && r.range.has_last);
	ck_assert_uint_eq(r.range.first, 2097152);
	ck_assert_uint_eq(r.range.last, 2162687);

	ck_assert_int_eq(parse(curl_put, &r), (long)header_len_of(curl_put));
	ck_assert_int_eq(r.method, IMG_HTTP_PUT);
	ck_assert_int_eq(r.flush, IMG_FLUSH_N);
	ck_assert_int_eq(r.content_length, 16);
	ck_assert(r.expect_continue);
	ck_assert(r.crange.present && !r.crange.bad && r.crange.has_last && !r.crange.has_complete);
	ck_assert_uint_eq(r.crange.first, 2097152);
	ck_assert_uint_eq(r.crange.last, 2097167);
	ck_assert(slice_is(r.path, "/images/" TID));
	ck_assert(slice_is(r.target, "/images/" TID "?flush=n"));

	ck_assert_int_gt(parse(curl_patch, &r), 0);
	ck_assert_int_eq(r.method, IMG_HTTP_PATCH);
	ck_assert_int_eq(r.content_length, 44);
	ck_assert(slice_is(r.content_type, "application/x-www-form-urlencoded"));

	ck_assert_int_gt(parse(curl_options, &r), 0);
	ck_assert_int_eq(r.method, IMG_HTTP_OPTIONS);
	ck_assert_str_eq(r.ticket_id, "*");

	ck_assert_int_gt(parse(py_put, &r), 0);
	ck_assert_int_eq(r.flush, IMG_FLUSH_Y);
	ck_assert(!r.expect_continue);
	ck_assert_uint_eq(r.crange.first, 0);
	ck_assert_uint_eq(r.crange.last, 15);

	ck_assert_int_gt(parse(py_extents, &r), 0);
	ck_assert_int_eq(r.resource, IMG_RES_EXTENTS);
	ck_assert_str_eq(r.ticket_id, TID);
	ck_assert_int_eq(r.context, IMG_CONTEXT_ZERO);
	ck_assert_int_eq(r.flush, IMG_FLUSH_DEFAULT);

	ck_assert_int_gt(parse(py_patch, &r), 0);
	ck_assert(slice_is(r.content_type, "application/json"));
	ck_assert_str_eq(img_http_method_name(r.method), "PATCH");
}
END_TEST

START_TEST(pipelined_and_bare_lf)
{
	char two[1024];
	snprintf(two, sizeof(two), "%s%s", curl_get, py_extents);
	struct img_http_req r;
	long n = parse(two, &r);
	ck_assert_int_eq(n, (long)strlen(curl_get));
	ck_assert_int_eq(r.resource, IMG_RES_IMAGE);
	ck_assert_int_eq(parse(two + n, &r), (long)strlen(py_extents));
	ck_assert_int_eq(r.resource, IMG_RES_EXTENTS);
	/* LF-only line ends, and empty lines before the request line */
	const char *lf = "\r\n\nGET /images/abc HTTP/1.1\nHost: x\n\n";
	ck_assert_int_eq(parse(lf, &r), (long)strlen(lf));
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.ticket_id, "abc");
}
END_TEST

START_TEST(keep_alive_rules)
{
	struct img_http_req r;
	parse("GET /images/a HTTP/1.1\r\nConnection: close\r\n\r\n", &r);
	ck_assert(!r.keep_alive);
	parse("GET /images/a HTTP/1.1\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", &r);
	ck_assert(!r.keep_alive);
	parse("GET /images/a HTTP/1.0\r\n\r\n", &r);
	ck_assert(!r.keep_alive);
	ck_assert_int_eq(r.version_minor, 0);
	parse("GET /images/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r);
	ck_assert(r.keep_alive);
	/* Expect: 100-continue means nothing to HTTP/1.0 */
	parse("PUT /images/a HTTP/1.0\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n", &r);
	ck_assert(!r.expect_continue);
	parse("PUT /images/a HTTP/1.1\r\nContent-Length: 1\r\nExpect: 100-Continue\r\n\r\n", &r);
	ck_assert(r.expect_continue);
	parse("GET /images/a?close=y HTTP/1.1\r\n\r\n", &r);
	ck_assert(r.close_query);
	ck_assert(r.keep_alive); /* the handler closes, like imageio's close=y */
}
END_TEST

struct range_case {
	const char *hdr;
	bool bad, suffix, has_last;
	uint64_t first, last;
};

static const struct range_case range_cases[] = {
	{ "bytes=0-499", false, false, true, 0, 499 },
	{ "bytes=500-", false, false, false, 500, 0 },
	{ "bytes=-500", false, true, true, 0, 500 },
	{ "bytes=7-7", false, false, true, 7, 7 },
	{ "bytes=9223372036854775806-9223372036854775807", false, false, true,
	  9223372036854775806ull, 9223372036854775807ull },
	{ "bytes=5-1", true, false, false, 0, 0 },          /* first > last */
	{ "bytes=0-1,5-6", true, false, false, 0, 0 },      /* multiple ranges */
	{ "bytes=-", true, false, false, 0, 0 },
	{ "bytes=", true, false, false, 0, 0 },
	{ "Bytes=0-1", true, false, false, 0, 0 },          /* unit is case sensitive */
	{ "bytes = 0-1", true, false, false, 0, 0 },
	{ "bytes=a-b", true, false, false, 0, 0 },
	{ "bytes=0-1 ", false, false, true, 0, 1 },         /* OWS is not the value */
	{ "bytes=0-1x", true, false, false, 0, 0 },
	{ "bytes=9223372036854775808-", true, false, false, 0, 0 }, /* > INT64_MAX */
	{ "items=0-1", true, false, false, 0, 0 },
};

START_TEST(range_forms)
{
	const struct range_case *c = &range_cases[_i];
	char req[256];
	snprintf(req, sizeof(req), "GET /images/a HTTP/1.1\r\nRange: %s\r\n\r\n", c->hdr);
	struct img_http_req r;
	ck_assert_int_eq(parse(req, &r), (long)strlen(req));
	ck_assert_int_eq(r.status, 0); /* a bad range is the GET handler's 416 */
	ck_assert(r.range.present);
	ck_assert_msg(r.range.bad == c->bad, "%s", c->hdr);
	if (c->bad)
		return;
	ck_assert_int_eq(r.range.suffix, c->suffix);
	ck_assert_int_eq(r.range.has_last, c->has_last);
	ck_assert_uint_eq(r.range.first, c->first);
	ck_assert_uint_eq(r.range.last, c->last);
}
END_TEST

struct crange_case {
	const char *hdr;
	bool bad, has_last, has_complete;
	uint64_t first, last, complete;
};

static const struct crange_case crange_cases[] = {
	{ "bytes 0-499/1000", false, true, true, 0, 499, 1000 },
	{ "bytes 0-499/*", false, true, false, 0, 499, 0 },
	{ "bytes 5368709120-6442450943/*", false, true, false, 5368709120ull, 6442450943ull, 0 },
	{ "bytes 100-*/*", false, false, false, 100, 0, 0 },
	{ "bytes 100-*/4096", false, false, true, 100, 0, 4096 },
	{ "bytes */1000", true, false, false, 0, 0, 0 },      /* unsatisfied form */
	{ "bytes 5-1/*", true, false, false, 0, 0, 0 },
	{ "bytes 0-1000/1000", true, false, false, 0, 0, 0 }, /* last >= complete */
	{ "bytes=0-1/*", true, false, false, 0, 0, 0 },
	{ "bytes 0-1", true, false, false, 0, 0, 0 },
	{ "bytes 0-1/*x", true, false, false, 0, 0, 0 },
	{ "bytes -1-2/*", true, false, false, 0, 0, 0 },
};

START_TEST(content_range_forms)
{
	const struct crange_case *c = &crange_cases[_i];
	char req[256];
	snprintf(req, sizeof(req),
		 "PUT /images/a HTTP/1.1\r\nContent-Range: %s\r\nContent-Length: 0\r\n\r\n", c->hdr);
	struct img_http_req r;
	ck_assert_int_eq(parse(req, &r), (long)strlen(req));
	ck_assert_int_eq(r.status, 0);
	ck_assert(r.crange.present);
	ck_assert_msg(r.crange.bad == c->bad, "%s", c->hdr);
	if (c->bad)
		return;
	ck_assert_int_eq(r.crange.has_last, c->has_last);
	ck_assert_int_eq(r.crange.has_complete, c->has_complete);
	ck_assert_uint_eq(r.crange.first, c->first);
	ck_assert_uint_eq(r.crange.last, c->last);
	ck_assert_uint_eq(r.crange.complete, c->complete);
}
END_TEST

START_TEST(query_and_routes)
{
	struct img_http_req r;
	parse("PUT /images/a?flush=y&flush=n HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &r);
	ck_assert_int_eq(r.flush, IMG_FLUSH_N); /* the last one wins */
	parse("PUT /images/a?flush=yes HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &r);
	ck_assert_int_eq(r.flush, IMG_FLUSH_BAD);
	parse("PUT /images/a?flush HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &r);
	ck_assert_int_eq(r.flush, IMG_FLUSH_BAD);
	parse("GET /images/a/extents?context=dirty&x=1 HTTP/1.1\r\n\r\n", &r);
	ck_assert_int_eq(r.context, IMG_CONTEXT_DIRTY);
	ck_assert_int_eq(r.resource, IMG_RES_EXTENTS);
	parse("GET /images/a/extents?context=all HTTP/1.1\r\n\r\n", &r);
	ck_assert_int_eq(r.context, IMG_CONTEXT_BAD);
	ck_assert_int_eq(r.status, 0);
	parse("GET /images/a/checksum HTTP/1.1\r\n\r\n", &r);
	ck_assert_int_eq(r.resource, IMG_RES_CHECKSUM);
	ck_assert_str_eq(r.ticket_id, "a");
	parse("GET /images/a/checksum/algorithms HTTP/1.1\r\n\r\n", &r);
	ck_assert_int_eq(r.resource, IMG_RES_CHECKSUM);
	ck_assert_str_eq(r.ticket_id, "a");
	/* the path is unquoted before it is routed, as imageio does */
	parse("GET /images/%61b%2Fextents HTTP/1.1\r\n\r\n", &r);
	ck_assert_int_eq(r.resource, IMG_RES_EXTENTS);
	ck_assert_str_eq(r.ticket_id, "ab");
	parse("GET /images/a%zz HTTP/1.1\r\n\r\n", &r);
	ck_assert_str_eq(r.ticket_id, "a%zz");
	/* (.*) is greedy: an unknown sub-path is part of the ticket id */
	parse("GET /images/a/b HTTP/1.1\r\n\r\n", &r);
	ck_assert_int_eq(r.resource, IMG_RES_IMAGE);
	ck_assert_str_eq(r.ticket_id, "a/b");
}
END_TEST

struct refusal {
	const char *req;
	long rc;         /* > 0: framed; the expected consumed length is strlen */
	int status;
	bool keep_alive;
};

static const struct refusal refusals[] = {
	{ "GET /info/ HTTP/1.1\r\n\r\n", 1, 404, true },
	{ "GET /images HTTP/1.1\r\n\r\n", 1, 404, true },
	{ "GET http://h/images/a HTTP/1.1\r\n\r\n", 1, 404, true },
	{ "GET /images/ HTTP/1.1\r\n\r\n", 1, 400, true },            /* Ticket id is required */
	{ "GET /images/a%00b HTTP/1.1\r\n\r\n", 1, 400, true },
	{ "FOO /images/a HTTP/1.1\r\n\r\n", 1, 405, true },
	{ "FOO /images/a HTTP/1.1\r\nContent-Length: 3\r\n\r\n", 1, 405, false },
	{ "PUT /images/a HTTP/1.1\r\n\r\n", 1, 400, true },           /* no Content-Length */
	{ "PUT /images/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 1, 400, false },
	{ "PUT /images/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n", 1,
	  400, false },
	{ "PATCH /images/a HTTP/1.1\r\nContent-Length: 4097\r\n\r\n", 1, 413, false },
	{ "GET /images/a HTTP/2.0\r\n\r\n", VD_EPROTO, 505, false },
	{ "GET /images/a HTTP/1.x\r\n\r\n", VD_EPROTO, 400, false },
	{ "GET /images/a HTTP/0.9\r\n\r\n", VD_EPROTO, 400, false },
	{ "GET /images/a\r\n\r\n", VD_EPROTO, 400, false },
	{ "GET  /images/a HTTP/1.1\r\n\r\n", VD_EPROTO, 400, false },
	{ "G(T /images/a HTTP/1.1\r\n\r\n", VD_EPROTO, 400, false },
	{ "GET /images/a HTTP/1.1 \r\n\r\n", VD_EPROTO, 400, false },
	{ "GET /images/a HTTP/1.1\r\nHost x\r\n\r\n", VD_EPROTO, 400, false },
	{ "GET /images/a HTTP/1.1\r\n: x\r\n\r\n", VD_EPROTO, 400, false },
	{ "GET /images/a HTTP/1.1\r\nHost : x\r\n\r\n", VD_EPROTO, 400, false },
	{ "GET /images/a HTTP/1.1\r\nX: a\r\n b\r\n\r\n", VD_EPROTO, 400, false }, /* folding */
	{ "GET /images/a HTTP/1.1\r\nX: a\001b\r\n\r\n", VD_EPROTO, 400, false },
	{ "PUT /images/a HTTP/1.1\r\nContent-Length: 12a\r\n\r\n", VD_EPROTO, 400, false },
	{ "PUT /images/a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", VD_EPROTO, 400, false },
	{ "PUT /images/a HTTP/1.1\r\nContent-Length: +1\r\n\r\n", VD_EPROTO, 400, false },
	{ "PUT /images/a HTTP/1.1\r\nContent-Length: \r\n\r\n", VD_EPROTO, 400, false },
	{ "PUT /images/a HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", VD_EPROTO, 400, false },
	{ "PUT /images/a HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n", VD_EPROTO, 400,
	  false },
	{ "PUT /images/a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", VD_EPROTO,
	  400, false },
};

START_TEST(every_refusal)
{
	const struct refusal *c = &refusals[_i];
	struct img_http_req r;
	long rc = parse(c->req, &r);
	if (c->rc > 0)
		ck_assert_msg(rc == (long)strlen(c->req), "%s: %ld", c->req, rc);
	else
		ck_assert_msg(rc == c->rc, "%s: %ld", c->req, rc);
	ck_assert_msg(r.status == c->status, "%s: status %d", c->req, r.status);
	ck_assert_ptr_nonnull(r.reason);
	ck_assert_msg(r.keep_alive == c->keep_alive, "%s: keep_alive", c->req);
}
END_TEST

START_TEST(duplicate_equal_content_length)
{
	struct img_http_req r;
	ck_assert_int_gt(parse("PUT /images/a HTTP/1.1\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n",
			       &r),
			 0);
	ck_assert_int_eq(r.status, 0);
	ck_assert_int_eq(r.content_length, 7);
	ck_assert_int_gt(parse("PUT /images/a HTTP/1.1\r\nContent-Length: 9223372036854775807\r\n\r\n",
			       &r),
			 0);
	ck_assert_int_eq(r.content_length, INT64_MAX);
}
END_TEST

START_TEST(limits)
{
	struct img_http_limits l = lim_default();
	struct img_http_req r;
	/* request line: 4096 bytes with its line end are accepted, more is 414 */
	char *big = malloc(20000);
	size_t n = (size_t)snprintf(big, 20000, "GET /images/");
	while (n < 4096 - strlen(" HTTP/1.1\r\n"))
		big[n++] = 'a';
	n += (size_t)snprintf(big + n, 20000 - n, " HTTP/1.1\r\n\r\n");
	ck_assert_int_eq(parse_n(big, n, &l, &r), (long)n);
	ck_assert_int_eq(r.status, IMG_HTTP_BAD_REQUEST); /* ticket id too long */
	/* one byte more, and the line is refused before its end arrives */
	memmove(big + 13, big + 12, n - 12);
	ck_assert_int_eq(parse_n(big, 4096, &l, &r), VD_ETOOBIG);
	ck_assert_int_eq(r.status, IMG_HTTP_URI_TOO_LONG);
	ck_assert_int_eq(parse_n(big, 4095, &l, &r), VD_AGAIN);
	/* a path within the request line limit but over the ticket bound */
	memset(big, 0, 20000);
	n = (size_t)snprintf(big, 20000, "GET /images/");
	for (int i = 0; i < IMG_HTTP_TICKET_MAX + 1; i++)
		big[n++] = 'b';
	n += (size_t)snprintf(big + n, 20000 - n, " HTTP/1.1\r\n\r\n");
	ck_assert_int_eq(parse_n(big, n, &l, &r), (long)n);
	ck_assert_int_eq(r.status, IMG_HTTP_BAD_REQUEST);
	/* exactly IMG_HTTP_TICKET_MAX is a ticket id */
	memmove(big + 12 + IMG_HTTP_TICKET_MAX, big + 13 + IMG_HTTP_TICKET_MAX,
		n - 13 - IMG_HTTP_TICKET_MAX);
	ck_assert_int_eq(parse_n(big, n - 1, &l, &r), (long)n - 1);
	ck_assert_int_eq(r.status, 0);
	ck_assert_uint_eq(strlen(r.ticket_id), IMG_HTTP_TICKET_MAX);

	/* header count: 100 pass, 101 are 431 */
	for (int count = 100; count <= 101; count++) {
		n = (size_t)snprintf(big, 20000, "GET /images/a HTTP/1.1\r\n");
		for (int i = 0; i < count; i++)
			n += (size_t)snprintf(big + n, 20000 - n, "X-%d: v\r\n", i);
		n += (size_t)snprintf(big + n, 20000 - n, "\r\n");
		long rc = parse_n(big, n, &l, &r);
		if (count == 100) {
			ck_assert_int_eq(rc, (long)n);
			ck_assert_uint_eq(r.nheaders, 100);
		} else {
			ck_assert_int_eq(rc, VD_ETOOBIG);
			ck_assert_int_eq(r.status, IMG_HTTP_HEADERS_TOO_LARGE);
		}
	}
	/* header section bytes: refused once max_header_bytes arrive without
	 * its end, even while the last line is still incomplete */
	n = (size_t)snprintf(big, 20000, "GET /images/a HTTP/1.1\r\nX-Big: ");
	while (n < 20000)
		big[n++] = 'z';
	ck_assert_int_eq(parse_n(big, l.max_header_bytes - 1, &l, &r), VD_AGAIN);
	ck_assert_int_eq(parse_n(big, l.max_header_bytes, &l, &r), VD_ETOOBIG);
	ck_assert_int_eq(r.status, IMG_HTTP_HEADERS_TOO_LARGE);
	ck_assert_int_eq(parse_n(big, 20000, &l, &r), VD_ETOOBIG);
	/* smaller configured limits apply */
	l.max_headers = 1;
	ck_assert_int_eq(parse_n(curl_get, strlen(curl_get), &l, &r), VD_ETOOBIG);
	l = lim_default();
	l.max_patch_body = 43;
	ck_assert_int_gt(parse_n(curl_patch, strlen(curl_patch), &l, &r), 0);
	ck_assert_int_eq(r.status, IMG_HTTP_PAYLOAD_TOO_LARGE);
	l.max_patch_body = 44;
	ck_assert_int_gt(parse_n(curl_patch, strlen(curl_patch), &l, &r), 0);
	ck_assert_int_eq(r.status, 0);
	free(big);
}
END_TEST

/* --- responses ---------------------------------------------------------- */

START_TEST(head_and_partial_content)
{
	char out[512];
	struct img_http_resp r = {
		.status = 206,
		.content_length = 65536,
		.content_type = "application/octet-stream",
		.content_disposition = "attachment",
		.cr_kind = IMG_CR_RANGE,
		.cr_first = 2097152,
		.cr_last = 2162687,
		.cr_complete = 1073741824,
		.date = 1,
	};
	long n = img_http_format_head(out, sizeof(out), &r);
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
	ck_assert_str_eq(out, "HTTP/1.1 206 Partial Content\r\n"
			      "server: vdsmd/" VDSMD_VERSION "\r\n"
			      "date: Thu, 01 Jan 1970 00:00:01 GMT\r\n"
			      "content-length: 65536\r\n"
			      "content-type: application/octet-stream\r\n"
			      "content-disposition: attachment\r\n"
			      "content-range: bytes 2097152-2162687/1073741824\r\n"
			      "\r\n");
	/* every shorter buffer is refused, never overrun */
	for (size_t cap = 0; cap < (size_t)n; cap++) {
		char *small = malloc(cap ? cap : 1);
		ck_assert_int_eq(img_http_format_head(small, cap, &r), VD_ETOOBIG);
		free(small);
	}
	struct img_http_resp ok = { .status = 200, .date = 1795100645 };
	n = img_http_format_head(out, sizeof(out), &ok);
	out[n] = '\0';
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 200 OK\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "date: Thu, 19 Nov 2026 15:04:05 GMT\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "content-length: 0\r\n"));
	ck_assert_ptr_null(strstr(out, "connection"));
	ck_assert_str_eq(img_http_reason(431), "Request Header Fields Too Large");
	ck_assert_str_eq(img_http_reason(299), "");
	n = img_http_format_continue(out, sizeof(out));
	ck_assert_int_eq(n, 25);
	ck_assert_int_eq(memcmp(out, "HTTP/1.1 100 Continue\r\n\r\n", 25), 0);
	ck_assert_int_eq(img_http_format_continue(out, 24), VD_ETOOBIG);
}
END_TEST

START_TEST(error_form)
{
	char out[2048];
	struct img_http_resp r = { .status = 403, .close = true };
	long n = img_http_format_error(out, sizeof(out), &r,
				       "You are not allowed to access this resource: No such ticket x");
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
	ck_assert_str_eq(out, "HTTP/1.1 403 Forbidden\r\n"
			      "server: vdsmd/" VDSMD_VERSION "\r\n"
			      "content-length: 62\r\n"
			      "content-type: text/plain; charset=UTF-8\r\n"
			      "connection: close\r\n"
			      "\r\n"
			      "You are not allowed to access this resource: No such ticket x\n");
	struct img_http_resp rr = { .status = 416, .cr_kind = IMG_CR_UNSATISFIED, .cr_complete = 4096 };
	n = img_http_format_error(out, sizeof(out), &rr, "Requested range out of allowed range");
	out[n] = '\0';
	ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 416 Requested Range Not Satisfiable\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "content-range: bytes */4096\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "\r\n\r\nRequested range out of allowed range\n"));
	/* a long message is cut, and the length header says what is sent */
	char msg[2000];
	memset(msg, 'm', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	n = img_http_format_error(out, sizeof(out), &r, msg);
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
	ck_assert_ptr_nonnull(strstr(out, "content-length: 513\r\n"));
	char *body = strstr(out, "\r\n\r\n") + 4;
	ck_assert_uint_eq(strlen(body), IMG_HTTP_ERRMSG_MAX + 1);
	ck_assert_int_eq(img_http_format_error(out, 200, &r, msg), VD_ETOOBIG);
}
END_TEST

static const char sock[] = "\0/org/ovirt/imageio";

START_TEST(options_json)
{
	struct vd_buf b = VD_BUF_INIT;
	struct img_http_options any = { .any_ticket = true, .unix_socket = sock,
					.unix_socket_len = sizeof(sock) - 1 };
	img_http_options_json(&b, &any);
	buf_putc(&b, '\0');
	ck_assert_str_eq(b.data, "{\"unix_socket\": \"\\u0000/org/ovirt/imageio\", "
				 "\"features\": [\"extents\", \"flush\", \"zero\"]}\n");
	ck_assert_str_eq(img_http_options_allow(&any), "OPTIONS,GET,PUT,PATCH");

	buf_reset(&b);
	struct img_http_options ro = { .readable = true, .max_readers = 8, .max_writers = 1 };
	img_http_options_json(&b, &ro);
	buf_putc(&b, '\0');
	ck_assert_str_eq(b.data, "{\"features\": [\"extents\"], \"max_readers\": 8, \"max_writers\": 1}\n");
	ck_assert_str_eq(img_http_options_allow(&ro), "OPTIONS,GET");

	buf_reset(&b);
	struct img_http_options rw = { .readable = true, .writable = true, .max_readers = 8,
				       .max_writers = 1 };
	img_http_options_json(&b, &rw);
	buf_putc(&b, '\0');
	ck_assert_str_eq(b.data, "{\"features\": [\"extents\", \"flush\", \"zero\"], "
				 "\"max_readers\": 8, \"max_writers\": 1}\n");
	/* "write" implies "read" */
	struct img_http_options wo = { .writable = true };
	ck_assert_str_eq(img_http_options_allow(&wo), "OPTIONS,GET,PUT,PATCH");
	struct img_http_options none = { 0 };
	ck_assert_str_eq(img_http_options_allow(&none), "OPTIONS");

	buf_reset(&b);
	img_http_json_string(&b, "a\"b\\c\n\x01\x7f\xc3\xa9", 10);
	buf_putc(&b, '\0');
	ck_assert_str_eq(b.data, "\"a\\\"b\\\\c\\n\\u0001\\u007f\xc3\xa9\"");
	buf_free(&b);
}
END_TEST

START_TEST(extents_json)
{
	struct img_extent v[] = {
		{ 0, 65536, false, false, true },
		{ 65536, 1073676288, true, false, false },
	};
	struct vd_buf b = VD_BUF_INIT;
	img_http_extents_json(&b, v, 2, IMG_EXTENTS_ZERO);
	buf_putc(&b, '\0');
	ck_assert_str_eq(b.data, "[{\"start\": 0, \"length\": 65536, \"zero\": false, \"hole\": false}, "
				 "{\"start\": 65536, \"length\": 1073676288, \"zero\": true, "
				 "\"hole\": false}]\n");
	buf_reset(&b);
	img_http_extents_json(&b, v, 2, IMG_EXTENTS_DIRTY);
	buf_putc(&b, '\0');
	ck_assert_str_eq(b.data, "[{\"start\": 0, \"length\": 65536, \"dirty\": true, \"zero\": false}, "
				 "{\"start\": 65536, \"length\": 1073676288, \"dirty\": false, "
				 "\"zero\": true}]\n");
	buf_reset(&b);
	img_http_extents_json(&b, v, 0, IMG_EXTENTS_ZERO);
	buf_putc(&b, '\0');
	ck_assert_str_eq(b.data, "[]\n");
	buf_free(&b);
}
END_TEST

static Suite *image_http_suite(void)
{
	Suite *s = suite_create("image_http");
	TCase *tc = tcase_create("parser");
	tcase_add_loop_test(tc, every_split_point, 0, (int)VD_ARRAY_SIZE(real_requests));
	tcase_add_test(tc, curl_and_python_fields);
	tcase_add_test(tc, pipelined_and_bare_lf);
	tcase_add_test(tc, keep_alive_rules);
	tcase_add_loop_test(tc, range_forms, 0, (int)VD_ARRAY_SIZE(range_cases));
	tcase_add_loop_test(tc, content_range_forms, 0, (int)VD_ARRAY_SIZE(crange_cases));
	tcase_add_test(tc, query_and_routes);
	tcase_add_loop_test(tc, every_refusal, 0, (int)VD_ARRAY_SIZE(refusals));
	tcase_add_test(tc, duplicate_equal_content_length);
	tcase_add_test(tc, limits);
	suite_add_tcase(s, tc);
	TCase *tr = tcase_create("response");
	tcase_add_test(tr, head_and_partial_content);
	tcase_add_test(tr, error_form);
	tcase_add_test(tr, options_json);
	tcase_add_test(tr, extents_json);
	suite_add_tcase(s, tr);
	return s;
}

int main(void)
{
	return check_run(image_http_suite());
}
