/* io/io.c - the plain implementation of the connection layer, and what
 * every implementation shares: close, the blocking helpers (poll() against
 * a deadline) and TCP connect.  See io.h. */
#include "io.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

static void plain_fail(struct io_conn *c, const char *what)
{
	c->last_errno = errno;
	snprintf(c->err, sizeof(c->err), "%s: %s", what, strerror(errno));
}

static long plain_read(struct io_conn *c, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = recv(c->fd, buf, len, 0);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			c->want = IO_WANT_READ;
			return VD_AGAIN;
		}
		plain_fail(c, "read");
		return errno == ECONNRESET ? VD_ECLOSED : VD_EIO;
	}
}

static long plain_write(struct io_conn *c, const void *buf, size_t len)
{
	for (;;) {
		ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
		if (n > 0)
			return n;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->want = IO_WANT_WRITE;
			return VD_AGAIN;
		}
		if (n == 0)
			errno = EPIPE;
		plain_fail(c, "write");
		return errno == EPIPE || errno == ECONNRESET ? VD_ECLOSED : VD_EIO;
	}
}

static int plain_flush(struct io_conn *c)
{
	return 0;
}

static int plain_shutdown(struct io_conn *c)
{
	if (shutdown(c->fd, SHUT_WR) < 0) {
		plain_fail(c, "shutdown");
		return VD_EIO;
	}
	return 0;
}

static int plain_handshake(struct io_conn *c)
{
	return 0;
}

static int plain_peer_cert(struct io_conn *c, char *out, size_t n)
{
	if (n)
		out[0] = 0;
	return VD_ENOENT;
}

static void plain_release(struct io_conn *c)
{
}

static const struct io_ops plain_ops = {
	.name = "plain",
	.read = plain_read,
	.write = plain_write,
	.flush = plain_flush,
	.shutdown = plain_shutdown,
	.handshake = plain_handshake,
	.peer_cert = plain_peer_cert,
	.release = plain_release,
};

void io_plain_init(struct io_conn *c, int fd)
{
	*c = (struct io_conn)IO_CONN_INIT;
	c->ops = &plain_ops;
	c->fd = fd;
}

void io_close(struct io_conn *c)
{
	if (c->ops)
		c->ops->release(c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->ops = NULL;
}

int io_detach(struct io_conn *c)
{
	int fd = c->fd;
	if (c->ops)
		c->ops->release(c);
	c->fd = -1;
	c->ops = NULL;
	return fd;
}

/* ---- blocking use ---------------------------------------------------------- */

static int remaining_ms(uint64_t deadline_ms)
{
	if (!deadline_ms)
		return -1;
	uint64_t now = vd_now_ms();
	if (now >= deadline_ms)
		return 0;
	uint64_t left = deadline_ms - now;
	return left > INT32_MAX ? INT32_MAX : (int)left;
}

static int wait_fd(int fd, short events, uint64_t deadline_ms, volatile sig_atomic_t *stop)
{
	struct pollfd p = { .fd = fd, .events = events };
	for (;;) {
		/* set by a signal handler or by another thread (the image
		 * server's stop): read it as an atomic */
		if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
			return VD_AGAIN;
		int r = poll(&p, 1, remaining_ms(deadline_ms));
		if (r > 0)
			return 0;
		if (r == 0) {
			errno = ETIMEDOUT;
			return VD_ETIMEDOUT;
		}
		if (errno != EINTR)
			return VD_EIO;
	}
}

int io_wait(struct io_conn *c, uint64_t deadline_ms, volatile sig_atomic_t *stop)
{
	int r = wait_fd(c->fd, c->want == IO_WANT_WRITE ? POLLOUT : POLLIN, deadline_ms, stop);
	if (r == VD_ETIMEDOUT)
		snprintf(c->err, sizeof(c->err), "timed out");
	else if (r == VD_EIO)
		plain_fail(c, "poll");
	return r;
}

long io_read_wait(struct io_conn *c, void *buf, size_t len, uint64_t deadline_ms,
		  volatile sig_atomic_t *stop)
{
	for (;;) {
		long n = io_read(c, buf, len);
		if (n != VD_AGAIN)
			return n;
		int w = io_wait(c, deadline_ms, stop);
		if (w < 0)
			return w;
	}
}

int io_write_all(struct io_conn *c, const void *buf, size_t len, uint64_t deadline_ms,
		 volatile sig_atomic_t *stop)
{
	const char *p = buf;
	size_t off = 0;
	while (off < len) {
		long n = io_write(c, p + off, len - off);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n != VD_AGAIN)
			return (int)n;
		int w = io_wait(c, deadline_ms, stop);
		if (w < 0)
			return w;
	}
	return io_flush(c);
}

int io_handshake_wait(struct io_conn *c, uint64_t deadline_ms, volatile sig_atomic_t *stop)
{
	for (;;) {
		int r = io_handshake(c);
		if (r != VD_AGAIN)
			return r;
		int w = io_wait(c, deadline_ms, stop);
		if (w < 0)
			return w;
	}
}

/* ---- connecting ------------------------------------------------------------ */

int io_connect_addr(const struct sockaddr *sa, socklen_t salen, uint64_t deadline_ms)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return VD_EIO;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int rc = VD_EIO;
	if (connect(fd, sa, salen) == 0)
		return fd;
	if (errno != EINPROGRESS)
		goto fail;
	rc = wait_fd(fd, POLLOUT, deadline_ms, NULL);
	if (rc < 0)
		goto fail;
	rc = VD_EIO;
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		goto fail;
	if (err) {
		errno = err;
		goto fail;
	}
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

int io_dial(const char *host, const char *port, int ai_flags, uint64_t deadline_ms, char *why,
	    size_t whylen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = ai_flags }, *res = NULL;
	int g = getaddrinfo(host, port, &hints, &res);
	if (g != 0) {
		snprintf(why, whylen, "%s: %s", host, gai_strerror(g));
		return VD_ENOENT;
	}
	int fd = VD_EIO, err = 0;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = io_connect_addr(ai->ai_addr, ai->ai_addrlen, deadline_ms);
		if (fd >= 0)
			break;
		err = errno;
		if (fd == VD_ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		errno = err;
		snprintf(why, whylen, "cannot connect to %s port %s: %s", host, port, strerror(err));
	}
	return fd;
}
