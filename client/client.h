/* client/client.h - vdsm-client internals: options and argument typing
 * (args.c), discovery output (help.c), the connection and STOMP session
 * (transport.c), Python-compatible JSON output (output.c) and the commands
 * (main.c, wait.c).
 *
 * Ownership: struct client_opts points into argv and into the arena given to
 * client_args_parse(); struct client_conn owns its socket, TLS state and
 * buffers until client_conn_close().  Exit codes: CLIENT_OK 0, CLIENT_FAIL 1,
 * CLIENT_USAGE 2. */
#ifndef VD_CLIENT_CLIENT_H
#define VD_CLIENT_CLIENT_H

#include <signal.h>
#include <stdio.h>
#include "../common/arena.h"
#include "../common/buf.h"
#include "../codecs/codec.h"
#include "../io/io.h"
#include "../rpc/rpc.h"
#include "../stomp/stomp.h"

enum { CLIENT_OK = 0, CLIENT_FAIL = 1, CLIENT_USAGE = 2 };

#define CLIENT_PROG "vdsm-client"
#define CLIENT_DEFAULT_PORT 54321
#define CLIENT_DEFAULT_CERT "/etc/pki/vdsm/certs/vdsmcert.pem"
#define CLIENT_DEFAULT_KEY "/etc/pki/vdsm/keys/vdsmkey.pem"
#define CLIENT_DEFAULT_CACERT "/etc/pki/vdsm/certs/cacert.pem"
#define CLIENT_REQUEST_DEST "jms.topic.vdsm_requests"
#define CLIENT_EVENTS_DEST "jms.queue.events"

enum client_mode {
	CLIENT_CALL,        /* NAMESPACE VERB [name=value ...] */
	CLIENT_LIST,        /* --list */
	CLIENT_HELP,        /* -h without a verb */
	CLIENT_VERB_HELP,   /* NAMESPACE VERB -h */
	CLIENT_WATCH,       /* --watch-events [PATTERN] */
	CLIENT_COMPLETION,  /* --bash-completion */
	CLIENT_VERSION,     /* --version */
	CLIENT_PRETTY,      /* --pretty: format JSON from stdin like a result */
};

struct client_opts {
	enum client_mode mode;
	const char *host;
	unsigned port;
	char where[300];            /* "host:port" ("[v6]:port") for messages */
	bool tls;
	const char *cert, *key, *cacert;
	unsigned timeout_ms;
	const char *flow_id;
	const char *file;           /* -f FILE, "-" for stdin, or NULL */
	const struct vd_codec *codec;
	bool compact;
	bool wait;
	const char *pattern;        /* --watch-events PATTERN or NULL */
	const char *ns, *verb;      /* NAMESPACE VERB */
	char method[128];           /* "Namespace.verb" */
	const struct rpc_verb_decl *decl;
	const char **argv_params;   /* the name=value words */
	int nparams;
	/* the typed params object (VD_OBJECT), built by client_args_params() */
	struct vd_value *params;
	/* --broker URI --host-id H: call through a STOMP broker (RabbitMQ):
	 * requests to /queue/vdsm.<H>.requests, replies on a /temp-queue,
	 * events from /topic/vdsm.<H>.events.  URI: stomp[s]://[LOGIN:PASSCODE@]
	 * HOST[:PORT][/VHOST] (default vhost "/"); host/port/tls come from it. */
	bool broker;
	const char *host_id;
	char broker_login[128], broker_passcode[128], broker_vhost[128];
	char broker_host[256];
};

/* ---- args.c ---------------------------------------------------------------- */

/* Parse argv into o (no I/O beyond reading -f).  On a usage error prints the
 * message and the usage line to stderr and returns CLIENT_USAGE. */
int client_args_parse(struct client_opts *o, struct vd_arena *a, int argc, char **argv);
/* Parse a --broker URI into o (host, port, tls, login, passcode, vhost).
 * CLIENT_OK or CLIENT_USAGE (message printed). */
int client_broker_uri(struct client_opts *o, const char *uri);
/* Type the name=value words (or the -f object) by o->decl into o->params.
 * Returns CLIENT_OK or CLIENT_USAGE (message printed). */
int client_args_params(struct client_opts *o, struct vd_arena *a);
/* Read a JSON document from file ("-": stdin) into a; usage error (printed)
 * when unreadable, empty or not JSON. */
int client_read_json(const char *file, struct vd_arena *a, struct vd_value **out);
/* Print "vdsm-client: error: <msg>" and the usage line; returns CLIENT_USAGE. */
int client_usage_error(const char *fmt, ...) VD_PRINTF(1, 2);
/* The JSON codec the client uses for its own parsing. */
const struct vd_codec *client_json_codec(void);
/* True when v fits the declared type. */
bool client_value_fits(enum rpc_ptype t, const struct vd_value *v);

/* ---- help.c ---------------------------------------------------------------- */

void client_print_usage(FILE *f);
void client_print_help(FILE *f);
void client_print_list(FILE *f);
void client_print_verb_help(FILE *f, const struct rpc_verb_decl *d, struct vd_arena *a);
void client_print_completion(FILE *f);

/* ---- output.c -------------------------------------------------------------- */

/* Append v as Python's json.dumps(v, indent=4, sort_keys=True) would
 * (compact: json.dumps(v, sort_keys=True)), ensure_ascii escaping. */
void client_json_format(struct vd_buf *out, const struct vd_value *v, bool compact);
/* Format then write to f with a trailing newline. */
void client_json_print(FILE *f, const struct vd_value *v, bool compact);

/* ---- transport.c ----------------------------------------------------------- */

struct ssl_ctx_st;

struct client_conn {
	struct io_conn io;          /* the socket, plain or TLS (io/io.h) */
	struct io_tls_lib *lib;     /* OpenSSL, loaded for TLS only */
	struct ssl_ctx_st *ctx;
	const struct client_opts *o;
	struct vd_buf in, out;
	struct stomp_client stomp;
	char reply_dest[64];
	char sub_id[37];
	struct stomp_frame frame;   /* last frame from client_conn_next() */
	size_t frame_len;           /* bytes of in that frame occupies */
	unsigned receipts;          /* RECEIPT frames seen */
	void (*on_receipt)(struct client_conn *c);
	volatile sig_atomic_t *stop;  /* set by a signal handler: stop waiting */
};

/* Connect (TCP, then TLS unless --insecure) before deadline_ms (vd_now_ms()
 * clock) and queue CONNECT.  On failure prints one sentence naming host and
 * port and returns CLIENT_FAIL (call client_conn_close() in every case). */
int client_conn_open(struct client_conn *c, const struct client_opts *o, uint64_t deadline_ms);
/* Queue SUBSCRIBE to dest (NULL: the private reply destination, a fresh
 * UUID), with a receipt request when receipt is true. */
void client_conn_subscribe(struct client_conn *c, const char *dest, bool receipt);
/* Queue a SEND of body to the request destination with reply-to. */
void client_conn_send_request(struct client_conn *c, const char *body, size_t len);
/* Flush queued output and wait for the next MESSAGE frame (ERROR frames are
 * reported and fail).  deadline_ms 0 = none.  Returns CLIENT_OK with
 * c->frame set, or CLIENT_FAIL (message printed).  *timed_out set when the
 * deadline passed (nothing printed then).  Interrupted through c->stop:
 * CLIENT_FAIL, nothing printed. */
int client_conn_next(struct client_conn *c, uint64_t deadline_ms, bool *timed_out);
/* Send DISCONNECT (best effort) and free everything. */
void client_conn_close(struct client_conn *c);

/* ---- call.c ---------------------------------------------------------------- */

/* One JSON-RPC call over c; on success *result points to the decoded result
 * (in a).  Returns CLIENT_OK, or CLIENT_FAIL with the error printed
 * (server errors as "Command ... failed"). */
int client_call(struct client_conn *c, struct vd_arena *a, const char *method,
		const struct vd_value *params, uint64_t deadline_ms,
		const struct vd_value **result);

/* ---- wait.c ---------------------------------------------------------------- */

/* --wait: poll Task.getStatus for task until it ends. */
int client_wait_task(struct client_conn *c, struct vd_arena *a, const char *task,
		     size_t len);
/* --watch-events */
int client_watch_events(const struct client_opts *o, struct vd_arena *a);

#endif
