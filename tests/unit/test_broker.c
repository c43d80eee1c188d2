/* tests/unit/test_broker.c - broker mode (vdsmd/broker*.c): URI parsing,
 * config defaults, startup errors, and an in-process daemon against a
 * scripted broker on a loopback socket: CONNECT/SUBSCRIBE headers, reply
 * then ACK, reconnect after the connection drops, a redelivered request
 * answered from the reply cache, events while disconnected counted.
 * (The real RabbitMQ runs in tests/integration/test_broker.py.) */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/buf.h"
#include "common/log.h"
#include "rpc/rpc.h"
#include "vdsmd/broker.h"
#include "vdsmd/daemon.h"
#include "check_main.h"
#include "daemon_test.h"

START_TEST(parse_uri)
{
	char host[64], why[256];
	unsigned port;
	bool tls;
	ck_assert_int_eq(broker_parse_uri("stomp://127.0.0.1", host, sizeof(host), &port, &tls,
					  why, sizeof(why)), 0);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_uint_eq(port, 61613);
	ck_assert(!tls);
	ck_assert_int_eq(broker_parse_uri("stomps://mq.example:1234/", host, sizeof(host), &port,
					  &tls, why, sizeof(why)), 0);
	ck_assert_str_eq(host, "mq.example");
	ck_assert_uint_eq(port, 1234);
	ck_assert(tls);
	ck_assert_int_eq(broker_parse_uri("stomps://[::1]", host, sizeof(host), &port, &tls,
					  why, sizeof(why)), 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_uint_eq(port, 61614);
	ck_assert_int_eq(broker_parse_uri("[::1]:9", host, sizeof(host), &port, &tls, why,
					  sizeof(why)), VD_EINVAL);
	static const char *const bad[] = {
		"amqp://h", "stomp://", "stomp://h:0", "stomp://h:70000", "stomp://h:12x",
		"stomp://[::1", "stomp://h/vhost", "stomp://:5",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = 0;
		ck_assert_msg(broker_parse_uri(bad[i], host, sizeof(host), &port, &tls, why,
					       sizeof(why)) == VD_EINVAL, "%s accepted", bad[i]);
		ck_assert_msg(strstr(why, "broker_uri") != NULL, "%s: %s", bad[i], why);
	}
}
END_TEST

START_TEST(config_defaults)
{
	struct vd_config c;
	char why[256] = "";
	const char *argv[] = { "vdsmd", "--config", "/dev/null", "--broker-prefetch", "5" };
	ck_assert_int_eq(config_load(&c, 5, (char **)argv, why, sizeof(why)), 0);
	ck_assert_str_eq(c.broker_uri, "");
	ck_assert_str_eq(c.broker_vhost, "/");
	ck_assert_str_eq(c.host_id, "");
	ck_assert_str_eq(c.broker_login, "");
	ck_assert_uint_eq(c.broker_prefetch, 5);
	config_free(&c);
	const char *bad[] = { "vdsmd", "--config", "/dev/null", "--broker-prefetch", "0" };
	ck_assert_int_eq(config_load(&c, 5, (char **)bad, why, sizeof(why)), VD_EINVAL);
	config_free(&c);
}
END_TEST

/* ---- in-process daemon against a scripted broker ---------------------------- */

static char storage[64];

static int start_daemon(struct vdsmd *d, const char *uri, const char *host_id, char *why,
			size_t whylen)
{
	const char *extra[] = { "--broker-uri", uri, "--broker-login", "u", "--broker-passcode", "p",
				"--host-id", host_id, "--vm-sample-interval", "1",
				"--host-sample-interval", "1" };
	return daemon_test_start(d, storage, "broker", extra, sizeof(extra) / sizeof(extra[0]),
				 why, whylen);
}

static void stop_daemon(struct vdsmd *d)
{
	daemon_test_stop(d, storage);
}

START_TEST(bad_uri_stops_startup)
{
	struct vdsmd d;
	char why[256] = "";
	ck_assert_int_eq(start_daemon(&d, "http://x", "h", why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, "broker_uri") != NULL, "%s", why);
	stop_daemon(&d);
	ck_assert_int_eq(start_daemon(&d, "stomp://127.0.0.1:1", "a.b", why, sizeof(why)),
			 VD_EINVAL);
	ck_assert_msg(strstr(why, "host_id") != NULL, "%s", why);
	stop_daemon(&d);
}
END_TEST

struct fake {
	int lfd, fd;
	struct vd_buf in;
};

/* Run the daemon's loop while waiting for `what` on the fake broker side:
 * a connection (what NULL, fd < 0) or a frame ending with NUL that contains
 * what.  The frame text (up to its NUL) is consumed and copied to out. */
static bool pump(struct vdsmd *d, struct fake *f, const char *what, char *out, size_t outlen,
		 double timeout)
{
	uint64_t end = vd_now_ms() + (uint64_t)(timeout * 1000);
	while (vd_now_ms() < end) {
		ev_run(d->loop, EVRUN_NOWAIT);
		if (f->fd < 0) {
			f->fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK);
			if (f->fd >= 0 && !what)
				return true;
		} else {
			char b[8192];
			ssize_t n = recv(f->fd, b, sizeof(b), 0);
			if (n > 0)
				buf_append(&f->in, b, (size_t)n);
			/* drop heart-beat EOLs */
			size_t skip = 0;
			while (skip < f->in.len && f->in.data[skip] == '\n')
				skip++;
			buf_consume(&f->in, skip);
			char *nul = f->in.len ? memchr(f->in.data, 0, f->in.len) : NULL;
			if (nul) {
				size_t fl = (size_t)(nul - f->in.data);
				bool hit = what && memmem(f->in.data, fl, what, strlen(what));
				if (out) {
					snprintf(out, outlen, "%.*s", (int)fl, f->in.data);
				}
				buf_consume(&f->in, fl + 1);
				if (hit)
					return true;
				ck_abort_msg("expected a frame with \"%s\", got:\n%.*s", what ? what : "",
					     (int)fl, out ? out : "");
			}
		}
		usleep(1000);
	}
	return false;
}

static void fake_send(struct fake *f, const char *frame, size_t len)
{
	ck_assert_int_eq(send(f->fd, frame, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void send_message(struct fake *f, const char *ack, bool redelivered, const char *body)
{
	char fr[1024];
	int n = snprintf(fr, sizeof(fr), "MESSAGE\ndestination:/queue/vdsm.u1.requests\n"
			 "subscription:vdsm-requests\nmessage-id:m-%s\nack:%s\n"
			 "reply-to:/reply-queue/r\n%scontent-length:%zu\n\n%s",
			 ack, ack, redelivered ? "redelivered:true\n" : "", strlen(body), body);
	fake_send(f, fr, (size_t)n + 1);   /* with the NUL */
}

static void login(struct vdsmd *d, struct fake *f)
{
	char fr[4096];
	ck_assert(pump(d, f, NULL, NULL, 0, 10));
	ck_assert(pump(d, f, "CONNECT\n", fr, sizeof(fr), 10));
	ck_assert_msg(strstr(fr, "accept-version:1.2\n") && strstr(fr, "host:/\n") &&
		      strstr(fr, "login:u\n") && strstr(fr, "passcode:p\n") &&
		      strstr(fr, "heart-beat:"), "%s", fr);
	static const char conn[] = "CONNECTED\nversion:1.2\nheart-beat:0,0\n\n";
	fake_send(f, conn, sizeof(conn));
	ck_assert(pump(d, f, "SUBSCRIBE\n", fr, sizeof(fr), 15));
	ck_assert_msg(strstr(fr, "destination:/queue/vdsm.u1.requests\n") &&
		      strstr(fr, "ack:client-individual\n") && strstr(fr, "prefetch-count:64\n"),
		      "%s", fr);
}

START_TEST(scripted_broker)
{
	struct fake f = { -1, -1, VD_BUF_INIT };
	f.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(f.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(f.lfd, 4), 0);
	socklen_t sl = sizeof(a);
	getsockname(f.lfd, (struct sockaddr *)&a, &sl);
	char uri[64], why[256] = "";
	snprintf(uri, sizeof(uri), "stomp://127.0.0.1:%u", ntohs(a.sin_port));
	struct vdsmd d;
	ck_assert_int_eq(start_daemon(&d, uri, "u1", why, sizeof(why)), 0);
	login(&d, &f);

	char fr[8192];
	const char *req = "{\"jsonrpc\":\"2.0\",\"method\":\"Host.ping2\",\"id\":\"x-1\"}";
	send_message(&f, "a1", false, req);
	ck_assert(pump(&d, &f, "SEND\n", fr, sizeof(fr), 5));
	ck_assert_msg(strstr(fr, "destination:/reply-queue/r\n") &&
		      strstr(fr, "{\"jsonrpc\":\"2.0\",\"id\":\"x-1\",\"result\":true}"), "%s", fr);
	ck_assert(pump(&d, &f, "ACK\n", fr, sizeof(fr), 5));
	ck_assert_msg(strstr(fr, "id:a1\n") != NULL, "%s", fr);

	struct vd_broker_stats st;
	broker_stats(d.broker, &st);
	ck_assert(st.connected);
	ck_assert_uint_eq(st.requests, 1);
	ck_assert_uint_eq(st.acked, 1);

	/* the broker goes away: not connected, events dropped and counted */
	close(f.fd);
	f.fd = -1;
	buf_reset(&f.in);
	for (int i = 0; i < 200 && d.broker && (broker_stats(d.broker, &st), st.connected); i++) {
		ev_run(d.loop, EVRUN_NOWAIT);
		usleep(1000);
	}
	ck_assert(!st.connected);
	broker_publish_event(d.broker, "{}", 2, d.codec);
	broker_stats(d.broker, &st);
	ck_assert_uint_eq(st.publish_failures, 1);

	/* reconnect (backoff about 1 s); the request comes again, redelivered */
	login(&d, &f);
	send_message(&f, "a2", true, req);
	ck_assert(pump(&d, &f, "SEND\n", fr, sizeof(fr), 5));
	ck_assert_msg(strstr(fr, "\"id\":\"x-1\",\"result\":true"), "%s", fr);
	ck_assert(pump(&d, &f, "ACK\n", fr, sizeof(fr), 5));
	ck_assert_msg(strstr(fr, "id:a2\n") != NULL, "%s", fr);
	broker_stats(d.broker, &st);
	ck_assert_uint_eq(st.duplicates, 1);
	ck_assert_uint_eq(st.redelivered, 1);
	ck_assert_uint_ge(st.reconnects, 1);

	/* connected: events go to the host's topic */
	broker_publish_event(d.broker, "{\"e\":1}", 7, d.codec);
	ck_assert(pump(&d, &f, "destination:/topic/vdsm.u1.events\n", fr, sizeof(fr), 5));

	/* /metrics has the broker lines */
	struct vd_buf m = VD_BUF_INIT;
	broker_metrics_format(d.broker, &m);
	buf_putc(&m, 0);
	ck_assert(strstr(m.data, "vdsmd_broker_connected 1\n"));
	ck_assert(strstr(m.data, "vdsmd_broker_requests_deduplicated_total 1\n"));
	buf_free(&m);

	stop_daemon(&d);
	close(f.fd);
	close(f.lfd);
	buf_free(&f.in);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker");
	TCase *tc = tcase_create("broker");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, parse_uri);
	tcase_add_test(tc, config_defaults);
	tcase_add_test(tc, bad_uri_stops_startup);
	tcase_add_test(tc, scripted_broker);
	suite_add_tcase(s, tc);
	return check_run(s);
}
