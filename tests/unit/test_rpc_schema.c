/* tests/unit/test_rpc_schema.c - the schema generated from api/ and the
 * seal's strictness: implemented verbs need exactly one handler, verbs
 * declared not implemented must have none and answer -32601 naming them. */
#include "rpc_test.h"
#include "check_main.h"
#include "../../rpc/schema.h"
#include "../../vdsmd/host/host.h"
#include "../../vdsmd/virt/virt.h"
#include "../../vdsmd/storage/storage.h"
#include "../../vdsmd/net/net.h"
#include "../../vdsmd/image/image.h"

static int h_ok(struct rpc_call *c)
{
	(void)c;
	return 0;
}

static const struct rpc_param p_id[] = { { "id", RPC_T_UUID, true, NULL, "an id" } };

static const struct rpc_verb_decl decls[] = {
	{ .name = "S.done", .result = "boolean", .desc = "implemented" },
	{ .name = "S.later", .params = p_id, .nparams = 1, .flags = RPC_F_UNIMPLEMENTED,
	  .result = "boolean", .desc = "declared, not implemented" },
	{ .name = NULL },
};

static struct rpc_engine *sealed(const struct rpc_binding *b, char *why, size_t n, int *rc)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, decls), 0);
	ck_assert_int_eq(rpc_engine_bind(e, b, NULL), 0);
	*rc = rpc_engine_seal(e, why, n);
	return e;
}

START_TEST(unimplemented_answers_32601_naming_it)
{
	select_json_codec(_i);
	static const struct rpc_binding b[] = { { "S.done", h_ok }, { NULL, NULL } };
	char why[256] = "";
	int rc;
	struct rpc_engine *e = sealed(b, why, sizeof why, &rc);
	ck_assert_msg(rc == 0, "seal: %s", why);
	rpc_engine_set_ready(e, true);
	ck_dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"S.done\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}");
	const char *want = "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32601,\"message\":"
			   "\"The method does not exist or is not available: S.later (declared by "
			   "the API, not implemented by vdsmd)\"}}";
	/* before params are looked at (a missing required one is not -32602) */
	ck_dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"S.later\"}", want);
	/* and before the code-99 gate: it will never be available */
	rpc_engine_set_ready(e, false);
	ck_dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"S.later\",\"params\":[\"x\"]}", want);
	/* a notification gets no reply */
	ck_dispatch(e, "{\"jsonrpc\":\"2.0\",\"method\":\"S.later\"}", NULL);
	rpc_engine_free(e);
}
END_TEST

START_TEST(seal_refuses_handler_for_unimplemented)
{
	static const struct rpc_binding b[] = {
		{ "S.done", h_ok }, { "S.later", h_ok }, { NULL, NULL },
	};
	char why[256] = "";
	int rc;
	struct rpc_engine *e = sealed(b, why, sizeof why, &rc);
	ck_assert_int_eq(rc, VD_EINVAL);
	ck_assert_msg(strstr(why, "'S.later'") && strstr(why, "not implemented"), "why: %s", why);
	rpc_engine_free(e);
}
END_TEST

START_TEST(seal_refuses_implemented_without_handler)
{
	static const struct rpc_binding b[] = { { NULL, NULL } };
	char why[256] = "";
	int rc;
	struct rpc_engine *e = sealed(b, why, sizeof why, &rc);
	ck_assert_int_eq(rc, VD_EINVAL);
	ck_assert_msg(strstr(why, "'S.done'") && strstr(why, "no handler"), "why: %s", why);
	rpc_engine_free(e);
}
END_TEST

START_TEST(generated_tables_consistent)
{
	/* backend tables hold implemented verbs, the other table only
	 * unimplemented ones; every verb has a result type and description */
	size_t n = 0, unimpl = 0;
	for (size_t f = 0; rpc_schema_families[f]; f++)
		for (const struct rpc_verb_decl *d = rpc_schema_families[f]; d->name; d++) {
			bool u = (d->flags & RPC_F_UNIMPLEMENTED) != 0;
			ck_assert_msg(u == (rpc_schema_families[f] == rpc_schema_unimplemented),
				      "%s in the wrong table", d->name);
			ck_assert_msg(d->result && *d->result && d->desc && *d->desc, "%s", d->name);
			ck_assert_ptr_eq(rpc_schema_find(d->name), d);
			for (unsigned i = 0; i < d->nerrors; i++)
				ck_assert_int_ne(d->errors[i], 0);
			n++;
			unimpl += u;
		}
	ck_assert_uint_ge(n - unimpl, 37);
	const struct rpc_verb_decl *d = rpc_schema_find("Image.delete");
	ck_assert_ptr_nonnull(d);
	ck_assert(d->flags & RPC_F_BLOCKING);
	ck_assert_uint_eq(d->nparams, 6);
	ck_assert_str_eq(d->params[3].name, "postZero");
	ck_assert_str_eq(d->params[1].def, "\"00000000-0000-0000-0000-000000000000\"");
	ck_assert_str_eq(d->result, "uuid");
	ck_assert(rpc_schema_find("Host.ping2")->flags & RPC_F_ALWAYS);
}
END_TEST

START_TEST(daemon_bindings_match_schema)
{
	/* the whole schema with the daemon's handler tables seals: the
	 * "implemented" flags of api/ tell the truth */
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare_schema(e), 0);
	ck_assert_int_eq(rpc_engine_bind(e, host_bindings, NULL), 0);
	ck_assert_int_eq(rpc_engine_bind(e, virt_bindings, NULL), 0);
	ck_assert_int_eq(rpc_engine_bind(e, storage_bindings, NULL), 0);
	ck_assert_int_eq(rpc_engine_bind(e, net_bindings, NULL), 0);
	ck_assert_int_eq(rpc_engine_bind(e, image_bindings, NULL), 0);
	char why[256] = "";
	ck_assert_msg(rpc_engine_seal(e, why, sizeof why) == 0, "seal: %s", why);
	rpc_engine_free(e);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rpc_schema");
	TCase *tc = tcase_create("schema");
	tcase_add_loop_test(tc, unimplemented_answers_32601_naming_it, 0, 2);
	tcase_add_test(tc, seal_refuses_handler_for_unimplemented);
	tcase_add_test(tc, seal_refuses_implemented_without_handler);
	tcase_add_test(tc, generated_tables_consistent);
	tcase_add_test(tc, daemon_bindings_match_schema);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
