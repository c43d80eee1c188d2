/* tests/unit/test_image_verbs.c - the Host.*_image_ticket verbs through the
 * real rpc engine (JSON in, JSON out): 483 without the image backend, the
 * engine's ticket accepted, imageio's status keys, the 482 refusals with
 * imageio's HTTP status, and a full table. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../codecs/codec.h"
#include "../../common/arena.h"
#include "../../common/log.h"
#include "../../rpc/schema.h"
#include "../../vdsmd/image/image.h"
#include "../../vdsmd/image/ticket.h"
#include "check_main.h"

#define TK "5a8b0c4e-3f21-4d7a-9b6e-1c2d3e4f5a6b"

static struct vdsmd D;
static char why_[256];
static struct rpc_engine *E;
static const struct vd_codec *J;
static struct vd_arena A;

struct reply {
	char *bytes;
	int calls;
};

static void on_reply(void *ctx, const struct rpc_response *r)
{
	struct reply *rp = ctx;
	rp->calls++;
	free(rp->bytes);
	rp->bytes = r->bytes ? strndup(r->bytes, r->len) : NULL;
}

static const struct vd_value *call(const char *method, const char *params)
{
	size_t n = strlen(params) + 256;
	char *body = malloc(n);
	snprintf(body, n, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\",\"params\":%s}", method,
		 params);
	struct rpc_request_info info = { J, NULL, "test", NULL };
	struct reply rp = { NULL, 0 };
	rpc_dispatch(E, &info, body, strlen(body), on_reply, &rp);
	free(body);
	ck_assert_int_eq(rp.calls, 1);
	ck_assert_ptr_nonnull(rp.bytes);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	char *keep = arena_strndup(&A, rp.bytes, strlen(rp.bytes));
	ck_assert_int_eq(J->decode(&A, keep, strlen(keep), &lim, &v, &err), 0);
	free(rp.bytes);
	return v;
}

static const struct vd_value *ok(const char *method, const char *params)
{
	const struct vd_value *r = call(method, params);
	const struct vd_value *res = vd_obj_get(r, "result");
	if (!res) {
		const struct vd_value *m = vd_obj_get(vd_obj_get(r, "error"), "message");
		ck_abort_msg("%s %s failed: %.*s", method, params, m ? (int)m->v.s.len : 0,
			     m ? m->v.s.ptr : "");
	}
	return res;
}

/* The error's code; its message must contain want (when non-NULL). */
static int err(const char *method, const char *params, const char *want)
{
	const struct vd_value *e = vd_obj_get(call(method, params), "error");
	ck_assert_msg(e != NULL, "%s %s: expected an error", method, params);
	const struct vd_value *m = vd_obj_get(e, "message");
	ck_assert_int_eq(m->type, VD_STRING);
	if (want)
		ck_assert_msg(memmem(m->v.s.ptr, m->v.s.len, want, strlen(want)),
			      "%s: '%.*s' lacks '%s'", method, (int)m->v.s.len, m->v.s.ptr, want);
	return (int)vd_obj_get(e, "code")->v.i;
}

static void setup(void)
{
	memset(&D, 0, sizeof(D));
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_WARN);
	J = codec_find("yajl");
	E = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(E, rpc_schema_image), 0);
	ck_assert_int_eq(rpc_engine_bind(E, image_bindings, &D), 0);
	char why[256] = "";
	ck_assert_msg(rpc_engine_seal(E, why, sizeof(why)) == 0, "%s", why);
	rpc_engine_set_ready(E, true);
	arena_init(&A, 4096);
}

static void teardown(void)
{
	arena_free(&A);
	rpc_engine_free(E);
	image_fini(&D);
}

#define TICKET(ops) \
	"{\"uuid\":\"" TK "\",\"timeout\":300,\"inactivity_timeout\":60,\"size\":1073741824," \
	"\"url\":\"file:///srv/sd/images/i/v\",\"ops\":" ops ",\"sparse\":true," \
	"\"transfer_id\":\"x-1\",\"dirty\":false}"

START_TEST(no_backend_is_483)
{
	ck_assert_int_eq(err("Host.add_image_ticket", "[" TICKET("[\"write\"]") "]", NULL), 483);
	ck_assert_int_eq(err("Host.get_image_ticket", "[\"" TK "\"]", "unsupported"), 483);
	ck_assert_int_eq(err("Host.extend_image_ticket", "[\"" TK "\", 30]", NULL), 483);
	ck_assert_int_eq(err("Host.remove_image_ticket", "[\"" TK "\"]", NULL), 483);
}
END_TEST

START_TEST(engine_flow)
{
	ck_assert_int_eq(image_init(&D, NULL, why_, sizeof(why_)), 0);
	const struct vd_value *r = ok("Host.add_image_ticket", "{\"ticket\":" TICKET("[\"write\"]") "}");
	ck_assert(r->type == VD_BOOL && r->v.b);
	r = ok("Host.get_image_ticket", "{\"uuid\":\"" TK "\"}");
	static const char *keys[] = { "active", "canceled", "connections", "expires", "idle_time",
				      "inactivity_timeout", "ops", "size", "sparse", "dirty",
				      "timeout", "url", "uuid", "transfer_id", "transferred" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++)
		ck_assert_msg(vd_obj_get(r, keys[i]), "no %s", keys[i]);
	ck_assert_ptr_null(vd_obj_get(r, "filename"));
	ck_assert_int_eq(vd_obj_get(r, "size")->v.i, 1073741824);
	const struct vd_value *ops = vd_obj_get(r, "ops");
	ck_assert_uint_eq(ops->v.arr.n, 1);
	ck_assert(vd_str_eq(&ops->v.arr.items[0], "write"));
	ck_assert(vd_str_eq(vd_obj_get(r, "transfer_id"), "x-1"));
	ck_assert(vd_obj_get(r, "sparse")->v.b);
	ck_assert_int_eq(vd_obj_get(r, "timeout")->v.i, 300);
	int64_t exp0 = vd_obj_get(r, "expires")->v.i;
	ok("Host.extend_image_ticket", "{\"uuid\":\"" TK "\",\"timeout\":3000}");
	r = ok("Host.get_image_ticket", "[\"" TK "\"]");
	ck_assert_int_ge(vd_obj_get(r, "expires")->v.i, exp0 + 2700);
	ck_assert_int_eq(vd_obj_get(r, "timeout")->v.i, 300);
	ok("Host.remove_image_ticket", "[\"" TK "\"]");
	ok("Host.remove_image_ticket", "[\"" TK "\"]");
	ck_assert_int_eq(err("Host.get_image_ticket", "[\"" TK "\"]",
			     "status=404, reason=Not Found"), 482);
}
END_TEST

START_TEST(refusals_are_482)
{
	ck_assert_int_eq(image_init(&D, NULL, why_, sizeof(why_)), 0);
	ck_assert_int_eq(err("Host.add_image_ticket", "[" TICKET("[\"delete\"]") "]",
			     "status=400, reason=Bad Request, error=Invalid ticket: Invalid value "
			     "for 'ops'"), 482);
	ck_assert_int_eq(err("Host.add_image_ticket", "[{\"uuid\":\"" TK "\"}]",
			     "Required ticket parameter is missing: size"), 482);
	ck_assert_int_eq(err("Host.extend_image_ticket", "[\"" TK "\", 30]", "status=404"), 482);
	ok("Host.add_image_ticket", "[" TICKET("[\"read\"]") "]");
	ck_assert_int_eq(err("Host.extend_image_ticket", "[\"" TK "\", -1]", "status=400"), 482);
	ck_assert_int_eq(err("Host.extend_image_ticket", "[\"" TK "\", 2147483648]", "'timeout'"),
			 482);
	/* the RPC layer's own checks */
	ck_assert_int_eq(err("Host.add_image_ticket", "[[1]]", NULL), -32602);
	ck_assert_int_eq(err("Host.get_image_ticket", "[\"x\"]", NULL), -32602);
}
END_TEST

START_TEST(full_table_is_482)
{
	ck_assert_int_eq(image_init(&D, NULL, why_, sizeof(why_)), 0);
	char p[512];
	for (int i = 0; i <= IMAGE_TICKETS_MAX; i++) {
		snprintf(p, sizeof p, "[{\"uuid\":\"00000000-0000-0000-0000-%012d\",\"size\":1,"
			 "\"ops\":[\"read\"],\"timeout\":1,\"url\":\"file:///x\"}]", i);
		if (i < IMAGE_TICKETS_MAX) {
			ok("Host.add_image_ticket", p);
			arena_reset(&A);
		} else {
			ck_assert_int_eq(err("Host.add_image_ticket", p, "status=503"), 482);
		}
	}
	ck_assert_uint_eq(ticket_table_count(D.image->tickets), IMAGE_TICKETS_MAX);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("image_verbs");
	TCase *tc = tcase_create("verbs");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, no_backend_is_483);
	tcase_add_test(tc, engine_flow);
	tcase_add_test(tc, refusals_are_482);
	tcase_add_test(tc, full_table_is_482);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
