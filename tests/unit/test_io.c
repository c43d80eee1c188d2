/* tests/unit/test_io.c - the connection layer (io/): plain and TLS over real
 * socketpairs and loopback TCP, real OpenSSL with the test PKI of
 * examples/make-pki.sh.  Non-blocking use (VD_AGAIN with want, short reads
 * and writes), blocking use against a deadline and a stop flag, the
 * handshake driven both ways, peer certificates, shutdown (EOF and
 * close_notify), a refused certificate, plaintext on a TLS server, and the
 * dlopen()ed OpenSSL table of vdsm-client against the linked one. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <openssl/ssl.h>

#include "io/io.h"
#include "io/tls_lib.h"
#include "check_main.h"

static char pki[256];

static void make_pki(void)
{
	snprintf(pki, sizeof(pki), "/tmp/vdsmd-test-io-%d", (int)getpid());
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "sh examples/make-pki.sh %s >/dev/null 2>&1", pki);
	if (system(cmd) != 0) {
		fprintf(stderr, "examples/make-pki.sh failed\n");
		exit(1);
	}
}

static void drop_pki(void)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", pki);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", pki);
}

static const char *pki_file(const char *name)
{
	static char path[8][320];
	static unsigned n;
	char *p = path[n++ % 8];
	snprintf(p, sizeof(path[0]), "%s/%s", pki, name);
	return p;
}

/* A context as vdsmd's (server: client certificate required) or as a
 * client's (its certificate, the server's checked against ca). */
static SSL_CTX *make_ctx(bool server, const char *who, const char *ca)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	ck_assert_ptr_nonnull(ctx);
	char crt[64], key[64];
	snprintf(crt, sizeof(crt), "%s.crt", who);
	snprintf(key, sizeof(key), "%s.key", who);
	ck_assert_int_eq(SSL_CTX_use_certificate_chain_file(ctx, pki_file(crt)), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(ctx, pki_file(key), SSL_FILETYPE_PEM), 1);
	ck_assert_int_eq(SSL_CTX_load_verify_locations(ctx, pki_file(ca), NULL), 1);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
			   NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	return ctx;
}

static void pair(int sv[2], bool nonblock)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0, sv),
			 0);
}

/* Run both handshakes, non-blocking, in turn until both are done; returns
 * how many VD_AGAIN they answered, or -1 when one failed (*which: 0 client). */
static int handshake_both(struct io_conn *cl, struct io_conn *sv, int *which)
{
	int agains = 0;
	bool cdone = false, sdone = false;
	for (int i = 0; i < 100 && !(cdone && sdone); i++) {
		if (!cdone) {
			int r = io_handshake(cl);
			if (r == VD_AGAIN) {
				ck_assert(cl->want == IO_WANT_READ || cl->want == IO_WANT_WRITE);
				agains++;
			} else if (r == 0) {
				cdone = true;
			} else {
				*which = 0;
				return -1;
			}
		}
		if (!sdone) {
			int r = io_handshake(sv);
			if (r == VD_AGAIN) {
				agains++;
			} else if (r == 0) {
				sdone = true;
			} else {
				*which = 1;
				return -1;
			}
		}
	}
	ck_assert(cdone && sdone);
	return agains;
}

struct tls_pair {
	SSL_CTX *sctx, *cctx;
	struct io_conn cl, sv;
};

static void tls_pair_open(struct tls_pair *p, const char *client_ca, const char *verify_name,
			  const struct io_tls_lib *client_lib)
{
	int fds[2];
	pair(fds, true);
	p->sctx = make_ctx(true, "server", "ca.crt");
	p->cctx = make_ctx(false, "client", client_ca);
	ck_assert_int_eq(io_tls_server_init(&p->sv, io_tls_lib_linked(), p->sctx, fds[1]), 0);
	ck_assert_int_eq(io_tls_client_init(&p->cl, client_lib ? client_lib : io_tls_lib_linked(),
					    p->cctx, fds[0], "localhost", verify_name), 0);
}

static void tls_pair_close(struct tls_pair *p)
{
	io_close(&p->cl);
	io_close(&p->sv);
	SSL_CTX_free(p->sctx);
	SSL_CTX_free(p->cctx);
}

/* ---- plain ------------------------------------------------------------------ */

START_TEST(plain_read_write_shutdown)
{
	int fds[2];
	pair(fds, false);
	struct io_conn a, b;
	io_plain_init(&a, fds[0]);
	io_plain_init(&b, fds[1]);
	ck_assert(!io_is_tls(&a));
	ck_assert_str_eq(io_version(&a), "plain");
	ck_assert_int_eq(io_handshake(&a), 0);
	ck_assert_int_eq(io_flush(&a), 0);
	char subj[64] = "x";
	ck_assert_int_eq(io_peer_cert(&a, subj, sizeof(subj)), VD_ENOENT);
	ck_assert_str_eq(subj, "");
	ck_assert_int_eq(io_write(&a, "0123456789", 10), 10);
	/* a short read: the rest stays for the next one */
	char buf[16];
	ck_assert_int_eq(io_read(&b, buf, 3), 3);
	ck_assert_int_eq(memcmp(buf, "012", 3), 0);
	ck_assert_int_eq(io_read(&b, buf, sizeof(buf)), 7);
	ck_assert_int_eq(memcmp(buf, "3456789", 7), 0);
	/* shutdown: the peer reads the end of the stream, and can still write */
	ck_assert_int_eq(io_shutdown(&a), 0);
	ck_assert_int_eq(io_read(&b, buf, sizeof(buf)), 0);
	ck_assert_int_eq(io_write(&b, "ok", 2), 2);
	ck_assert_int_eq(io_read(&a, buf, sizeof(buf)), 2);
	io_close(&a);
	ck_assert_int_eq(a.fd, -1);
	/* the peer gone: a write says so, not with 0 */
	long w = 0;
	for (int i = 0; i < 4 && w >= 0; i++)
		w = io_write(&b, "x", 1);
	ck_assert_int_eq(w, VD_ECLOSED);
	ck_assert_ptr_nonnull(strstr(io_last_error(&b), "write"));
	io_close(&b);
	io_close(&b);   /* twice is harmless */
}
END_TEST

START_TEST(plain_nonblocking_again_and_short_writes)
{
	int fds[2];
	pair(fds, true);
	int small = 4096;
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	struct io_conn a, b;
	io_plain_init(&a, fds[0]);
	io_plain_init(&b, fds[1]);
	char buf[4096];
	ck_assert_int_eq(io_read(&b, buf, sizeof(buf)), VD_AGAIN);
	ck_assert_int_eq(b.want, IO_WANT_READ);
	/* fill the socket: a write shorter than asked, then VD_AGAIN */
	size_t big = 1 << 20, sent = 0;
	char *data = malloc(big);
	for (size_t i = 0; i < big; i++)
		data[i] = (char)(i * 7);
	bool short_write = false;
	long w;
	while ((w = io_write(&a, data + sent, big - sent)) > 0) {
		if ((size_t)w < big - sent)
			short_write = true;
		sent += (size_t)w;
	}
	ck_assert_int_eq(w, VD_AGAIN);
	ck_assert_int_eq(a.want, IO_WANT_WRITE);
	ck_assert(short_write);
	ck_assert(sent > 0 && sent < big);
	/* drain and finish: every byte arrives in order */
	size_t got = 0;
	bool ok = true;
	while (got < big) {
		long r = io_read(&b, buf, sizeof(buf));
		if (r > 0) {
			for (long i = 0; i < r; i++)
				ok &= buf[i] == (char)((got + (size_t)i) * 7);
			got += (size_t)r;
		} else {
			ck_assert_int_eq(r, VD_AGAIN);
		}
		if (sent < big) {
			w = io_write(&a, data + sent, big - sent);
			if (w > 0)
				sent += (size_t)w;
		}
	}
	ck_assert(ok);
	free(data);
	io_close(&a);
	io_close(&b);
}
END_TEST

START_TEST(plain_deadline_and_stop)
{
	int fds[2];
	pair(fds, true);
	struct io_conn a;
	io_plain_init(&a, fds[0]);
	char buf[8];
	uint64_t t0 = vd_now_ms();
	ck_assert_int_eq(io_read_wait(&a, buf, sizeof(buf), t0 + 150, NULL), VD_ETIMEDOUT);
	uint64_t took = vd_now_ms() - t0;
	ck_assert_msg(took >= 140 && took < 2000, "waited %llu ms", (unsigned long long)took);
	volatile sig_atomic_t stop = 1;
	ck_assert_int_eq(io_read_wait(&a, buf, sizeof(buf), 0, &stop), VD_AGAIN);
	/* bytes already there: read at once whatever the deadline */
	ck_assert_int_eq(write(fds[1], "hi", 2), 2);
	ck_assert_int_eq(io_read_wait(&a, buf, sizeof(buf), vd_now_ms() + 1000, NULL), 2);
	ck_assert_int_eq(io_write_all(&a, "abc", 3, vd_now_ms() + 1000, NULL), 0);
	ck_assert_int_eq(read(fds[1], buf, sizeof(buf)), 3);
	io_close(&a);
	close(fds[1]);
}
END_TEST

START_TEST(connect_refused_and_loopback)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(l, (struct sockaddr *)&in, sizeof(in)), 0);
	socklen_t len = sizeof(in);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&in, &len), 0);
	char port[8];
	snprintf(port, sizeof(port), "%u", ntohs(in.sin_port));
	char why[256] = "";
	/* bound, not listening: refused */
	ck_assert_int_eq(io_dial("127.0.0.1", port, 0, vd_now_ms() + 2000, why, sizeof(why)), VD_EIO);
	ck_assert_int_eq(errno, ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "refused"));
	ck_assert_int_eq(listen(l, 4), 0);
	int fd = io_dial("127.0.0.1", port, 0, vd_now_ms() + 2000, why, sizeof(why));
	ck_assert_int_ge(fd, 0);
	ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
	int s = accept(l, NULL, NULL);
	ck_assert_int_ge(s, 0);
	struct io_conn c;
	io_plain_init(&c, fd);
	ck_assert_int_eq(io_write_all(&c, "ping", 4, vd_now_ms() + 1000, NULL), 0);
	char buf[8];
	ck_assert_int_eq(read(s, buf, sizeof(buf)), 4);
	io_close(&c);
	close(s);
	close(l);
}
END_TEST

/* ---- TLS -------------------------------------------------------------------- */

START_TEST(tls_nonblocking_handshake_certs_and_data)
{
	struct tls_pair p;
	tls_pair_open(&p, "ca.crt", "localhost", NULL);
	ck_assert(io_is_tls(&p.cl));
	char buf[256];
	/* before the handshake: nothing to read yet, the client must write */
	ck_assert_int_eq(io_read(&p.sv, buf, sizeof(buf)), VD_AGAIN);
	ck_assert_int_eq(p.sv.want, IO_WANT_READ);
	int which = -1;
	int agains = handshake_both(&p.cl, &p.sv, &which);
	ck_assert_msg(agains > 0, "handshake failed on side %d: %s", which,
		      which == 0 ? io_last_error(&p.cl) : io_last_error(&p.sv));
	ck_assert_ptr_nonnull(strstr(io_version(&p.cl), "TLSv1."));
	char subj[256];
	ck_assert_int_eq(io_peer_cert(&p.sv, subj, sizeof(subj)), 0);
	ck_assert_str_eq(subj, "/CN=vdsmd test client");
	ck_assert_int_eq(io_peer_cert(&p.cl, subj, sizeof(subj)), 0);
	ck_assert_str_eq(subj, "/CN=localhost");
	/* 1 MiB through: short writes (partial-write mode) and short reads */
	size_t big = 1 << 20, sent = 0, got = 0;
	char *data = malloc(big), *back = malloc(big);
	for (size_t i = 0; i < big; i++)
		data[i] = (char)(i * 13 + 1);
	bool short_write = false;
	while (got < big) {
		if (sent < big) {
			long w = io_write(&p.cl, data + sent, big - sent);
			if (w > 0) {
				short_write |= (size_t)w < big - sent;
				sent += (size_t)w;
			} else {
				ck_assert_int_eq(w, VD_AGAIN);
			}
		}
		size_t want = VD_MIN((size_t)1000, big - got);
		long r = io_read(&p.sv, back + got, want);
		if (r > 0) {
			ck_assert_int_le(r, 1000);
			got += (size_t)r;
		} else {
			ck_assert_int_eq(r, VD_AGAIN);
		}
	}
	ck_assert(short_write);
	ck_assert_int_eq(memcmp(data, back, big), 0);
	/* a read smaller than a record: the rest comes with the next read */
	ck_assert_int_eq(io_write(&p.sv, "hello world", 11), 11);
	ck_assert_int_eq(io_flush(&p.sv), 0);
	long r;
	while ((r = io_read(&p.cl, buf, 5)) == VD_AGAIN)
		;
	ck_assert_int_eq(r, 5);
	ck_assert_int_eq(io_read(&p.cl, buf + 5, sizeof(buf) - 5), 6);
	ck_assert_int_eq(memcmp(buf, "hello world", 11), 0);
	/* shutdown: close_notify reads as the end of the stream */
	ck_assert_int_eq(io_shutdown(&p.cl), 0);
	while ((r = io_read(&p.sv, buf, sizeof(buf))) == VD_AGAIN)
		;
	ck_assert_int_eq(r, 0);
	free(data);
	free(back);
	tls_pair_close(&p);
}
END_TEST

START_TEST(tls_untrusted_server_refused)
{
	struct tls_pair p;
	tls_pair_open(&p, "wrong-ca.crt", NULL, NULL);
	int r = 0;
	for (int i = 0; i < 100; i++) {
		r = io_handshake(&p.cl);
		if (r != VD_AGAIN)
			break;
		int s = io_handshake(&p.sv);
		if (s != VD_AGAIN && s != 0)
			break;
	}
	ck_assert_int_eq(r, VD_EIO);
	ck_assert_ptr_nonnull(p.cl.verify_err);
	ck_assert_msg(strstr(p.cl.verify_err, "issuer") || strstr(p.cl.verify_err, "certificate"),
		      "%s", p.cl.verify_err);
	ck_assert_ptr_nonnull(strstr(io_last_error(&p.cl), "certificate verify failed"));
	ck_assert_str_eq(p.cl.reason, "certificate verify failed");
	tls_pair_close(&p);
}
END_TEST

START_TEST(tls_wrong_name_refused)
{
	struct tls_pair p;
	tls_pair_open(&p, "ca.crt", "other.example", NULL);
	int r = 0;
	for (int i = 0; i < 100 && (r = io_handshake(&p.cl)) == VD_AGAIN; i++)
		io_handshake(&p.sv);
	ck_assert_int_eq(r, VD_EIO);
	ck_assert_ptr_nonnull(p.cl.verify_err);
	ck_assert_ptr_nonnull(strstr(p.cl.verify_err, "mismatch"));
	tls_pair_close(&p);
	/* by IP address: the server certificate names 127.0.0.1 */
	tls_pair_open(&p, "ca.crt", "127.0.0.1", NULL);
	int which = -1;
	ck_assert_int_ge(handshake_both(&p.cl, &p.sv, &which), 0);
	tls_pair_close(&p);
}
END_TEST

START_TEST(tls_client_without_certificate_refused)
{
	int fds[2];
	pair(fds, true);
	SSL_CTX *sctx = make_ctx(true, "server", "ca.crt");
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	ck_assert_int_eq(SSL_CTX_load_verify_locations(cctx, pki_file("ca.crt"), NULL), 1);
	struct io_conn cl, sv;
	ck_assert_int_eq(io_tls_server_init(&sv, io_tls_lib_linked(), sctx, fds[1]), 0);
	ck_assert_int_eq(io_tls_client_init(&cl, io_tls_lib_linked(), cctx, fds[0], NULL, NULL), 0);
	int r = VD_AGAIN;
	for (int i = 0; i < 100 && r == VD_AGAIN; i++) {
		int x = io_handshake(&cl);
		ck_assert(x == VD_AGAIN || x == 0 || x == VD_EIO);
		r = io_handshake(&sv);
	}
	ck_assert_int_eq(r, VD_EIO);
	ck_assert_msg(strstr(io_last_error(&sv), "certificate"), "%s", io_last_error(&sv));
	ck_assert(!sv.closed_in_handshake);
	io_close(&cl);
	io_close(&sv);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
}
END_TEST

START_TEST(tls_plaintext_on_server_refused)
{
	int fds[2];
	pair(fds, true);
	SSL_CTX *ctx = make_ctx(true, "server", "ca.crt");
	struct io_conn sv;
	ck_assert_int_eq(io_tls_server_init(&sv, io_tls_lib_linked(), ctx, fds[1]), 0);
	ck_assert_int_eq(io_handshake(&sv), VD_AGAIN);
	ck_assert_int_eq(sv.want, IO_WANT_READ);
	ck_assert_int_eq(write(fds[0], "CONNECT\n\n", 9), 9);
	ck_assert_int_eq(io_handshake(&sv), VD_EPROTO);
	ck_assert_ptr_nonnull(strstr(io_last_error(&sv), "plaintext"));
	io_close(&sv);
	/* a peer that closes before its first byte */
	pair(fds, true);
	ck_assert_int_eq(io_tls_server_init(&sv, io_tls_lib_linked(), ctx, fds[1]), 0);
	close(fds[0]);
	ck_assert_int_eq(io_handshake(&sv), VD_ECLOSED);
	ck_assert(sv.closed_in_handshake);
	io_close(&sv);
	SSL_CTX_free(ctx);
}
END_TEST

/* The blocking side: a server thread that handshakes and echoes one
 * message (or, with mute, reads and never answers). */
struct echo {
	SSL_CTX *ctx;
	int fd;
	bool mute;
	int rc;
	char subject[256];
};

static void *echo_main(void *arg)
{
	struct echo *e = arg;
	struct io_conn c;
	e->rc = io_tls_server_init(&c, io_tls_lib_linked(), e->ctx, e->fd);
	if (e->rc)
		return NULL;
	uint64_t dl = vd_now_ms() + 5000;
	e->rc = io_handshake_wait(&c, dl, NULL);
	if (!e->rc)
		io_peer_cert(&c, e->subject, sizeof(e->subject));
	char buf[256];
	long n = e->rc ? -1 : io_read_wait(&c, buf, sizeof(buf), dl, NULL);
	if (n > 0 && !e->mute)
		e->rc = io_write_all(&c, buf, (size_t)n, dl, NULL);
	if (e->mute)   /* hold the connection until the client gives up */
		io_read_wait(&c, buf, sizeof(buf), dl, NULL);
	io_close(&c);
	return NULL;
}

static void blocking_roundtrip(const struct io_tls_lib *client_lib, bool mute)
{
	int fds[2];
	pair(fds, true);
	struct echo e = { .ctx = make_ctx(true, "server", "ca.crt"), .fd = fds[1], .mute = mute };
	SSL_CTX *cctx = make_ctx(false, "client", "ca.crt");
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, echo_main, &e), 0);
	struct io_conn c;
	ck_assert_int_eq(io_tls_client_init(&c, client_lib, cctx, fds[0], "localhost", "localhost"),
			 0);
	uint64_t dl = vd_now_ms() + 5000;
	ck_assert_int_eq(io_handshake_wait(&c, dl, NULL), 0);
	ck_assert_int_eq(io_write_all(&c, "echo me", 7, dl, NULL), 0);
	char buf[64];
	if (mute) {
		uint64_t t0 = vd_now_ms();
		ck_assert_int_eq(io_read_wait(&c, buf, sizeof(buf), t0 + 200, NULL), VD_ETIMEDOUT);
		ck_assert_uint_ge(vd_now_ms() - t0, 190);
	} else {
		long n = io_read_wait(&c, buf, sizeof(buf), dl, NULL);
		ck_assert_int_eq(n, 7);
		ck_assert_int_eq(memcmp(buf, "echo me", 7), 0);
	}
	io_close(&c);
	pthread_join(t, NULL);
	ck_assert_int_eq(e.rc, 0);
	ck_assert_str_eq(e.subject, "/CN=vdsmd test client");
	SSL_CTX_free(e.ctx);
	SSL_CTX_free(cctx);
}

START_TEST(tls_blocking_with_deadline)
{
	blocking_roundtrip(io_tls_lib_linked(), false);
	blocking_roundtrip(io_tls_lib_linked(), true);
}
END_TEST

START_TEST(tls_loaded_library)
{
	struct io_tls_lib lib;
	char why[256];
	ck_assert_msg(io_tls_lib_load(&lib, why, sizeof(why)) == 0, "%s", why);
	/* the same libssl the test is linked with: the same functions */
	ck_assert(lib.SSL_read == io_tls_lib_linked()->SSL_read);
	blocking_roundtrip(&lib, false);
}
END_TEST

static Suite *io_suite(void)
{
	Suite *s = suite_create("io");
	TCase *tc = tcase_create("plain");
	tcase_add_test(tc, plain_read_write_shutdown);
	tcase_add_test(tc, plain_nonblocking_again_and_short_writes);
	tcase_add_test(tc, plain_deadline_and_stop);
	tcase_add_test(tc, connect_refused_and_loopback);
	suite_add_tcase(s, tc);
	tc = tcase_create("tls");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, tls_nonblocking_handshake_certs_and_data);
	tcase_add_test(tc, tls_untrusted_server_refused);
	tcase_add_test(tc, tls_wrong_name_refused);
	tcase_add_test(tc, tls_client_without_certificate_refused);
	tcase_add_test(tc, tls_plaintext_on_server_refused);
	tcase_add_test(tc, tls_blocking_with_deadline);
	tcase_add_test(tc, tls_loaded_library);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	make_pki();
	int rc = check_run(io_suite());
	drop_pki();
	return rc;
}
