/* vdsmd/wire.c - what PROTOCOL.md 2 "one frame per write" needs beyond
 * conn_flush(): the frame boundaries of each connection's output buffer,
 * and events held back behind the replies of the requests that cause them.
 *
 * The oVirt engine's client library (vdsm-jsonrpc-java) reads one TLS
 * record per read and handles one STOMP frame per readable event; a frame
 * that arrives packed with the previous one waits for the next bytes, up to
 * a heart-beat.  So every frame goes out in its own write (conn_flush asks
 * wire_next_len how far to write), and a lifecycle verb's reply is written
 * before the VM_status event it causes: an event for a connection that has
 * requests in flight is kept aside until those requests are answered. */
#include "server.h"

#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

/* ---- frames -------------------------------------------------------------- */

/* Separate writes are not enough on plaintext: a reader that is a little
 * late reads two frames at once, and the engine's library keeps the second
 * until more bytes come (a heart-beat later), and for good once 1 KiB of
 * such frames piled up.  That library reads at most 1024 bytes at a time
 * (ReactorClient.BUFFER_SIZE) and, for a longer frame, exactly the rest of
 * that frame: a MESSAGE of at least 1024 bytes is never read together with
 * the next frame, however late the reader is.  So on plaintext a shorter
 * MESSAGE gets a `pad` header (the last one) that brings it to pad_to
 * bytes: a memmove of under 1 KiB and the bytes, no syscall, no delay.
 * (A gap between frames helps only while the reader is faster than the
 * gap; leading EOLs break stomp.py.)  TLS needs none: a reader takes one
 * record per read and the next record stays in the socket. */
static void pad_message(struct vd_conn *c, size_t off, size_t pad_to)
{
	static const char cmd[] = "MESSAGE\n";
	char *f = c->out.data + off;
	size_t len = c->out.len - off;
	if (len >= pad_to || len < sizeof(cmd) || memcmp(f, cmd, sizeof(cmd) - 1))
		return;
	char *blank = memmem(f, len, "\n\n", 2);
	if (!blank)
		return;
	size_t at = (size_t)(blank - f) + 1;   /* after the last header's EOL */
	size_t n = VD_MAX(pad_to - len, sizeof("pad:.\n") - 1);
	buf_reserve(&c->out, n);
	f = c->out.data + off;
	memmove(f + at + n, f + at, len - at);
	memcpy(f + at, "pad:", 4);
	memset(f + at + 4, '.', n - 5);
	f[at + n - 1] = '\n';
	c->out.len += n;
}

struct held_frame {
	struct held_frame *next;
	uint64_t barrier;   /* released once requests up to this seq are answered */
	size_t len;
	char data[];
};

static void fend_push(struct vd_conn *c, uint64_t end)
{
	if (c->fend_n == c->fend_cap) {
		unsigned cap = c->fend_cap ? c->fend_cap * 2 : 16;
		uint64_t *r = xmalloc(cap * sizeof(*r));
		for (unsigned i = 0; i < c->fend_n; i++)
			r[i] = c->fend[(c->fend_head + i) % c->fend_cap];
		free(c->fend);
		c->fend = r;
		c->fend_cap = cap;
		c->fend_head = 0;
	}
	c->fend[(c->fend_head + c->fend_n) % c->fend_cap] = end;
	c->fend_n++;
}

void wire_frame_end(struct vd_conn *c)
{
	uint64_t end = c->out_base + c->out.len;
	bool direct = c->direct_tail;
	c->direct_tail = false;
	if (end <= c->out_mark)
		return;  /* written whole by write_direct: nothing queued */
	size_t pad_to = c->ssl ? 0 : c->srv->pad_to;
	if (pad_to && !direct && c->out_mark >= c->out_base && end - c->out_mark < pad_to) {
		pad_message(c, (size_t)(c->out_mark - c->out_base), pad_to);
		end = c->out_base + c->out.len;
	}
	c->out_mark = end;
	fend_push(c, end);
}

size_t wire_next_len(struct vd_conn *c, uint64_t pos, size_t avail)
{
	while (c->fend_n && c->fend[c->fend_head] <= pos) {
		c->fend_head = (c->fend_head + 1) % c->fend_cap;
		c->fend_n--;
	}
	if (!c->fend_n)
		return avail;
	uint64_t n = c->fend[c->fend_head] - pos;
	return n < avail ? (size_t)n : avail;
}

static void release(struct vd_conn *c)
{
	while (c->held && (!c->req_head || c->req_head->seq > c->held->barrier)) {
		struct held_frame *h = c->held;
		c->held = h->next;
		if (!c->held)
			c->held_tail = &c->held;
		c->held_bytes -= h->len;
		if (!c->dead) {
			buf_append(&c->out, h->data, h->len);
			wire_frame_end(c);
		}
		free(h);
	}
}

bool wire_hold_event(struct vd_conn *c)
{
	struct vd_server *s = c->srv;
	if (!c->req_head)
		return false;  /* (nothing is held then: the last answer released it) */
	uint64_t start = c->out_mark;
	/* The frame must be whole in the buffer: its start is the end of the
	 * previous frame (write_direct is off during fan-out). */
	if (start < c->out_base || start > c->out_base + c->out.len)
		return false;
	size_t off = (size_t)(start - c->out_base);
	size_t len = c->out.len - off;
	/* Held events count against half the output bound, like queued ones;
	 * past it they go out unordered rather than being lost. */
	if (c->held_bytes + len > s->d->cfg.max_output / 2)
		return false;
	struct held_frame *h = xmalloc(sizeof(*h) + len);
	h->next = NULL;
	h->barrier = c->req_seq;
	h->len = len;
	memcpy(h->data, c->out.data + off, len);
	c->out.len = off;
	if (!c->held_tail)
		c->held_tail = &c->held;
	*c->held_tail = h;
	c->held_tail = &h->next;
	c->held_bytes += len;
	return true;
}

void wire_req_start(struct vd_conn *c, struct stomp_req *q)
{
	q->seq = ++c->req_seq;
	q->next = NULL;
	q->prev = c->req_tail;
	if (c->req_tail)
		c->req_tail->next = q;
	else
		c->req_head = q;
	c->req_tail = q;
}

void wire_req_done(struct vd_conn *c, struct stomp_req *q)
{
	if (q->prev)
		q->prev->next = q->next;
	else
		c->req_head = q->next;
	if (q->next)
		q->next->prev = q->prev;
	else
		c->req_tail = q->prev;
	q->prev = q->next = NULL;
	if (c->held)
		release(c);
}

void wire_free(struct vd_conn *c)
{
	while (c->held) {
		struct held_frame *h = c->held;
		c->held = h->next;
		free(h);
	}
	c->held_tail = NULL;
	c->held_bytes = 0;
	free(c->fend);
	c->fend = NULL;
	c->fend_n = c->fend_cap = c->fend_head = 0;
}
