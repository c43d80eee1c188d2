/* client/main.c - vdsm-client: parse, type the params, connect, call one verb
 * and print its result (see client.h for the pieces, man/vdsm-client.1 for
 * the interface).  Exit 0 success, 1 failure, 2 usage. */
#include "client.h"

#include <stdio.h>

static int run_call(struct client_opts *o, struct vd_arena *a)
{
	int rc = client_args_params(o, a);
	if (rc != CLIENT_OK)
		return rc;
	uint64_t deadline = vd_now_ms() + o->timeout_ms;
	struct client_conn c;
	rc = client_conn_open(&c, o, deadline);
	if (rc == CLIENT_OK) {
		client_conn_subscribe(&c, NULL, false);
		const struct vd_value *result = NULL;
		rc = client_call(&c, a, o->method, o->params, deadline, &result);
		if (rc == CLIENT_OK) {
			if (o->wait && result->type == VD_STRING &&
			    vd_is_uuid(result->v.s.ptr, result->v.s.len))
				rc = client_wait_task(&c, a, result->v.s.ptr, result->v.s.len);
			else
				client_json_print(stdout, result, o->compact);
		}
	}
	client_conn_close(&c);
	return rc;
}

int main(int argc, char **argv)
{
	struct vd_arena a;
	arena_init(&a, 64 * 1024);
	struct client_opts o;
	int rc = client_args_parse(&o, &a, argc, argv);
	if (rc != CLIENT_OK)
		goto out;
	switch (o.mode) {
	case CLIENT_CALL: rc = run_call(&o, &a); break;
	case CLIENT_LIST: client_print_list(stdout); break;
	case CLIENT_HELP: client_print_help(stdout); break;
	case CLIENT_VERB_HELP: client_print_verb_help(stdout, o.decl, &a); break;
	case CLIENT_WATCH: rc = client_watch_events(&o, &a); break;
	case CLIENT_COMPLETION: client_print_completion(stdout); break;
	case CLIENT_VERSION: puts(CLIENT_PROG " " VDSMD_VERSION); break;
	case CLIENT_PRETTY: {
		struct vd_value *v = NULL;
		rc = client_read_json("-", &a, &v);
		if (rc == CLIENT_OK)
			client_json_print(stdout, v, o.compact);
		break;
	}
	}
out:
	if (fflush(stdout) != 0 && rc == CLIENT_OK)
		rc = CLIENT_FAIL;
	arena_free(&a);
	return rc;
}
