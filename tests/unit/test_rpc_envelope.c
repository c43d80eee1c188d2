/* tests/unit/test_rpc_envelope.c - JSON-RPC envelope handling of the engine
 * (PROTOCOL.md section 3): checks in order, ids of every JSON type,
 * notifications, both batch forms, error codes and messages, code 99,
 * seal errors, metrics.  No sockets: bodies go straight to rpc_dispatch. */
#include "rpc_test.h"
#include "../../rpc/schema.h"
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

/* Require an error response: exact head (key order, id), code, message
 * prefix, and nothing after the message. */
static void check_error(const char *body, const char *id_json, int code, const char *prefix)
{
	struct collected col = { 0 };
	dispatch_json(eng, body, &col);
	ck_assert_int_eq(col.calls, 1);
	ck_assert_msg(col.bytes, "no reply to %s", body);
	char head[256];
	snprintf(head, sizeof(head), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"%s",
		 id_json, code, prefix);
	ck_assert_msg(strncmp(col.bytes, head, strlen(head)) == 0,
		      "request %s\n  got  %s\n  want %s...", body, col.bytes, head);
	size_t n = strlen(col.bytes);
	ck_assert_msg(n >= 3 && strcmp(col.bytes + n - 3, "\"}}") == 0, "tail of %s", col.bytes);
	ck_assert_ptr_null(strstr(col.bytes, "\"data\""));
	collected_reset(&col);
}

START_TEST(parse_errors)
{
	select_json_codec(_i);
	check_error("{", "null", -32700, "Invalid JSON was received by the server.");
	check_error("", "null", -32700, "Invalid JSON was received by the server.");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\"} x", "null", -32700,
		    "Invalid JSON was received by the server.");
	check_error("[{\"jsonrpc\":\"2.0\",\"id\":1,", "null", -32700,
		    "Invalid JSON was received by the server.");
}
END_TEST

START_TEST(not_object_or_array)
{
	select_json_codec(_i);
	check_error("42", "null", -32600, "Invalid request");
	check_error("\"Test.ping\"", "null", -32600, "Invalid request");
	check_error("null", "null", -32600, "Invalid request");
	check_error("true", "null", -32600, "Invalid request");
	check_error("[]", "null", -32600, "Invalid request");
}
END_TEST

START_TEST(envelope_order)
{
	select_json_codec(_i);
	/* jsonrpc missing / wrong type / wrong value, answered with own id */
	check_error("{\"id\":1,\"method\":\"Test.ping\"}", "1", -32600, "Invalid request: member 'jsonrpc'");
	check_error("{\"jsonrpc\":2.0,\"id\":1,\"method\":\"Test.ping\"}", "1", -32600,
		    "Invalid request: member 'jsonrpc'");
	check_error("{\"jsonrpc\":\"1.0\",\"id\":\"a\",\"method\":\"Test.ping\"}", "\"a\"", -32600,
		    "Invalid request: member 'jsonrpc'");
	/* jsonrpc is checked before method */
	check_error("{\"jsonrpc\":\"1.0\",\"id\":2}", "2", -32600, "Invalid request: member 'jsonrpc'");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":2}", "2", -32600, "Invalid request: member 'method'");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":7}", "2", -32600,
		    "Invalid request: member 'method'");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":null}", "2", -32600,
		    "Invalid request: member 'method'");
	/* method is checked before params */
	check_error("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":1,\"params\":1}", "3", -32600,
		    "Invalid request: member 'method'");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"Test.ping\",\"params\":\"x\"}", "3",
		    -32600, "Invalid request: member 'params' of Test.ping");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"Test.ping\",\"params\":null}", "3",
		    -32600, "Invalid request: member 'params'");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"Test.ping\",\"params\":5}", "3",
		    -32600, "Invalid request: member 'params'");
	/* an invalid request without id is still answered, once, with id null */
	check_error("{\"jsonrpc\":\"2.0\",\"method\":1}", "null", -32600, "Invalid request");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":1}", "null", -32600, "Invalid request");
	/* valid params forms */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"Test.ping\",\"params\":[]}",
		    "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"Test.ping\",\"params\":{}}",
		    "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":true}");
}
END_TEST

START_TEST(ids_of_every_type)
{
	select_json_codec(_i);
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":\"abc-1\",\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":\"abc-1\",\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":\"\",\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":\"\",\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":\"q\\\"\\u00e9\",\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":\"q\\\"\xc3\xa9\",\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":-17,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":-17,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":true}");
	/* integers at the edges of y_number's short path (18 digits) and past it */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":-999999999999999999,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":-999999999999999999,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":9223372036854775807,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":9223372036854775807,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":true}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":2e0,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":2.0,\"result\":true}");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":01,\"method\":\"Test.ping\"}", "null", -32700,
		    "Invalid JSON was received by the server.");
	/* duplicate envelope members: the first of each name counts */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"Test.ping\",\"id\":8,"
		    "\"method\":\"X.y\",\"jsonrpc\":\"1.0\",\"params\":[],\"params\":5}",
		    "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":true}");
	check_error("{\"jsonrpc\":\"1.0\",\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"Test.ping\"}", "9",
		    -32600, "Invalid request: member 'jsonrpc'");
	/* null and absent: notifications */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"Test.ping\"}", NULL);
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"method\":\"Test.ping\"}", NULL);
	/* bool, array, object: invalid, answered with id null */
	check_error("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"Test.ping\"}", "null", -32600,
		    "Invalid request: member 'id'");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"Test.ping\"}", "null", -32600,
		    "Invalid request: member 'id'");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"Test.ping\"}", "null", -32600,
		    "Invalid request: member 'id'");
}
END_TEST

START_TEST(id_travels_beside_bytes)
{
	select_json_codec(_i);
	struct collected col = { 0 };
	dispatch_json(eng, "{\"jsonrpc\":\"2.0\",\"id\":\"req-9\",\"method\":\"Test.ping\"}", &col);
	ck_assert(col.id_present);
	ck_assert_int_eq(col.id.type, VD_STRING);
	ck_assert_str_eq(col.id_str, "req-9");
	ck_assert_ptr_eq(col.codec, json_codec_for_tests());
	collected_reset(&col);
	dispatch_json(eng, "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"Test.nope\"}", &col);
	ck_assert(col.id_present);
	ck_assert_int_eq(col.id.type, VD_INT);
	ck_assert_int_eq(col.id.v.i, 77);
	collected_reset(&col);
	dispatch_json(eng, "{", &col);
	ck_assert(!col.id_present);
	collected_reset(&col);
}
END_TEST

START_TEST(key_order_and_results)
{
	select_json_codec(_i);
	ck_dispatch(eng, "{\"id\":5,\"params\":{\"value\":[1,{\"a\":null}]},\"method\":\"Test.echo\",\"jsonrpc\":\"2.0\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":[1,{\"a\":null}]}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"Test.echo\",\"params\":[\"s\"]}",
		    "{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":\"s\"}");
	/* a handler that writes nothing answers true */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"Test.count\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":true}");
	ck_assert_int_eq(app.notified, 1);
}
END_TEST

START_TEST(unknown_method)
{
	select_json_codec(_i);
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Host.nothing\"}", "1", -32601,
		    "The method does not exist or is not available: Host.nothing\"");
	/* an embedded NUL does not match a declared name */
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\\u0000x\"}", "1", -32601,
		    "The method does not exist or is not available: Test.ping?x");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.pin\"}", "1", -32601,
		    "The method does not exist or is not available: Test.pin\"");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", "1", -32601,
		    "The method does not exist or is not available");
	/* long names are cut */
	char body[4096];
	char name[2001];
	memset(name, 'm', 2000);
	name[2000] = '\0';
	snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\"}", name);
	struct collected col = { 0 };
	dispatch_json(eng, body, &col);
	ck_assert(col.bytes && strstr(col.bytes, "...\"}}"));
	ck_assert(col.len < 600);
	collected_reset(&col);
	/* notification of an unknown method: nothing */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"method\":\"Host.nothing\"}", NULL);
}
END_TEST

START_TEST(notifications_executed)
{
	select_json_codec(_i);
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"}", NULL);
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"Test.count\",\"params\":[]}", NULL);
	ck_assert_int_eq(app.notified, 2);
	/* failing notifications are not answered either */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"method\":\"Test.fail\",\"params\":[1]}", NULL);
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"method\":\"Test.echo\"}", NULL);
}
END_TEST

START_TEST(batch_of_one)
{
	select_json_codec(_i);
	ck_dispatch(eng, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\"}]",
		    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}");
	ck_dispatch(eng, "[{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"}]", NULL);
	ck_assert_int_eq(app.notified, 1);
	ck_dispatch(eng, "[1]", "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
		    "\"message\":\"Invalid request: a request must be an object\"}}");
	struct collected col = { 0 };
	dispatch_json(eng, "[{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"Test.ping\"}]", &col);
	ck_assert(col.id_present);
	ck_assert_str_eq(col.id_str, "x");
	collected_reset(&col);
}
END_TEST

START_TEST(batch_of_several)
{
	select_json_codec(_i);
	ck_assert_int_eq(RPC_E_NO_VM, 6);  /* used as Test.fail's param below */
	ck_dispatch(eng,
		    "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\"},"
		    "{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"},"
		    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"No.such\"},"
		    "5,"
		    "{\"jsonrpc\":\"2.0\",\"id\":\"e\",\"method\":\"Test.echo\",\"params\":{\"value\":{\"k\":[]}}},"
		    "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"Test.fail\",\"params\":[6]}]",
		    "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true},"
		    "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601,\"message\":"
		    "\"The method does not exist or is not available: No.such\"}},"
		    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
		    "\"Invalid request: a request must be an object\"}},"
		    "{\"jsonrpc\":\"2.0\",\"id\":\"e\",\"result\":{\"k\":[]}},"
		    "{\"jsonrpc\":\"2.0\",\"id\":6,\"error\":{\"code\":1,\"message\":"
		    "\"Virtual machine does not exist: detail for Test.fail\"}}]");
	ck_assert_int_eq(app.notified, 1);
	/* only notifications: executed, nothing sent */
	ck_dispatch(eng, "[{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"},"
		    "{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\",\"id\":null}]", NULL);
	ck_assert_int_eq(app.notified, 3);
	/* one answer among notifications: still an array */
	ck_dispatch(eng, "[{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"},"
		    "{\"jsonrpc\":\"2.0\",\"method\":\"Test.ping\",\"id\":9}]",
		    "[{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":true}]");
	/* invalid members */
	ck_dispatch(eng, "[1,2]",
		    "[{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
		    "\"Invalid request: a request must be an object\"}},"
		    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
		    "\"Invalid request: a request must be an object\"}}]");
	struct collected col = { 0 };
	dispatch_json(eng, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\"},"
		      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.ping\"}]", &col);
	ck_assert(!col.id_present);  /* a batch has no single id */
	collected_reset(&col);
}
END_TEST

START_TEST(batch_too_large)
{
	select_json_codec(_i);
	size_t n = RPC_MAX_BATCH + 1;
	const char *item = "{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"},";
	size_t il = strlen(item);
	char *body = malloc(n * il + 2);
	body[0] = '[';
	for (size_t i = 0; i < n; i++)
		memcpy(body + 1 + i * il, item, il);
	body[n * il] = ']';
	body[n * il + 1] = '\0';
	char want[64];
	snprintf(want, sizeof(want), "Invalid request: batch of %zu requests", n);
	check_error(body, "null", -32600, want);
	ck_assert_int_eq(app.notified, 0);
	/* at the limit: executed */
	body[(n - 1) * il] = ']';
	body[(n - 1) * il + 1] = '\0';
	ck_dispatch(eng, body, NULL);
	ck_assert_int_eq(app.notified, RPC_MAX_BATCH);
	free(body);
}
END_TEST

/* Expected wire code per internal error, from the PROTOCOL.md table. */
static const struct { enum rpc_err e; int code; const char *msg; } codes[] = {
	{ RPC_E_PARSE, -32700, "Invalid JSON was received by the server." },
	{ RPC_E_INVALID_REQ, -32600, "Invalid request" },
	{ RPC_E_NO_METHOD, -32601, "The method does not exist or is not available" },
	{ RPC_E_PARAMS, -32602, "Invalid params" },
	{ RPC_E_INTERNAL, -32603, "Internal JSON-RPC error" },
	{ RPC_E_NO_VM, 1, "Virtual machine does not exist" },
	{ RPC_E_VM_EXISTS, 4, "Virtual machine already exists" },
	{ RPC_E_CREATE_VM, 9, "Error creating the requested VM" },
	{ RPC_E_NO_PEER, 10, "Could not connect to peer host" },
	{ RPC_E_MIGRATION, 12, "Fatal error during migration" },
	{ RPC_E_MIGRATE_LIMIT, 82, "Incoming migration limit exceeded" },
	{ RPC_E_NO_IMAGE_FILE, 13, "Drive image file could not be found" },
	{ RPC_E_SNAPSHOT, 48, "Snapshot failed" },
	{ RPC_E_MERGE, 52, "Merge failed" },
	{ RPC_E_REPLICA, 55, "Drive replication error" },
	{ RPC_E_UNAVAIL, 40, "Resource unavailable" },
	{ RPC_E_NO_REPLICATION, 88, "Replication not in progress." },
	{ RPC_E_EXTERNAL_DATA, 89, "Failed to handle external VM data" },
	{ RPC_E_RECOVERING, 99, "Recovering from crash or Initializing" },
	{ RPC_E_GENERAL, 100, "General Exception" },
	{ RPC_E_NO_VOLUME, 201, "Volume does not exist" },
	{ RPC_E_VOLUME_EXISTS, 212, "Volume already exists" },
	{ RPC_E_NO_IMAGE, 268, "Image does not exist in domain" },
	{ RPC_E_NO_POOL, 309, "Unknown pool id, pool not connected" },
	{ RPC_E_WRONG_MASTER, 324, "Wrong Master domain or its version" },
	{ RPC_E_POOL_CONNECTED, 325, "Cannot perform action while storage pool is connected" },
	{ RPC_E_NOT_IN_POOL, 353, "Storage domain not in pool" },
	{ RPC_E_DOM_STATE, 347, "Storage domain is in illegal state" },
	{ RPC_E_NOT_MEMBER, 375, "Domain is not member in pool" },
	{ RPC_E_DOM_STATUS, 376, "Unsupported Storage Domain status" },
	{ RPC_E_DETACH_MASTER, 383, "Illegal action" },
	{ RPC_E_DOM_VERSION, 394, "Domain version is unsupported" },
	{ RPC_E_VERSION_ADVANCED, 395, "Current domain version is too advanced" },
	{ RPC_E_SPM_ACQUIRE, 651, "Cannot obtain lock" },
	{ RPC_E_SPM_TASKS, 653, "Error stopping SPM, SPM has unfinished task(s)" },
	{ RPC_E_NOT_SPM, 654, "Not SPM" },
	{ RPC_E_NO_DOMAIN, 358, "Storage domain does not exist" },
	{ RPC_E_DOMAIN_EXISTS, 365, "Storage domain already exists" },
	{ RPC_E_NO_TASK, 401, "Task id unknown" },
	{ RPC_E_TASK_STATE, 410, "Operation is not allowed in this task state" },
	{ RPC_E_TASK_ABORTED, 411, "Task is aborted" },
	{ RPC_E_TASK_NOT_DONE, 403, "Task not finished" },
	{ RPC_E_TASK_MOVE, 441, "cannot move task to requested state" },
	{ RPC_E_NO_RESOURCES, 1100, "Not enough resources" },
	{ RPC_E_VM_DOWN, 6, "Virtual machine is down" },
	{ RPC_E_AGENT_NONRESP, 19, "Guest agent non-responsive" },
	{ RPC_E_MISSING_PARAM, 11, "Missing required parameter" },
	{ RPC_E_NOT_IMPL, 44, "Not implemented" },
	{ RPC_E_RESIZE, 58, "Wrong resize disk parameter" },
	{ RPC_E_VM_POLICY, 63, "Failed to update VM SLA policy" },
	{ RPC_E_UNSUPPORTED, 75, "Operation not supported" },
	{ RPC_E_FREEZE, 76, "Unable to freeze guest filesystems" },
	{ RPC_E_THAW, 77, "Unable to thaw guest filesystems" },
	{ RPC_E_NET_LOST_CONN, 10, "Connection to the engine lost" },
	{ RPC_E_NET_BAD_PARAMS, 21, "Bad network parameters" },
	{ RPC_E_NET_BAD_ADDR, 22, "Bad network address" },
	{ RPC_E_NET_BAD_NIC, 23, "Bad nic" },
	{ RPC_E_NET_USED_NIC, 24, "Nic already in use" },
	{ RPC_E_NET_BAD_BONDING, 25, "Bad bonding" },
	{ RPC_E_NET_BAD_VLAN, 26, "Bad vlan" },
	{ RPC_E_NET_BAD_BRIDGE, 27, "Bad bridge" },
	{ RPC_E_NET_FAILED_IFUP, 29, "Failed to bring interface up" },
	{ RPC_E_NET_USED_BOND, 31, "Bond already in use" },
	{ RPC_E_TICKET, 18, "Error while setting spice ticket" },
	{ RPC_E_CHANGE_DISK, 41, "Failed to change disk image" },
	{ RPC_E_HOTPLUG_NIC, 49, "Failed to hotplug NIC" },
	{ RPC_E_UPDATE_DEVICE, 56, "Failed to update device" },
	{ RPC_E_HOTPLUG_MEM, 70, "Failed to hotplug memory" },
	{ RPC_E_HOTUNPLUG_MEM, 85, "Failed to hotunplug memory" },
	{ RPC_E_MASTER_ERR, 355, "Error validating master storage domain" },
	{ RPC_E_HOTPLUG_DISK, 45, "Failed to hotplug disk" },
	{ RPC_E_HOTUNPLUG_DISK, 46, "Failed to hotunplug disk" },
	{ RPC_E_MIG_CANCEL, 47, "Migration not in progress" },
	{ RPC_E_HOTUNPLUG_NIC, 50, "Failed to hotunplug NIC" },
	{ RPC_E_UNEXPECTED, 16, "Unexpected exception" },
	{ RPC_E_GEN_MISMATCH, 911, "The provided generation does not match the actual generation" },
	{ RPC_E_NOT_IN_CHAIN, 920, "Volume is not part of the chain." },
	{ RPC_E_WRONG_PARENT, 921, "Wrong parent volume." },
	{ RPC_E_SHARED_RO, 219, "Shared volume is read only" },
	{ RPC_E_MERGE_BITMAP, 1621, "Failed to merge bitmaps" },
	{ RPC_E_ADD_BITMAP, 1620, "Failed to add bitmap" },
	{ RPC_E_BACKUP, 1600, "Backup Error" },
	{ RPC_E_NO_BACKUP, 1601, "No such backup Error" },
	{ RPC_E_CHECKPOINT, 1610, "Checkpoint Error" },
	{ RPC_E_NO_CHECKPOINT, 1611, "No such checkpoint Error" },
	{ RPC_E_CHECKPOINT_BAD, 1612, "Inconsistent checkpoint Error" },
	{ RPC_E_REMOVE_BITMAP, 1622, "Failed to remove bitmap" },
	{ RPC_E_ST_UNSUPPORTED, 2009, "Unsupported operation" },
	{ RPC_E_IMAGE_TICKETS, 481, "Cannot communicate with image daemon" },
	{ RPC_E_IMAGE_DAEMON, 482, "Image daemon request failed" },
	{ RPC_E_IMAGE_UNSUPPORTED, 483, "Image daemon is unsupported" },
	{ RPC_E_POOL_NOT_CONN, 313, "Storage pool not connected" },
	{ RPC_E_BITMAP_CHAIN, 946, "Invalid bitmap chain" },
	{ RPC_E_NO_BITMAP, 947, "Bitmap does not exist" },
	{ RPC_E_VOL_UPDATE, 235, "Cannot update volume attributes" },
	{ RPC_E_IMAGE_VERIFY, 484, "Image verification failed" },
	{ RPC_E_STORAGE, 200, "General Storage Exception" },
	{ RPC_E_DOM_ACTION, 350, "Error in storage domain action" },
	{ RPC_E_CONN_ERROR, 451, "Error storage server connection" },
	{ RPC_E_DISCONN_ERROR, 452, "Error storage server disconnection" },
	{ RPC_E_CONN_ACCESS, 469, "Permission settings on the specified path do not allow access to the storage. Verify permission settings on the specified storage path." },
	{ RPC_E_MOUNT_TYPE, 470, "Mount type error" },
	{ RPC_E_MOUNT, 477, "Problem while trying to mount target" },
};

START_TEST(every_error_code)
{
	select_json_codec(_i);
	ck_assert_int_eq(VD_ARRAY_SIZE(codes), RPC_E__COUNT - 1);
	for (size_t i = 0; i < VD_ARRAY_SIZE(codes); i++) {
		ck_assert_int_eq(rpc_err_code(codes[i].e), codes[i].code);
		ck_assert_str_eq(rpc_err_message(codes[i].e), codes[i].msg);
		/* through a handler: partial output rolled back, detail appended */
		char body[160], prefix[200];
		snprintf(body, sizeof(body),
			 "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"Test.fail\",\"params\":{\"err\":%d}}",
			 i, (int)codes[i].e);
		/* a message that is a full sentence is followed by " ", others by ": " */
		size_t ml = strlen(codes[i].msg);
		snprintf(prefix, sizeof(prefix), "%s%sdetail for Test.fail\"", codes[i].msg,
			 codes[i].msg[ml - 1] == '.' ? " " : ": ");
		char id[16];
		snprintf(id, sizeof(id), "%zu", i);
		check_error(body, id, codes[i].code, prefix);
	}
	/* handler failed without saying why, and a handler that left a
	 * container open: -32603 naming the verb */
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.fail\",\"params\":[0]}", "1", -32603,
		    "Internal JSON-RPC error: handler of Test.fail failed\"");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.bad\"}", "1", -32603,
		    "Internal JSON-RPC error: handler of Test.bad wrote an invalid result\"");
}
END_TEST

START_TEST(recovering_until_ready)
{
	select_json_codec(_i);
	rpc_engine_set_ready(eng, false);
	ck_assert(!rpc_engine_ready(eng));
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.echo\",\"params\":[1]}", "1", 99,
		    "Recovering from crash or Initializing\"");
	/* even with bad params, and for blocking verbs */
	check_error("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.echo\"}", "2", 99,
		    "Recovering from crash or Initializing");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.block\"}", "2", 99,
		    "Recovering from crash or Initializing");
	/* RPC_F_ALWAYS verbs answer; unknown verbs are still -32601 */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":true}");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"X.y\"}", "4", -32601, "The method");
	/* notifications are not executed while initializing */
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"}", NULL);
	ck_assert_int_eq(app.notified, 0);
	rpc_engine_set_ready(eng, true);
	ck_assert(rpc_engine_ready(eng));
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"Test.echo\",\"params\":[1]}",
		    "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":1}");
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"method\":\"Test.count\"}", NULL);
	ck_assert_int_eq(app.notified, 1);
}
END_TEST

START_TEST(blocking_inline_without_pool)
{
	select_json_codec(_i);
	app.release = true;
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.block\",\"params\":[\"z\"]}",
		    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"z\"}");
	ck_assert_int_eq(app.ran, 1);
}
END_TEST

START_TEST(every_codec)
{
	select_json_codec(_i);
	const struct vd_codec *const *l = codec_list();
	for (size_t i = 0; l[i]; i++) {
		const struct vd_codec *cd = l[i];
		/* build the request with the codec's own writer */
		struct vd_buf req = VD_BUF_INIT;
		struct vd_writer w;
		cd->writer_init(&w, &req);
		vw_begin_object(&w);
		vw_kstr(&w, "jsonrpc", "2.0");
		vw_kstr(&w, "method", "Test.echo");
		vw_keyz(&w, "params");
		vw_begin_array(&w);
		vw_begin_object(&w);
		vw_kint(&w, "n", -5);
		vw_kstr(&w, "s", "x");
		vw_end_object(&w);
		vw_end_array(&w);
		vw_kint(&w, "id", 42);
		vw_end_object(&w);
		struct collected col = { 0 };
		struct rpc_request_info info = { cd, NULL, "test", NULL };
		rpc_dispatch(eng, &info, req.data, req.len, collect_reply, &col);
		ck_assert_int_eq(col.calls, 1);
		ck_assert_ptr_eq(col.codec, cd);
		struct vd_arena a;
		arena_init(&a, 1024);
		struct vd_value *v = decode_reply(&a, cd, col.bytes, col.len);
		ck_assert_int_eq(v->type, VD_OBJECT);
		ck_assert_int_eq(v->v.obj.n, 3);
		ck_assert(v->v.obj.members[0].klen == 7 && memcmp(v->v.obj.members[0].key, "jsonrpc", 7) == 0);
		ck_assert(v->v.obj.members[1].klen == 2 && memcmp(v->v.obj.members[1].key, "id", 2) == 0);
		ck_assert(v->v.obj.members[2].klen == 6 && memcmp(v->v.obj.members[2].key, "result", 6) == 0);
		const struct vd_value *id = vd_obj_get(v, "id");
		ck_assert(id->type == VD_INT && id->v.i == 42);
		const struct vd_value *r = vd_obj_get(v, "result");
		ck_assert(r && r->type == VD_OBJECT);
		ck_assert(vd_obj_get(r, "n")->v.i == -5);
		ck_assert(vd_str_eq(vd_obj_get(r, "s"), "x"));
		if (cd->is_json)
			ck_assert_str_eq(col.bytes, "{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"n\":-5,\"s\":\"x\"}}");
		arena_free(&a);
		collected_reset(&col);
		buf_free(&req);
	}
}
END_TEST

/* ---- sealing ---- */

static int h_any(struct rpc_call *c)
{
	(void)c;
	return 0;
}

static const struct rpc_verb_decl two_decls[] = {
	{ .name = "A.one" }, { .name = "A.two" }, { .name = NULL },
};

START_TEST(seal_names_unbound_verb)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, two_decls), 0);
	static const struct rpc_binding b[] = { { "A.one", h_any }, { NULL, NULL } };
	ck_assert_int_eq(rpc_engine_bind(e, b, NULL), 0);
	char why[256] = "";
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, "'A.two'") && strstr(why, "no handler"), "%s", why);
	rpc_engine_free(e);
}
END_TEST

START_TEST(seal_names_undeclared_binding)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, two_decls), 0);
	static const struct rpc_binding b[] = {
		{ "A.one", h_any }, { "A.two", h_any }, { "A.three", h_any }, { NULL, NULL },
	};
	ck_assert_int_eq(rpc_engine_bind(e, b, NULL), 0);
	char why[256] = "";
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, "'A.three'") && strstr(why, "not declared"), "%s", why);
	rpc_engine_free(e);
}
END_TEST

START_TEST(seal_rejects_duplicates)
{
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, two_decls), 0);
	ck_assert_int_eq(rpc_engine_declare(e, two_decls), 0);
	char why[256] = "";
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, "'A.one'") && strstr(why, "twice"), "%s", why);
	rpc_engine_free(e);

	e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, two_decls), 0);
	static const struct rpc_binding b[] = {
		{ "A.one", h_any }, { "A.two", h_any }, { "A.two", h_any }, { NULL, NULL },
	};
	ck_assert_int_eq(rpc_engine_bind(e, b, NULL), 0);
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), VD_EINVAL);
	ck_assert_msg(strstr(why, "'A.two'") && strstr(why, "twice"), "%s", why);
	rpc_engine_free(e);
}
END_TEST

START_TEST(lookup_many_verbs)
{
	/* a larger table exercises collisions in the hash */
	enum { N = 500 };
	static struct rpc_verb_decl decls[N + 1];
	static struct rpc_binding binds[N + 1];
	static char names[N][24];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "Many.verb%d", i);
		decls[i] = (struct rpc_verb_decl){ .name = names[i], .flags = RPC_F_ALWAYS };
		binds[i] = (struct rpc_binding){ names[i], h_any };
	}
	decls[N].name = NULL;
	binds[N].name = NULL;
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare(e, decls), 0);
	ck_assert_int_eq(rpc_engine_bind(e, binds, NULL), 0);
	char why[256];
	ck_assert_int_eq(rpc_engine_seal(e, why, sizeof(why)), 0);
	for (int i = 0; i < N; i++)
		ck_assert_ptr_eq(rpc_engine_find(e, names[i]), &decls[i]);
	ck_assert_ptr_null(rpc_engine_find(e, "Many.verb500"));
	ck_assert_ptr_null(rpc_engine_find(e, "Many.verb"));
	char body[128];
	snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Many.verb%d\"}", 321);
	struct collected col = { 0 };
	dispatch_json(e, body, &col);
	ck_assert_str_eq(col.bytes, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}");
	collected_reset(&col);
	rpc_engine_free(e);
}
END_TEST

START_TEST(compiled_schema_declares)
{
	/* the real schema tables declare cleanly (defaults parse, no dups) */
	struct rpc_engine *e = rpc_engine_new(NULL);
	ck_assert_int_eq(rpc_engine_declare_schema(e), 0);
	rpc_engine_free(e);
}
END_TEST

START_TEST(metrics_text)
{
	select_json_codec(_i);
	ck_dispatch(eng, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\"}",
		    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.echo\"}", "1", -32602, "Invalid params");
	check_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Nope\"}", "1", -32601, "The method");
	check_error("{", "null", -32700, "Invalid JSON");
	struct vd_buf out = VD_BUF_INIT;
	rpc_metrics_format(eng, &out);
	buf_putc(&out, '\0');
	ck_assert_ptr_nonnull(strstr(out.data, "vdsmd_rpc_requests_total{verb=\"Test.ping\",result=\"ok\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out.data,
		"vdsmd_rpc_requests_total{verb=\"Test.echo\",result=\"error\",code=\"-32602\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out.data, "vdsmd_rpc_invalid_requests_total{code=\"-32601\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out.data, "vdsmd_rpc_invalid_requests_total{code=\"-32700\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out.data,
		"vdsmd_rpc_request_duration_seconds_bucket{verb=\"Test.ping\",le=\"+Inf\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out.data,
		"vdsmd_rpc_request_duration_seconds_count{verb=\"Test.ping\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(out.data, "# TYPE vdsmd_rpc_request_duration_seconds histogram\n"));
	buf_free(&out);
}
END_TEST

static void reentrant_reply(void *ctx, const struct rpc_response *r)
{
	struct collected *c = ctx;
	collect_reply(ctx, r);
	if (c->calls == 1) {
		/* dispatch again from inside the callback: own scratch */
		dispatch_json(eng, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"Test.echo\",\"params\":[\"in\"]}", c);
		ck_assert_str_eq(c->bytes, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"in\"}");
	}
}

START_TEST(reentrant_dispatch)
{
	select_json_codec(_i);
	struct collected col = { 0 };
	struct rpc_request_info info = { json_codec_for_tests(), NULL, "test", NULL };
	const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Test.ping\"}";
	rpc_dispatch(eng, &info, body, strlen(body), reentrant_reply, &col);
	ck_assert_int_eq(col.calls, 2);
	collected_reset(&col);
	ck_dispatch(eng, body, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rpc_envelope");
	TCase *tc = tcase_create("envelope");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, parse_errors, 0, 2);
	tcase_add_loop_test(tc, not_object_or_array, 0, 2);
	tcase_add_loop_test(tc, envelope_order, 0, 2);
	tcase_add_loop_test(tc, ids_of_every_type, 0, 2);
	tcase_add_loop_test(tc, id_travels_beside_bytes, 0, 2);
	tcase_add_loop_test(tc, key_order_and_results, 0, 2);
	tcase_add_loop_test(tc, unknown_method, 0, 2);
	tcase_add_loop_test(tc, notifications_executed, 0, 2);
	tcase_add_loop_test(tc, batch_of_one, 0, 2);
	tcase_add_loop_test(tc, batch_of_several, 0, 2);
	tcase_add_loop_test(tc, batch_too_large, 0, 2);
	tcase_add_loop_test(tc, every_error_code, 0, 2);
	tcase_add_loop_test(tc, recovering_until_ready, 0, 2);
	tcase_add_loop_test(tc, blocking_inline_without_pool, 0, 2);
	tcase_add_loop_test(tc, every_codec, 0, 2);
	tcase_add_loop_test(tc, metrics_text, 0, 2);
	tcase_add_loop_test(tc, reentrant_dispatch, 0, 2);
	suite_add_tcase(s, tc);
	TCase *ts = tcase_create("seal");
	tcase_add_test(ts, seal_names_unbound_verb);
	tcase_add_test(ts, seal_names_undeclared_binding);
	tcase_add_test(ts, seal_rejects_duplicates);
	tcase_add_test(ts, lookup_many_verbs);
	tcase_add_test(ts, compiled_schema_declares);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	return check_run(suite());
}
