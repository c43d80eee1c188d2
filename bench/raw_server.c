/* bench/raw_server.c - the cost floor of a STOMP round trip on this machine:
 * the smallest libev server that answers CONNECT with CONNECTED and every
 * SEND with a canned MESSAGE on the SEND's reply-to destination.  No JSON
 * parsing: the request id is copied from the body's "id": bytes so the load
 * generator can check it.  One thread, TCP_NODELAY, write-first output.
 *
 *   raw_server [-1] [-t DIR] [PORT]   (0 or absent: ephemeral; prints "port N")
 *
 * Default: everything queued goes out in one send() (what a client that
 * sends vdsmd-framing:packed gets from vdsmd).
 *
 * -1: the floor of vdsmd's engine layout on plaintext (PROTOCOL.md 2,
 * vdsmd/wire.c), the baseline of bench/frames.sh.  Every frame goes out in
 * a send() of its own (a partial send is finished before the next frame
 * starts); a MESSAGE shorter than ONE_FRAME_PAD (1024, vdsmd's
 * stomp_pad_frames default) grows to exactly that many bytes, NUL
 * included, with spaces after its JSON body, inside a content-length
 * rewritten to cover them (wire.c pad_body: headers first and unpadded);
 * CONNECTED is not padded (vdsmd pads only JSON MESSAGEs); each socket has
 * TCP_NOTSENT_LOWAT 1 (wire_set_framing), so the kernel takes a frame only
 * once everything before it has been sent.  What it leaves out of wire.c:
 * the bound on unacknowledged bytes before a frame (wire_write_fits: a
 * SIOCOUTQ read, and a 2 ms wait past 32 KiB) and holding events behind
 * replies (there are no events here) - so what vdsmd spends on those is
 * counted as its own cost, not the rule's.
 *
 * -t DIR: TLS (OpenSSL through io/io.h) with server.crt, server.key and
 * ca.crt from DIR (examples/make-pki.sh), client certificates required,
 * the context set up as vdsmd/tls.c does (TLS 1.2 and up, no session
 * tickets, no renegotiation, partial writes).  With -1 every frame is one
 * SSL_write, hence one record, and a MESSAGE shorter than ONE_FRAME_TLS
 * (8448, wire.c WIRE_TLS_RECORD_MIN) is padded to it; no TCP_NOTSENT_LOWAT
 * (vdsmd sets it on plaintext only).  Frames over one record (16 KiB),
 * which wire.c cuts into equal records, never occur here. */
#include <errno.h>
#include <stdbool.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "io/io.h"

#define ONE_FRAME_PAD 1024u  /* -1: MESSAGE frames padded to this (vdsmd's default) */
#define ONE_FRAME_TLS 8448u  /* -1 -t: MESSAGE frames padded to this (one record) */
#define MAX_FRAMES 4096u     /* -1: frame ends one connection can queue */

static bool one_frame;   /* -1 */
static SSL_CTX *tls_ctx; /* -t */

struct rconn {
	ev_io io;
	char *in;
	size_t inlen, incap;
	char *out;
	size_t outlen, outcap;
	size_t fend[MAX_FRAMES];  /* -1: end offset of each queued frame in out */
	unsigned nfend;
	unsigned long msgid;
	struct io_conn tio;  /* -t */
	bool handshaken;
};

static void grow(char **b, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	size_t c = *cap ? *cap : 4096;
	while (c < need)
		c *= 2;
	*b = realloc(*b, c);
	if (!*b)
		abort();
	*cap = c;
}

static void put(struct rconn *c, const void *p, size_t n)
{
	grow(&c->out, &c->outcap, c->outlen + n);
	memcpy(c->out + c->outlen, p, n);
	c->outlen += n;
}

/* -1: the frame just put ends at outlen */
static void frame_end(struct rconn *c)
{
	if (!one_frame)
		return;
	if (c->nfend == MAX_FRAMES)
		abort();  /* the load generator keeps at most a few thousand in flight */
	c->fend[c->nfend++] = c->outlen;
}

static void close_conn(struct ev_loop *loop, struct rconn *c)
{
	ev_io_stop(loop, &c->io);
	if (tls_ctx)
		io_close(&c->tio);
	else
		close(c->io.fd);
	free(c->in);
	free(c->out);
	free(c);
}

static int flush_out(struct ev_loop *loop, struct rconn *c)
{
	size_t off = 0;
	unsigned f = 0;  /* -1: the frame off is in */
	while (off < c->outlen) {
		size_t end = one_frame ? c->fend[f] : c->outlen;
		ssize_t n;
		if (tls_ctx) {
			n = io_write(&c->tio, c->out + off, end - off);
			if (n == VD_AGAIN)
				break;
			if (n < 0)
				return -1;
		} else if ((n = send(c->io.fd, c->out + off, end - off, MSG_NOSIGNAL)) < 0) {
			if (errno == EAGAIN)
				break;
			return -1;
		}
		off += (size_t)n;
		if (one_frame && off == end)
			f++;
	}
	memmove(c->out, c->out + off, c->outlen - off);
	c->outlen -= off;
	if (f) {
		for (unsigned i = f; i < c->nfend; i++)
			c->fend[i - f] = c->fend[i] - off;
		c->nfend -= f;
	} else {
		for (unsigned i = 0; i < c->nfend; i++)
			c->fend[i] -= off;
	}
	int want = EV_READ | (c->outlen || (tls_ctx && c->tio.want == IO_WANT_WRITE) ? EV_WRITE : 0);
	if ((c->io.events & (EV_READ | EV_WRITE)) != want) {
		ev_io_stop(loop, &c->io);
		ev_io_set(&c->io, c->io.fd, want);
		ev_io_start(loop, &c->io);
	}
	return 0;
}

static const char *hdr(const char *h, size_t hlen, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	const char *p = h, *end = h + hlen;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == ':') {
			*vlen = (size_t)(eol - p) - nl - 1;
			return p + nl + 1;
		}
		p = eol + 1;
	}
	return NULL;
}

static int message_head(char *head, size_t cap, const char *dest, size_t dl,
			unsigned long id, size_t clen)
{
	return snprintf(head, cap,
			"MESSAGE\ndestination:%.*s\ncontent-type:application/json\n"
			"subscription:s\nmessage-id:%lu\ncontent-length:%zu\n\n",
			(int)dl, dest, id, clen);
}

/* One MESSAGE with body b; -1: padded to ONE_FRAME_PAD bytes with spaces
 * after the body, counted in content-length (its digits included). */
static void message(struct rconn *c, const char *dest, size_t dl, const char *b, size_t bl)
{
	char head[512];
	unsigned long id = c->msgid++;
	size_t hl = (size_t)message_head(head, sizeof(head), dest, dl, id, bl);
	size_t pad = 0, to = tls_ctx ? ONE_FRAME_TLS : ONE_FRAME_PAD;
	if (one_frame && hl + bl + 1 < to) {
		pad = to - (hl + bl + 1);
		/* the longer content-length may take a digit more */
		hl = (size_t)message_head(head, sizeof(head), dest, dl, id, bl + pad);
		while (pad && hl + bl + pad + 1 > to) {
			pad--;
			hl = (size_t)message_head(head, sizeof(head), dest, dl, id, bl + pad);
		}
	}
	put(c, head, hl);
	put(c, b, bl);
	grow(&c->out, &c->outcap, c->outlen + pad + 1);
	memset(c->out + c->outlen, ' ', pad);
	c->outlen += pad;
	put(c, "", 1);
	frame_end(c);
}

static void handle(struct rconn *c)
{
	size_t off = 0;
	for (;;) {
		while (off < c->inlen && (c->in[off] == '\n' || c->in[off] == '\r'))
			off++;
		char *p = c->in + off;
		size_t left = c->inlen - off;
		char *hend = memmem(p, left, "\n\n", 2);
		if (!hend)
			break;
		size_t hlen = (size_t)(hend - p) + 2;
		size_t vl, blen;
		const char *cl = hdr(p, hlen, "content-length", &vl);
		if (cl) {
			blen = strtoul(cl, NULL, 10);
			if (left < hlen + blen + 1)
				break;
		} else {
			char *nul = memchr(p + hlen, 0, left - hlen);
			if (!nul)
				break;
			blen = (size_t)(nul - (p + hlen));
		}
		if (memcmp(p, "CONNECT", 7) == 0 || memcmp(p, "STOMP", 5) == 0) {
			static const char ok[] = "CONNECTED\nversion:1.2\nheart-beat:0,0\n\n";
			put(c, ok, sizeof(ok)); /* includes the NUL */
			frame_end(c);
		} else if (memcmp(p, "SEND", 4) == 0) {
			size_t rl = 0;
			const char *rt = hdr(p, hlen, "reply-to", &rl);
			const char *body = p + hlen;
			char *idp = memmem(body, blen, "\"id\":", 5);
			size_t il = 0;
			if (idp) {
				idp += 5;
				while (idp + il < body + blen && idp[il] != ',' && idp[il] != '}')
					il++;
			}
			char resp[256];
			int bl = snprintf(resp, sizeof(resp), "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":true}",
					  (int)il, idp ? idp : "null");
			message(c, rt ? rt : "jms.topic.vdsm_responses", rt ? rl : 24, resp, (size_t)bl);
		}
		off += hlen + blen + 1;
	}
	memmove(c->in, c->in + off, c->inlen - off);
	c->inlen -= off;
}

/* -t: handshake, then read until OpenSSL has nothing buffered, answer,
 * write. */
static void tls_cb(struct ev_loop *loop, struct rconn *c)
{
	if (!c->handshaken) {
		int r = io_handshake(&c->tio);
		if (r == VD_AGAIN) {
			int want = c->tio.want == IO_WANT_WRITE ? EV_WRITE : EV_READ;
			ev_io_stop(loop, &c->io);
			ev_io_set(&c->io, c->io.fd, want);
			ev_io_start(loop, &c->io);
			return;
		}
		if (r < 0) {
			close_conn(loop, c);
			return;
		}
		c->handshaken = true;
	}
	for (;;) {
		grow(&c->in, &c->incap, c->inlen + 65536);
		long n = io_read(&c->tio, c->in + c->inlen, c->incap - c->inlen);
		if (n == VD_AGAIN)
			break;
		if (n < 0) {
			close_conn(loop, c);
			return;
		}
		c->inlen += (size_t)n;
	}
	handle(c);
	if (flush_out(loop, c) < 0)
		close_conn(loop, c);
}

static void conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rconn *c = (struct rconn *)w;
	if (tls_ctx) {
		tls_cb(loop, c);
		return;
	}
	if (revents & EV_READ) {
		grow(&c->in, &c->incap, c->inlen + 65536);
		ssize_t n = read(w->fd, c->in + c->inlen, c->incap - c->inlen);
		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			close_conn(loop, c);
			return;
		}
		if (n > 0) {
			c->inlen += (size_t)n;
			handle(c);
		}
	}
	if (flush_out(loop, c) < 0)
		close_conn(loop, c);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK);
		if (fd < 0)
			return;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (one_frame && !tls_ctx)
			setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &one, sizeof(one));
		struct rconn *c = calloc(1, sizeof(*c));
		if (!c)
			abort();
		if (tls_ctx && io_tls_server_init(&c->tio, io_tls_lib_linked(), tls_ctx, fd) != 0) {
			fprintf(stderr, "raw_server: TLS: %s\n", io_last_error(&c->tio));
			io_close(&c->tio);
			free(c);
			continue;
		}
		ev_io_init(&c->io, conn_cb, fd, EV_READ);
		ev_io_start(loop, &c->io);
	}
}

static void stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	ev_break(loop, EVBREAK_ALL);
}

/* As vdsmd/tls.c sets up its server context. */
static SSL_CTX *server_ctx(const char *dir)
{
	char ca[1024], crt[1024], key[1024];
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	snprintf(crt, sizeof(crt), "%s/server.crt", dir);
	snprintf(key, sizeof(key), "%s/server.key", dir);
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, crt) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
		ERR_print_errors_fp(stderr);
		exit(1);
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
			      SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return ctx;
}

int main(int argc, char **argv)
{
	int a1 = 1;
	for (; a1 < argc && argv[a1][0] == '-'; a1++) {
		if (!strcmp(argv[a1], "-1")) {
			one_frame = true;
		} else if (!strcmp(argv[a1], "-t") && a1 + 1 < argc) {
			tls_ctx = server_ctx(argv[++a1]);
		} else {
			fprintf(stderr, "usage: raw_server [-1] [-t DIR] [PORT]\n");
			return 2;
		}
	}
	int port = argc > a1 ? atoi(argv[a1]) : 0;
	/* SSL_write to a peer that closed with replies in flight */
	signal(SIGPIPE, SIG_IGN);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 511) < 0) {
		perror("raw_server: bind");
		return 1;
	}
	socklen_t sl = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &sl);
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	struct ev_loop *loop = ev_default_loop(0);
	ev_io lio;
	ev_io_init(&lio, accept_cb, fd, EV_READ);
	ev_io_start(loop, &lio);
	ev_signal st, si;
	ev_signal_init(&st, stop_cb, SIGTERM);
	ev_signal_init(&si, stop_cb, SIGINT);
	ev_signal_start(loop, &st);
	ev_signal_start(loop, &si);
	ev_run(loop, 0);
	close(fd);
	return 0;
}
