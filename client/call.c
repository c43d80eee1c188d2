/* client/call.c - one JSON-RPC request over a client connection and its
 * reply: encode, send, read MESSAGE frames until the reply with our id, and
 * print a server error the way vdsm-client does.  Used by main.c (the verb
 * call) and wait.c (Task.getStatus polls); it calls neither. */
#include "client.h"

#include <stdio.h>

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
