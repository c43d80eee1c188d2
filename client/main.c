/* client/main.c - vdsm-client: parse, type the params, connect, call one verb
 * and print its result (see client.h for the pieces, man/vdsm-client.1 for
 * the interface).  Exit 0 success, 1 failure, 2 usage. */
#include "client.h"

#include <string.h>
#include <unistd.h>

/* Encode {"jsonrpc":"2.0","method":...,"params":...,"id":...} with codec. */
static void encode_request(struct vd_buf *out, const struct vd_codec *codec, const char *method,
			   const struct vd_value *params, const char *id)
{
	struct vd_writer w;
	codec->writer_init(&w, out);
	vw_begin_object(&w);
	vw_kstr(&w, "jsonrpc", "2.0");
	vw_kstr(&w, "method", method);
	if (params) {
		vw_keyz(&w, "params");
		vw_value(&w, params);
	}
	vw_kstr(&w, "id", id);
	vw_end_object(&w);
}

/* Decode a MESSAGE body by its content-type (default: the client's JSON). */
static struct vd_value *decode_body(struct client_conn *c, struct vd_arena *a)
{
	size_t ctlen = 0;
	const char *ct = stomp_frame_get(&c->frame, "content-type", &ctlen);
	const struct vd_codec *codec = codec_find_content_type(ct, ctlen);
	if (!codec)
		codec = client_json_codec();
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	if (codec->decode(a, c->frame.body ? c->frame.body : "", c->frame.body_len, &lim, &v, &err) != 0)
		return NULL;
	return v;
}

static void print_server_error(const char *method, const struct vd_value *params,
			       const struct vd_value *err)
{
	struct vd_buf b = VD_BUF_INIT;
	static const struct vd_value empty = { .type = VD_OBJECT };
	client_json_format(&b, params ? params : &empty, true);
	const struct vd_value *code = vd_obj_get(err, "code");
	const struct vd_value *msg = vd_obj_get(err, "message");
	fprintf(stderr, CLIENT_PROG ": Command %s with args %.*s failed:\n(code=", method,
		(int)b.len, b.data);
	if (code && code->type == VD_INT)
		fprintf(stderr, "%lld", (long long)code->v.i);
	else
		fputs("?", stderr);
	if (msg && msg->type == VD_STRING)
		fprintf(stderr, ", message=%.*s)\n", (int)msg->v.s.len, msg->v.s.ptr);
	else
		fputs(", message=)\n", stderr);
	buf_free(&b);
}

int client_call(struct client_conn *c, struct vd_arena *a, const char *method,
		const struct vd_value *params, uint64_t deadline_ms,
		const struct vd_value **result)
{
	const struct client_opts *o = c->o;
	char id[37];
	vd_uuid_generate(id);
	struct vd_buf body = VD_BUF_INIT;
	encode_request(&body, o->codec, method, params, id);
	client_conn_send_request(c, body.data, body.len);
	buf_free(&body);
	for (;;) {
		bool timed_out = false;
		if (client_conn_next(c, deadline_ms, &timed_out) != CLIENT_OK) {
			if (timed_out)
				fprintf(stderr, CLIENT_PROG ": No response from %s to %s within "
					"%g seconds.\n", o->where, method,
					o->timeout_ms / 1000.0);
			return CLIENT_FAIL;
		}
		struct vd_value *resp = decode_body(c, a);
		if (resp && resp->type == VD_ARRAY && resp->v.arr.n == 1)
			resp = &resp->v.arr.items[0];
		if (!resp || resp->type != VD_OBJECT) {
			fprintf(stderr, CLIENT_PROG ": Invalid response from %s to %s.\n",
				o->where, method);
			return CLIENT_FAIL;
		}
		const struct vd_value *rid = vd_obj_get(resp, "id");
		const struct vd_value *err = vd_obj_get(resp, "error");
		if (!vd_str_eq(rid, id) && !(err && rid && rid->type == VD_NULL))
			continue;   /* not ours (e.g. an earlier request's late reply) */
		if (err) {
			print_server_error(method, params, err);
			return CLIENT_FAIL;
		}
		const struct vd_value *r = vd_obj_get(resp, "result");
		if (!r) {
			fprintf(stderr, CLIENT_PROG ": Invalid response from %s to %s: "
				"no result.\n", o->where, method);
			return CLIENT_FAIL;
		}
		*result = r;
		return CLIENT_OK;
	}
}

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
