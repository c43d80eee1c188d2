/* vdsmd/wire.c - what PROTOCOL.md 2 "one frame per write" needs beyond
 * conn_flush(): the frame boundaries of each connection's output buffer,
 * the frame layout the engine's client library reads right, and events
 * held back behind the replies of the requests that cause them.
 *
 * Every frame goes out in its own write (conn_flush asks wire_next_len how
 * far to write), and a lifecycle verb's reply is written before the
 * VM_status event it causes: an event for a connection that has requests
 * in flight is kept aside until those requests are answered. */
#include "server.h"

#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "../common/log.h"

/* ---- frames the engine's library reads right ------------------------------
 *
 * The rule, from the library's read loop (vdsm-jsonrpc-java 1.7:
 * Reactor.run/processChannels, StompCommonClient.processIncoming,
 * SSLEngineNioHelper.read, Message.parse).  Its reactor handles each
 * connection once per wake-up and never clears its selected-key set, so a
 * wake-up comes when the socket is readable, or after the 1 s select
 * timeout.  One wake-up reads the frame's start into a 1024-byte header
 * buffer and, when content-length says more is coming, the rest of the
 * frame into a buffer of exactly that size.
 *
 * TLS: a read pulls up to 16 709 bytes (its packet buffer) off the socket,
 * but only when its decrypted data is used up, and decrypts ONE record.  A
 * second complete record already in that buffer waits for the next
 * wake-up: 1 s later when the socket has nothing more.  So no two complete
 * records may ever fit in 16 709 bytes: every record carries at least
 * WIRE_TLS_RECORD_MIN bytes (more than half of 16 709 before the record's
 * own 21-29 bytes of header and tag; the ~100 bytes to spare also cover a
 * buffer a little larger).  A shorter MESSAGE is padded up to it; a frame
 * above one record (16 384) is cut into equal records (never a full one and
 * a small rest), and one that two records of the minimum cannot carry is
 * padded to that.  A partial record always means more bytes in the socket,
 * hence a wake-up.
 *
 * Plaintext: the header read takes at most 1024 bytes, and Message.parse
 * throws (the connection is dropped, every pending call fails) when the
 * bytes it got end inside the header block, blank line and one body byte
 * included (a read that ends in the command line or the first header line
 * is taken for a heart-beat and kept).  So: (1) a MESSAGE is at least
 * stomp_pad_frames (1024) bytes, so a header read never holds the end of
 * one frame and the start of the next, and starts at a frame's first byte;
 * (2) headers first and short, padding in the body, never in a header;
 * (3) one frame per write, and the kernel takes a frame only when it has
 * sent everything before it (TCP_NOTSENT_LOWAT 1): a frame starts a TCP
 * segment of its own, never glued to the tail of a queued one that the
 * send path cuts anywhere (without it, 20 rounds of 1000 calls through the
 * model client failed 6 times in 6); (4) a write that starts a frame waits
 * (2 ms timer) while more than WIRE_PLAIN_QUEUE_MAX bytes are still
 * unacknowledged: past that Linux ended writes anywhere, header included
 * (measured: 100-250 partial writes per 20 000 frames when the reader fell
 * behind, with 45-160 KB in flight, and each one inside the first ~110
 * bytes killed the library; with the bound, none).  Not ruled out: TCP
 * itself cutting a segment there (a retransmission or a zero-window probe
 * after the reader's receive buffer overflowed).
 *
 * Padding is JSON whitespace after the body's value, inside content-length,
 * so only JSON bodies get it.  stomp_pad_frames 0 turns padding off (and
 * the record sizes that go with it).  A client that sent
 * vdsmd-framing:packed reads any framing: its frames go out as they are,
 * and packed, the queued ones in one write (c->packed, as all of them with
 * stomp_batch_writes). */

#define WIRE_TLS_RECORD_MIN 8448u    /* 8 KiB + 256 */
#define WIRE_TLS_RECORD_MAX 16384u   /* TLS plaintext record limit */
#define WIRE_PLAIN_QUEUE_MAX (32u * 1024)  /* plaintext: bytes unacknowledged before a frame */

void wire_set_framing(struct vd_conn *c, bool packed)
{
	c->packed = packed || c->srv->d->cfg.stomp_batch_writes;
	if (c->ssl || c->fd < 0)
		return;
	/* (3) above; 0 is the system default (no limit) */
	int lowat = c->packed || !c->srv->pad_to ? 0 : 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
	/* the send buffer wire_write_fits' bound is checked against (read
	 * again there before refusing a frame) */
	socklen_t l = sizeof(c->sndbuf);
	if (lowat && getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &c->sndbuf, &l) < 0)
		c->sndbuf = 0;
}

/* (4) above, for a queue of q bytes and a frame of want, against the
 * SO_SNDBUF last read: the head (or all of a short frame) and what is
 * queued, at twice their size for the kernel's per-buffer overhead, well
 * within the send buffer.  Monotone in q. */
static bool queue_fits(const struct vd_conn *c, size_t q, size_t want)
{
	size_t head = VD_MIN(want, (size_t)4096);
	return q + head <= WIRE_PLAIN_QUEUE_MAX && 2 * (q + head) + 8192 <= (size_t)c->sndbuf;
}

bool wire_write_fits(struct vd_conn *c, size_t want)
{
	if (c->state != CS_STOMP || c->packed || c->ssl || !c->srv->pad_to)
		return true;
	/* The queue is at most outq_max: when that fits, so does the queue,
	 * and the SIOCOUTQ read (a syscall per frame) is not needed. */
	if (queue_fits(c, c->outq_max, want))
		return true;
	int q = 0;
	if (ioctl(c->fd, SIOCOUTQ, &q) < 0)
		return true;
	c->outq_max = q > 0 ? (size_t)q : 0;
	if (q <= 0)
		return true;   /* nothing queued: the head goes whole */
	if ((size_t)q + VD_MIN(want, (size_t)4096) > WIRE_PLAIN_QUEUE_MAX)
		return false;
	if (queue_fits(c, (size_t)q, want))
		return true;
	/* the send buffer is autotuned: read it again before refusing */
	int sb = 0;
	socklen_t l = sizeof(sb);
	if (getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sb, &l) == 0)
		c->sndbuf = sb;
	return queue_fits(c, (size_t)q, want);
}

/* The size a len-byte frame must grow to (0: as it is). */
static size_t pad_target(const struct vd_conn *c, size_t len)
{
	if (c->packed || !c->srv->pad_to)
		return 0;
	if (!c->ssl)
		return len < c->srv->pad_to ? c->srv->pad_to : 0;
	if (len < WIRE_TLS_RECORD_MIN)
		return WIRE_TLS_RECORD_MIN;
	if (len > WIRE_TLS_RECORD_MAX && len < 2 * WIRE_TLS_RECORD_MIN)
		return 2 * WIRE_TLS_RECORD_MIN;
	return 0;
}

size_t wire_pad_frame(const struct vd_conn *c, size_t off, size_t len)
{
	/* pad_body's case: the frame starts where the last one recorded ends */
	if (c->dead || c->out_mark != c->out_base + off)
		return 0;
	return pad_target(c, len);
}

size_t wire_frame_size(const struct vd_conn *c, size_t len)
{
	return VD_MAX(len, pad_target(c, len));
}

size_t wire_pad_max(const struct vd_server *s)
{
	return s->pad_to ? VD_MAX(s->pad_to, 2 * WIRE_TLS_RECORD_MIN) : 0;
}

/* The value of header name (with its leading EOL, "\ncontent-type:") in
 * the header block f[0, hend): start offset and length, or false. */
static bool header_at(const char *f, size_t hend, const char *name, size_t *at, size_t *n)
{
	size_t nl = strlen(name);
	const char *h = memmem(f, hend, name, nl);
	if (!h)
		return false;
	*at = (size_t)(h - f) + nl;
	const char *e = memchr(f + *at, '\n', hend - *at);
	*n = e ? (size_t)(e - (f + *at)) : hend - *at;
	return true;
}

/* Grow the MESSAGE at c->out.data + off (it ends the buffer) to at least
 * target bytes: spaces after its JSON body, content-length rewritten. */
static void pad_body(struct vd_conn *c, size_t off, size_t target)
{
	static const char cmd[] = "MESSAGE\n";
	char *f = c->out.data + off;
	size_t len = c->out.len - off;
	if (len < sizeof(cmd) || memcmp(f, cmd, sizeof(cmd) - 1))
		return;
	char *blank = memmem(f, len, "\n\n", 2);
	if (!blank)
		return;
	size_t hend = (size_t)(blank - f) + 1;   /* the last header's EOL */
	size_t ct, ctn, cl, cln;
	if (!header_at(f, hend, "\ncontent-type:", &ct, &ctn) || !stomp_ct_is_json(f + ct, ctn) ||
	    !header_at(f, hend, "\ncontent-length:", &cl, &cln) || cln == 0 || cln > 19)
		return;
	size_t clen = 0;
	for (size_t i = 0; i < cln; i++) {
		if (f[cl + i] < '0' || f[cl + i] > '9')
			return;
		clen = clen * 10 + (size_t)(f[cl + i] - '0');
	}
	size_t body = hend + 1;
	if (body + clen + 1 != len || clen == 0)
		return;
	/* n spaces; the new length may take a digit more (stomp's rule) */
	unsigned dd;
	size_t n = stomp_pad_count(len, clen, (unsigned)cln, target, &dd);
	buf_reserve(&c->out, n + dd);
	f = c->out.data + off;
	size_t tail = body + clen - (cl + cln);   /* from after the value to the NUL */
	memmove(f + cl + cln + dd, f + cl + cln, tail);
	char *w = stomp_put_u64(f + cl, clen + n);
	w += tail;
	memset(w, ' ', n);
	w[n] = '\0';
	c->out.len = off + len + n + dd;
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
	if (c->packed) {
		c->out_mark = end;   /* no boundary: queued frames go out together */
		return;
	}
	size_t target = pad_target(c, (size_t)(end - c->out_mark));
	if (target && !direct && c->out_mark >= c->out_base) {
		pad_body(c, (size_t)(c->out_mark - c->out_base), target);
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
	if (c->ssl && c->srv->pad_to && n > WIRE_TLS_RECORD_MAX) {
		/* equal records: the rest over as few as can carry it */
		uint64_t k = (n + WIRE_TLS_RECORD_MAX - 1) / WIRE_TLS_RECORD_MAX;
		n = (n + k - 1) / k;
	}
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
