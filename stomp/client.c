/* stomp/client.c - the client side of a STOMP 1.2 connection (vdsm-client,
 * later broker mode): frames appended to an output buffer, incoming frames
 * parsed from the caller's input buffer.  No I/O. */
#include "stomp.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct stomp_header hdr_make(const char *n, size_t nlen, const char *v)
{
	struct stomp_header h = { n, nlen, v, v ? strlen(v) : 0 };
	return h;
}

#define HDR(n, v) hdr_make(n, sizeof(n) - 1, v)

void stomp_client_init(struct stomp_client *c, struct vd_buf *out)
{
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	memset(c, 0, sizeof(*c));
	c->out = out;
	stomp_parser_init(&c->parser);
	c->limits = lim;
	c->next_receipt = 1;
}

void stomp_client_connect(struct stomp_client *c, const char *host, const char *login,
			  const char *passcode, unsigned hb_send_ms, unsigned hb_recv_ms)
{
	char hb[32];
	snprintf(hb, sizeof(hb), "%u,%u", hb_send_ms, hb_recv_ms);
	c->hb_want_send = hb_send_ms;
	c->hb_want_recv = hb_recv_ms;
	struct stomp_header h[] = {
		HDR("accept-version", "1.2"),
		HDR("host", host),
		HDR("login", login),
		HDR("passcode", passcode),
		HDR("heart-beat", hb),
		/* this parser reads any framing: vdsmd need not lay frames out
		 * for the engine's library (PROTOCOL.md 2); others ignore it */
		HDR("vdsmd-framing", "packed"),
	};
	stomp_write_frame(c->out, STOMP_CONNECT, h, VD_ARRAY_SIZE(h), NULL, 0);
}

void stomp_client_subscribe(struct stomp_client *c, const char *dest, const char *id,
			    const char *ack)
{
	struct stomp_header h[] = {
		HDR("destination", dest),
		HDR("id", id),
		HDR("ack", ack ? ack : "auto"),
	};
	stomp_write_frame(c->out, STOMP_SUBSCRIBE, h, VD_ARRAY_SIZE(h), NULL, 0);
}

void stomp_client_send(struct stomp_client *c, const char *dest, const char *reply_to,
		       const char *content_type, const struct stomp_header *extra,
		       unsigned nextra, const void *body, size_t len)
{
	struct stomp_header stack[16];
	unsigned n = 3 + nextra;
	struct stomp_header *h = n <= VD_ARRAY_SIZE(stack) ? stack : xmalloc(n * sizeof(*h));
	h[0] = HDR("destination", dest);
	h[1] = HDR("content-type", content_type);
	h[2] = HDR("reply-to", reply_to);
	for (unsigned i = 0; i < nextra; i++)
		h[3 + i] = extra[i];
	stomp_write_frame(c->out, STOMP_SEND, h, n, body ? body : "", len);
	if (h != stack)
		free(h);
}

void stomp_client_ack(struct stomp_client *c, const char *id)
{
	struct stomp_header h[] = { HDR("id", id) };
	stomp_write_frame(c->out, STOMP_ACK, h, 1, NULL, 0);
}

void stomp_client_disconnect(struct stomp_client *c, const char *receipt)
{
	struct stomp_header h[] = { HDR("receipt", receipt) };
	stomp_write_frame(c->out, STOMP_DISCONNECT, h, 1, NULL, 0);
}

static unsigned hb_pick(unsigned mine, unsigned theirs)
{
	return mine && theirs ? VD_MAX(mine, theirs) : 0;
}

/* "<sx>,<sy>" from the server's CONNECTED: decimal digits only, each at
 * most 10 days of ms (sscanf("%u") was undefined behaviour on overflow). */
static bool parse_hb_pair(const char *s, unsigned *sx, unsigned *sy)
{
	unsigned long v[2] = { 0, 0 };
	for (int i = 0; i < 2; i++) {
		if (*s < '0' || *s > '9')
			return false;
		while (*s >= '0' && *s <= '9') {
			v[i] = v[i] * 10 + (unsigned long)(*s++ - '0');
			if (v[i] > 864000000ul)
				return false;
		}
		if (*s++ != (i == 0 ? ',' : '\0'))
			return false;
	}
	*sx = (unsigned)v[0];
	*sy = (unsigned)v[1];
	return true;
}

static void on_connected(struct stomp_client *c, const struct stomp_frame *f)
{
	unsigned sx = 0, sy = 0;
	const char *hb = stomp_frame_get(f, "heart-beat", NULL);
	if (hb && !parse_hb_pair(hb, &sx, &sy))
		sx = sy = 0;
	/* The server sends every sx and wants traffic every sy. */
	c->hb_send_ms = hb_pick(c->hb_want_send, sy);
	c->hb_recv_ms = hb_pick(c->hb_want_recv, sx);
	c->connected = true;
}

long stomp_client_feed(struct stomp_client *c, char *buf, size_t len,
		       struct stomp_frame *f, const char **why)
{
	if (!f->hdr) {
		f->hdr = c->hdr;
		f->hdr_cap = VD_ARRAY_SIZE(c->hdr);
	}
	long r = stomp_parse(&c->parser, &c->limits, buf, len, f, why);
	if (r <= 0)
		return r;
	switch (f->cmd) {
	case STOMP_NONE:
	case STOMP_MESSAGE:
	case STOMP_RECEIPT:
	case STOMP_ERROR:
		break;
	case STOMP_CONNECTED:
		on_connected(c, f);
		break;
	default:
		if (why)
			*why = "Unexpected frame from server";
		return VD_EPROTO;
	}
	return r;
}
