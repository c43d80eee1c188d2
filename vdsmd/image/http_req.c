/* vdsmd/image/http_req.c - the image server's request parser (see http_req.h).
 *
 * One pass over the buffer each call, no state kept between calls: the
 * header section is small (bounded by max_header_bytes) and is re-scanned
 * only while it is incomplete.  Nothing is allocated; the only copy is the
 * percent-decoded ticket id into the fixed array of the request. */
#include "http_req.h"

#include <string.h>
#include <strings.h>

void img_http_limits_default(struct img_http_limits *lim)
{
	lim->max_request_line = 4096;
	lim->max_header_bytes = 16384;
	lim->max_headers = 100;
	lim->max_patch_body = 4096;
}

static const char *const method_names[] = {
	[IMG_HTTP_M_NONE] = "",
	[IMG_HTTP_GET] = "GET",
	[IMG_HTTP_PUT] = "PUT",
	[IMG_HTTP_PATCH] = "PATCH",
	[IMG_HTTP_OPTIONS] = "OPTIONS",
	[IMG_HTTP_HEAD] = "HEAD",
	[IMG_HTTP_POST] = "POST",
	[IMG_HTTP_DELETE] = "DELETE",
};

const char *img_http_method_name(enum img_http_method m)
{
	if ((size_t)m >= VD_ARRAY_SIZE(method_names))
		return "";
	return method_names[m];
}

static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static bool slice_eq(const char *p, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(p, lit, n) == 0;
}

static bool slice_ieq(const char *p, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* Does the comma-separated list v[0..n) hold tok (case-insensitive)? */
static bool list_has(const char *v, size_t n, const char *tok)
{
	size_t i = 0;
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t st = i;
		while (i < n && v[i] != ',')
			i++;
		size_t e = i;
		while (e > st && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > st && slice_ieq(v + st, e - st, tok))
			return true;
	}
	return false;
}

/* Decimal digits only, at least one, no sign, no overflow past INT64_MAX.
 * Returns the number of digits read (0 on failure). */
static size_t parse_u63(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
		unsigned d = (unsigned)(p[i] - '0');
		if (v > ((uint64_t)INT64_MAX - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	*out = v;
	return i;
}

/* Range: "bytes=" [first] "-" [last], exactly (imageio's regex
 * bytes=(\d*)-(\d*)$: no spaces, no unit case folding, one range). */
static void parse_range(const char *v, size_t n, struct img_http_range *r)
{
	memset(r, 0, sizeof(*r));
	r->present = true;
	r->bad = true;
	if (n < 6 || memcmp(v, "bytes=", 6) != 0)
		return;
	size_t i = 6;
	uint64_t first = 0, last = 0;
	size_t nf = parse_u63(v + i, n - i, &first);
	if (nf == 0 && i < n && v[i] >= '0' && v[i] <= '9')
		return; /* overflow */
	i += nf;
	if (i >= n || v[i] != '-')
		return;
	i++;
	size_t nl = parse_u63(v + i, n - i, &last);
	if (nl == 0 && i < n && v[i] >= '0' && v[i] <= '9')
		return;
	i += nl;
	if (i != n)
		return; /* junk, or a second range */
	if (nf == 0) {
		if (nl == 0)
			return; /* "bytes=-" */
		r->suffix = true;
		r->has_last = true;
		r->last = last;
	} else {
		r->first = first;
		if (nl) {
			if (first > last)
				return;
			r->has_last = true;
			r->last = last;
		}
	}
	r->bad = false;
}

/* Content-Range: "bytes " first "-" (last | "*") "/" (complete | "*"). */
static void parse_crange(const char *v, size_t n, struct img_http_crange *c)
{
	memset(c, 0, sizeof(*c));
	c->present = true;
	c->bad = true;
	if (n < 6 || memcmp(v, "bytes ", 6) != 0)
		return;
	size_t i = 6, k;
	if ((k = parse_u63(v + i, n - i, &c->first)) == 0)
		return;
	i += k;
	if (i >= n || v[i] != '-')
		return;
	i++;
	if (i < n && v[i] == '*') {
		i++;
	} else {
		if ((k = parse_u63(v + i, n - i, &c->last)) == 0)
			return;
		i += k;
		c->has_last = true;
	}
	if (i >= n || v[i] != '/')
		return;
	i++;
	if (i < n && v[i] == '*') {
		i++;
	} else {
		if ((k = parse_u63(v + i, n - i, &c->complete)) == 0)
			return;
		i += k;
		c->has_complete = true;
	}
	if (i != n)
		return;
	if (c->has_last && c->last < c->first)
		return;
	if (c->has_last && c->has_complete && c->last >= c->complete)
		return;
	c->bad = false;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Percent-decodes p[0..n) into out[0..cap) like Python's unquote (an
 * invalid escape stays as it is).  Returns the decoded length, or -1 when it
 * does not fit. */
static long unquote(const char *p, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = p[i];
		int h, l;
		if (ch == '%' && i + 2 < n && (h = hexval(p[i + 1])) >= 0 &&
		    (l = hexval(p[i + 2])) >= 0) {
			ch = (char)(h * 16 + l);
			i += 2;
		}
		if (o >= cap)
			return -1;
		out[o++] = ch;
	}
	return (long)o;
}

static bool ends_with(const char *p, size_t n, const char *suf, size_t *cut)
{
	size_t sl = strlen(suf);
	if (n < sl || memcmp(p + n - sl, suf, sl) != 0)
		return false;
	*cut = n - sl;
	return true;
}

/* Splits the decoded path into resource and ticket id, imageio's routes:
 * /images/(.*)/extents, /images/(.*)/checksum/algorithms,
 * /images/(.*)/checksum, /images/(.*). */
static void route(struct img_http_req *r)
{
	static const char prefix[] = "/images/";
	const size_t pl = sizeof(prefix) - 1;
	char dec[IMG_HTTP_TICKET_MAX + 32];
	long dl = unquote(r->path.p, r->path.n, dec, sizeof(dec));
	if (dl < 0) {
		/* Longer than any ticket id with any suffix: still a 404 when
		 * it is not under /images/ at all. */
		if (r->path.n < pl || memcmp(r->path.p, prefix, pl) != 0) {
			r->resource = IMG_RES_NONE;
			r->status = IMG_HTTP_NOT_FOUND;
			r->reason = "No handler for path";
			return;
		}
		r->resource = IMG_RES_IMAGE;
		r->status = IMG_HTTP_BAD_REQUEST;
		r->reason = "Ticket id too long";
		return;
	}
	size_t n = (size_t)dl;
	if (n < pl || memcmp(dec, prefix, pl) != 0) {
		r->resource = IMG_RES_NONE;
		r->status = IMG_HTTP_NOT_FOUND;
		r->reason = "No handler for path";
		return;
	}
	const char *id = dec + pl;
	size_t idn = n - pl, cut;
	r->resource = IMG_RES_IMAGE;
	if (ends_with(id, idn, "/extents", &cut)) {
		r->resource = IMG_RES_EXTENTS;
		idn = cut;
	} else if (ends_with(id, idn, "/checksum/algorithms", &cut) ||
		   ends_with(id, idn, "/checksum", &cut)) {
		r->resource = IMG_RES_CHECKSUM;
		idn = cut;
	}
	if (idn > IMG_HTTP_TICKET_MAX || memchr(id, '\0', idn)) {
		r->status = IMG_HTTP_BAD_REQUEST;
		r->reason = idn > IMG_HTTP_TICKET_MAX ? "Ticket id too long" : "Invalid ticket id";
		return;
	}
	memcpy(r->ticket_id, id, idn);
	r->ticket_id[idn] = '\0';
	if (idn == 0) {
		r->status = IMG_HTTP_BAD_REQUEST;
		r->reason = "Ticket id is required";
	}
}

/* key=value pairs split on '&'; the last occurrence of a key wins
 * (urllib.parse.parse_qsl with keep_blank_values). */
static void parse_query(const char *q, size_t n, struct img_http_req *r)
{
	size_t i = 0;
	while (i <= n) {
		size_t st = i;
		while (i < n && q[i] != '&')
			i++;
		const char *kv = q + st;
		size_t kvn = i - st;
		i++;
		if (kvn == 0)
			continue;
		const char *eq = memchr(kv, '=', kvn);
		size_t kn = eq ? (size_t)(eq - kv) : kvn;
		const char *v = eq ? eq + 1 : kv + kvn;
		size_t vn = eq ? kvn - kn - 1 : 0;
		if (slice_eq(kv, kn, "flush"))
			r->flush = slice_eq(v, vn, "y") ? IMG_FLUSH_Y
				 : slice_eq(v, vn, "n") ? IMG_FLUSH_N : IMG_FLUSH_BAD;
		else if (slice_eq(kv, kn, "context"))
			r->context = slice_eq(v, vn, "zero") ? IMG_CONTEXT_ZERO
				   : slice_eq(v, vn, "dirty") ? IMG_CONTEXT_DIRTY : IMG_CONTEXT_BAD;
		else if (slice_eq(kv, kn, "close"))
			r->close_query = slice_eq(v, vn, "y");
	}
}

static long fail(struct img_http_req *r, int status, const char *reason, int err)
{
	r->status = status;
	r->reason = reason;
	r->keep_alive = false;
	return err;
}

/* Request line "METHOD SP target SP HTTP/1.x" in buf[0..n) (line end
 * excluded). */
static long parse_request_line(const char *buf, size_t n, struct img_http_req *r)
{
	size_t i = 0;
	while (i < n && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == 0 || i >= n || buf[i] != ' ')
		return fail(r, IMG_HTTP_BAD_REQUEST, "Bad request syntax", VD_EPROTO);
	r->method_name.p = buf;
	r->method_name.n = i;
	for (size_t m = 1; m < VD_ARRAY_SIZE(method_names); m++)
		if (slice_eq(buf, i, method_names[m]))
			r->method = (enum img_http_method)m;
	size_t ts = ++i;
	while (i < n && (unsigned char)buf[i] > 0x20 && buf[i] != 0x7f)
		i++;
	if (i == ts || i >= n || buf[i] != ' ')
		return fail(r, IMG_HTTP_BAD_REQUEST, "Bad request syntax", VD_EPROTO);
	r->target.p = buf + ts;
	r->target.n = i - ts;
	i++;
	const char *v = buf + i;
	size_t vn = n - i;
	if (vn < 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
	    v[7] < '0' || v[7] > '9' || vn != 8)
		return fail(r, IMG_HTTP_BAD_REQUEST, "Bad request version", VD_EPROTO);
	if (v[5] >= '2')
		return fail(r, IMG_HTTP_VERSION_NOT_SUPPORTED, "Invalid HTTP version", VD_EPROTO);
	if (v[5] != '1')
		return fail(r, IMG_HTTP_BAD_REQUEST, "Bad request version", VD_EPROTO);
	r->version_minor = v[7] - '0';
	return 0;
}

/* One header line buf[0..n) (line end excluded). */
static long parse_header(const char *buf, size_t n, struct img_http_req *r, bool *conn_close,
			 bool *conn_keep)
{
	if (n && (buf[0] == ' ' || buf[0] == '\t'))
		return fail(r, IMG_HTTP_BAD_REQUEST, "Obsolete header line folding", VD_EPROTO);
	size_t i = 0;
	while (i < n && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == 0 || i >= n || buf[i] != ':')
		return fail(r, IMG_HTTP_BAD_REQUEST, "Invalid header line", VD_EPROTO);
	const char *name = buf;
	size_t nn = i++;
	while (i < n && (buf[i] == ' ' || buf[i] == '\t'))
		i++;
	size_t e = n;
	while (e > i && (buf[e - 1] == ' ' || buf[e - 1] == '\t'))
		e--;
	const char *v = buf + i;
	size_t vn = e - i;
	for (size_t k = 0; k < vn; k++) {
		unsigned char ch = (unsigned char)v[k];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return fail(r, IMG_HTTP_BAD_REQUEST, "Invalid header value", VD_EPROTO);
	}
	if (slice_ieq(name, nn, "content-length")) {
		uint64_t cl;
		if (vn == 0 || parse_u63(v, vn, &cl) != vn)
			return fail(r, IMG_HTTP_BAD_REQUEST, "Invalid Content-Length", VD_EPROTO);
		if (r->content_length >= 0 && (uint64_t)r->content_length != cl)
			return fail(r, IMG_HTTP_BAD_REQUEST, "Conflicting Content-Length", VD_EPROTO);
		r->content_length = (int64_t)cl;
	} else if (slice_ieq(name, nn, "transfer-encoding")) {
		r->chunked = true;
	} else if (slice_ieq(name, nn, "range")) {
		parse_range(v, vn, &r->range);
	} else if (slice_ieq(name, nn, "content-range")) {
		parse_crange(v, vn, &r->crange);
	} else if (slice_ieq(name, nn, "content-type")) {
		r->content_type.p = v;
		r->content_type.n = vn;
	} else if (slice_ieq(name, nn, "connection")) {
		if (list_has(v, vn, "close"))
			*conn_close = true;
		if (list_has(v, vn, "keep-alive"))
			*conn_keep = true;
	} else if (slice_ieq(name, nn, "expect")) {
		if (slice_ieq(v, vn, "100-continue"))
			r->expect_continue = true;
	}
	return 0;
}

/* Finds the end of the line starting at buf[i]: returns the index of '\n'
 * (the line's text ends before an optional '\r'), or -1 when not in
 * buf[i..lim). */
static long line_end(const char *buf, size_t i, size_t lim)
{
	const char *nl = i < lim ? memchr(buf + i, '\n', lim - i) : NULL;
	return nl ? nl - buf : -1;
}

static size_t text_end(const char *buf, size_t st, size_t nl)
{
	return (nl > st && buf[nl - 1] == '\r') ? nl - 1 : nl;
}

long img_http_parse(const char *buf, size_t len, const struct img_http_limits *lim,
		    struct img_http_req *r)
{
	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	/* Empty lines before a request line are skipped (RFC 9112 2.2). */
	size_t i = 0;
	while (i < len && i < lim->max_request_line && (buf[i] == '\r' || buf[i] == '\n'))
		i++;
	size_t rl_lim = VD_MIN(len, i + lim->max_request_line);
	long nl = line_end(buf, i, rl_lim);
	if (nl < 0) {
		if (len - i >= lim->max_request_line)
			return fail(r, IMG_HTTP_URI_TOO_LONG, "Request-URI Too Long", VD_ETOOBIG);
		return VD_AGAIN;
	}
	long rc = parse_request_line(buf + i, text_end(buf, i, (size_t)nl) - i, r);
	if (rc < 0)
		return rc;
	/* Header lines up to the empty line, within max_header_bytes. */
	size_t hdr_lim = VD_MIN(len, lim->max_header_bytes);
	bool conn_close = false, conn_keep = false;
	size_t pos = (size_t)nl + 1;
	for (;;) {
		nl = line_end(buf, pos, hdr_lim);
		if (nl < 0) {
			if (len >= lim->max_header_bytes)
				return fail(r, IMG_HTTP_HEADERS_TOO_LARGE, "Request header fields too large",
					    VD_ETOOBIG);
			return VD_AGAIN;
		}
		size_t te = text_end(buf, pos, (size_t)nl);
		if (te == pos) {
			pos = (size_t)nl + 1;
			break;
		}
		if (++r->nheaders > lim->max_headers)
			return fail(r, IMG_HTTP_HEADERS_TOO_LARGE, "Too many headers", VD_ETOOBIG);
		rc = parse_header(buf + pos, te - pos, r, &conn_close, &conn_keep);
		if (rc < 0)
			return rc;
		pos = (size_t)nl + 1;
	}
	r->header_len = pos;
	/* Keep-alive as Python's http.server decides it for an HTTP/1.1 server. */
	if (r->version_minor >= 1)
		r->keep_alive = !conn_close;
	else
		r->keep_alive = conn_keep && !conn_close;
	if (r->version_minor < 1)
		r->expect_continue = false;

	const char *q = memchr(r->target.p, '?', r->target.n);
	r->path.p = r->target.p;
	r->path.n = q ? (size_t)(q - r->target.p) : r->target.n;
	if (q)
		parse_query(q + 1, r->target.n - r->path.n - 1, r);

	/* Framed, but refused (the later checks take precedence).  A body the
	 * server will not read ends the connection, as in imageio. */
	bool body = r->content_length > 0;
	route(r);
	if (r->chunked) {
		r->status = IMG_HTTP_BAD_REQUEST;
		r->reason = "Transfer-Encoding is not supported, Content-Length header is required";
		r->keep_alive = false; /* the body's end is unknown */
	} else if (r->method == IMG_HTTP_M_NONE) {
		r->status = IMG_HTTP_METHOD_NOT_ALLOWED;
		r->reason = "Invalid method";
	} else if (r->method == IMG_HTTP_PATCH && body &&
		   (uint64_t)r->content_length > lim->max_patch_body) {
		r->status = IMG_HTTP_PAYLOAD_TOO_LARGE;
		r->reason = "PATCH request body too large";
	} else if (r->method == IMG_HTTP_PUT && r->content_length < 0) {
		r->status = IMG_HTTP_BAD_REQUEST;
		r->reason = "Content-Length header is required";
	}
	if (r->status && body)
		r->keep_alive = false;
	return (long)pos;
}
