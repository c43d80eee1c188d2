/* vdsmd/virt/migrate.c - live migration between two vdsmd hosts, as VDSM
 * does it:
 *
 *   source  VM.migrate {vmID, params: {dst: "host:port", dstqemu?,
 *           maxBandwidth? (MiB/s)}}: checks the call and the VM, reports
 *           "Migration Source" and answers at once, as VDSM (vm.py migrate
 *           starts migration.SourceThread and returns "Migration in
 *           progress"); a background job then asks the destination vdsmd
 *           to expect the VM (VM.migrationCreate over its JSON-RPC HTTP
 *           endpoint, POST /jsonrpc) and runs libvirt's peer-to-peer
 *           migration to the destination's libvirt, publishing
 *           |virt|VM_migration_status| {progress} while it runs.  Success:
 *           the VM goes Down with exitReason 4 (events.c); any failure (the
 *           destination unreachable or refusing, libvirt's error) or
 *           VM.migrateCancel: it is Up again and VM.getMigrationStatus says
 *           why (code 12 migrateErr, or the destination's own error code, as
 *           SourceThread._recover), never the verb's answer; a destination
 *           that had accepted the VM is sent VM.destroy first.
 *   dest    VM.migrationCreate {vmID?, params: {vmId, _srcDomXML|xml}}:
 *           reports the VM "Migration Destination" until libvirt starts it
 *           here (then Up, through the usual events).
 *
 * The destination's libvirt URI: the migration_libvirt_uri setting, a URI
 * with an optional %s for the host; VDSM's qemu+tls://%s/system by default
 * (the tests point it at a private libvirtd).  The QEMU
 * migration stream goes to tcp://<dstqemu or dst host>, and the destination
 * QEMU listens on that address.  The call to the destination vdsmd is
 * HTTPS when this vdsmd serves TLS (its own certificate and key, the
 * destination's certificate checked against ca_file, as VDSM's ssl
 * setting), plain HTTP when it serves plaintext. */
#include "virt_int.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"
#include "../../io/io.h"
#include "../../rpc/event.h"

#define PEER_TIMEOUT_S 15
#define MAX_PEER_REPLY (1u << 20)
#define PROGRESS_MS 300

/* host and port of "host:port" / "[v6]:port" (port default 54321). */
static bool split_hostport(const char *hp, char *host, size_t hl, char *port, size_t pl)
{
	const char *colon;
	if (*hp == '[') {
		const char *rb = strchr(hp, ']');
		if (!rb || (size_t)(rb - hp - 1) >= hl)
			return false;
		snprintf(host, hl, "%.*s", (int)(rb - hp - 1), hp + 1);
		colon = rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = strrchr(hp, ':');
		size_t n = colon ? (size_t)(colon - hp) : strlen(hp);
		if (n == 0 || n >= hl)
			return false;
		snprintf(host, hl, "%.*s", (int)n, hp);
	}
	snprintf(port, pl, "%s", colon && colon[1] ? colon + 1 : "54321");
	return strspn(port, "0123456789") == strlen(port);
}

/* Why the TLS handshake with the peer failed. */
static void tls_reason(const struct io_conn *p, char *out, size_t n)
{
	if (p->verify_err)
		snprintf(out, n, "certificate verify failed: %s", p->verify_err);
	else if (p->closed_in_handshake)
		snprintf(out, n, "connection closed");
	else
		snprintf(out, n, "%s", io_last_error(p));
}

/* The deadline of the next step: every step (connect, handshake, each
 * write and read) may take PEER_TIMEOUT_S. */
static uint64_t step_deadline(void)
{
	return vd_now_ms() + PEER_TIMEOUT_S * 1000u;
}

/* The body of the HTTP reply in (NUL-terminated) into out, with its
 * Content-Type in ct.  0, or VD_EIO with why. */
static int http_body(const char *hostport, const struct vd_buf *in, struct vd_buf *out,
		     char *ct, size_t ctlen, char *why, size_t whylen)
{
	const char *hb = strstr(in->data, "\r\n\r\n");
	if (strncmp(in->data, "HTTP/1.1 200", 12) != 0 || !hb) {
		snprintf(why, whylen, "%s answered: %.60s", hostport, in->data);
		return VD_EIO;
	}
	/* the whole body: no less than its Content-Length (a cut TLS stream) */
	size_t blen_in = in->len - 1 - (size_t)(hb + 4 - in->data);
	const char *cl = strcasestr(in->data, "\r\nContent-Length:");
	if (cl && cl < hb) {
		unsigned long long want = strtoull(cl + 17, NULL, 10);
		if (want > blen_in) {
			snprintf(why, whylen, "%s: reply cut at %zu of %llu bytes", hostport,
				 blen_in, want);
			return VD_EIO;
		}
		blen_in = (size_t)want;
	}
	const char *t = strcasestr(in->data, "\r\nContent-Type:");
	ct[0] = 0;
	if (t && t < hb) {
		t += 15;
		t += strspn(t, " \t");
		size_t tl = strcspn(t, "\r");
		snprintf(ct, ctlen, "%.*s", (int)VD_MIN(tl, ctlen - 1), t);
	}
	buf_append(out, hb + 4, blen_in);
	return 0;
}

/* One JSON-RPC call over HTTP to host:port (over TLS with tls: this host's
 * certificate, the peer's checked against the CA, as VDSM's ssl setting),
 * through the connection layer; the response body in out, its content
 * type in ct. */
static int peer_call(const char *hostport, struct ssl_ctx_st *tls, const char *body,
		     size_t blen, struct vd_buf *out, char *ct, size_t ctlen, char *why,
		     size_t whylen)
{
	char host[256], port[16], r[256];
	if (!split_hostport(hostport, host, sizeof host, port, sizeof port)) {
		snprintf(why, whylen, "bad destination address %s", hostport);
		return VD_EINVAL;
	}
	/* TCP_NODELAY (io_dial): the request follows the TLS handshake's last
	 * flight and must not wait behind Nagle for that flight's ACK */
	int fd = io_dial(host, port, 0, step_deadline(), r, sizeof r);
	if (fd == VD_ENOENT) {
		snprintf(why, whylen, "%s", r);
		return VD_EIO;
	}
	if (fd < 0) {
		snprintf(why, whylen, "cannot connect to %s: %s", hostport, strerror(errno));
		return VD_EIO;
	}
	struct io_conn p;
	struct vd_buf req = VD_BUF_INIT, in = VD_BUF_INIT;
	int rc = VD_EIO;
	if (!tls) {
		io_plain_init(&p, fd);
	} else if (io_tls_client_init(&p, io_tls_lib_linked(), tls, fd, host, NULL) != 0) {
		snprintf(why, whylen, "TLS to %s: cannot set up", hostport);
		goto out;
	} else if (io_handshake_wait(&p, step_deadline(), NULL) != 0) {
		tls_reason(&p, r, sizeof r);
		snprintf(why, whylen, "TLS handshake with %s failed: %s", hostport, r);
		goto out;
	}
	buf_printf(&req, "POST /jsonrpc HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
		   "Content-Length: %zu\r\nConnection: close\r\n\r\n", host, blen);
	buf_append(&req, body, blen);
	if (io_write_all(&p, req.data, req.len, step_deadline(), NULL) != 0) {
		snprintf(why, whylen, "sending to %s: %s", hostport, io_last_error(&p));
		goto out;
	}
	for (;;) {
		if (in.len >= MAX_PEER_REPLY) {
			snprintf(why, whylen, "reply from %s over %u bytes", hostport, MAX_PEER_REPLY);
			goto out;
		}
		buf_reserve(&in, 16384);
		long n = io_read_wait(&p, in.data + in.len, 16384, step_deadline(), NULL);
		if (n == 0 || n == VD_ECLOSED)
			break;
		if (n < 0) {
			snprintf(why, whylen, "reading from %s: %s", hostport, io_last_error(&p));
			goto out;
		}
		in.len += (size_t)n;
	}
	buf_putc(&in, '\0');
	rc = http_body(hostport, &in, out, ct, ctlen, why, whylen);
out:
	buf_free(&req);
	buf_free(&in);
	if (rc == 0 && io_is_tls(&p))
		io_shutdown(&p);
	io_close(&p);
	return rc;
}

/* The destination's JSON-RPC answer to VM.migrationCreate, decoded with
 * the codec of its content type (else this daemon's): 0 for a result, or
 * VD_EPROTO with why (its error, or what is wrong with the reply) and
 * *code its error code (0 when it sent none). */
static int peer_reply_check(const struct vd_codec *codec, const char *ct,
			    const struct vd_buf *reply, char *why, size_t whylen, int *err_code)
{
	*err_code = 0;
	const struct vd_codec *rc = *ct ? codec_find_content_type(ct, strlen(ct)) : NULL;
	if (rc)
		codec = rc;
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err;
	memset(&err, 0, sizeof err);
	int out = VD_EPROTO;
	if (codec->decode(&a, reply->data, reply->len, &lim, &v, &err) != 0 || !v ||
	    v->type != VD_OBJECT) {
		snprintf(why, whylen, "not a JSON-RPC response: %.200s", reply->len ? reply->data : "");
		goto done;
	}
	const struct vd_value *e = vd_obj_get(v, "error");
	if (e && e->type != VD_NULL) {
		const struct vd_value *m = e->type == VD_OBJECT ? vd_obj_get(e, "message") : NULL;
		const struct vd_value *code = e->type == VD_OBJECT ? vd_obj_get(e, "code") : NULL;
		if (code && code->type == VD_INT && code->v.i > 0 && code->v.i < 100000)
			*err_code = (int)code->v.i;
		if (m && m->type == VD_STRING)
			snprintf(why, whylen, "%.*s (code %lld)", (int)VD_MIN(m->v.s.len, 200u),
				 m->v.s.ptr, code && code->type == VD_INT ? (long long)code->v.i : 0LL);
		else
			snprintf(why, whylen, "%.200s", reply->data);
		goto done;
	}
	if (!vd_obj_get(v, "result")) {
		snprintf(why, whylen, "no result: %.200s", reply->data);
		goto done;
	}
	out = 0;
done:
	arena_free(&a);
	return out;
}

/* ---- source --------------------------------------------------------------- */

struct migration {
	struct virt_state *s;
	char id[37];
	char *dst;                 /* the destination vdsmd, host:port (owned) */
	struct ssl_ctx_st *tls;    /* its TLS context, NULL: plain HTTP */
	struct vd_buf body;        /* the VM.migrationCreate request */
	char dconnuri[512];
	char qemu_uri[300];
	char listen[256];
	unsigned long bandwidth;   /* MiB/s, 0: libvirt's default */
	pthread_t progress;
	atomic_bool done;
};

static void set_migration(struct virt_state *s, const char *id, int code, const char *msg,
			  int progress, bool running)
{
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	if (t) {
		t->migrating = running;
		t->mig_code = code;
		snprintf(t->mig_message, sizeof t->mig_message, "%s", msg);
		if (progress >= 0)
			t->mig_progress = progress;
	}
	pthread_mutex_unlock(&s->lock);
}

static void publish_progress(struct virt_state *s, const char *id, int progress)
{
	struct event_bus *bus = s->d->bus;
	if (!bus)
		return;
	struct rpc_event ev;
	struct vd_writer *w = rpc_event_begin(&ev, bus, "|virt|VM_migration_status|%s", id);
	vw_keyz(w, id);
	vw_begin_object(w);
	vw_kint(w, "progress", progress);
	vw_kbool(w, "postcopy", false);
	vw_end_object(w);
	rpc_event_publish(bus, &ev);
}

static void *progress_main(void *arg)
{
	struct migration *m = arg;
	int last = -1;
	while (!atomic_load(&m->done)) {
		struct timespec ts = { 0, PROGRESS_MS * 1000000L };
		nanosleep(&ts, NULL);
		virConnectPtr c;
		virDomainPtr d = virt_bg_domain(m->s, m->id, &c);
		virDomainJobInfo ji;
		if (d && virDomainGetJobInfo(d, &ji) == 0 && ji.type != VIR_DOMAIN_JOB_NONE &&
		    ji.dataTotal > 0) {
			int p = (int)(100.0 * (double)ji.dataProcessed / (double)ji.dataTotal);
			p = p > 99 ? 99 : p;
			if (p != last && !atomic_load(&m->done)) {
				set_migration(m->s, m->id, 0, "Migration in progress", p, true);
				publish_progress(m->s, m->id, p);
				last = p;
			}
		}
		virt_bg_release(c, d);
	}
	return NULL;
}

/* The destination is asked to expect the VM: 0, or the code the
 * migration fails with (12 migrateErr, or the destination's) and why. */
static int migrate_prepare_dest(struct migration *m, char *why, size_t whylen)
{
	struct virt_state *s = m->s;
	struct vd_buf reply = VD_BUF_INIT;
	char ct[128], reason[224];
	uint64_t t0 = vd_now_ns();
	int code = 0;
	if (peer_call(m->dst, m->tls, m->body.data, m->body.len, &reply, ct, sizeof ct, why,
		      whylen) < 0) {
		code = rpc_err_code(RPC_E_MIGRATION);
	} else if (peer_reply_check(s->d->codec, ct, &reply, reason, sizeof reason, &code) < 0) {
		snprintf(why, whylen, "destination %.255s refused the VM: %s", m->dst, reason);
		if (!code)
			code = rpc_err_code(RPC_E_MIGRATION);
	} else {
		log_info("virt: migrating %s to %s (VM.migrationCreate over %s: %.1f ms)", m->id,
			 m->dst, m->tls ? "TLS" : "HTTP", (double)(vd_now_ns() - t0) / 1e6);
	}
	buf_free(&reply);
	return code;
}

/* The migration failed after the destination accepted the VM: it is asked
 * to drop what it made for it (VM.destroy), as VDSM's SourceThread._recover
 * does, so that no VM is left there "Migration Destination" (and a new
 * attempt to the same host is not refused as a duplicate).  Unlike VDSM
 * (which calls destroy whenever it reached the destination), never after
 * a refused VM.migrationCreate: a destination that answered "already
 * exists" keeps its VM.  A failure is logged; the migration's own failure
 * is what is reported. */
static void migrate_destroy_dest(struct migration *m)
{
	struct virt_state *s = m->s;
	struct vd_buf body = VD_BUF_INIT, reply = VD_BUF_INIT;
	struct vd_writer w;
	memset(&w, 0, sizeof w);
	s->d->codec->writer_init(&w, &body);
	vw_begin_object(&w);
	vw_kstr(&w, "jsonrpc", "2.0");
	vw_kstr(&w, "id", "vdsmd-migration-destroy");
	vw_kstr(&w, "method", "VM.destroy");
	vw_keyz(&w, "params");
	vw_begin_object(&w);
	vw_kstr(&w, "vmID", m->id);
	vw_end_object(&w);
	vw_end_object(&w);
	char ct[128], why[256];
	int code = 0;
	if (peer_call(m->dst, m->tls, body.data, body.len, &reply, ct, sizeof ct, why,
		      sizeof why) < 0 ||
	    peer_reply_check(s->d->codec, ct, &reply, why, sizeof why, &code) < 0)
		log_warn("virt: cannot destroy %s on the migration destination %s: %s", m->id,
			 m->dst, why);
	else
		log_info("virt: destroyed %s on the migration destination %s", m->id, m->dst);
	buf_free(&body);
	buf_free(&reply);
}

static void *migrate_main(void *arg)
{
	struct migration *m = arg;
	struct virt_state *s = m->s;
	atomic_init(&m->done, false);
	char err[512] = "libvirt is not reachable";
	int fail_code = migrate_prepare_dest(m, err, sizeof err);
	bool prog = !fail_code && pthread_create(&m->progress, NULL, progress_main, m) == 0;
	virConnectPtr c = NULL;
	virDomainPtr d = fail_code ? NULL : virt_bg_domain(s, m->id, &c);
	int rc = -1;
	if (d) {
		virTypedParameterPtr tp = NULL;
		int n = 0, max = 0;
		virTypedParamsAddString(&tp, &n, &max, VIR_MIGRATE_PARAM_URI, m->qemu_uri);
		if (m->listen[0])
			virTypedParamsAddString(&tp, &n, &max, VIR_MIGRATE_PARAM_LISTEN_ADDRESS, m->listen);
		if (m->bandwidth)
			virTypedParamsAddULLong(&tp, &n, &max, VIR_MIGRATE_PARAM_BANDWIDTH, m->bandwidth);
		unsigned flags = VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER | VIR_MIGRATE_ABORT_ON_ERROR;
		rc = virDomainMigrateToURI3(d, m->dconnuri, tp, (unsigned)n, flags);
		if (rc < 0)
			snprintf(err, sizeof err, "%s", virt_last_error());
		virTypedParamsFree(tp, n);
	}
	atomic_store(&m->done, true);
	if (prog)
		pthread_join(m->progress, NULL);
	if (rc == 0) {
		log_info("virt: %s migrated to %s", m->id, m->dconnuri);
		set_migration(s, m->id, 0, "Migration done", 100, false);
		publish_progress(s, m->id, 100);
	} else {
		bool canceled = !fail_code && (virt_last_error_code() == VIR_ERR_OPERATION_ABORTED ||
					       strstr(err, "cancel") != NULL);
		log_warn("virt: migration of %s failed: %s", m->id, err);
		/* the destination has forgotten the VM before it is Up here
		 * again: an engine that retries finds no VM left there */
		if (!fail_code)
			migrate_destroy_dest(m);
		/* Up first: whoever sees the failed status sees the VM Up */
		pthread_mutex_lock(&s->lock);
		struct virt_track *t = track_find(s, m->id);
		if (t && t->status == VS_MIGRATION_SOURCE)
			t->status = VS_UP;
		pthread_mutex_unlock(&s->lock);
		set_migration(s, m->id, canceled ? 0 : fail_code ? fail_code
			      : rpc_err_code(RPC_E_MIGRATION), canceled ? "Migration canceled" : err,
			      -1, false);
		virt_publish_status(s, m->id, VS_UP, NULL);
		virt_kick(s);
	}
	virt_bg_release(c, d);
	buf_free(&m->body);
	free(m->dst);
	virt_bg_done(s, m);
	return NULL;
}

static const char *mstr(struct rpc_call *c, const struct vd_value *obj, const char *key,
			size_t max)
{
	const struct vd_value *v = vd_obj_get(obj, key);
	if (!v || v->type != VD_STRING || v->v.s.len == 0 || v->v.s.len > max ||
	    memchr(v->v.s.ptr, 0, v->v.s.len))
		return NULL;
	return arena_strndup(c->arena, v->v.s.ptr, v->v.s.len);
}

int virt_verb_migrate(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	const struct vd_value *p = rpc_arg(c, "params");
	const char *dst = mstr(c, p, "dst", 255);
	const char *dstqemu = mstr(c, p, "dstqemu", 255);
	const struct vd_value *bw = vd_obj_get(p, "maxBandwidth");
	if (!dst)
		return rpc_fail(c, RPC_E_PARAMS, "params.dst: the destination host:port");
	char host[256], port[16];
	if (!split_hostport(dst, host, sizeof host, port, sizeof port))
		return rpc_fail(c, RPC_E_PARAMS, "params.dst: host:port expected, got %s", dst);
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	char *xml = NULL;
	struct migration *m = NULL;
	virDomainPtr dom = virt_lookup(c, s, conn, id);
	if (!dom)
		goto out;
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	bool busy = t && t->migrating;
	pthread_mutex_unlock(&s->lock);
	if (busy) {
		rpc_fail(c, RPC_E_MIGRATION, "%s is already migrating", id);
		goto out;
	}
	xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_MIGRATABLE);
	if (!xml) {
		virt_fail_libvirt(c, "migrate", id);
		goto out;
	}
	m = xcalloc(1, sizeof *m);
	m->s = s;
	snprintf(m->id, sizeof m->id, "%s", id);
	m->dst = xstrdup(dst);
	/* what the destination is asked to expect (VDSM's migration_parameters),
	 * sent by the background job */
	struct vd_writer w;
	memset(&w, 0, sizeof w);
	buf_init(&m->body);
	s->d->codec->writer_init(&w, &m->body);
	vw_begin_object(&w);
	vw_kstr(&w, "jsonrpc", "2.0");
	vw_kstr(&w, "id", "vdsmd-migration-create");
	vw_kstr(&w, "method", "VM.migrationCreate");
	vw_keyz(&w, "params");
	vw_begin_object(&w);
	vw_kstr(&w, "vmID", id);
	vw_keyz(&w, "params");
	vw_begin_object(&w);
	vw_kstr(&w, "vmId", id);
	vw_kstr(&w, "_srcDomXML", xml);
	vw_kstr(&w, "xml", xml);
	vw_end_object(&w);
	vw_end_object(&w);
	vw_end_object(&w);
	pthread_mutex_lock(&s->lock);
	m->tls = s->deps.peer_tls;
	pthread_mutex_unlock(&s->lock);
	const char *tmpl = s->d->cfg.migration_libvirt_uri;
	if (!tmpl || !*tmpl)
		tmpl = "qemu+tls://%s/system";
	if (strstr(tmpl, "%s") && !strstr(strstr(tmpl, "%s") + 2, "%"))
		snprintf(m->dconnuri, sizeof m->dconnuri, tmpl, host);  /* NOLINT: checked template */
	else
		snprintf(m->dconnuri, sizeof m->dconnuri, "%s", tmpl);
	const char *qhost = dstqemu ? dstqemu : host;
	bool v6 = strchr(qhost, ':') != NULL;
	snprintf(m->qemu_uri, sizeof m->qemu_uri, v6 ? "tcp://[%s]" : "tcp://%s", qhost);
	snprintf(m->listen, sizeof m->listen, "%s", qhost);
	if (bw && bw->type == VD_INT && bw->v.i > 0)
		m->bandwidth = (unsigned long)bw->v.i;
	virt_transfer_begin(s, dom, id, VS_MIGRATION_SOURCE, "Migration in progress");
	if (virt_bg_spawn(s, migrate_main, m) < 0) {
		set_migration(s, id, rpc_err_code(RPC_E_MIGRATION), "cannot start the migration thread",
			      -1, false);
		pthread_mutex_lock(&s->lock);
		t = track_find(s, id);
		if (t && t->status == VS_MIGRATION_SOURCE)
			t->status = VS_UP;
		pthread_mutex_unlock(&s->lock);
		virt_publish_status(s, id, VS_UP, NULL);
		rpc_fail(c, RPC_E_MIGRATION, "cannot start the migration of %s", id);
		goto out;
	}
	m = NULL;   /* the job's now */
	log_info("virt: migration of %s to %s started", id, dst);
	virt_refresh(s);
	rc = 0;
out:
	free(xml);
	if (m) {
		buf_free(&m->body);
		free(m->dst);
		free(m);
	}
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

static int act_migrate_cancel(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			      const char *id)
{
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	bool running = t && t->migrating;
	pthread_mutex_unlock(&s->lock);
	/* VDSM: migCancelErr 47 when no migration runs (vm.py migrateCancel) */
	if (!running)
		return rpc_fail(c, RPC_E_MIG_CANCEL, "%s is not migrating", id);
	if (virDomainAbortJob(dom) < 0) {
		if (virt_last_error_code() == VIR_ERR_OPERATION_INVALID)
			return rpc_fail(c, RPC_E_MIG_CANCEL, "%s: %s", id, virt_last_error());
		return virt_fail_libvirt(c, "migrateCancel", id);
	}
	log_info("virt: migration of %s canceled", id);
	return 0;
}

int virt_verb_migrate_cancel(struct rpc_call *c)
{
	return virt_on_domain(c, act_migrate_cancel);
}

int virt_verb_get_migration_status(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	if (!s)
		return rpc_fail(c, RPC_E_RECOVERING, "virt backend not started");
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	if (!t || tomb_has(s, id)) {
		pthread_mutex_unlock(&s->lock);
		return rpc_fail(c, RPC_E_NO_VM, "%s", id);
	}
	int code = t->mig_code, progress = t->mig_progress;
	char msg[256];
	snprintf(msg, sizeof msg, "%s", t->mig_message[0] ? t->mig_message : "Migration not started");
	pthread_mutex_unlock(&s->lock);
	vw_begin_object(c->w);
	vw_keyz(c->w, "status");
	vw_begin_object(c->w);
	vw_kint(c->w, "code", code);
	vw_kstr(c->w, "message", msg);
	vw_end_object(c->w);
	vw_kint(c->w, "progress", progress);
	vw_end_object(c->w);
	return 0;
}

/* ---- destination ------------------------------------------------------------ */

int virt_verb_migration_create(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const struct vd_value *p = rpc_arg(c, "params");
	const char *id = mstr(c, p, "vmId", 36);
	if (!id || !vd_is_uuid(id, strlen(id)))
		return rpc_fail(c, RPC_E_PARAMS, "params.vmId: the VM's UUID");
	const char *vid = rpc_arg_str(c, "vmID", NULL);
	if (vid && strcmp(vid, id) != 0)
		return rpc_fail(c, RPC_E_PARAMS, "params.vmId differs from vmID");
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr old = virDomainLookupByUUIDString(conn, id);
	unsigned max = s->d->cfg.max_incoming_migrations, pending = 0;
	pthread_mutex_lock(&s->lock);
	TRACK_FOREACH(s, p2)
		pending += p2->incoming;
	/* a bounded number at once, as VDSM's max_incoming_migrations (issue
	 * 27: they were created without bound) */
	bool full = max && pending >= max;
	struct virt_track *t = old || full ? NULL : track_claim(s, id, "");
	bool dup = !t && !full;
	if (t) {
		t->launching = false;
		t->incoming = true;
		t->incoming_ms = vd_now_ms();
		t->status = VS_MIGRATION_DESTINATION;
	}
	pthread_mutex_unlock(&s->lock);
	if (old)
		virDomainFree(old);
	if (old || dup) {
		rpc_fail(c, RPC_E_VM_EXISTS, "%s", id);
		goto out;
	}
	if (full) {
		log_warn("virt: VM.migrationCreate %s refused: %u incoming migrations pending "
			 "(max_incoming_migrations)", id, pending);
		rpc_fail(c, RPC_E_MIGRATE_LIMIT, "%u incoming migrations pending", pending);
		goto out;
	}
	log_info("virt: expecting %s by migration", id);
	virt_publish_status(s, id, VS_MIGRATION_DESTINATION, NULL);
	virt_refresh(s);
	vw_begin_object(c->w);
	vw_kint(c->w, "migrationPort", 0);
	vw_keyz(c->w, "params");
	vw_begin_object(c->w);
	vw_kstr(c->w, "vmId", id);
	vw_kstr(c->w, "status", virt_status_name(VS_MIGRATION_DESTINATION));
	vw_kstrf(c->w, "statusTime", "%llu", (unsigned long long)rpc_event_time_ms());
	vw_end_object(c->w);
	vw_end_object(c->w);
	rc = 0;
out:
	virConnectClose(conn);
	return rc;
}
