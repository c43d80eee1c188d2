/* client/help.c - discovery from the compiled-in schema: usage, --list,
 * NAMESPACE VERB -h (types, defaults, descriptions, a JSON template for -f)
 * and the bash completion script (--bash-completion, generated at build). */
#include "client.h"

#include <stdlib.h>
#include <string.h>

void client_print_usage(FILE *f)
{
	fputs("usage: " CLIENT_PROG " [-h] [-a HOST] [-p PORT] [--insecure] [--timeout SEC]\n"
	      "                   [--flow-id ID] [--cert FILE] [--key FILE] [--cacert FILE]\n"
	      "                   [--codec json|msgpack] [--compact] [--wait] [-f FILE|-]\n"
	      "                   NAMESPACE VERB [name=value ...]\n"
	      "       " CLIENT_PROG " --list\n"
	      "       " CLIENT_PROG " NAMESPACE VERB -h\n"
	      "       " CLIENT_PROG " [connection options] --watch-events [PATTERN]\n", f);
}

void client_print_help(FILE *f)
{
	client_print_usage(f);
	fputs("\nCall a vdsmd verb over JSON-RPC/STOMP and print its result as JSON.\n"
	      "\noptions:\n"
	      "  -h, --help            show this help (with NAMESPACE VERB: the verb's params)\n"
	      "  -a, --host HOST       host address (default localhost)\n"
	      "  -p, --port PORT       port (default 54321)\n"
	      "  --insecure            plaintext instead of TLS (alias: --unsecure)\n"
	      "  --cert FILE           client certificate (default " CLIENT_DEFAULT_CERT ")\n"
	      "  --key FILE            client key (default " CLIENT_DEFAULT_KEY ")\n"
	      "  --cacert FILE         CA verifying the server (default " CLIENT_DEFAULT_CACERT ")\n"
	      "  --timeout SEC         give up after SEC seconds (default 60)\n"
	      "  --flow-id ID          flow id (ovirtCorrelationId) for the server's logs\n"
	      "  -f, --file FILE       read the params as a JSON object from FILE ('-': stdin)\n"
	      "  --codec json|msgpack  request encoding (default json)\n"
	      "  --compact             print the result on one line\n"
	      "  --wait                for a verb returning a task id, wait for the task\n"
	      "  --watch-events [PAT]  print events (one JSON line each) until interrupted;\n"
	      "                        PAT: substring, or glob (*?[) on the event name\n"
	      "  --list                list namespaces and verbs\n"
	      "  --bash-completion     print the bash completion script\n"
	      "  --version             print the version\n"
	      "  --pretty              format JSON read from standard input as a result\n"
	      "  --broker URI          call through a STOMP broker (RabbitMQ):\n"
	      "                        stomp[s]://[LOGIN:PASSCODE@]HOST[:PORT][/VHOST]\n"
	      "  --host-id H           with --broker: the host to call (its host_id)\n"
	      "\nname=value params are typed by the verb's declared params: integers,\n"
	      "booleans (true/false), JSON for objects and lists, text for strings.\n"
	      "\nexit status: 0 success, 1 failure, 2 usage error\n", f);
}

static void split_name(const char *name, const char **ns, size_t *nslen, const char **verb)
{
	const char *dot = strchr(name, '.');
	*ns = name;
	*nslen = dot ? (size_t)(dot - name) : strlen(name);
	*verb = dot ? dot + 1 : "";
}

static int decl_cmp(const void *x, const void *y)
{
	return strcmp((*(const struct rpc_verb_decl *const *)x)->name,
		      (*(const struct rpc_verb_decl *const *)y)->name);
}

/* Every declared verb, sorted by name; caller frees. */
static const struct rpc_verb_decl **sorted_decls(size_t *n)
{
	size_t cnt = 0;
	for (size_t f = 0; rpc_schema_families[f]; f++)
		for (const struct rpc_verb_decl *d = rpc_schema_families[f]; d->name; d++)
			cnt++;
	const struct rpc_verb_decl **v = xmalloc((cnt + 1) * sizeof(*v));
	cnt = 0;
	for (size_t f = 0; rpc_schema_families[f]; f++)
		for (const struct rpc_verb_decl *d = rpc_schema_families[f]; d->name; d++)
			v[cnt++] = d;
	qsort(v, cnt, sizeof(*v), decl_cmp);
	*n = cnt;
	return v;
}

void client_print_list(FILE *f)
{
	size_t n;
	const struct rpc_verb_decl **v = sorted_decls(&n);
	for (size_t i = 0; i < n; i++) {
		const char *ns, *verb;
		size_t nslen;
		split_name(v[i]->name, &ns, &nslen, &verb);
		fprintf(f, "%.*s %s%s\n", (int)nslen, ns, verb,
			v[i]->flags & RPC_F_UNIMPLEMENTED ? " (not implemented)" : "");
	}
	free(v);
}

/* A sample value for the -f template when a param has no default. */
static const char *template_value(enum rpc_ptype t)
{
	switch (t) {
	case RPC_T_STRING: return "\"\"";
	case RPC_T_UUID: return "\"00000000-0000-0000-0000-000000000000\"";
	case RPC_T_INT: case RPC_T_INTSTR: case RPC_T_NUMBER: return "0";
	case RPC_T_BOOL: return "false";
	case RPC_T_OBJECT: return "{}";
	case RPC_T_ARRAY: return "[]";
	case RPC_T_ANY: return "null";
	}
	return "null";
}

void client_print_verb_help(FILE *f, const struct rpc_verb_decl *d, struct vd_arena *a)
{
	const char *ns, *verb;
	size_t nslen;
	split_name(d->name, &ns, &nslen, &verb);
	fprintf(f, "usage: %s [options] %.*s %s", CLIENT_PROG, (int)nslen, ns, verb);
	for (unsigned i = 0; i < d->nparams; i++)
		fprintf(f, d->params[i].required ? " %s=VALUE" : " [%s=VALUE]", d->params[i].name);
	fputs("\n", f);
	if (d->desc && *d->desc)
		fprintf(f, "\n%s\n", d->desc);
	if (d->flags & RPC_F_UNIMPLEMENTED)
		fputs("\nNot implemented by vdsmd yet: the call answers -32601.\n", f);
	if (d->nparams) {
		fputs("\nparams:\n", f);
		for (unsigned i = 0; i < d->nparams; i++) {
			const struct rpc_param *p = &d->params[i];
			fprintf(f, "  %-20s %s, %s", p->name, rpc_ptype_name(p->type),
				p->required ? "required" : "optional");
			if (p->def)
				fprintf(f, ", default %s", p->def);
			fputs("\n", f);
			if (p->desc && *p->desc)
				fprintf(f, "  %-20s %s\n", "", p->desc);
		}
	} else {
		fputs("\nparams: none\n", f);
	}
	if (d->result && *d->result)
		fprintf(f, "\nresult: %s\n", d->result);
	if (d->nerrors) {
		fputs("errors:", f);
		for (unsigned i = 0; i < d->nerrors; i++)
			fprintf(f, "%s %d", i ? "," : "", d->errors[i]);
		fputs(" (VDSM error codes)\n", f);
	}
	if (d->flags & RPC_F_BLOCKING)
		fputs("\n(runs on the daemon's worker pool)\n", f);
	if (!d->nparams)
		return;
	/* The template: each param with its default, or a sample of its type;
	 * decoded and re-printed so it is exactly what -f accepts. */
	struct vd_buf t = VD_BUF_INIT;
	buf_putc(&t, '{');
	for (unsigned i = 0; i < d->nparams; i++) {
		const struct rpc_param *p = &d->params[i];
		buf_printf(&t, "%s\"%s\": %s", i ? ", " : "", p->name,
			   p->def ? p->def : template_value(p->type));
	}
	buf_putc(&t, '}');
	const struct vd_codec *c = client_json_codec();
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	fprintf(f, "\nJSON template for -f:\n");
	if (c && c->decode(a, t.data, t.len, &lim, &v, &err) == 0 && v)
		client_json_print(f, v, false);
	else
		fprintf(f, "%.*s\n", (int)t.len, t.data);
	buf_free(&t);
}

void client_print_completion(FILE *f)
{
	size_t n;
	const struct rpc_verb_decl **v = sorted_decls(&n);
	fputs("# bash completion for vdsm-client (generated from the verb schema)\n"
	      "_vdsm_client()\n{\n"
	      "    local cur prev words cword\n"
	      "    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
	      "    prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
	      "    local opts=\"-h --help -a --host -p --port --insecure --timeout --flow-id"
	      " -f --file --cert --key --cacert --codec --compact --wait --watch-events"
	      " --list --version --broker --host-id\"\n"
	      "    case \"$prev\" in\n"
	      "        -f|--file|--cert|--key|--cacert)\n"
	      "            COMPREPLY=( $(compgen -f -- \"$cur\") ); return ;;\n"
	      "        --codec)\n"
	      "            COMPREPLY=( $(compgen -W \"json msgpack\" -- \"$cur\") ); return ;;\n"
	      "        -a|--host|-p|--port|--timeout|--flow-id|--broker|--host-id)\n"
	      "            return ;;\n"
	      "    esac\n"
	      "    local i w pos=() skip=0\n"
	      "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
	      "        w=\"${COMP_WORDS[i]}\"\n"
	      "        if ((skip)); then skip=0; continue; fi\n"
	      "        case \"$w\" in\n"
	      "            -a|--host|-p|--port|--timeout|--flow-id|-f|--file|--cert|--key|--cacert|--codec|--broker|--host-id)\n"
	      "                skip=1 ;;\n"
	      "            -*) ;;\n"
	      "            *) pos+=(\"$w\") ;;\n"
	      "        esac\n"
	      "    done\n"
	      "    if [[ \"$cur\" == -* ]]; then\n"
	      "        COMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") ); return\n"
	      "    fi\n"
	      "    case ${#pos[@]} in\n"
	      "    0)\n"
	      "        COMPREPLY=( $(compgen -W \"", f);
	/* namespaces */
	for (size_t i = 0; i < n; i++) {
		const char *ns, *verb, *pns, *pverb;
		size_t nslen, pnslen;
		split_name(v[i]->name, &ns, &nslen, &verb);
		if (i) {
			split_name(v[i - 1]->name, &pns, &pnslen, &pverb);
			if (pnslen == nslen && memcmp(pns, ns, nslen) == 0)
				continue;
		}
		fprintf(f, "%s%.*s", i ? " " : "", (int)nslen, ns);
	}
	fputs("\" -- \"$cur\") ) ;;\n    1)\n        case \"${pos[0]}\" in\n", f);
	/* verbs per namespace */
	for (size_t i = 0; i < n;) {
		const char *ns, *verb;
		size_t nslen;
		split_name(v[i]->name, &ns, &nslen, &verb);
		fprintf(f, "        %.*s) COMPREPLY=( $(compgen -W \"", (int)nslen, ns);
		size_t j = i;
		for (; j < n; j++) {
			const char *ns2, *verb2;
			size_t nslen2;
			split_name(v[j]->name, &ns2, &nslen2, &verb2);
			if (nslen2 != nslen || memcmp(ns2, ns, nslen) != 0)
				break;
			fprintf(f, "%s%s", j > i ? " " : "", verb2);
		}
		fputs("\" -- \"$cur\") ) ;;\n", f);
		i = j;
	}
	fputs("        esac ;;\n    *)\n        case \"${pos[0]}.${pos[1]}\" in\n", f);
	/* param names per verb */
	for (size_t i = 0; i < n; i++) {
		if (!v[i]->nparams)
			continue;
		fprintf(f, "        %s) COMPREPLY=( $(compgen -W \"", v[i]->name);
		for (unsigned k = 0; k < v[i]->nparams; k++)
			fprintf(f, "%s%s=", k ? " " : "", v[i]->params[k].name);
		fputs("\" -- \"$cur\") ); compopt -o nospace 2>/dev/null ;;\n", f);
	}
	fputs("        esac ;;\n    esac\n}\n"
	      "complete -F _vdsm_client vdsm-client\n", f);
	free(v);
}
