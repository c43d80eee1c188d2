/* tests/unit/test_rpc_params.c - central parameter validation: named and
 * positional params, defaults parsed at declaration, every type check with
 * a message naming the param, declaration-time errors. */
#include "rpc_test.h"
#include "check_main.h"

static struct test_app app;
static struct rpc_engine *eng;

static void setup(void)
{
	test_app_init(&app);
	eng = test_engine(&app, true);
}

static void teardown(void)
{
	rpc_engine_free(eng);
	test_app_fini(&app);
}

#define UUID "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
#define REQ(params) "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.types\",\"params\":" params "}"
#define OK(result) "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" result "}"
#define DEFAULTS_AFTER_S "\"u\":null,\"i\":7,\"is\":42,\"n\":null,\"b\":true,\"o\":{\"k\":[1,\"x\"]},\"a\":null}"

static void check_params_error(const char *body, const char *msg)
{
	struct collected col = { 0 };
	dispatch_json(eng, body, &col);
	ck_assert_int_eq(col.calls, 1);
	char want[512];
	snprintf(want, sizeof(want),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"Invalid params: %s\"}}", msg);
	ck_assert_msg(col.bytes && strcmp(col.bytes, want) == 0, "request %s\n  got  %s\n  want %s",
		      body, col.bytes ? col.bytes : "(none)", want);
	collected_reset(&col);
}

START_TEST(named_with_defaults)
{
	select_json_codec(_i);
	ck_dispatch(eng, REQ("{\"s\":\"hi\"}"), OK("{\"s\":\"hi\",\"s_nul\":true," DEFAULTS_AFTER_S));
	/* unknown named params are ignored; order of members does not matter */
	ck_dispatch(eng, REQ("{\"zzz\":1,\"i\":3,\"s\":\"hi\"}"),
		    OK("{\"s\":\"hi\",\"s_nul\":true,\"u\":null,\"i\":3,\"is\":42,\"n\":null,\"b\":true,"
		       "\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
	/* an explicit null takes the default */
	ck_dispatch(eng, REQ("{\"s\":\"hi\",\"i\":null,\"is\":null,\"b\":null,\"o\":null}"),
		    OK("{\"s\":\"hi\",\"s_nul\":true," DEFAULTS_AFTER_S));
}
END_TEST

START_TEST(named_all_given)
{
	select_json_codec(_i);
	ck_dispatch(eng, REQ("{\"a\":[true],\"o\":{},\"b\":false,\"n\":-2.5,\"is\":\"123\",\"i\":-9,"
			     "\"u\":\"" UUID "\",\"s\":\"x y\"}"),
		    OK("{\"s\":\"x y\",\"s_nul\":true,\"u\":\"" UUID "\",\"i\":-9,\"is\":123,\"n\":-2.5,"
		       "\"b\":false,\"o\":{},\"a\":[true]}"));
	/* INTSTR takes plain integers too; NUMBER takes integers */
	ck_dispatch(eng, REQ("{\"s\":\"\",\"is\":9223372036854775807,\"n\":18446744073709551615}"),
		    OK("{\"s\":\"\",\"s_nul\":true,\"u\":null,\"i\":7,\"is\":9223372036854775807,"
		       "\"n\":18446744073709551615,\"b\":true,\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
	ck_dispatch(eng, REQ("{\"s\":\"q\",\"is\":\"9223372036854775807\",\"i\":-9223372036854775808}"),
		    OK("{\"s\":\"q\",\"s_nul\":true,\"u\":null,\"i\":-9223372036854775808,"
		       "\"is\":9223372036854775807,\"n\":null,\"b\":true,\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
}
END_TEST

START_TEST(positional)
{
	select_json_codec(_i);
	ck_dispatch(eng, REQ("[\"hi\",\"" UUID "\",3,\"0123\",1.5,false,{\"z\":null},[1,2]]"),
		    OK("{\"s\":\"hi\",\"s_nul\":true,\"u\":\"" UUID "\",\"i\":3,\"is\":123,\"n\":1.5,"
		       "\"b\":false,\"o\":{\"z\":null},\"a\":[1,2]}"));
	/* fewer than declared: the rest take defaults */
	ck_dispatch(eng, REQ("[\"hi\"]"), OK("{\"s\":\"hi\",\"s_nul\":true," DEFAULTS_AFTER_S));
	ck_dispatch(eng, REQ("[\"hi\",null,null]"), OK("{\"s\":\"hi\",\"s_nul\":true," DEFAULTS_AFTER_S));
	check_params_error(REQ("[\"hi\",null,1,2,3,true,{},[],9]"), "Test.types takes 8 params, 9 given");
	/* positional params of a verb without params */
	check_params_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\",\"params\":[1]}",
			   "Test.ping takes 0 params, 1 given");
}
END_TEST

START_TEST(missing_required)
{
	select_json_codec(_i);
	check_params_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.types\"}",
			   "missing required param 's' of Test.types");
	check_params_error(REQ("{}"), "missing required param 's' of Test.types");
	check_params_error(REQ("[]"), "missing required param 's' of Test.types");
	check_params_error(REQ("{\"s\":null}"), "missing required param 's' of Test.types");
	check_params_error(REQ("{\"S\":\"x\"}"), "missing required param 's' of Test.types");
	/* a required ANY param accepts an explicit null */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.echo\",\"params\":[null]}", OK("null"));
	check_params_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.echo\",\"params\":{}}",
			   "missing required param 'value' of Test.echo");
}
END_TEST

START_TEST(bad_types)
{
	select_json_codec(_i);
	check_params_error(REQ("{\"s\":1}"), "param 's' of Test.types must be string, got int 1");
	check_params_error(REQ("{\"s\":[\"x\"]}"), "param 's' of Test.types must be string, got array");
	check_params_error(REQ("{\"s\":\"x\",\"u\":\"nope\"}"),
			   "param 'u' of Test.types must be uuid, got string 'nope': not a canonical UUID");
	check_params_error(REQ("{\"s\":\"x\",\"u\":\"0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4\"}"),
			   "param 'u' of Test.types must be uuid, got string '0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4': not a canonical UUID");
	check_params_error(REQ("{\"s\":\"x\",\"u\":5}"), "param 'u' of Test.types must be uuid, got int 5");
	check_params_error(REQ("{\"s\":\"x\",\"i\":\"5x\"}"),
			   "param 'i' of Test.types must be int, got string '5x': not a decimal integer within int64");
	check_params_error(REQ("{\"s\":\"x\",\"i\":1.5}"), "param 'i' of Test.types must be int, got double 1.5");
	check_params_error(REQ("{\"s\":\"x\",\"i\":true}"), "param 'i' of Test.types must be int, got bool true");
	check_params_error(REQ("{\"s\":\"x\",\"i\":18446744073709551615}"),
			   "param 'i' of Test.types must be int, got uint 18446744073709551615: out of range");
	check_params_error(REQ("{\"s\":\"x\",\"is\":\"12a\"}"),
			   "param 'is' of Test.types must be int-or-string, got string '12a': not a string of decimal digits within int64");
	check_params_error(REQ("{\"s\":\"x\",\"is\":\"-1\"}"),
			   "param 'is' of Test.types must be int-or-string, got string '-1': not a string of decimal digits within int64");
	check_params_error(REQ("{\"s\":\"x\",\"is\":\"\"}"),
			   "param 'is' of Test.types must be int-or-string, got string '': not a string of decimal digits within int64");
	check_params_error(REQ("{\"s\":\"x\",\"is\":\"9223372036854775808\"}"),
			   "param 'is' of Test.types must be int-or-string, got string '9223372036854775808': not a string of decimal digits within int64");
	check_params_error(REQ("{\"s\":\"x\",\"is\":2.0}"), "param 'is' of Test.types must be int-or-string, got double 2");
	check_params_error(REQ("{\"s\":\"x\",\"n\":\"1\"}"), "param 'n' of Test.types must be number, got string '1'");
	check_params_error(REQ("{\"s\":\"x\",\"b\":\"yes\"}"),
			   "param 'b' of Test.types must be bool, got string 'yes': not true/false");
	check_params_error(REQ("{\"s\":\"x\",\"b\":1}"), "param 'b' of Test.types must be bool, got int 1");
	check_params_error(REQ("{\"s\":\"x\",\"o\":[]}"), "param 'o' of Test.types must be object, got array");
	check_params_error(REQ("{\"s\":\"x\",\"a\":{}}"), "param 'a' of Test.types must be array, got object");
	check_params_error(REQ("[\"x\",null,null,null,null,null,null,\"[]\"]"),
			   "param 'a' of Test.types must be array, got string '[]'");
	/* the first bad param in declared order is named */
	check_params_error(REQ("{\"a\":1,\"s\":2}"), "param 's' of Test.types must be string, got int 2");
}
END_TEST

START_TEST(strings_copied_nul_terminated)
{
	select_json_codec(_i);
	/* escaped string, embedded NUL kept with its length */
	ck_dispatch(eng, REQ("{\"s\":\"a\\u0000b\\n\"}"),
		    OK("{\"s\":\"a\\u0000b\\n\",\"s_nul\":true," DEFAULTS_AFTER_S));
	ck_dispatch(eng, REQ("[\"plain\",\"" UUID "\"]"),
		    OK("{\"s\":\"plain\",\"s_nul\":true,\"u\":\"" UUID "\",\"i\":7,\"is\":42,\"n\":null,"
		       "\"b\":true,\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
}
END_TEST

/* ---- declaration-time checks ---- */

static int h_any(struct rpc_call *c)
{
	(void)c;
	return 0;
}

static void check_declare_fails(const struct rpc_verb_decl *decls, const char *want1, const char *want2)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, decls), VD_EINVAL);
	static const struct rpc_binding b[] = { { "D.x", h_any }, { NULL, NULL } };
	rpc_engine_bind(e, b, NULL);
	char why[256] = "";
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, want1) && strstr(why, want2), "why: %s", why);
	rpc_engine_free(e);
}

START_TEST(bad_default_type)
{
	static const struct rpc_param p[] = { { "count", RPC_T_INT, false, "\"x\"", NULL } };
	static const struct rpc_verb_decl d[] = { { .name = "D.x", .params = p, .nparams = 1 }, { .name = NULL } };
	check_declare_fails(d, "'D.x'", "'count'");
}
END_TEST

START_TEST(bad_default_json)
{
	static const struct rpc_param p[] = { { "obj", RPC_T_OBJECT, false, "{", NULL } };
	static const struct rpc_verb_decl d[] = { { .name = "D.x", .params = p, .nparams = 1 }, { .name = NULL } };
	check_declare_fails(d, "'D.x'", "'obj'");
}
END_TEST

START_TEST(duplicate_param)
{
	static const struct rpc_param p[] = {
		{ "a", RPC_T_INT, false, NULL, NULL }, { "a", RPC_T_STRING, false, NULL, NULL },
	};
	static const struct rpc_verb_decl d[] = { { .name = "D.x", .params = p, .nparams = 2 }, { .name = NULL } };
	check_declare_fails(d, "'D.x'", "'a' declared twice");
}
END_TEST

START_TEST(too_many_params)
{
	static struct rpc_param p[RPC_MAX_PARAMS + 1];
	static char names[RPC_MAX_PARAMS + 1][16];
	for (int i = 0; i <= RPC_MAX_PARAMS; i++) {
		snprintf(names[i], sizeof(names[i]), "p%d", i);
		p[i] = (struct rpc_param){ names[i], RPC_T_ANY, false, NULL, NULL };
	}
	static struct rpc_verb_decl d[2];
	d[0] = (struct rpc_verb_decl){ .name = "D.x", .params = p, .nparams = RPC_MAX_PARAMS + 1 };
	d[1].name = NULL;
	check_declare_fails(d, "'D.x'", "params");
}
END_TEST

START_TEST(null_default_is_no_default)
{
	static const struct rpc_param p[] = {
		{ "v", RPC_T_STRING, false, "null", NULL },
		{ "w", RPC_T_ANY, false, "[1,{\"a\":\"b\"}]", NULL },
	};
	static const struct rpc_verb_decl d[] = { { .name = "D.x", .params = p, .nparams = 2 }, { .name = NULL } };
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, d), 0);
	static const struct rpc_binding b[] = { { "D.x", h_any }, { NULL, NULL } };
	ck_assert_int_eq(rpc_engine_bind(e, b, NULL), 0);
	char why[256];
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), 0);
	rpc_engine_free(e);
}
END_TEST

static int h_args(struct rpc_call *c)
{
	/* accessors: absent without default → NULL / dflt */
	ck_assert_ptr_null(rpc_arg(c, "v"));
	ck_assert_ptr_null(rpc_arg_str(c, "v", NULL));
	size_t n = 99;
	ck_assert_ptr_null(rpc_arg_str(c, "v", &n));
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(rpc_arg_int(c, "v", -4), -4);
	ck_assert(rpc_arg_bool(c, "v", true));
	const struct vd_value *w = rpc_arg(c, "w");
	ck_assert(w && w->type == VD_ARRAY && w->v.arr.n == 2);
	ck_assert_ptr_eq(c->app, &app);
	ck_assert_str_eq(c->flow_id, "flow-1");
	ck_assert_ptr_nonnull(c->arena);
	return 0;
}

START_TEST(accessors)
{
	static const struct rpc_param p[] = {
		{ "v", RPC_T_STRING, false, NULL, NULL },
		{ "w", RPC_T_ANY, false, "[1,{\"a\":\"b\"}]", NULL },
	};
	static const struct rpc_verb_decl d[] = {
		{ .name = "D.args", .params = p, .nparams = 2, .flags = RPC_F_ALWAYS }, { .name = NULL },
	};
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, d), 0);
	static const struct rpc_binding b[] = { { "D.args", h_args }, { NULL, NULL } };
	ck_assert_int_eq(rpc_engine_bind(e, b, &app), 0);
	char why[256];
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), 0);
	ck_dispatch(e, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"D.args\"}", OK("true"));
	rpc_engine_free(e);
}
END_TEST

/* What VDSM coerces is accepted and reaches the handler typed; the rest is
 * -32602 naming the param and the value.  One accepted, one refused per rule. */
START_TEST(vdsm_coercions)
{
	select_json_codec(_i);
	/* bool from "true"/"false" in any case (the engine's Image.delete) */
	ck_dispatch(eng, REQ("{\"s\":\"\",\"b\":\"FALSE\"}"),
		    OK("{\"s\":\"\",\"s_nul\":true,\"u\":null,\"i\":7,\"is\":42,\"n\":null,\"b\":false,"
		       "\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
	check_params_error(REQ("{\"s\":\"x\",\"b\":\"truth\"}"),
			   "param 'b' of Test.types must be bool, got string 'truth': not true/false");
	/* bool from "1"/"0" (VDSM's tobool) */
	ck_dispatch(eng, REQ("{\"s\":\"\",\"b\":\"0\"}"),
		    OK("{\"s\":\"\",\"s_nul\":true,\"u\":null,\"i\":7,\"is\":42,\"n\":null,\"b\":false,"
		       "\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
	check_params_error(REQ("{\"s\":\"x\",\"b\":\"2\"}"),
			   "param 'b' of Test.types must be bool, got string '2': not true/false");
	/* int from a decimal string, sign allowed (VDSM's int()) */
	ck_dispatch(eng, REQ("{\"s\":\"\",\"i\":\"-42\"}"),
		    OK("{\"s\":\"\",\"s_nul\":true,\"u\":null,\"i\":-42,\"is\":42,\"n\":null,\"b\":true,"
		       "\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
	check_params_error(REQ("{\"s\":\"x\",\"i\":\"4.2\"}"),
			   "param 'i' of Test.types must be int, got string '4.2': not a decimal integer within int64");
	check_params_error(REQ("{\"s\":\"x\",\"i\":\"99999999999999999999\"}"),
			   "param 'i' of Test.types must be int, got string '99999999999999999999': not a decimal integer within int64");
	/* int64 bounds as strings */
	ck_dispatch(eng, REQ("{\"s\":\"\",\"i\":\"-9223372036854775808\"}"),
		    OK("{\"s\":\"\",\"s_nul\":true,\"u\":null,\"i\":-9223372036854775808,\"is\":42,\"n\":null,"
		       "\"b\":true,\"o\":{\"k\":[1,\"x\"]},\"a\":null}"));
	/* null means "not given": the default applies; not for a required one */
	ck_dispatch(eng, REQ("{\"s\":\"\",\"i\":null,\"b\":null}"),
		    OK("{\"s\":\"\",\"s_nul\":true," DEFAULTS_AFTER_S));
	check_params_error(REQ("{\"s\":null,\"i\":\"1\"}"), "missing required param 's' of Test.types");
	/* a long string value is cut in the message, quotes never break it */
	check_params_error(REQ("{\"s\":\"x\",\"b\":\"it's a very long value that goes on and on and on\"}"),
			   "param 'b' of Test.types must be bool, got string 'it?s a very long value that goes on and ...': not true/false");
}
END_TEST

/* rpc_member_int: the int-or-string reading of a member of an object param
 * (VM.create's vmParams.memSize), and an RPC_T_INTSTR param bound as an
 * int (its default too). */
static int h_member(struct rpc_call *c)
{
	int64_t n;
	if (rpc_member_int(c, "p", rpc_arg(c, "p"), "n", 1, 4096, 7, &n) < 0)
		return -1;
	const struct vd_value *q = rpc_arg(c, "q");
	vw_begin_object(c->w);
	vw_kint(c->w, "n", n);
	vw_kstr(c->w, "q", vd_type_name(q->type));
	vw_kint(c->w, "qv", q->type == VD_INT ? q->v.i : -1);
	vw_end_object(c->w);
	return 0;
}

static struct rpc_engine *member_engine(void)
{
	static const struct rpc_param p[] = {
		{ "p", RPC_T_OBJECT, false, "{}", NULL },
		{ "q", RPC_T_INTSTR, false, "\"42\"", NULL },
	};
	static const struct rpc_verb_decl d[] = {
		{ .name = "D.member", .params = p, .nparams = 2, .flags = RPC_F_ALWAYS }, { .name = NULL },
	};
	static const struct rpc_binding b[] = { { "D.member", h_member }, { NULL, NULL } };
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, d), 0);
	ck_assert_int_eq(rpc_engine_bind(e, b, &app), 0);
	char why[256];
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), 0);
	return e;
}

#define MREQ(params) "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"D.member\",\"params\":" params "}"
#define MOK(n, qv) OK("{\"n\":" n ",\"q\":\"int\",\"qv\":" qv "}")

static void check_member_error(struct rpc_engine *e, const char *body, const char *msg)
{
	struct collected col = { 0 };
	dispatch_json(e, body, &col);
	ck_assert_int_eq(col.calls, 1);
	char want[512];
	snprintf(want, sizeof(want),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"Invalid params: %s\"}}", msg);
	ck_assert_msg(col.bytes && strcmp(col.bytes, want) == 0, "request %s\n  got  %s\n  want %s",
		      body, col.bytes ? col.bytes : "(none)", want);
	collected_reset(&col);
}

START_TEST(member_int)
{
	select_json_codec(_i);
	struct rpc_engine *e = member_engine();
	/* an integer, a decimal string, absent or null (the default), the bounds */
	ck_dispatch(e, MREQ("{\"p\":{\"n\":5}}"), MOK("5", "42"));
	ck_dispatch(e, MREQ("{\"p\":{\"n\":\"4096\"}}"), MOK("4096", "42"));
	ck_dispatch(e, MREQ("{\"p\":{\"n\":\"0001\"}}"), MOK("1", "42"));
	ck_dispatch(e, MREQ("{\"p\":{}}"), MOK("7", "42"));
	ck_dispatch(e, MREQ("{\"p\":{\"n\":null,\"m\":\"x\"}}"), MOK("7", "42"));
	ck_dispatch(e, MREQ("{}"), MOK("7", "42"));
	/* the INTSTR param reaches the handler as an int, given or defaulted */
	ck_dispatch(e, MREQ("{\"q\":\"9223372036854775807\"}"), MOK("7", "9223372036854775807"));
	ck_dispatch(e, MREQ("{\"q\":-3}"), MOK("7", "-3"));
#define BAD(v, got) check_member_error(e, MREQ("{\"p\":{\"n\":" v "}}"), \
		"param 'p.n' of D.member must be int-or-string, got " got)
	/* out of the handler's bounds, as an int and as a string */
	BAD("0", "int 0: not within 1..4096");
	BAD("-1", "int -1: not within 1..4096");
	BAD("\"4097\"", "string '4097': not within 1..4096");
	BAD("9223372036854775807", "int 9223372036854775807: not within 1..4096");
	/* overflow */
	BAD("18446744073709551615", "uint 18446744073709551615: out of range");
	BAD("\"9223372036854775808\"",
	    "string '9223372036854775808': not a string of decimal digits within int64");
	BAD("\"99999999999999999999\"",
	    "string '99999999999999999999': not a string of decimal digits within int64");
	/* a negative, signed, spaced, empty, junk or float string */
	BAD("\"-1\"", "string '-1': not a string of decimal digits within int64");
	BAD("\"+5\"", "string '+5': not a string of decimal digits within int64");
	BAD("\" 5\"", "string ' 5': not a string of decimal digits within int64");
	BAD("\"\"", "string '': not a string of decimal digits within int64");
	BAD("\"lots\"", "string 'lots': not a string of decimal digits within int64");
	BAD("\"5.0\"", "string '5.0': not a string of decimal digits within int64");
	/* a float, a bool, an array, an object */
	BAD("2.0", "double 2");
	BAD("2.5", "double 2.5");
	BAD("true", "bool true");
	BAD("[5]", "array");
	BAD("{}", "object");
#undef BAD
	/* the param itself is checked by the schema as ever */
	check_member_error(e, MREQ("{\"p\":[]}"), "param 'p' of D.member must be object, got array");
	check_member_error(e, MREQ("{\"q\":\"x\"}"),
			   "param 'q' of D.member must be int-or-string, got string 'x': "
			   "not a string of decimal digits within int64");
	rpc_engine_free(e);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rpc_params");
	TCase *tc = tcase_create("params");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, named_with_defaults, 0, 2);
	tcase_add_loop_test(tc, named_all_given, 0, 2);
	tcase_add_loop_test(tc, positional, 0, 2);
	tcase_add_loop_test(tc, missing_required, 0, 2);
	tcase_add_loop_test(tc, bad_types, 0, 2);
	tcase_add_loop_test(tc, vdsm_coercions, 0, 2);
	tcase_add_loop_test(tc, strings_copied_nul_terminated, 0, 2);
	tcase_add_loop_test(tc, member_int, 0, 2);
	suite_add_tcase(s, tc);
	TCase *td = tcase_create("declare");
	tcase_add_checked_fixture(td, setup, teardown);
	tcase_add_test(td, bad_default_type);
	tcase_add_test(td, bad_default_json);
	tcase_add_test(td, duplicate_param);
	tcase_add_test(td, too_many_params);
	tcase_add_test(td, null_default_is_no_default);
	tcase_add_test(td, accessors);
	suite_add_tcase(s, td);
	return s;
}

int main(void)
{
	return check_run(suite());
}
