/* client/args.c - command line options and typing of name=value params by
 * the compiled-in verb schema (the same tables the daemon validates with).
 *
 * Everything here runs before any connection: a usage error (exit 2) never
 * touches the network. */
#include "client.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_FILE_BYTES ((size_t)16 << 20)

int client_usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("usage: " CLIENT_PROG " [options] NAMESPACE VERB [name=value ...] "
	      "(see " CLIENT_PROG " -h)\n" CLIENT_PROG ": error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLIENT_USAGE;
}

const struct vd_codec *client_json_codec(void)
{
	const struct vd_codec *c = codec_find("yajl");
	return c ? c : codec_find("fallback");
}

/* Decode JSON text into a; NULL (and *why) when it is not valid JSON. */
static struct vd_value *parse_json(struct vd_arena *a, const char *s, size_t n, const char **why)
{
	const struct vd_codec *codec = client_json_codec();
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err = { 0, NULL, 0 };
	if (!codec || codec->decode(a, s, n, &lim, &v, &err) != 0 || !v) {
		*why = err.reason ? err.reason : "invalid JSON";
		return NULL;
	}
	return v;
}

bool client_value_fits(enum rpc_ptype t, const struct vd_value *v)
{
	switch (t) {
	case RPC_T_ANY: return true;
	case RPC_T_STRING: return v->type == VD_STRING;
	case RPC_T_UUID: return v->type == VD_STRING && vd_is_uuid(v->v.s.ptr, v->v.s.len);
	case RPC_T_INT: return v->type == VD_INT || v->type == VD_UINT;
	case RPC_T_INTSTR:
		if (v->type == VD_INT || v->type == VD_UINT)
			return true;
		if (v->type != VD_STRING || v->v.s.len == 0)
			return false;
		for (size_t i = 0; i < v->v.s.len; i++)
			if (v->v.s.ptr[i] < '0' || v->v.s.ptr[i] > '9')
				return false;
		return true;
	case RPC_T_NUMBER: return v->type == VD_INT || v->type == VD_UINT || v->type == VD_DOUBLE;
	case RPC_T_BOOL: return v->type == VD_BOOL;
	case RPC_T_OBJECT: return v->type == VD_OBJECT;
	case RPC_T_ARRAY: return v->type == VD_ARRAY;
	}
	return false;
}

static bool parse_int(const char *s, struct vd_value *v)
{
	if (!*s)
		return false;
	char *end;
	errno = 0;
	if (*s == '-') {
		long long i = strtoll(s, &end, 10);
		if (errno || *end || end == s + 1)
			return false;
		v->type = VD_INT;
		v->v.i = i;
		return true;
	}
	if (*s < '0' || *s > '9')
		return false;
	unsigned long long u = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	vd_set_uint(v, (uint64_t)u);
	return true;
}

/* Type one command-line value; false when it does not fit. */
static bool type_value(struct vd_arena *a, const struct rpc_param *p, const char *s,
		       struct vd_value *v, const char **why)
{
	size_t n = strlen(s);
	*why = NULL;
	switch (p->type) {
	case RPC_T_STRING:
	case RPC_T_UUID:
		v->type = VD_STRING;
		v->v.s.ptr = s;
		v->v.s.len = n;
		if (p->type == RPC_T_UUID && !vd_is_uuid(s, n))
			*why = "expected a UUID";
		return *why == NULL;
	case RPC_T_INT:  // NOLINT(bugprone-branch-clone): INTSTR parses like INT, then differs in type
		if (!parse_int(s, v))
			*why = "expected an integer";
		return *why == NULL;
	case RPC_T_INTSTR:
		if (!parse_int(s, v))
			*why = "expected an integer";
		return *why == NULL;
	case RPC_T_NUMBER: {
		if (parse_int(s, v))
			return true;
		char *end;
		errno = 0;
		double d = n ? strtod(s, &end) : 0;
		if (!n || *end || errno || !isfinite(d)) {
			*why = "expected a number";
			return false;
		}
		v->type = VD_DOUBLE;
		v->v.d = d;
		return true;
	}
	case RPC_T_BOOL:
		v->type = VD_BOOL;
		if (strcasecmp(s, "true") == 0)
			v->v.b = true;
		else if (strcasecmp(s, "false") == 0)
			v->v.b = false;
		else
			*why = "expected true or false";
		return *why == NULL;
	case RPC_T_OBJECT:
	case RPC_T_ARRAY: {
		struct vd_value *j = parse_json(a, s, n, why);
		if (!j)
			return false;
		if (!client_value_fits(p->type, j)) {
			*why = p->type == RPC_T_OBJECT ? "expected a JSON object" : "expected a JSON list";
			return false;
		}
		*v = *j;
		return true;
	}
	case RPC_T_ANY: {
		/* JSON when it parses, else the plain string */
		const char *ignore;
		struct vd_value *j = parse_json(a, s, n, &ignore);
		if (j) {
			*v = *j;
		} else {
			v->type = VD_STRING;
			v->v.s.ptr = s;
			v->v.s.len = n;
		}
		return true;
	}
	}
	*why = "unsupported type";
	return false;
}

static const struct rpc_param *find_param(const struct rpc_verb_decl *d, const char *name, size_t n)
{
	for (unsigned i = 0; i < d->nparams; i++)
		if (strlen(d->params[i].name) == n && memcmp(d->params[i].name, name, n) == 0)
			return &d->params[i];
	return NULL;
}

static int read_all(const char *file, struct vd_buf *b)
{
	FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
	if (!f)
		return client_usage_error("cannot read %s: %s", file, strerror(errno));
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b->len + n > MAX_FILE_BYTES) {
			if (f != stdin)
				fclose(f);
			return client_usage_error("%s: larger than %zu bytes", file, MAX_FILE_BYTES);
		}
		buf_append(b, chunk, n);
	}
	bool err = ferror(f);
	if (f != stdin)
		fclose(f);
	if (err)
		return client_usage_error("cannot read %s", file);
	return CLIENT_OK;
}

int client_read_json(const char *file, struct vd_arena *a, struct vd_value **out)
{
	struct vd_buf b = VD_BUF_INIT;
	int rc = read_all(file, &b);
	if (rc != CLIENT_OK)
		goto out;
	const char *name = strcmp(file, "-") == 0 ? "standard input" : file;
	size_t ws = 0;
	while (ws < b.len && strchr(" \t\r\n", b.data[ws]))
		ws++;
	if (ws == b.len) {
		rc = client_usage_error("%s is empty", name);
		goto out;
	}
	const char *why;
	char *copy = arena_strndup(a, b.data, b.len);
	*out = parse_json(a, copy, b.len, &why);
	if (!*out)
		rc = client_usage_error("%s: %s", name, why);
out:
	buf_free(&b);
	return rc;
}

static int params_from_file(struct client_opts *o, struct vd_arena *a)
{
	struct vd_value *v = NULL;
	int rc = client_read_json(o->file, a, &v);
	if (rc != CLIENT_OK)
		return rc;
	const char *name = strcmp(o->file, "-") == 0 ? "standard input" : o->file;
	/* client_read_json() sets v whenever it returns CLIENT_OK */
	if (v->type != VD_OBJECT) {  // NOLINT(clang-analyzer-core.NullDereference)
		rc = client_usage_error("%s: expected a JSON object of parameters", name);
		goto out;
	}
	for (size_t i = 0; i < v->v.obj.n; i++) {
		const struct vd_member *m = &v->v.obj.members[i];
		const struct rpc_param *p = find_param(o->decl, m->key, m->klen);
		if (!p) {
			rc = client_usage_error("%s: unknown parameter '%.*s' for %s", name,
						(int)m->klen, m->key, o->method);
			goto out;
		}
		if (!client_value_fits(p->type, &m->val)) {
			rc = client_usage_error("%s: parameter '%s' of %s must be %s, got %s", name,
						p->name, o->method, rpc_ptype_name(p->type),
						vd_type_name(m->val.type));
			goto out;
		}
	}
	o->params = v;
out:
	return rc;
}

int client_args_params(struct client_opts *o, struct vd_arena *a)
{
	if (o->file)
		return params_from_file(o, a);
	struct vd_value *obj = arena_alloc(a, sizeof(*obj));
	obj->type = VD_OBJECT;
	obj->v.obj.n = 0;
	obj->v.obj.members = arena_alloc(a, sizeof(struct vd_member) * (size_t)(o->nparams + 1));
	for (int i = 0; i < o->nparams; i++) {
		const char *w = o->argv_params[i];
		const char *eq = strchr(w, '=');
		if (!eq || eq == w)
			return client_usage_error("invalid parameter '%s' (expected name=value)", w);
		size_t nl = (size_t)(eq - w);
		const struct rpc_param *p = find_param(o->decl, w, nl);
		if (!p)
			return client_usage_error("unknown parameter '%.*s' for %s (see: %s %s %s -h)",
						  (int)nl, w, o->method, CLIENT_PROG, o->ns, o->verb);
		for (size_t k = 0; k < obj->v.obj.n; k++)
			if (strcmp(obj->v.obj.members[k].key, p->name) == 0)
				return client_usage_error("parameter '%s' given twice", p->name);
		struct vd_member *m = &obj->v.obj.members[obj->v.obj.n];
		m->key = p->name;
		m->klen = nl;
		const char *why;
		if (!type_value(a, p, eq + 1, &m->val, &why))
			return client_usage_error("parameter '%s' of %s must be %s: %s (got '%s')",
						  p->name, o->method, rpc_ptype_name(p->type), why,
						  eq + 1);
		obj->v.obj.n++;
	}
	o->params = obj;
	return CLIENT_OK;
}

/* ---- options ---------------------------------------------------------------- */

enum opt_id {
	O_HOST, O_PORT, O_INSECURE, O_TIMEOUT, O_FLOW, O_FILE, O_CERT, O_KEY, O_CACERT,
	O_CODEC, O_COMPACT, O_LIST, O_HELP, O_WAIT, O_WATCH, O_COMPLETION, O_VERSION, O_PRETTY,
	O_BROKER, O_HOST_ID,
};

struct opt_def {
	const char *lng;
	char shrt;
	bool arg;
	enum opt_id id;
};

static const struct opt_def opt_defs[] = {
	{ "host", 'a', true, O_HOST },
	{ "port", 'p', true, O_PORT },
	{ "insecure", 0, false, O_INSECURE },
	{ "unsecure", 0, false, O_INSECURE },
	{ "timeout", 0, true, O_TIMEOUT },
	{ "flow-id", 0, true, O_FLOW },
	{ "file", 'f', true, O_FILE },
	{ "cert", 0, true, O_CERT },
	{ "key", 0, true, O_KEY },
	{ "cacert", 0, true, O_CACERT },
	{ "codec", 0, true, O_CODEC },
	{ "compact", 0, false, O_COMPACT },
	{ "list", 0, false, O_LIST },
	{ "help", 'h', false, O_HELP },
	{ "wait", 0, false, O_WAIT },
	{ "watch-events", 0, false, O_WATCH },
	{ "bash-completion", 0, false, O_COMPLETION },
	{ "version", 0, false, O_VERSION },
	{ "pretty", 0, false, O_PRETTY },
	{ "broker", 0, true, O_BROKER },
	{ "host-id", 0, true, O_HOST_ID },
};

/* stomp[s]://[LOGIN[:PASSCODE]@]HOST[:PORT][/VHOST] */
int client_broker_uri(struct client_opts *o, const char *uri)
{
	const char *p;
	if (strncmp(uri, "stomp://", 8) == 0) {
		o->tls = false;
		p = uri + 8;
	} else if (strncmp(uri, "stomps://", 9) == 0) {
		o->tls = true;
		p = uri + 9;
	} else {
		return client_usage_error("--broker: expected stomp://HOST[:PORT] or "
					  "stomps://HOST[:PORT], got '%s'", uri);
	}
	o->port = o->tls ? 61614 : 61613;
	const char *at = strchr(p, '@');
	const char *slash = strchr(p, '/');
	if (at && (!slash || at < slash)) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		size_t ul = colon ? (size_t)(colon - p) : (size_t)(at - p);
		if (ul >= sizeof(o->broker_login))
			return client_usage_error("--broker: login too long");
		memcpy(o->broker_login, p, ul);
		o->broker_login[ul] = 0;
		if (colon) {
			size_t pl = (size_t)(at - colon - 1);
			if (pl >= sizeof(o->broker_passcode))
				return client_usage_error("--broker: passcode too long");
			memcpy(o->broker_passcode, colon + 1, pl);
			o->broker_passcode[pl] = 0;
		}
		p = at + 1;
	}
	const char *hs = p, *he, *rest;
	if (*p == '[') {
		he = strchr(p, ']');
		if (!he)
			return client_usage_error("--broker: unterminated '[' in '%s'", uri);
		hs = p + 1;
		rest = he + 1;
	} else {
		he = p + strcspn(p, ":/");
		rest = he;
	}
	size_t hl = (size_t)(he - hs);
	if (hl == 0 || hl >= sizeof(o->broker_host))
		return client_usage_error("--broker: missing or too long host in '%s'", uri);
	memcpy(o->broker_host, hs, hl);
	o->broker_host[hl] = 0;
	o->host = o->broker_host;
	if (*rest == ':') {
		char *end;
		errno = 0;
		unsigned long port = strtoul(rest + 1, &end, 10);
		if (errno || end == rest + 1 || port == 0 || port > 65535 || (*end && *end != '/'))
			return client_usage_error("--broker: invalid port in '%s'", uri);
		o->port = (unsigned)port;
		rest = end;
	}
	snprintf(o->broker_vhost, sizeof(o->broker_vhost), "%s", *rest == '/' && rest[1] ? rest + 1 : "/");
	o->broker = true;
	return CLIENT_OK;
}

static int set_opt(struct client_opts *o, enum opt_id id, const char *name, const char *val,
		   bool *list, bool *help, bool *watch)
{
	char *end;
	switch (id) {
	case O_HOST:
		if (!*val)
			return client_usage_error("%s: empty host", name);
		o->host = val;
		break;
	case O_PORT: {
		errno = 0;
		unsigned long p = strtoul(val, &end, 10);
		if (errno || *end || !*val || p == 0 || p > 65535)
			return client_usage_error("%s: invalid port '%s'", name, val);
		o->port = (unsigned)p;
		break;
	}
	case O_INSECURE: o->tls = false; break;
	case O_TIMEOUT: {
		errno = 0;
		double t = strtod(val, &end);
		if (errno || *end || !*val || !(t > 0) || t > 86400.0 * 365)
			return client_usage_error("%s: invalid timeout '%s'", name, val);
		o->timeout_ms = (unsigned)ceil(t * 1000);
		break;
	}
	case O_FLOW: o->flow_id = val; break;
	case O_FILE: o->file = val; break;
	case O_CERT: o->cert = val; break;
	case O_KEY: o->key = val; break;
	case O_CACERT: o->cacert = val; break;
	case O_CODEC:
		if (strcmp(val, "json") == 0) {
			o->codec = client_json_codec();
		} else if (strcmp(val, "msgpack") == 0) {
			o->codec = codec_find("msgpack");
			if (!o->codec)
				return client_usage_error("%s: msgpack is not built in", name);
		} else {
			return client_usage_error("%s: expected json or msgpack, got '%s'", name, val);
		}
		break;
	case O_COMPACT: o->compact = true; break;
	case O_LIST: *list = true; break;
	case O_HELP: *help = true; break;
	case O_WAIT: o->wait = true; break;
	case O_WATCH: *watch = true; break;
	case O_COMPLETION: o->mode = CLIENT_COMPLETION; break;
	case O_VERSION: o->mode = CLIENT_VERSION; break;
	case O_PRETTY: o->mode = CLIENT_PRETTY; break;
	case O_BROKER: return client_broker_uri(o, val);
	case O_HOST_ID:
		if (!*val || strpbrk(val, "/.#*: "))
			return client_usage_error("%s: invalid host id '%s'", name, val);
		o->host_id = val;
		break;
	}
	return CLIENT_OK;
}

int client_args_parse(struct client_opts *o, struct vd_arena *a, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	o->mode = CLIENT_CALL;
	o->host = "localhost";
	o->port = CLIENT_DEFAULT_PORT;
	o->tls = true;
	o->cert = CLIENT_DEFAULT_CERT;
	o->key = CLIENT_DEFAULT_KEY;
	o->cacert = CLIENT_DEFAULT_CACERT;
	o->timeout_ms = 60000;
	bool list = false, help = false, watch = false, dashdash = false;
	const char **pos = arena_alloc(a, sizeof(char *) * (size_t)(argc + 1));
	int npos = 0;

	for (int i = 1; i < argc; i++) {
		const char *w = argv[i];
		if (dashdash || w[0] != '-' || w[1] == 0) {
			pos[npos++] = w;
			continue;
		}
		if (strcmp(w, "--") == 0) {
			dashdash = true;
			continue;
		}
		const struct opt_def *d = NULL;
		const char *val = NULL;
		char name[64];
		if (w[1] == '-') {
			const char *eq = strchr(w + 2, '=');
			size_t n = eq ? (size_t)(eq - w - 2) : strlen(w + 2);
			for (size_t k = 0; k < VD_ARRAY_SIZE(opt_defs); k++)
				if (strlen(opt_defs[k].lng) == n && memcmp(opt_defs[k].lng, w + 2, n) == 0)
					d = &opt_defs[k];
			snprintf(name, sizeof(name), "--%.*s", (int)VD_MIN(n, 60), w + 2);
			if (!d)
				return client_usage_error("unrecognized option '%s'", name);
			if (eq) {
				if (!d->arg)
					return client_usage_error("option %s takes no value", name);
				val = eq + 1;
			}
		} else {
			for (size_t k = 0; k < VD_ARRAY_SIZE(opt_defs); k++)
				if (opt_defs[k].shrt == w[1])
					d = &opt_defs[k];
			snprintf(name, sizeof(name), "-%c", w[1]);
			if (!d)
				return client_usage_error("unrecognized option '%s'", w);
			if (w[2]) {
				if (!d->arg)
					return client_usage_error("unrecognized option '%s'", w);
				val = w + 2;
			}
		}
		if (d->arg && !val) {
			if (i + 1 >= argc)
				return client_usage_error("option %s needs a value", name);
			val = argv[++i];
		}
		int rc = set_opt(o, d->id, name, val, &list, &help, &watch);
		if (rc != CLIENT_OK)
			return rc;
	}
	if (o->broker && !o->host_id)
		return client_usage_error("--broker needs --host-id (the host to call)");
	if (o->host_id && !o->broker)
		return client_usage_error("--host-id needs --broker URI");
	snprintf(o->where, sizeof(o->where), strchr(o->host, ':') ? "[%.280s]:%u" : "%.280s:%u",
		 o->host, o->port);
	if (!o->codec)
		o->codec = client_json_codec();
	if (!o->codec)
		return client_usage_error("no JSON codec built in");

	if (o->mode == CLIENT_COMPLETION || o->mode == CLIENT_VERSION)
		return CLIENT_OK;
	if (o->mode == CLIENT_PRETTY) {
		if (npos)
			return client_usage_error("--pretty reads JSON from standard input only");
		return CLIENT_OK;
	}
	if (list) {
		o->mode = CLIENT_LIST;
		return CLIENT_OK;
	}
	if (watch) {
		if (npos > 1)
			return client_usage_error("--watch-events takes at most one PATTERN");
		o->mode = CLIENT_WATCH;
		o->pattern = npos ? pos[0] : NULL;
		return CLIENT_OK;
	}
	if (npos < 2) {
		if (help) {
			o->mode = CLIENT_HELP;
			return CLIENT_OK;
		}
		return client_usage_error(npos ? "missing VERB after '%s'" : "missing NAMESPACE and VERB%s",
					  npos ? pos[0] : "");
	}
	o->ns = pos[0];
	o->verb = pos[1];
	if (strlen(o->ns) + strlen(o->verb) + 2 > sizeof(o->method))
		return client_usage_error("unknown verb %s.%s", o->ns, o->verb);
	size_t nl = strlen(o->ns);
	memcpy(o->method, o->ns, nl);
	o->method[nl] = '.';
	strcpy(o->method + nl + 1, o->verb);
	o->decl = rpc_schema_find(o->method);
	if (!o->decl)
		return client_usage_error("unknown verb %s %s (see: %s --list)", o->ns, o->verb,
					  CLIENT_PROG);
	if (help) {
		o->mode = CLIENT_VERB_HELP;
		return CLIENT_OK;
	}
	o->argv_params = pos + 2;
	o->nparams = npos - 2;
	if (o->file && o->nparams)
		return client_usage_error("conflicting parameters: name=value arguments and -f %s",
					  o->file);
	return CLIENT_OK;
}
