/* tests/unit/test_daemon.c - vdsmd/daemon.c in-process: readiness from the
 * subsystems, startup errors (codec, TLS files, port in use), and /health
 * 503 vs 200 over a real loopback socket driven by the daemon's own loop. */
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

#include "common/log.h"
#include "rpc/event.h"
#include "rpc/rpc.h"
#include "vdsmd/daemon.h"
#include "vdsmd/server.h"
#include "check_main.h"
#include "daemon_test.h"

static char storage[64];

static int init_daemon(struct vdsmd *d, const char *extra1, const char *extra2, char *why,
		       size_t whylen)
{
	const char *extra[] = { extra1, extra2 };
	return daemon_test_start(d, storage, "daemon", extra, extra1 ? 2 : 0, why, whylen);
}

static void fini_daemon(struct vdsmd *d)
{
	daemon_test_stop(d, storage);
}

START_TEST(ready_needs_host_and_virt)
{
	struct vdsmd d;
	memset(&d, 0, sizeof(d));
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	d.rpc = rpc_engine_new(&lim);
	d.bus = event_bus_new(codec_find("yajl"), 16);
	d.start_ms = vd_now_ms();
	ck_assert(!rpc_engine_ready(d.rpc));
	daemon_subsystem_ready(&d, "host");
	ck_assert(!rpc_engine_ready(d.rpc));
	ck_assert(!event_bus_enabled(d.bus));
	daemon_subsystem_ready(&d, "storage"); /* not one that gates readiness */
	daemon_subsystem_ready(&d, "host");
	ck_assert(!rpc_engine_ready(d.rpc));
	daemon_subsystem_ready(&d, "virt");
	ck_assert(rpc_engine_ready(d.rpc));
	ck_assert(event_bus_enabled(d.bus));
	daemon_subsystem_ready(&d, "virt");
	ck_assert(rpc_engine_ready(d.rpc));
	event_bus_free(d.bus);
	rpc_engine_free(d.rpc);
}
END_TEST

START_TEST(codec_for_content_type)
{
	struct vdsmd d;
	memset(&d, 0, sizeof(d));
	d.codec = codec_find("fallback");
	ck_assert_ptr_eq(daemon_codec_for(&d, NULL, 0), d.codec);
	ck_assert_ptr_eq(daemon_codec_for(&d, "application/json", 16), d.codec);
	ck_assert_ptr_eq(daemon_codec_for(&d, "application/json; charset=utf-8", 31), d.codec);
	ck_assert_ptr_null(daemon_codec_for(&d, "text/xml", 8));
#ifdef WITH_MSGPACK
	const struct vd_codec *mp = daemon_codec_for(&d, "application/msgpack", 19);
	ck_assert_ptr_nonnull(mp);
	ck_assert_str_eq(mp->name, "msgpack");
	/* A msgpack startup codec still answers JSON requests with JSON. */
	d.codec = mp;
	ck_assert(daemon_codec_for(&d, "application/json", 16)->is_json);
	ck_assert_ptr_eq(daemon_codec_for(&d, NULL, 0), mp);
#endif
}
END_TEST

START_TEST(startup_errors)
{
	struct vdsmd d;
	char why[512] = "";
	/* TLS with a missing file names the key and the file. */
	ck_assert_int_lt(init_daemon(&d, "--tls", "on", why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "key_file") && strstr(why, "/etc/pki/vdsm/keys/vdsmkey.pem"),
		      "%s", why);
	fini_daemon(&d);
	/* A port already in use. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	socklen_t sl = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &sl);
	char port[16];
	snprintf(port, sizeof(port), "%u", ntohs(a.sin_port));
	ck_assert_int_lt(init_daemon(&d, "--port", port, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "cannot listen on 127.0.0.1 port") && strstr(why, "in use"), "%s",
		      why);
	fini_daemon(&d);
	close(fd);
}
END_TEST

/* Send an HTTP request and run the daemon's loop until the response is in. */
static int http_status(struct vdsmd *d, const char *req, char *resp, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(d->srv->bound_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	size_t len = 0;
	for (int i = 0; i < 2000 && !strstr(resp, "\r\n\r\n"); i++) {
		ev_run(d->loop, EVRUN_NOWAIT);
		ssize_t n = read(fd, resp + len, cap - len - 1);
		if (n > 0) {
			len += (size_t)n;
			resp[len] = 0;
		} else {
			usleep(1000);
		}
	}
	close(fd);
	int status = 0;
	sscanf(resp, "HTTP/1.1 %d", &status);
	return status;
}

START_TEST(health_follows_readiness)
{
	struct vdsmd d;
	char why[512] = "";
	ck_assert_int_eq(init_daemon(&d, NULL, NULL, why, sizeof(why)), 0);
	char resp[4096] = "";
	/* Let host and virt report first (their samplers may do so from
	 * another thread), then take readiness away by hand. */
	/* The mask is set before the sampler thread marks the engine ready:
	 * wait for both, or that thread's set_ready(true) can land after the
	 * test's set_ready(false). */
	for (int i = 0; i < 5000 && (__atomic_load_n(&d.ready_mask, __ATOMIC_ACQUIRE) != 3 ||
				     !rpc_engine_ready(d.rpc)); i++) {
		ev_run(d.loop, EVRUN_NOWAIT);
		usleep(1000);
	}
	ck_assert_uint_eq(__atomic_load_n(&d.ready_mask, __ATOMIC_ACQUIRE), 3);
	rpc_engine_set_ready(d.rpc, false);
	ck_assert_int_eq(http_status(&d, "GET /health HTTP/1.1\r\n\r\n", resp, sizeof(resp)), 503);
	ck_assert(strstr(resp, "{\"status\":\"starting\"}"));
	memset(resp, 0, sizeof(resp));
	rpc_engine_set_ready(d.rpc, true);
	ck_assert_int_eq(http_status(&d, "GET /health HTTP/1.1\r\n\r\n", resp, sizeof(resp)), 200);
	ck_assert(strstr(resp, "{\"status\":\"ok\"}"));
	memset(resp, 0, sizeof(resp));
	ck_assert_int_eq(http_status(&d, "DELETE /health HTTP/1.1\r\n\r\n", resp, sizeof(resp)), 0);
	fini_daemon(&d);
}
END_TEST

int main(void)
{
	log_open(&daemon_test_log, NULL, VD_LOG_ERROR);
	Suite *s = suite_create("daemon");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, ready_needs_host_and_virt);
	tcase_add_test(tc, codec_for_content_type);
	tcase_add_test(tc, startup_errors);
	tcase_add_test(tc, health_follows_readiness);
	suite_add_tcase(s, tc);
	return check_run(s);
}
