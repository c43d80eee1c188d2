/* vdsmd/image/http_resp.c - status lines, headers and JSON bodies of the
 * image server (see http_resp.h). */
#include "http_resp.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef VDSMD_VERSION
#define VDSMD_VERSION "0"
#endif

/* Python's http.HTTPStatus phrases, which imageio's responses carry. */
const char *img_http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Request Entity Too Large";
	case 414: return "Request-URI Too Long";
	case 416: return "Requested Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "";
	}
}

/* snprintf appender over a fixed buffer; *ok turns false once it overflows. */
struct fmt {
	char *out;
	size_t cap, len;
	bool ok;
};

static void VD_PRINTF(2, 3) put(struct fmt *f, const char *fmt, ...)
{
	if (!f->ok)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(f->out + f->len, f->cap - f->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= f->cap - f->len) {
		f->ok = false;
		return;
	}
	f->len += (size_t)n;
}

static void put_bytes(struct fmt *f, const char *p, size_t n)
{
	if (!f->ok)
		return;
	if (n > f->cap - f->len) {
		f->ok = false;
		return;
	}
	memcpy(f->out + f->len, p, n);
	f->len += n;
}

/* IMF-fixdate ("Wed, 02 Dec 2026 15:04:05 GMT"), locale-free. */
static void put_date(struct fmt *f, time_t t)
{
	static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	struct tm tm;
	if (!gmtime_r(&t, &tm) || tm.tm_wday < 0 || tm.tm_wday > 6 || tm.tm_mon < 0 ||
	    tm.tm_mon > 11)
		return;
	put(f, "date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n", days[tm.tm_wday], tm.tm_mday,
	    months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void put_head(struct fmt *f, const struct img_http_resp *r)
{
	put(f, "HTTP/1.1 %d %s\r\n", r->status, img_http_reason(r->status));
	put(f, "server: vdsmd/%s\r\n", VDSMD_VERSION);
	if (r->date)
		put_date(f, r->date);
	put(f, "content-length: %" PRIu64 "\r\n", r->content_length);
	if (r->content_type)
		put(f, "content-type: %s\r\n", r->content_type);
	if (r->content_disposition)
		put(f, "content-disposition: %s\r\n", r->content_disposition);
	if (r->allow)
		put(f, "allow: %s\r\n", r->allow);
	if (r->cr_kind == IMG_CR_RANGE)
		put(f, "content-range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", r->cr_first,
		    r->cr_last, r->cr_complete);
	else if (r->cr_kind == IMG_CR_UNSATISFIED)
		put(f, "content-range: bytes */%" PRIu64 "\r\n", r->cr_complete);
	if (r->close)
		put(f, "connection: close\r\n");
	put(f, "\r\n");
}

long img_http_format_head(char *out, size_t cap, const struct img_http_resp *r)
{
	struct fmt f = { out, cap, 0, true };
	put_head(&f, r);
	return f.ok ? (long)f.len : VD_ETOOBIG;
}

long img_http_format_error(char *out, size_t cap, const struct img_http_resp *r, const char *msg)
{
	size_t ml = strnlen(msg, IMG_HTTP_ERRMSG_MAX);
	struct img_http_resp e = *r;
	e.content_type = "text/plain; charset=UTF-8";
	e.content_disposition = NULL;
	e.content_length = ml + 1;
	struct fmt f = { out, cap, 0, true };
	put_head(&f, &e);
	put_bytes(&f, msg, ml);
	put_bytes(&f, "\n", 1);
	return f.ok ? (long)f.len : VD_ETOOBIG;
}

long img_http_format_continue(char *out, size_t cap)
{
	static const char c[] = "HTTP/1.1 100 Continue\r\n\r\n";
	if (cap < sizeof(c) - 1)
		return VD_ETOOBIG;
	memcpy(out, c, sizeof(c) - 1);
	return (long)(sizeof(c) - 1);
}

const char *img_http_options_allow(const struct img_http_options *o)
{
	/* "write" implies "read" (imageio auth.py Ticket.may) */
	if (o->any_ticket || o->writable)
		return "OPTIONS,GET,PUT,PATCH";
	if (o->readable)
		return "OPTIONS,GET";
	return "OPTIONS";
}

void img_http_json_string(struct vd_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	buf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		switch (ch) {
		case '"': buf_puts(b, "\\\""); break;
		case '\\': buf_puts(b, "\\\\"); break;
		case '\n': buf_puts(b, "\\n"); break;
		case '\r': buf_puts(b, "\\r"); break;
		case '\t': buf_puts(b, "\\t"); break;
		case '\b': buf_puts(b, "\\b"); break;
		case '\f': buf_puts(b, "\\f"); break;
		default:
			if (ch < 0x20 || ch == 0x7f) {
				char u[6] = { '\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15] };
				buf_append(b, u, sizeof(u));
			} else {
				buf_putc(b, (char)ch);
			}
		}
	}
	buf_putc(b, '"');
}

/* imageio: BASE_FEATURES when the ticket may read, ALL_FEATURES when it may
 * write; "checksum" is not served here, so it is not announced. */
void img_http_options_json(struct vd_buf *b, const struct img_http_options *o)
{
	bool comma = false;
	buf_putc(b, '{');
	if (o->unix_socket) {
		buf_puts(b, "\"unix_socket\": ");
		img_http_json_string(b, o->unix_socket, o->unix_socket_len);
		comma = true;
	}
	const char *features = NULL;
	if (o->any_ticket || o->writable)
		features = "[\"extents\", \"flush\", \"zero\"]";
	else if (o->readable)
		features = "[\"extents\"]";
	if (features) {
		buf_printf(b, "%s\"features\": %s", comma ? ", " : "", features);
		comma = true;
	}
	if (!o->any_ticket)
		buf_printf(b, "%s\"max_readers\": %u, \"max_writers\": %u", comma ? ", " : "",
			   o->max_readers, o->max_writers);
	buf_puts(b, "}\n");
}

void img_http_extents_json(struct vd_buf *b, const struct img_extent *v, size_t n,
			   enum img_extent_context ctx)
{
	buf_putc(b, '[');
	for (size_t i = 0; i < n; i++) {
		const struct img_extent *e = &v[i];
		if (ctx == IMG_EXTENTS_DIRTY)
			buf_printf(b, "%s{\"start\": %" PRIu64 ", \"length\": %" PRIu64
				      ", \"dirty\": %s, \"zero\": %s}",
				   i ? ", " : "", e->start, e->length, e->dirty ? "true" : "false",
				   e->zero ? "true" : "false");
		else
			buf_printf(b, "%s{\"start\": %" PRIu64 ", \"length\": %" PRIu64
				      ", \"zero\": %s, \"hole\": %s}",
				   i ? ", " : "", e->start, e->length, e->zero ? "true" : "false",
				   e->hole ? "true" : "false");
	}
	buf_puts(b, "]\n");
}
