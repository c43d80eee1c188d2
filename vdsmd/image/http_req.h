/* vdsmd/image/http_req.h - the image server's HTTP/1.1 request parser.
 *
 * Pure (no sockets, no allocation): img_http_parse() reads the header section
 * of one request from a byte buffer, in the picohttpparser style.  The caller
 * keeps appending input and calls it again with the whole unconsumed buffer
 * until it stops answering VD_AGAIN.  Every slice in struct img_http_req
 * points into that buffer and lives as long as it does.
 *
 * The resource model is ovirt-imageio's (docs/images.md):
 *   /images/<ticket-id>             OPTIONS, GET, PUT, PATCH
 *   /images/<ticket-id>/extents     GET ?context=zero|dirty
 * with ?flush=y|n on PUT and ?close=y on GET/PUT.
 *
 * Return values of img_http_parse():
 *   > 0         the header section is complete; that many bytes are consumed.
 *               req->status == 0: a well-formed request.  req->status != 0:
 *               the request is framed (its body, if any, is Content-Length
 *               bytes) but must be answered with that status and
 *               req->reason; req->keep_alive tells whether the connection
 *               can carry another request afterwards.
 *   VD_AGAIN    incomplete; call again with more bytes.
 *   < 0 other   the request cannot be framed: answer req->status (400, 414,
 *               431, 505) with req->reason and close the connection.
 *               VD_ETOOBIG for an over-long request line or header section
 *               or too many headers, VD_EPROTO for malformed input.
 *
 * Errors that only matter to one method (a bad Range header on a PUT, a bad
 * ?flush= on a GET) are not request errors: the fields record them (range.bad,
 * crange.bad, IMG_FLUSH_BAD, IMG_CONTEXT_BAD) and the handler of the method
 * that reads them refuses, as imageio does. */
#ifndef VD_IMAGE_HTTP_REQ_H
#define VD_IMAGE_HTTP_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/vd.h"

/* HTTP status codes the image server answers (imageio's http.py set, plus
 * the framing errors of Python's http.server that imageio inherits). */
enum img_http_status {
	IMG_HTTP_CONTINUE = 100,
	IMG_HTTP_OK = 200,
	IMG_HTTP_NO_CONTENT = 204,
	IMG_HTTP_PARTIAL_CONTENT = 206,
	IMG_HTTP_BAD_REQUEST = 400,
	IMG_HTTP_FORBIDDEN = 403,
	IMG_HTTP_NOT_FOUND = 404,
	IMG_HTTP_METHOD_NOT_ALLOWED = 405,
	IMG_HTTP_CONFLICT = 409,
	IMG_HTTP_PAYLOAD_TOO_LARGE = 413,
	IMG_HTTP_URI_TOO_LONG = 414,
	IMG_HTTP_RANGE_NOT_SATISFIABLE = 416,
	IMG_HTTP_HEADERS_TOO_LARGE = 431,
	IMG_HTTP_INTERNAL_ERROR = 500,
	IMG_HTTP_SERVICE_UNAVAILABLE = 503,
	IMG_HTTP_VERSION_NOT_SUPPORTED = 505,
};

enum img_http_method {
	IMG_HTTP_M_NONE = 0,
	IMG_HTTP_GET,
	IMG_HTTP_PUT,
	IMG_HTTP_PATCH,
	IMG_HTTP_OPTIONS,
	IMG_HTTP_HEAD,
	IMG_HTTP_POST,
	IMG_HTTP_DELETE,
};

/* What the path names.  imageio routes /images/(.*)/extents,
 * /images/(.*)/checksum[/algorithms] and /images/(.*); anything else is 404. */
enum img_http_resource {
	IMG_RES_NONE = 0,  /* not under /images/: status 404 */
	IMG_RES_IMAGE,     /* /images/<id> */
	IMG_RES_EXTENTS,   /* /images/<id>/extents */
	IMG_RES_CHECKSUM,  /* /images/<id>/checksum[/algorithms]: not served */
};

enum img_http_flush { IMG_FLUSH_DEFAULT = 0, IMG_FLUSH_Y, IMG_FLUSH_N, IMG_FLUSH_BAD };
enum img_http_context { IMG_CONTEXT_DEFAULT = 0, IMG_CONTEXT_ZERO, IMG_CONTEXT_DIRTY, IMG_CONTEXT_BAD };

/* Range: bytes=first-last | bytes=first- | bytes=-suffix (one range only). */
struct img_http_range {
	bool present;
	bool bad;          /* malformed, multiple ranges, or first > last: 416 */
	bool suffix;       /* bytes=-N: the last N bytes, N in last */
	bool has_last;
	uint64_t first, last;
};

/* Content-Range: bytes first-last/complete, last and complete may be '*'.
 * The unsatisfied form bytes * /complete is refused like imageio (400). */
struct img_http_crange {
	bool present;
	bool bad;          /* malformed, last < first or last >= complete: 400 */
	bool has_last, has_complete;
	uint64_t first, last, complete;
};

struct img_http_slice {
	const char *p;
	size_t n;
};

#define IMG_HTTP_TICKET_MAX 255

struct img_http_req {
	enum img_http_method method;
	struct img_http_slice method_name;   /* as sent (for "Invalid method") */
	struct img_http_slice target;        /* raw request target (for logs) */
	struct img_http_slice path;          /* target before '?', not decoded */
	int version_minor;                   /* HTTP/1.<minor> */
	enum img_http_resource resource;
	/* The ticket id, percent-decoded, NUL-terminated; "" when missing
	 * ("/images/": 400 "Ticket id is required"). */
	char ticket_id[IMG_HTTP_TICKET_MAX + 1];
	enum img_http_flush flush;
	enum img_http_context context;
	bool close_query;                    /* ?close=y */
	int64_t content_length;              /* -1 when absent */
	struct img_http_range range;
	struct img_http_crange crange;
	struct img_http_slice content_type;
	bool expect_continue;                /* Expect: 100-continue (HTTP/1.1) */
	bool keep_alive;                     /* after this request and its body */
	bool chunked;                        /* Transfer-Encoding was sent */
	unsigned nheaders;
	size_t header_len;                   /* bytes consumed */
	int status;                          /* 0, or the status to answer */
	const char *reason;                  /* static text for status */
};

/* Bounds applied before anything is kept (imageio: a 4096-byte request line;
 * Python's http.client: 100 headers). */
struct img_http_limits {
	size_t max_request_line;    /* 414 beyond */
	size_t max_header_bytes;    /* whole header section, request line included: 431 */
	unsigned max_headers;       /* 431 beyond */
	uint64_t max_patch_body;    /* PATCH JSON body: 413 beyond */
};

/* The defaults: 4096, 16384, 100, 4096. */
void img_http_limits_default(struct img_http_limits *lim);

long img_http_parse(const char *buf, size_t len, const struct img_http_limits *lim,
		    struct img_http_req *req);

/* "GET", "PUT", ... for a method enum ("" for IMG_HTTP_M_NONE). */
const char *img_http_method_name(enum img_http_method m);

#endif
