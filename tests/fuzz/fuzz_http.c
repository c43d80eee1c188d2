/* tests/fuzz/fuzz_http.c - libFuzzer target for the HTTP request parser and
 * the protocol detector (vdsmd/http.c, vdsmd/detect.c).  The input is copied
 * to an exactly-sized heap buffer so ASan catches any read past its end; it
 * is parsed whole and at a split point derived from the first byte, and the
 * parse must be consistent (same result when complete, AGAIN on a prefix). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vdsmd/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	int p = detect_protocol(buf, size);
	if (p != VD_AGAIN && p != PROTO_NONE && p != PROTO_HTTP && p != PROTO_STOMP)
		abort();
	for (size_t k = 0; k < size && k < 64; k++) {
		int q = detect_protocol(buf, k);
		if (q != VD_AGAIN && q != p)
			abort(); /* a prefix decided differently */
	}
	size_t max_header = size && data[0] & 1 ? 64 : 8192;
	struct http_req r;
	long n = http_parse(buf, size, max_header, &r);
	if (n > 0) {
		if ((size_t)n > size || (size_t)n > max_header || r.header_len != (size_t)n)
			abort();
		if (r.method_len == 0 || r.path_len == 0 || r.path[0] != '/')
			abort();
		if (r.content_type && (r.content_type < buf || r.content_type + r.ct_len > buf + size))
			abort();
		/* Any proper prefix of a complete header section is incomplete. */
		size_t k = size ? data[0] % (size_t)n : 0;
		char *pre = malloc(k ? k : 1);
		memcpy(pre, buf, k);
		struct http_req r2;
		if (http_parse(pre, k, max_header, &r2) != VD_AGAIN)
			abort();
		free(pre);
	} else if (n != VD_AGAIN && n != VD_EPROTO && n != VD_ETOOBIG) {
		abort();
	}
	free(buf);
	return 0;
}
