/* vdsmd/image/http_resp.h - the image server's response formatting: status
 * line and headers into a caller buffer, imageio's error form, and the JSON
 * bodies of OPTIONS and /extents.
 *
 * Pure: no sockets, no clock (the caller passes the Date), no allocation
 * beyond the vd_buf a JSON body is appended to.  Header names are written in
 * lower case, as imageio writes them.
 *
 * imageio's error form (http.py Response.send_error): the status, a
 * "content-type: text/plain; charset=UTF-8" body holding the message and a
 * newline, a content-range for 416 ("bytes * /<available>"), and
 * "connection: close" when the server ends the connection. */
#ifndef VD_IMAGE_HTTP_RESP_H
#define VD_IMAGE_HTTP_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../../common/buf.h"
#include "backend.h"

enum img_http_crange_kind {
	IMG_CR_NONE = 0,
	IMG_CR_RANGE,        /* bytes first-last/complete (a 206 answer) */
	IMG_CR_UNSATISFIED,  /* bytes * /complete (a 416 answer) */
};

struct img_http_resp {
	int status;
	uint64_t content_length;        /* always written */
	const char *content_type;       /* NULL: none */
	const char *content_disposition;/* NULL: none */
	const char *allow;              /* NULL: none */
	enum img_http_crange_kind cr_kind;
	uint64_t cr_first, cr_last, cr_complete;
	bool close;                     /* connection: close */
	time_t date;                    /* (time_t)0: no date header */
};

/* Messages of error bodies are cut at this many bytes. */
#define IMG_HTTP_ERRMSG_MAX 512

/* The reason phrase for a status ("Partial Content"); "" when unknown. */
const char *img_http_reason(int status);

/* Writes the status line and headers, ending with the empty line, into
 * out[0..cap).  Returns the length written, or VD_ETOOBIG when it does not
 * fit (out is then unspecified). */
long img_http_format_head(char *out, size_t cap, const struct img_http_resp *r);

/* A complete error response (head and body) in imageio's form: r->status,
 * r->close, r->cr_* and r->date are used; the content type and length are
 * set here.  msg is cut at IMG_HTTP_ERRMSG_MAX bytes.  Returns the length or
 * VD_ETOOBIG. */
long img_http_format_error(char *out, size_t cap, const struct img_http_resp *r, const char *msg);

/* "HTTP/1.1 100 Continue\r\n\r\n" into out; the length or VD_ETOOBIG. */
long img_http_format_continue(char *out, size_t cap);

/* What OPTIONS answers (imageio handlers/images.py options()). */
struct img_http_options {
	bool any_ticket;          /* OPTIONS /images/ *: every feature, no limits */
	bool readable, writable;  /* the ticket's ops */
	unsigned max_readers, max_writers;
	const char *unix_socket;  /* NULL: not listening; may start with NUL */
	size_t unix_socket_len;
};

/* The allow header value: "OPTIONS,GET,PUT,PATCH" (or a subset). */
const char *img_http_options_allow(const struct img_http_options *o);

/* Appends the JSON document (with imageio's ", " and ": " separators and
 * a trailing newline) to b. */
void img_http_options_json(struct vd_buf *b, const struct img_http_options *o);

/* Appends the extent list as imageio sends it:
 * zero context: [{"start": 0, "length": 65536, "zero": false, "hole": false}, ...]
 * dirty context: [{"start": 0, "length": 65536, "dirty": true, "zero": false}, ...]
 * with a trailing newline.  The caller bounds n (the backend does). */
void img_http_extents_json(struct vd_buf *b, const struct img_extent *v, size_t n,
			   enum img_extent_context ctx);

/* Appends s[0..n) as a JSON string (quotes included), escaping like
 * Python's json.dumps: control characters as \u00XX. */
void img_http_json_string(struct vd_buf *b, const char *s, size_t n);

#endif
