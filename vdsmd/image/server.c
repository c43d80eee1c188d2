/* vdsmd/image/server.c - listeners, the accept thread and one thread per
 * connection (see server.h). */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "../../common/log.h"
#include "../../common/vd.h"
#include "../../io/io.h"

/* Transfers are bulk work: each connection thread runs this much nicer
 * than the rest of the daemon (Linux's nice is per thread), so while
 * uploads keep every core busy the event loop still wakes at once and the
 * main port's answers do not queue behind them. */
#define IMAGE_THREAD_NICE 10

enum slot_state { SLOT_FREE = 0, SLOT_RUNNING, SLOT_DONE };

struct slot {
	struct image_server *s;
	pthread_t th;
	enum slot_state state;
	int fd;                 /* the socket while open (stop shuts it down) */
	bool is_unix;
	char peer[64];
};

struct image_server {
	struct image_server_opts o;
	int tcp_fd, unix_fd;
	int wake[2];
	unsigned port;
	char *unix_path;
	pthread_t acceptor;
	bool acceptor_started;
	pthread_mutex_t mu;
	struct slot *slots;
	unsigned active;
	volatile sig_atomic_t stop;
	struct vd_log_limit lim;    /* accept thread's warnings */
};

static void peer_name(const struct sockaddr_storage *sa, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)sa;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(out, n, "%s:%u", host, port);
	} else if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)sa;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(out, n, "[%s]:%u", host, port);
	} else {
		snprintf(out, n, "unix");
	}
}

static void *conn_main(void *arg)
{
	struct slot *sl = arg;
	struct image_server *s = sl->s;
	struct io_conn c = IO_CONN_INIT;
	bool ok = true;
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), IMAGE_THREAD_NICE) != 0)
		log_debug("image: %s: setpriority: %s", sl->peer, strerror(errno));
	if (!sl->is_unix && s->o.tls) {
		if (io_tls_server_init(&c, s->o.lib, s->o.tls, sl->fd) != 0) {
			log_warn("image: %s: %s", sl->peer, io_last_error(&c));
			ok = false;
		} else {
			uint64_t deadline = vd_now_ms() + (s->o.handshake_ms ? s->o.handshake_ms : 10000);
			int rc = io_handshake_wait(&c, deadline, &s->stop);
			if (rc != 0) {
				if (rc != VD_ECLOSED && !__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
					log_warn("image: %s: TLS handshake failed: %s", sl->peer,
						 io_last_error(&c));
				ok = false;
			}
		}
	} else {
		io_plain_init(&c, sl->fd);
	}
	if (ok)
		s->o.serve(s->o.arg, &c, sl->peer, &s->stop);
	pthread_mutex_lock(&s->mu);
	sl->fd = -1;            /* stop must not shut a reused descriptor */
	pthread_mutex_unlock(&s->mu);
	io_close(&c);
	pthread_mutex_lock(&s->mu);
	sl->state = SLOT_DONE;
	s->active--;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Join the threads that ended (accept thread only). */
static void reap(struct image_server *s)
{
	for (unsigned i = 0; i < s->o.max_conns; i++) {
		struct slot *sl = &s->slots[i];
		pthread_mutex_lock(&s->mu);
		bool done = sl->state == SLOT_DONE;
		pthread_mutex_unlock(&s->mu);
		if (done) {
			pthread_join(sl->th, NULL);
			pthread_mutex_lock(&s->mu);
			sl->state = SLOT_FREE;
			pthread_mutex_unlock(&s->mu);
		}
	}
}

static void take(struct image_server *s, int lfd, bool is_unix)
{
	struct sockaddr_storage sa = { 0 };
	socklen_t len = sizeof(sa);
	int fd = accept4(lfd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_limited(&s->lim, VD_LOG_WARN, "image: accept: %s", strerror(errno));
		return;
	}
	if (!is_unix) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	reap(s);
	struct slot *sl = NULL;
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->o.max_conns && !sl; i++)
		if (s->slots[i].state == SLOT_FREE)
			sl = &s->slots[i];
	pthread_mutex_unlock(&s->mu);
	char peer[64];
	if (is_unix)
		snprintf(peer, sizeof(peer), "unix");
	else
		peer_name(&sa, peer, sizeof(peer));
	if (!sl) {
		log_limited(&s->lim, VD_LOG_WARN, "image: %s refused: %u connections open (the limit)",
			    peer, s->o.max_conns);
		close(fd);
		return;
	}
	sl->s = s;
	sl->fd = fd;
	sl->is_unix = is_unix;
	snprintf(sl->peer, sizeof(sl->peer), "%s", peer);
	pthread_mutex_lock(&s->mu);
	sl->state = SLOT_RUNNING;
	s->active++;
	pthread_mutex_unlock(&s->mu);
	int rc = pthread_create(&sl->th, NULL, conn_main, sl);
	if (rc != 0) {
		log_limited(&s->lim, VD_LOG_WARN, "image: %s refused: cannot start a thread: %s", peer,
			    strerror(rc));
		pthread_mutex_lock(&s->mu);
		sl->state = SLOT_FREE;
		sl->fd = -1;
		s->active--;
		pthread_mutex_unlock(&s->mu);
		close(fd);
	}
}

static void *accept_main(void *arg)
{
	struct image_server *s = arg;
	for (;;) {
		struct pollfd p[3];
		nfds_t n = 0;
		p[n++] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
		if (s->tcp_fd >= 0)
			p[n++] = (struct pollfd){ .fd = s->tcp_fd, .events = POLLIN };
		if (s->unix_fd >= 0)
			p[n++] = (struct pollfd){ .fd = s->unix_fd, .events = POLLIN };
		if (poll(p, n, 1000) < 0) {
			if (errno == EINTR)
				continue;
			log_error("image: poll: %s", strerror(errno));
			break;
		}
		if (__atomic_load_n(&s->stop, __ATOMIC_RELAXED) || (p[0].revents & POLLIN))
			break;
		for (nfds_t i = 1; i < n; i++)
			if (p[i].revents & POLLIN)
				take(s, p[i].fd, p[i].fd == s->unix_fd);
		reap(s);
	}
	return NULL;
}

static int listen_tcp(struct image_server *s, char *why, size_t whylen)
{
	char port[16];
	snprintf(port, sizeof(port), "%u", s->o.port);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	const char *host = s->o.host && s->o.host[0] ? s->o.host : NULL;
	int g = getaddrinfo(host, port, &hints, &ai);
	if (g != 0) {
		snprintf(why, whylen, "image server: bad address %s: %s", host ? host : "(any)",
			 gai_strerror(g));
		return VD_EINVAL;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
		snprintf(why, whylen, "image server: cannot listen on %s port %u: %s",
			 host ? host : "(any)", s->o.port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return VD_EIO;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage sa = { 0 };
	socklen_t len = sizeof(sa);
	uint16_t bound = 0;
	if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
		if (sa.ss_family == AF_INET6) {
			struct sockaddr_in6 a6;
			memcpy(&a6, &sa, sizeof(a6));
			bound = a6.sin6_port;
		} else {
			struct sockaddr_in a4;
			memcpy(&a4, &sa, sizeof(a4));
			bound = a4.sin_port;
		}
	}
	s->port = ntohs(bound);
	s->tcp_fd = fd;
	return 0;
}

static int listen_unix(struct image_server *s, char *why, size_t whylen)
{
	const char *path = s->o.unix_path;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, whylen, "image server: unix socket path is longer than %zu bytes: %s",
			 sizeof(sa.sun_path) - 1, path);
		return VD_EINVAL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(why, whylen, "image server: %s exists and is not a socket", path);
			return VD_EEXIST;
		}
		unlink(path);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
		snprintf(why, whylen, "image server: cannot listen on %s: %s", path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return VD_EIO;
	}
	s->unix_fd = fd;
	s->unix_path = xstrdup(path);
	return 0;
}

int image_server_start(const struct image_server_opts *o, struct image_server **out, char *why,
		       size_t whylen)
{
	if (!o->serve || o->max_conns == 0 || (o->tls && !o->lib)) {
		snprintf(why, whylen, "image server: bad options");
		return VD_EINVAL;
	}
	struct image_server *s = xcalloc(1, sizeof(*s));
	s->o = *o;
	s->tcp_fd = s->unix_fd = -1;
	s->wake[0] = s->wake[1] = -1;
	s->lim.burst = 5;
	pthread_mutex_init(&s->mu, NULL);
	s->slots = xcalloc(o->max_conns, sizeof(*s->slots));
	for (unsigned i = 0; i < o->max_conns; i++)
		s->slots[i].fd = -1;
	int rc = listen_tcp(s, why, whylen);
	if (rc == 0 && o->unix_path)
		rc = listen_unix(s, why, whylen);
	if (rc == 0 && pipe2(s->wake, O_CLOEXEC) != 0) {
		snprintf(why, whylen, "image server: pipe: %s", strerror(errno));
		rc = VD_EIO;
	}
	if (rc == 0) {
		int e = pthread_create(&s->acceptor, NULL, accept_main, s);
		if (e != 0) {
			snprintf(why, whylen, "image server: cannot start a thread: %s", strerror(e));
			rc = VD_EIO;
		} else {
			s->acceptor_started = true;
		}
	}
	if (rc != 0) {
		image_server_stop(s);
		return rc;
	}
	*out = s;
	return 0;
}

unsigned image_server_port(const struct image_server *s)
{
	return s->port;
}

unsigned image_server_active(struct image_server *s)
{
	pthread_mutex_lock(&s->mu);
	unsigned n = s->active;
	pthread_mutex_unlock(&s->mu);
	return n;
}

void image_server_stop(struct image_server *s)
{
	if (!s)
		return;
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	if (s->acceptor_started) {
		ssize_t w;
		do
			w = write(s->wake[1], "x", 1);
		while (w < 0 && errno == EINTR);
		pthread_join(s->acceptor, NULL);
	}
	if (s->tcp_fd >= 0)
		close(s->tcp_fd);
	if (s->unix_fd >= 0)
		close(s->unix_fd);
	if (s->unix_path) {
		unlink(s->unix_path);
		free(s->unix_path);
	}
	/* End every open connection's blocking I/O, then wait for them. */
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->o.max_conns; i++)
		if (s->slots[i].state == SLOT_RUNNING && s->slots[i].fd >= 0)
			shutdown(s->slots[i].fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; i < s->o.max_conns; i++) {
		pthread_mutex_lock(&s->mu);
		bool started = s->slots[i].state != SLOT_FREE;
		pthread_mutex_unlock(&s->mu);
		if (started)
			pthread_join(s->slots[i].th, NULL);
	}
	for (int i = 0; i < 2; i++)
		if (s->wake[i] >= 0)
			close(s->wake[i]);
	pthread_mutex_destroy(&s->mu);
	free(s->slots);
	free(s);
}
