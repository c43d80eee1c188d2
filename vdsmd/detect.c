/* vdsmd/detect.c - protocol detection on the first bytes of a connection
 * (PROTOCOL.md section 1): decide as soon as the bytes disambiguate. */
#include "server.h"

#include <string.h>

/* Past this many leading heart-beat EOLs without a command we give up. */
#define DETECT_MAX_EOLS 1024

static const char *const http_methods[] = { "GET /", "HEAD /", "POST /", "PUT /" };
static const char *const stomp_cmds[] = {
	"CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK",
	"BEGIN", "COMMIT", "ABORT", "DISCONNECT",
};

const char *proto_name(enum vd_proto p)
{
	switch (p) {
	case PROTO_HTTP: return "http";
	case PROTO_STOMP: return "stomp";
	default: return "none";
	}
}

/* 1 match, 0 undecided (buf is a proper prefix), -1 no match. */
static int match(const char *buf, size_t len, const char *tok, bool eol)
{
	size_t n = strlen(tok);
	size_t cmp = VD_MIN(len, n);
	if (memcmp(buf, tok, cmp) != 0)
		return -1;
	if (len < n + (eol ? 1 : 0))
		return 0;
	if (eol && buf[n] != '\n' && buf[n] != '\r')
		return -1;
	return 1;
}

int detect_protocol(const char *buf, size_t len)
{
	size_t i = 0;
	/* HTTP first: no leading EOLs allowed there. */
	bool maybe = false;
	for (size_t k = 0; k < VD_ARRAY_SIZE(http_methods); k++) {
		int m = match(buf, len, http_methods[k], false);
		if (m > 0)
			return PROTO_HTTP;
		if (m == 0)
			maybe = true;
	}
	/* STOMP: optional leading "\n" / "\r\n" heart-beats. */
	while (i < len) {
		if (buf[i] == '\n') {
			i++;
		} else if (buf[i] == '\r') {
			if (i + 1 == len)
				return VD_AGAIN;
			if (buf[i + 1] != '\n')
				return PROTO_NONE;
			i += 2;
		} else {
			break;
		}
		if (i > DETECT_MAX_EOLS)
			return PROTO_NONE;
	}
	if (i == len)
		return VD_AGAIN;
	for (size_t k = 0; k < VD_ARRAY_SIZE(stomp_cmds); k++) {
		int m = match(buf + i, len - i, stomp_cmds[k], true);
		if (m > 0)
			return PROTO_STOMP;
		if (m == 0)
			maybe = true;
	}
	return maybe ? VD_AGAIN : PROTO_NONE;
}
