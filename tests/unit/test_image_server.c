/* tests/unit/test_image_server.c - the image server's listeners and
 * connection threads (vdsmd/image/server.c) over real loopback TCP, a real
 * unix socket and real OpenSSL with the test PKI of examples/make-pki.sh:
 * a line-echo serve callback, the connection limit, stop while a client
 * idles in the middle of a read, TLS without a client certificate, and
 * plaintext sent to the TLS listener. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <openssl/ssl.h>

#include "common/vd.h"
#include "io/io.h"
#include "vdsmd/image/server.h"
#include "check_main.h"

/* Echo every chunk back until the end of the stream or stop. */
static void echo(void *arg, struct io_conn *c, const char *peer, volatile sig_atomic_t *stop)
{
	char buf[256];
	int *served = arg;
	__atomic_add_fetch(served, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		long n = io_read_wait(c, buf, sizeof(buf), 0, stop);
		if (n <= 0)
			return;
		if (io_write_all(c, buf, (size_t)n, vd_now_ms() + 5000, stop) != 0)
			return;
	}
}

static int dial(unsigned port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Read until n bytes or EOF / 5 s: bytes read. */
static ssize_t read_some(int fd, char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 5000) != 1)
			break;
		ssize_t r = read(fd, buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static void roundtrip(int fd, const char *msg)
{
	char buf[64] = "";
	ck_assert_int_eq(write(fd, msg, strlen(msg)), (ssize_t)strlen(msg));
	ck_assert_int_eq(read_some(fd, buf, strlen(msg)), (ssize_t)strlen(msg));
	ck_assert_str_eq(buf, msg);
}

static void wait_active(struct image_server *s, unsigned want)
{
	for (int i = 0; i < 500 && image_server_active(s) != want; i++)
		usleep(10000);
	ck_assert_uint_eq(image_server_active(s), want);
}

START_TEST(plain_echo_and_limit)
{
	int served = 0;
	struct image_server_opts o = { .host = "127.0.0.1", .max_conns = 2, .serve = echo,
				       .arg = &served };
	struct image_server *s = NULL;
	char why[256];
	ck_assert_int_eq(image_server_start(&o, &s, why, sizeof(why)), 0);
	unsigned port = image_server_port(s);
	ck_assert_uint_ne(port, 0);
	int a = dial(port), b = dial(port);
	roundtrip(a, "hello");
	roundtrip(b, "world");
	wait_active(s, 2);
	/* a third connection over the limit is closed without an answer */
	int c = dial(port);
	char buf[8];
	ck_assert_int_eq(read_some(c, buf, sizeof(buf)), 0);
	close(c);
	/* a slot that ends is taken again */
	close(a);
	wait_active(s, 1);
	int d = dial(port);
	roundtrip(d, "again");
	ck_assert_int_eq(__atomic_load_n(&served, __ATOMIC_SEQ_CST), 3);
	/* stop ends the connections blocked in their reads */
	uint64_t t0 = vd_now_ms();
	image_server_stop(s);
	ck_assert_uint_lt(vd_now_ms() - t0, 3000);
	ck_assert_int_eq(read_some(b, buf, sizeof(buf)), 0);
	ck_assert_int_eq(read_some(d, buf, sizeof(buf)), 0);
	close(b);
	close(d);
	/* the port is free again */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ne(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}
END_TEST

START_TEST(unix_socket)
{
	int served = 0;
	char path[108];
	snprintf(path, sizeof(path), "/tmp/vdsmd-test-imgsrv-%d.sock", (int)getpid());
	/* a stale socket file from an earlier run is replaced */
	int stale = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(stale, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(stale);
	struct image_server_opts o = { .host = "127.0.0.1", .unix_path = path, .max_conns = 4,
				       .serve = echo, .arg = &served };
	struct image_server *s = NULL;
	char why[256];
	ck_assert_msg(image_server_start(&o, &s, why, sizeof(why)) == 0, "%s", why);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	roundtrip(fd, "over unix");
	image_server_stop(s);
	close(fd);
	struct stat st;
	ck_assert_int_ne(lstat(path, &st), 0);
	/* a path that is a regular file is never removed */
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(image_server_start(&o, &s, why, sizeof(why)), VD_EEXIST);
	ck_assert_ptr_nonnull(strstr(why, "not a socket"));
	ck_assert_int_eq(lstat(path, &st), 0);
	unlink(path);
}
END_TEST

START_TEST(bad_address_and_port_in_use)
{
	int served = 0;
	char why[256];
	struct image_server *s = NULL, *t = NULL;
	struct image_server_opts o = { .host = "not-an-address", .max_conns = 1, .serve = echo,
				       .arg = &served };
	ck_assert_int_eq(image_server_start(&o, &s, why, sizeof(why)), VD_EINVAL);
	o.host = "127.0.0.1";
	ck_assert_int_eq(image_server_start(&o, &s, why, sizeof(why)), 0);
	o.port = image_server_port(s);
	ck_assert_int_eq(image_server_start(&o, &t, why, sizeof(why)), VD_EIO);
	ck_assert_ptr_nonnull(strstr(why, "in use"));
	image_server_stop(s);
}
END_TEST

static char pki[256];

static void make_pki(void)
{
	snprintf(pki, sizeof(pki), "/tmp/vdsmd-test-imgsrv-%d", (int)getpid());
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "sh examples/make-pki.sh %s >/dev/null 2>&1", pki);
	ck_assert_int_eq(system(cmd), 0);
}

static void drop_pki(void)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", pki);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(tls_without_client_certificate)
{
	make_pki();
	char crt[320], key[320], ca[320];
	snprintf(crt, sizeof(crt), "%s/server.crt", pki);
	snprintf(key, sizeof(key), "%s/server.key", pki);
	snprintf(ca, sizeof(ca), "%s/ca.crt", pki);
	SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
	ck_assert_int_eq(SSL_CTX_use_certificate_chain_file(sctx, crt), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(sctx, key, SSL_FILETYPE_PEM), 1);
	SSL_CTX_set_verify(sctx, SSL_VERIFY_NONE, NULL);
	int served = 0;
	struct image_server_opts o = { .host = "127.0.0.1", .max_conns = 2, .tls = sctx,
				       .lib = io_tls_lib_linked(), .handshake_ms = 2000,
				       .serve = echo, .arg = &served };
	struct image_server *s = NULL;
	char why[256];
	ck_assert_int_eq(image_server_start(&o, &s, why, sizeof(why)), 0);

	/* a client with no certificate of its own, checking the server's */
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	ck_assert_int_eq(SSL_CTX_load_verify_locations(cctx, ca, NULL), 1);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	struct io_conn c = IO_CONN_INIT;
	int fd = dial(image_server_port(s));
	ck_assert_int_eq(io_tls_client_init(&c, io_tls_lib_linked(), cctx, fd, NULL, NULL), 0);
	ck_assert_int_eq(io_handshake_wait(&c, vd_now_ms() + 5000, NULL), 0);
	ck_assert_int_eq(io_write_all(&c, "secret", 6, vd_now_ms() + 5000, NULL), 0);
	char buf[16] = "";
	size_t got = 0;
	while (got < 6) {
		long n = io_read_wait(&c, buf + got, sizeof(buf) - 1 - got, vd_now_ms() + 5000,
				      NULL);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	ck_assert_str_eq(buf, "secret");

	/* plaintext on the TLS listener: closed, serve() never called */
	int p = dial(image_server_port(s));
	const char *req = "GET /images/x HTTP/1.1\r\nHost: a\r\n\r\n";
	ck_assert_int_eq(write(p, req, strlen(req)), (ssize_t)strlen(req));
	ck_assert_int_eq(read_some(p, buf, sizeof(buf)), 0);
	close(p);
	ck_assert_int_eq(__atomic_load_n(&served, __ATOMIC_SEQ_CST), 1);

	/* a client that never starts its handshake is dropped at the deadline */
	int idle = dial(image_server_port(s));
	ck_assert_int_eq(read_some(idle, buf, sizeof(buf)), 0);
	close(idle);

	image_server_stop(s);
	long n = io_read_wait(&c, buf, sizeof(buf), vd_now_ms() + 5000, NULL);
	ck_assert_int_le(n, 0);
	io_close(&c);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	drop_pki();
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("image_server");
	TCase *tc = tcase_create("server");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, plain_echo_and_limit);
	tcase_add_test(tc, unix_socket);
	tcase_add_test(tc, bad_address_and_port_in_use);
	tcase_add_test(tc, tls_without_client_certificate);
	suite_add_tcase(s, tc);
	return check_run(s);
}
