/* tests/fuzz/fuzz_image_http.c - libFuzzer target for the image server's
 * request parser (vdsmd/image/http_req.c).  The input is copied to an
 * exactly-sized heap buffer so ASan catches a read past its end.  Checked:
 * a complete parse consumes no more than was given and every slice lies in
 * the buffer; any proper prefix of a complete header section is VD_AGAIN;
 * a refusal always names a status; the error answer for it formats. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vdsmd/image/http_req.h"
#include "vdsmd/image/http_resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void in_buf(const struct img_http_slice *s, const char *buf, size_t n)
{
	if (s->n && (s->p < buf || s->p + s->n > buf + n))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	struct img_http_limits lim;
	img_http_limits_default(&lim);
	if (size && (data[0] & 1)) { /* small limits reach the refusals */
		lim.max_request_line = 64;
		lim.max_header_bytes = 256;
		lim.max_headers = 4;
	}
	struct img_http_req r;
	long n = img_http_parse(buf, size, &lim, &r);
	if (n > 0) {
		if ((size_t)n > size || (size_t)n > lim.max_header_bytes || r.header_len != (size_t)n)
			abort();
		in_buf(&r.method_name, buf, size);
		in_buf(&r.target, buf, size);
		in_buf(&r.path, buf, size);
		in_buf(&r.content_type, buf, size);
		if (strlen(r.ticket_id) > IMG_HTTP_TICKET_MAX || r.nheaders > lim.max_headers)
			abort();
		if (r.status && !r.reason)
			abort();
		size_t k = data[0] % (size_t)n;
		char *pre = malloc(k ? k : 1);
		memcpy(pre, buf, k);
		struct img_http_req r2;
		long m = img_http_parse(pre, k, &lim, &r2);
		free(pre);
		if (m != VD_AGAIN && !(m < 0 && r2.status))
			abort(); /* a prefix parsed as complete */
	} else if (n != VD_AGAIN) {
		if (!r.status || !r.reason)
			abort();
	}
	if (r.status) {
		char out[1024];
		struct img_http_resp resp = { .status = r.status, .close = !r.keep_alive };
		if (img_http_format_error(out, sizeof(out), &resp, r.reason) <= 0)
			abort();
	}
	free(buf);
	return 0;
}
