/* tests/unit/test_rpc_borrow.c - a handler's borrowed result
 * (rpc_result_borrow, issue 25): sent in pieces from where it is by
 * rpc_dispatch_pieces, copied in by rpc_dispatch, in a batch and on a
 * failure; released exactly once, after the reply, in every case. */
#include "rpc_test.h"
#include "check_main.h"

/* What Test.borrow hands out: a result encoded once, as a cache would. */
static const char held[] = "{\"cached\":[1,2,3],\"s\":\"x\"}";

struct borrow_app {
	int released;         /* release calls */
	int replies_before;   /* replies seen when release ran */
	int replies;
	bool fail_after;      /* Test.borrow fails after borrowing */
	const char *bytes;    /* what Test.borrow lends (NULL: held) */
	size_t len;
};

static struct borrow_app bapp;

static void release_held(void *hold)
{
	struct borrow_app *a = hold;
	a->released++;
	a->replies_before = a->replies;
}

static int th_borrow(struct rpc_call *c)
{
	struct borrow_app *a = c->app;
	if (a->bytes)
		rpc_result_borrow(c, a->bytes, a->len, release_held, a);
	else
		rpc_result_borrow(c, held, sizeof(held) - 1, release_held, a);
	if (a->fail_after)
		return rpc_fail(c, RPC_E_INTERNAL, "after borrowing");
	return 0;
}

static const struct rpc_verb_decl borrow_decls[] = {
	{ .name = "Test.borrow", .result = "object" },
	{ .name = NULL },
};
static const struct rpc_binding borrow_bindings[] = {
	{ "Test.borrow", th_borrow },
	{ NULL, NULL },
};

static struct rpc_engine *eng;

static void setup(void)
{
	memset(&bapp, 0, sizeof(bapp));
	eng = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(eng, borrow_decls), 0);
	ck_assert_int_eq(rpc_engine_bind(eng, borrow_bindings, &bapp), 0);
	char why[256] = "";
	ck_assert_msg(rpc_engine_seal(eng, why, sizeof(why)) == 0, "seal: %s", why);
	rpc_engine_set_ready(eng, true);
}

static void teardown(void)
{
	rpc_engine_free(eng);
}

/* The reply joined from its pieces, and how it came. */
struct joined {
	int calls;
	bool had_ext;
	int released_at_reply;   /* release calls made before the reply */
	size_t len;              /* of text (msgpack has NULs) */
	char text[512];
};

static void join_reply(void *ctx, const struct rpc_response *r)
{
	struct joined *j = ctx;
	j->calls++;
	bapp.replies++;
	j->released_at_reply = bapp.released;
	j->had_ext = r->ext != NULL;
	if (!r->bytes)
		return;
	size_t at = r->ext ? r->at : r->len;
	ck_assert_uint_le(at, r->len);
	ck_assert_uint_lt(r->len + r->ext_len, sizeof(j->text));
	memcpy(j->text, r->bytes, at);
	if (r->ext)
		memcpy(j->text + at, r->ext, r->ext_len);
	memcpy(j->text + at + r->ext_len, r->bytes + at, r->len - at);
	j->text[r->len + r->ext_len] = '\0';
	j->len = r->len + r->ext_len;
}

static void run(const char *body, bool pieces, struct joined *j)
{
	struct rpc_request_info info = { .codec = json_codec_for_tests(), .transport = "test" };
	memset(j, 0, sizeof(*j));
	if (pieces)
		rpc_dispatch_pieces(eng, &info, body, strlen(body), join_reply, j);
	else
		rpc_dispatch(eng, &info, body, strlen(body), join_reply, j);
}

static const char want[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":"
			   "{\"cached\":[1,2,3],\"s\":\"x\"}}";

START_TEST(pieces_not_copied)
{
	select_json_codec(_i);
	struct joined j;
	run("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"Test.borrow\"}", true, &j);
	ck_assert_int_eq(j.calls, 1);
	ck_assert(j.had_ext);
	ck_assert_str_eq(j.text, want);
	ck_assert_int_eq(j.released_at_reply, 0);  /* still held while sent */
	ck_assert_int_eq(bapp.released, 1);
	ck_assert_int_eq(bapp.replies_before, 1);  /* released after the reply */
}
END_TEST

START_TEST(one_piece_copied)
{
	select_json_codec(_i);
	struct joined j;
	run("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"Test.borrow\"}", false, &j);
	ck_assert_int_eq(j.calls, 1);
	ck_assert(!j.had_ext);
	ck_assert_str_eq(j.text, want);
	ck_assert_int_eq(bapp.released, 1);
}
END_TEST

START_TEST(batch_copies)
{
	select_json_codec(_i);
	struct joined j;
	run("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.borrow\"},"
	    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.borrow\"}]", true, &j);
	ck_assert_int_eq(j.calls, 1);
	ck_assert(!j.had_ext);
	ck_assert_str_eq(j.text, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"cached\":[1,2,3],"
			 "\"s\":\"x\"}},{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"cached\":"
			 "[1,2,3],\"s\":\"x\"}}]");
	ck_assert_int_eq(bapp.released, 2);
}
END_TEST

START_TEST(failure_and_notification_release)
{
	select_json_codec(_i);
	struct joined j;
	bapp.fail_after = true;
	run("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"Test.borrow\"}", true, &j);
	ck_assert_int_eq(j.calls, 1);
	ck_assert(!j.had_ext);
	ck_assert_ptr_null(strstr(j.text, "cached"));
	ck_assert_ptr_nonnull(strstr(j.text, "\"error\""));
	ck_assert_int_eq(bapp.released, 1);
	bapp.fail_after = false;
	run("{\"jsonrpc\":\"2.0\",\"method\":\"Test.borrow\"}", true, &j);
	ck_assert_int_eq(j.calls, 1);
	ck_assert_str_eq(j.text, "");  /* a notification: nothing sent */
	ck_assert_int_eq(bapp.released, 2);
}
END_TEST

/* A msgpack request gets the bytes copied in, and a well-formed reply: the
 * msgpack writer compacts the envelope's header when it closes, which
 * would move a borrowed spot. */
START_TEST(msgpack_copies)
{
	const struct vd_codec *mp = codec_find("msgpack");
	if (!mp) {
		check_skip("msgpack_copies", "built without msgpack");
		return;
	}
	static const char req[] = "\x83\xa7jsonrpc\xa3" "2.0\xa2id\x07\xa6method\xabTest.borrow";
	static const char mp_held[] = "\x92\x01\xa1x";   /* [1,"x"] */
	static const char want_mp[] = "\x83\xa7jsonrpc\xa3" "2.0\xa2id\x07\xa6result\x92\x01\xa1x";
	struct rpc_request_info info = { .codec = mp, .transport = "test" };
	struct joined j;
	memset(&j, 0, sizeof(j));
	bapp.bytes = mp_held;
	bapp.len = sizeof(mp_held) - 1;
	rpc_dispatch_pieces(eng, &info, req, sizeof(req) - 1, join_reply, &j);
	ck_assert_int_eq(j.calls, 1);
	ck_assert(!j.had_ext);
	ck_assert_uint_eq(j.len, sizeof(want_mp) - 1);
	ck_assert(memcmp(j.text, want_mp, j.len) == 0);
	ck_assert_int_eq(bapp.released, 1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rpc_borrow");
	TCase *tc = tcase_create("borrow");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, pieces_not_copied, 0, 2);
	tcase_add_loop_test(tc, one_piece_copied, 0, 2);
	tcase_add_loop_test(tc, batch_copies, 0, 2);
	tcase_add_loop_test(tc, failure_and_notification_release, 0, 2);
	tcase_add_test(tc, msgpack_copies);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
