/* vdsmd/http.c - HTTP/1.1 on the STOMP port (PROTOCOL.md section 5):
 * GET /health, GET /metrics, POST /jsonrpc; keep-alive and pipelining
 * (answered in order), bounded header section and body.
 *
 * http_parse() is a pure function over a buffer (fuzzed directly). */
#include "server.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/log.h"
#include "../rpc/rpc.h"

static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool token_eq(const char *p, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* Does the comma-separated list v contain tok (case-insensitive)? */
static bool list_has(const char *v, size_t n, const char *tok)
{
	size_t i = 0, tl = strlen(tok);
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t st = i;
		while (i < n && v[i] != ',')
			i++;
		size_t e = i;
		while (e > st && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - st == tl && strncasecmp(v + st, tok, tl) == 0)
			return true;
	}
	return false;
}

long http_parse(const char *buf, size_t len, size_t max_header, struct http_req *r)
{
	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	/* Find the end of the header section within the bound. */
	size_t lim = VD_MIN(len, max_header), end = 0;
	for (size_t i = 0; i < lim; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n') {
			end = i + 2;
			break;
		}
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
			end = i + 3;
			break;
		}
	}
	if (!end || end > max_header)
		return len >= max_header ? VD_ETOOBIG : VD_AGAIN;
	r->header_len = end;
	/* Request line: METHOD SP target SP HTTP/1.x */
	size_t i = 0;
	while (i < end && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == 0 || buf[i] != ' ')
		return VD_EPROTO;
	r->method = buf;
	r->method_len = i++;
	size_t ps = i;
	while (i < end && buf[i] != ' ' && (unsigned char)buf[i] > 0x20 && buf[i] != 0x7f)
		i++;
	if (i == ps || buf[i] != ' ' || buf[ps] != '/')
		return VD_EPROTO;
	r->path = buf + ps;
	r->path_len = i - ps;
	i++;
	if (end - i < 9 || memcmp(buf + i, "HTTP/1.", 7) != 0 || buf[i + 7] < '0' ||
	    buf[i + 7] > '9')
		return VD_EPROTO;
	r->minor = buf[i + 7] - '0';
	i += 8;
	if (i < end && buf[i] == '\r')
		i++;
	if (i >= end || buf[i] != '\n')
		return VD_EPROTO;
	i++;
	/* Header fields. */
	while (i < end) {
		if (buf[i] == '\n' || (buf[i] == '\r' && buf[i + 1] == '\n'))
			break;
		size_t ns = i;
		while (i < end && is_tchar((unsigned char)buf[i]))
			i++;
		if (i == ns || buf[i] != ':')
			return VD_EPROTO;
		size_t nl = i - ns;
		i++;
		while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		size_t vs = i;
		while (i < end && buf[i] != '\n') {
			unsigned char ch = (unsigned char)buf[i];
			if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch == 0x7f)
				return VD_EPROTO;
			i++;
		}
		if (i >= end)
			return VD_EPROTO;
		size_t ve = i;
		i++;
		if (ve > vs && buf[ve - 1] == '\r')
			ve--;
		while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
			ve--;
		const char *n = buf + ns, *v = buf + vs;
		size_t vl = ve - vs;
		if (token_eq(n, nl, "content-length")) {
			if (vl == 0 || vl > 15)
				return VD_EPROTO;
			long long x = 0;
			for (size_t k = 0; k < vl; k++) {
				if (v[k] < '0' || v[k] > '9')
					return VD_EPROTO;
				x = x * 10 + (v[k] - '0');
			}
			if (r->content_length >= 0 && r->content_length != x)
				return VD_EPROTO;
			r->content_length = x;
		} else if (token_eq(n, nl, "transfer-encoding")) {
			r->chunked = true; /* any coding: we only take Content-Length */
		} else if (token_eq(n, nl, "connection")) {
			if (list_has(v, vl, "close"))
				r->conn_close = true;
			if (list_has(v, vl, "keep-alive"))
				r->conn_keep_alive = true;
		} else if (token_eq(n, nl, "content-type")) {
			r->content_type = v;
			r->ct_len = vl;
		}
	}
	return (long)end;
}

/* ---- responses --------------------------------------------------------- */

static const char *status_text(int code)
{
	switch (code) {
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 411: return "Length Required";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

static void respond(struct vd_conn *c, int code, const char *ctype, const char *extra,
		    const char *body, size_t len, bool head)
{
	struct vd_buf *o = &c->out;
	buf_printf(o, "HTTP/1.1 %d %s\r\nServer: vdsmd/%s\r\n", code, status_text(code),
		   VDSMD_VERSION);
	if (code != 204)
		buf_printf(o, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, len);
	if (extra)
		buf_puts(o, extra);
	if (c->http_close)
		buf_puts(o, "Connection: close\r\n");
	buf_puts(o, "\r\n");
	if (!head && code != 204)
		buf_append(o, body, len);
	if (code >= 400)
		c->srv->n.http_errors++;
}

/* An error answer after which the connection closes (framing unknown). */
static long fail(struct vd_conn *c, int code, const char *msg)
{
	c->http_close = true;
	char body[160];
	int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
	respond(c, code, "application/json", NULL, body, (size_t)n, false);
	log_info("http %s: %d %s", c->peer, code, msg);
	return VD_EPROTO;
}

struct http_pending {
	struct vd_conn *conn;
};

static void http_reply(void *ctx, const struct rpc_response *r)
{
	struct http_pending *p = ctx;
	struct vd_conn *c = p->conn;
	free(p);
	/* charged before it is held, as STOMP replies are: when the budget has
	 * no room even after closing bigger holders, c itself was closed */
	if (!c->dead && r->len)
		(void)guard_admit_buf(c, &c->out, r->len + 256);
	if (!c->dead) {
		if (r->len)
			respond(c, 200, r->codec->content_type, NULL, r->bytes, r->len, false);
		else
			respond(c, 204, NULL, NULL, NULL, 0, false);
		c->http_busy = false;
		if (c->http_close)
			c->closing = true;
		if (c != c->srv->feeding) {
			/* Answered later (worker pool): continue with pipelined input. */
			conn_process(c);
			conn_flush(c);
		}
	}
	conn_unref(c);
}

long http_conn_feed(struct vd_conn *c, char *buf, size_t len)
{
	if (c->http_busy)
		return 0;
	struct vd_server *s = c->srv;
	struct vdsmd *d = s->d;
	struct http_req r;
	size_t max_header = VD_MAX(d->cfg.max_header_line * 2, (size_t)1024);
	long h = http_parse(buf, len, max_header, &r);
	if (h == VD_AGAIN)
		return 0;
	if (h == VD_ETOOBIG)
		return fail(c, 431, "header section too large");
	if (h < 0)
		return fail(c, 400, "malformed request");
	if (r.chunked)
		return fail(c, 501, "chunked transfer encoding is not supported");
	size_t body_len = r.content_length > 0 ? (size_t)r.content_length : 0;
	if (r.content_length > (long long)d->cfg.max_frame_size)
		return fail(c, 413, "body too large");
	if (len - (size_t)h < body_len)
		return 0; /* wait for the body (bounded just above) */
	s->n.http_requests++;
	c->http_close = r.minor == 0 ? !r.conn_keep_alive : r.conn_close;
	size_t used = (size_t)h + body_len;
	size_t plen = r.path_len;
	const char *q = memchr(r.path, '?', plen);
	if (q)
		plen = (size_t)(q - r.path);
	bool get = token_eq(r.method, r.method_len, "GET");
	bool head = token_eq(r.method, r.method_len, "HEAD");
	log_debug("http %s: %.*s %.*s", c->peer, (int)r.method_len, r.method, (int)r.path_len, r.path);
	if (token_eq(r.path, plen, "/health")) {
		if (!get && !head) {
			respond(c, 405, "application/json", "Allow: GET, HEAD\r\n",
				"{\"error\":\"method not allowed\"}\n", 31, false);
		} else if (server_ready(s)) {
			respond(c, 200, "application/json", NULL, "{\"status\":\"ok\"}", 15, head);
		} else {
			respond(c, 503, "application/json", "Retry-After: 5\r\n",
				"{\"status\":\"starting\"}", 21, head);
		}
	} else if (token_eq(r.path, plen, "/metrics")) {
		if (!get && !head) {
			respond(c, 405, "application/json", "Allow: GET, HEAD\r\n",
				"{\"error\":\"method not allowed\"}\n", 31, false);
		} else {
			struct vd_buf m = VD_BUF_INIT;
			metrics_format(s, &m);
			respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, m.data,
				m.len, head);
			buf_free(&m);
		}
	} else if (token_eq(r.path, plen, "/jsonrpc")) {
		if (!token_eq(r.method, r.method_len, "POST")) {
			respond(c, 405, "application/json", "Allow: POST\r\n",
				"{\"error\":\"method not allowed\"}\n", 31, false);
		} else if (r.content_length < 0) {
			return fail(c, 411, "Content-Length required");
		} else {
			const struct vd_codec *codec = daemon_codec_for(d, r.content_type, r.ct_len);
			if (!codec) {
				respond(c, 415, "application/json", NULL,
					"{\"error\":\"unsupported content type\"}\n", 36, false);
				goto done;
			}
			struct http_pending *p = xmalloc(sizeof(*p));
			p->conn = c;
			conn_ref(c);
			c->http_busy = true;
			struct rpc_request_info info = {
				.codec = codec, .transport = "http",
				.local_addr = c->local[0] ? c->local : NULL,
			};
			rpc_dispatch(d->rpc, &info, buf + h, body_len, http_reply, p);
			return (long)used;
		}
	} else {
		respond(c, 404, "application/json", NULL, "{\"error\":\"not found\"}\n", 22, false);
	}
done:
	if (c->http_close)
		c->closing = true;
	return (long)used;
}
