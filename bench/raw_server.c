/* bench/raw_server.c - the cost floor of a STOMP round trip on this machine:
 * the smallest libev server that answers CONNECT with CONNECTED and every
 * SEND with a canned MESSAGE on the SEND's reply-to destination.  No JSON
 * parsing: the request id is copied from the body's "id": bytes so the load
 * generator can check it.  One thread, TCP_NODELAY, write-first output.
 *
 *   raw_server [PORT]      (0 or absent: ephemeral; prints "port N") */
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct rconn {
	ev_io io;
	char *in;
	size_t inlen, incap;
	char *out;
	size_t outlen, outcap;
	unsigned long msgid;
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

static void close_conn(struct ev_loop *loop, struct rconn *c)
{
	ev_io_stop(loop, &c->io);
	close(c->io.fd);
	free(c->in);
	free(c->out);
	free(c);
}

static int flush_out(struct ev_loop *loop, struct rconn *c)
{
	size_t off = 0;
	while (off < c->outlen) {
		ssize_t n = send(c->io.fd, c->out + off, c->outlen - off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN)
				break;
			return -1;
		}
		off += (size_t)n;
	}
	memmove(c->out, c->out + off, c->outlen - off);
	c->outlen -= off;
	int want = EV_READ | (c->outlen ? EV_WRITE : 0);
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
			char resp[256], head[512];
			int bl = snprintf(resp, sizeof(resp), "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":true}",
					  (int)il, idp ? idp : "null");
			int hl = snprintf(head, sizeof(head),
					  "MESSAGE\ndestination:%.*s\ncontent-type:application/json\n"
					  "subscription:s\nmessage-id:%lu\ncontent-length:%d\n\n",
					  (int)(rt ? rl : 24), rt ? rt : "jms.topic.vdsm_responses",
					  c->msgid++, bl);
			put(c, head, (size_t)hl);
			put(c, resp, (size_t)bl);
			put(c, "", 1);
		}
		off += hlen + blen + 1;
	}
	memmove(c->in, c->in + off, c->inlen - off);
	c->inlen -= off;
}

static void conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rconn *c = (struct rconn *)w;
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
		struct rconn *c = calloc(1, sizeof(*c));
		ev_io_init(&c->io, conn_cb, fd, EV_READ);
		ev_io_start(loop, &c->io);
	}
}

static void stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	ev_break(loop, EVBREAK_ALL);
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 0;
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
