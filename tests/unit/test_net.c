/* tests/unit/test_net.c - the pure parts of the network core: protocol
 * detection (every prefix of every input) and the HTTP request parser
 * (every split point, limits, malformed input). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "vdsmd/server.h"
#include "check_main.h"

static int detect(const char *s)
{
	return detect_protocol(s, strlen(s));
}

START_TEST(detect_decides)
{
	static const struct { const char *in; int want; } cases[] = {
		{ "GET /health HTTP/1.1\r\n", PROTO_HTTP },
		{ "HEAD /", PROTO_HTTP },
		{ "POST /jsonrpc", PROTO_HTTP },
		{ "PUT /x", PROTO_HTTP },
		{ "CONNECT\n", PROTO_STOMP },
		{ "CONNECT\r\n", PROTO_STOMP },
		{ "STOMP\n", PROTO_STOMP },
		{ "SEND\n", PROTO_STOMP },
		{ "SUBSCRIBE\n", PROTO_STOMP },
		{ "UNSUBSCRIBE\n", PROTO_STOMP },
		{ "ACK\n", PROTO_STOMP },
		{ "NACK\n", PROTO_STOMP },
		{ "BEGIN\n", PROTO_STOMP },
		{ "COMMIT\n", PROTO_STOMP },
		{ "ABORT\n", PROTO_STOMP },
		{ "DISCONNECT\n", PROTO_STOMP },
		{ "\n\r\n\nCONNECT\n", PROTO_STOMP },
		{ "\x16\x03\x01", PROTO_NONE },
		{ "GET x", PROTO_NONE },
		{ "get /", PROTO_NONE },
		{ "CONNECTX\n", PROTO_NONE },
		{ "CONNECT ", PROTO_NONE },
		{ "\rX", PROTO_NONE },
		{ "\n\nGET /", PROTO_NONE },
		{ "DELETE /", PROTO_NONE },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *in = cases[i].in;
		size_t n = strlen(in);
		ck_assert_msg(detect(in) == cases[i].want, "case %zu (%s)", i, in);
		/* No proper prefix decides differently: either undecided or the
		 * same answer. */
		for (size_t k = 0; k < n; k++) {
			int r = detect_protocol(in, k);
			ck_assert_msg(r == VD_AGAIN || r == cases[i].want, "case %zu prefix %zu: %d",
				      i, k, r);
		}
	}
}
END_TEST

START_TEST(detect_needs_more)
{
	ck_assert_int_eq(detect(""), VD_AGAIN);
	ck_assert_int_eq(detect("\n\n"), VD_AGAIN);
	ck_assert_int_eq(detect("\r"), VD_AGAIN);
	ck_assert_int_eq(detect("CONN"), VD_AGAIN);
	ck_assert_int_eq(detect("CONNECT"), VD_AGAIN);
	ck_assert_int_eq(detect("GE"), VD_AGAIN);
	ck_assert_int_eq(detect("S"), VD_AGAIN);
	/* A flood of heart-beats without a command is given up. */
	char *eols = malloc(5000);
	memset(eols, '\n', 5000);
	ck_assert_int_eq(detect_protocol(eols, 5000), PROTO_NONE);
	free(eols);
}
END_TEST

static const char req1[] =
	"POST /jsonrpc?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json; charset=utf-8\r\n"
	"Content-Length: 12\r\nConnection: keep-alive, Upgrade\r\n\r\n";

START_TEST(http_parses_at_every_split)
{
	size_t n = strlen(req1);
	for (size_t k = 0; k < n; k++) {
		struct http_req r;
		ck_assert_int_eq(http_parse(req1, k, 8192, &r), VD_AGAIN);
	}
	struct http_req r;
	ck_assert_int_eq(http_parse(req1, n, 8192, &r), (long)n);
	ck_assert_int_eq(r.method_len, 4);
	ck_assert(memcmp(r.method, "POST", 4) == 0);
	ck_assert_int_eq(r.path_len, 12);
	ck_assert_int_eq(r.minor, 1);
	ck_assert_int_eq(r.content_length, 12);
	ck_assert(r.conn_keep_alive);
	ck_assert(!r.conn_close);
	ck_assert_int_eq(r.ct_len, strlen("application/json; charset=utf-8"));
}
END_TEST

START_TEST(http_bare_lf_and_close)
{
	const char *s = "GET /health HTTP/1.0\nConnection: close\n\n";
	struct http_req r;
	ck_assert_int_eq(http_parse(s, strlen(s), 8192, &r), (long)strlen(s));
	ck_assert_int_eq(r.minor, 0);
	ck_assert(r.conn_close);
	ck_assert_int_eq(r.content_length, -1);
}
END_TEST

START_TEST(http_rejects)
{
	static const char *const bad[] = {
		"GET /x HTTP/2.0\r\n\r\n",
		"GET x HTTP/1.1\r\n\r\n",
		" GET /x HTTP/1.1\r\n\r\n",
		"GET /x\r\n\r\n",
		"GET /x HTTP/1.1\r\nno colon\r\n\r\n",
		"GET /x HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
		"GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"GET /x HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"GET /x HTTP/1.1\r\nA: b\x01\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct http_req r;
		ck_assert_msg(http_parse(bad[i], strlen(bad[i]), 8192, &r) == VD_EPROTO, "%zu", i);
	}
}
END_TEST

START_TEST(http_header_limit)
{
	char big[300];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	struct http_req r;
	ck_assert_int_eq(http_parse(big, sizeof(big), 256, &r), VD_ETOOBIG);
	ck_assert_int_eq(http_parse(big, 200, 256, &r), VD_AGAIN);
	const char *ok = "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
	ck_assert_int_eq(http_parse(ok, strlen(ok), strlen(ok), &r), (long)strlen(ok));
	ck_assert(r.chunked);
	ck_assert_int_eq(http_parse(ok, strlen(ok), strlen(ok) - 1, &r), VD_ETOOBIG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("net");
	tcase_add_test(tc, detect_decides);
	tcase_add_test(tc, detect_needs_more);
	tcase_add_test(tc, http_parses_at_every_split);
	tcase_add_test(tc, http_bare_lf_and_close);
	tcase_add_test(tc, http_rejects);
	tcase_add_test(tc, http_header_limit);
	suite_add_tcase(s, tc);
	return check_run(s);
}
