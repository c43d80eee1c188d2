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

/* HTTP: a method and the start of a path, no leading EOLs. */
static int match_http(const char *buf, size_t len)
{
	int r = -1;
	for (size_t k = 0; k < VD_ARRAY_SIZE(http_methods); k++) {
		int m = match(buf, len, http_methods[k], false);
		if (m > 0)
			return 1;
		if (m == 0)
			r = 0;
	}
	return r;
}

/* STOMP: optional leading "\n" / "\r\n" heart-beats, then a command and
 * its EOL. */
static int match_stomp(const char *buf, size_t len)
{
	size_t i = 0;
	while (i < len) {
		if (buf[i] == '\n') {
			i++;
		} else if (buf[i] == '\r') {
			if (i + 1 == len)
				return 0;
			if (buf[i + 1] != '\n')
				return -1;
			i += 2;
		} else {
			break;
		}
		if (i > DETECT_MAX_EOLS)
			return -1;
	}
	if (i == len)
		return 0;
	int r = -1;
	for (size_t k = 0; k < VD_ARRAY_SIZE(stomp_cmds); k++) {
		int m = match(buf + i, len - i, stomp_cmds[k], true);
		if (m > 0)
			return 1;
		if (m == 0)
			r = 0;
	}
	return r;
}

/* The protocols a connection may speak, in the order they are tried (a
 * protocol is added here, and its handlers in daemon.c's conn_protos). */
static const struct {
	enum vd_proto id;
	const char *name;
	int (*match)(const char *buf, size_t len);   /* 1 yes, 0 undecided, -1 no */
} protocols[] = {
	{ PROTO_HTTP, "http", match_http },
	{ PROTO_STOMP, "stomp", match_stomp },
};

const char *proto_name(enum vd_proto p)
{
	for (size_t k = 0; k < VD_ARRAY_SIZE(protocols); k++)
		if (protocols[k].id == p)
			return protocols[k].name;
	return "none";
}

int detect_protocol(const char *buf, size_t len)
{
	bool maybe = false;
	for (size_t k = 0; k < VD_ARRAY_SIZE(protocols); k++) {
		int m = protocols[k].match(buf, len);
		if (m > 0)
			return protocols[k].id;
		if (m == 0)
			maybe = true;
	}
	return maybe ? VD_AGAIN : PROTO_NONE;
}
