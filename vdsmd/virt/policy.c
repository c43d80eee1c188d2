/* vdsmd/virt/policy.c - the engine's SLA policy of a VM: VM.updateVmPolicy
 * and VM.getIoTunePolicy.
 *
 * VDSM keeps the policy in the domain's metadata, element <qos> in the
 * namespace http://ovirt.org/vm/tune/1.0 (prefix ovirt-tune): <vcpuLimit>
 * (percent of the host's CPU power) and <ioTune><device name= path=>
 * <maximum>..</maximum><guaranteed>..</guaranteed></device></ioTune>; its
 * MOM policies then apply it.  vdsmd has no MOM, so it applies the policy the
 * way VDSM's default MOM policies do (mom.d/04-cputune, 05-iotune), then
 * stores it (it survives a vdsmd restart with the domain):
 *   vcpuLimit < 100: vcpu_quota = limit% * period * host CPUs / VM vCPUs,
 *                    period 100000 us (both scaled up while the quota would
 *                    be under libvirt's minimum of 1000 us); >= 100: no limit
 *                    (quota -1, period 100000);
 *   ioTune:          each device's "maximum" values become its live I/O
 *                    limits (an absent value is 0: unlimited).
 * A policy entry without name or path names its disk by domainID, poolID,
 * imageID and volumeID (the VM's metadata).  Errors: an empty params is code
 * 11 (MissParam), an unknown disk or a value libvirt refuses 63
 * (updateVmPolicyErr), a VM without a running domain 1/100. */
#include "virt_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define TUNE_NS "http://ovirt.org/vm/tune/1.0"
#define TUNE_PREFIX "ovirt-tune"
#define MAX_POLICIES 64
#define DEFAULT_PERIOD 100000
#define MIN_QUOTA 1000
#define MAX_PERIOD 1000000

/* VDSM's order (ops x units) */
static const char *const tune_keys[6] = {
	"total_bytes_sec", "total_iops_sec", "read_bytes_sec",
	"read_iops_sec", "write_bytes_sec", "write_iops_sec",
};

struct tune6 {
	bool present;            /* the <maximum>/<guaranteed> element exists */
	bool set[6];
	uint64_t v[6];
};

struct iopol {
	char name[32];
	char path[1024];
	struct tune6 max, gua;
};

struct qos {
	bool has_limit;
	char limit[24];          /* vcpuLimit text */
	struct iopol *pol;
	unsigned npol;
};

/* ---- the <qos> element: a small scanner (elements by local name) ------ */

/* The next element named local (any prefix) in [p, end): its '<', or NULL. */
static const char *find_elem(const char *p, const char *end, const char *local)
{
	size_t ln = strlen(local);
	for (const char *q = p; q && q < end; q = memchr(q + 1, '<', (size_t)(end - q - 1))) {
		if (*q != '<' || q[1] == '/')
			continue;
		const char *n = q + 1, *e = n;
		while (e < end && *e != '>' && *e != ' ' && *e != '/' && *e != '\t' && *e != '\n')
			e++;
		const char *colon = memchr(n, ':', (size_t)(e - n));
		if (colon)
			n = colon + 1;
		if ((size_t)(e - n) == ln && memcmp(n, local, ln) == 0)
			return q;
	}
	return NULL;
}

/* The content span of the element at q (after its start tag, before its end
 * tag); false for a self-closed or unterminated one. */
static bool elem_content(const char *q, const char *end, const char **cs, const char **ce)
{
	const char *gt = memchr(q, '>', (size_t)(end - q));
	if (!gt || gt[-1] == '/')
		return false;
	const char *n = q + 1, *e = n;
	while (*e != '>' && *e != ' ' && *e != '/' && *e != '\t' && *e != '\n')
		e++;
	char close[80];
	int cl = snprintf(close, sizeof close, "</%.*s>", (int)(e - n), n);
	if (cl <= 0 || (size_t)cl >= sizeof close)
		return false;
	const char *c = gt + 1;
	for (; c + cl <= end; c++)
		if (memcmp(c, close, (size_t)cl) == 0)
			break;
	if (c + cl > end)
		return false;
	*cs = gt + 1;
	*ce = c;
	return true;
}

static void unescape_into(char *out, size_t outlen, const char *s, const char *e)
{
	size_t o = 0;
	while (s < e && o + 1 < outlen) {
		static const struct { const char *ent; char ch; } ents[] = {
			{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
			{ "&quot;", '"' }, { "&apos;", '\'' },
		};
		bool done = false;
		for (size_t i = 0; i < 5 && *s == '&'; i++) {
			size_t n = strlen(ents[i].ent);
			if ((size_t)(e - s) >= n && memcmp(s, ents[i].ent, n) == 0) {
				out[o++] = ents[i].ch;
				s += n;
				done = true;
				break;
			}
		}
		if (!done)
			out[o++] = *s++;
	}
	out[o] = '\0';
}

/* Attribute name of the start tag at q, unescaped; false if absent. */
static bool attr_of(const char *q, const char *end, const char *name, char *out, size_t outlen)
{
	const char *gt = memchr(q, '>', (size_t)(end - q));
	if (!gt)
		return false;
	size_t nl = strlen(name);
	for (const char *a = q + 1; a + nl + 2 < gt; a++) {
		if ((a[-1] == ' ' || a[-1] == '\t' || a[-1] == '\n') && memcmp(a, name, nl) == 0 &&
		    a[nl] == '=' && (a[nl + 1] == '"' || a[nl + 1] == '\'')) {
			const char *v = a + nl + 2;
			const char *ve = memchr(v, a[nl + 1], (size_t)(gt - v));
			if (!ve)
				return false;
			unescape_into(out, outlen, v, ve);
			return true;
		}
	}
	return false;
}

static void parse_tune6(const char *p, const char *end, const char *local, struct tune6 *t)
{
	const char *q = find_elem(p, end, local), *cs, *ce;
	if (!q)
		return;
	t->present = true;
	if (!elem_content(q, end, &cs, &ce))
		return;
	for (int k = 0; k < 6; k++) {
		const char *x = find_elem(cs, ce, tune_keys[k]), *vs, *ve;
		char num[24];
		if (x && elem_content(x, ce, &vs, &ve)) {
			unescape_into(num, sizeof num, vs, ve);
			char *endp;
			unsigned long long v = strtoull(num, &endp, 10);
			if (endp != num && *endp == '\0') {
				t->set[k] = true;
				t->v[k] = v;
			}
		}
	}
}

static void qos_parse(const char *xml, struct qos *q)
{
	memset(q, 0, sizeof *q);
	q->pol = xcalloc(MAX_POLICIES, sizeof *q->pol);
	if (!xml)
		return;
	const char *end = xml + strlen(xml), *cs, *ce;
	const char *l = find_elem(xml, end, "vcpuLimit");
	if (l && elem_content(l, end, &cs, &ce)) {
		unescape_into(q->limit, sizeof q->limit, cs, ce);
		q->has_limit = true;
	}
	const char *io = find_elem(xml, end, "ioTune");
	if (!io || !elem_content(io, end, &cs, &ce))
		return;
	for (const char *d = find_elem(cs, ce, "device"); d && q->npol < MAX_POLICIES;
	     d = find_elem(d + 1, ce, "device")) {
		struct iopol *p = &q->pol[q->npol++];
		attr_of(d, ce, "name", p->name, sizeof p->name);
		attr_of(d, ce, "path", p->path, sizeof p->path);
		const char *ds, *de;
		if (elem_content(d, ce, &ds, &de)) {
			parse_tune6(ds, de, "maximum", &p->max);
			parse_tune6(ds, de, "guaranteed", &p->gua);
			d = de;
		}
	}
}

static void put_tune6(struct vd_buf *b, const char *tag, const struct tune6 *t)
{
	if (!t->present)
		return;
	buf_printf(b, "<%s>", tag);
	for (int k = 0; k < 6; k++)
		if (t->set[k])
			buf_printf(b, "<%s>%" PRIu64 "</%s>", tune_keys[k], t->v[k], tune_keys[k]);
	buf_printf(b, "</%s>", tag);
}

/* The <qos> element as VDSM writes it, NUL-terminated into b. */
static void qos_write(const struct qos *q, struct vd_buf *b)
{
	buf_puts(b, "<qos>");
	if (q->has_limit) {
		buf_puts(b, "<vcpuLimit>");
		virt_xml_escape(b, q->limit);
		buf_puts(b, "</vcpuLimit>");
	}
	if (q->npol) {
		buf_puts(b, "<ioTune>");
		for (unsigned i = 0; i < q->npol; i++) {
			const struct iopol *p = &q->pol[i];
			buf_puts(b, "<device");
			if (p->name[0]) {
				buf_puts(b, " name=\"");
				virt_xml_escape(b, p->name);
				buf_putc(b, '"');
			}
			if (p->path[0]) {
				buf_puts(b, " path=\"");
				virt_xml_escape(b, p->path);
				buf_putc(b, '"');
			}
			buf_putc(b, '>');
			put_tune6(b, "maximum", &p->max);
			put_tune6(b, "guaranteed", &p->gua);
			buf_puts(b, "</device>");
		}
		buf_puts(b, "</ioTune>");
	}
	buf_puts(b, "</qos>");
	buf_putc(b, '\0');
}

/* The stored <qos> of dom (NULL when there is none); -1 on a libvirt error. */
static int qos_read(virDomainPtr dom, struct qos *q)
{
	char *md = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, TUNE_NS, 0);
	if (!md && virt_last_error_code() != VIR_ERR_NO_DOMAIN_METADATA) {
		memset(q, 0, sizeof *q);
		return -1;
	}
	qos_parse(md, q);
	free(md);
	return 0;
}

/* ---- VM.updateVmPolicy ---------------------------------------------- */

/* Merge a JSON tune object into t (VDSM: values of the new one win). */
static int tune6_merge(struct tune6 *t, const struct vd_value *o, char *why, size_t whylen)
{
	if (!o)
		return 0;
	if (o->type != VD_OBJECT) {
		snprintf(why, whylen, "ioTune: maximum/guaranteed must be objects");
		return -1;
	}
	t->present = true;
	for (int k = 0; k < 6; k++) {
		const struct vd_value *v = vd_obj_get(o, tune_keys[k]);
		if (!v || v->type == VD_NULL)
			continue;
		if (v->type != VD_INT || v->v.i < 0) {
			snprintf(why, whylen, "ioTune: %s must be a non-negative integer",
				 tune_keys[k]);
			return -1;
		}
		t->set[k] = true;
		t->v[k] = (uint64_t)v->v.i;
	}
	return 0;
}

static void str_field(const struct vd_value *o, const char *key, char *out, size_t outlen)
{
	const struct vd_value *v = vd_obj_get(o, key);
	if (v && v->type == VD_STRING && v->v.s.len < outlen) {
		memcpy(out, v->v.s.ptr, v->v.s.len);
		out[v->v.s.len] = '\0';
	}
}

/* Merge the ioTune changes into q (VDSM's io_tune_update_list), naming a
 * disk given by its volume from the domain's XML. */
static int merge_iotune(const struct vd_value *list, virDomainPtr dom, struct qos *q,
			char *why, size_t whylen)
{
	if (list->type != VD_ARRAY) {
		snprintf(why, whylen, "ioTune: a list of device policies");
		return -1;
	}
	int rc = -1;
	char *xml = NULL;
	struct virt_engxml *ex = NULL;
	for (size_t i = 0; i < list->v.arr.n; i++) {
		const struct vd_value *e = &list->v.arr.items[i];
		if (e->type != VD_OBJECT) {
			snprintf(why, whylen, "ioTune[%zu]: an object", i);
			goto out;
		}
		struct iopol ch = { 0 };
		str_field(e, "name", ch.name, sizeof ch.name);
		str_field(e, "path", ch.path, sizeof ch.path);
		if (!ch.name[0] && !ch.path[0]) {
			char sd[37] = "", img[37] = "", vol[37] = "";
			str_field(e, "domainID", sd, sizeof sd);
			str_field(e, "imageID", img, sizeof img);
			str_field(e, "volumeID", vol, sizeof vol);
			if (!ex) {
				ex = xcalloc(1, sizeof *ex);
				xml = virDomainGetXMLDesc(dom, 0);
				if (!xml || engxml_parse(xml, ex, why, whylen) < 0) {
					if (!xml)
						snprintf(why, whylen, "%s", virt_last_error());
					goto out;
				}
			}
			const struct virt_engdisk *d = virt_find_vol_drive(ex, sd, img, vol);
			if (!d) {
				snprintf(why, whylen, "No such drive: %s/%s/%s", sd, img, vol);
				goto out;
			}
			snprintf(ch.name, sizeof ch.name, "%s", d->dev);
			snprintf(ch.path, sizeof ch.path, "%s", d->path);
		}
		if (tune6_merge(&ch.max, vd_obj_get(e, "maximum"), why, whylen) < 0 ||
		    tune6_merge(&ch.gua, vd_obj_get(e, "guaranteed"), why, whylen) < 0)
			goto out;
		struct iopol *old = NULL;
		for (unsigned j = 0; j < q->npol && !old; j++)
			if (ch.name[0] && strcmp(q->pol[j].name, ch.name) == 0)
				old = &q->pol[j];
		for (unsigned j = 0; j < q->npol && !old; j++)
			if (ch.path[0] && strcmp(q->pol[j].path, ch.path) == 0)
				old = &q->pol[j];
		if (!old) {
			if (q->npol >= MAX_POLICIES) {
				snprintf(why, whylen, "ioTune: more than %d devices", MAX_POLICIES);
				goto out;
			}
			q->pol[q->npol++] = ch;
			continue;
		}
		if (ch.name[0])
			snprintf(old->name, sizeof old->name, "%s", ch.name);
		if (ch.path[0])
			snprintf(old->path, sizeof old->path, "%s", ch.path);
		old->max.present = old->gua.present = true;
		for (int k = 0; k < 6; k++) {
			if (ch.max.set[k])
				old->max.set[k] = true, old->max.v[k] = ch.max.v[k];
			if (ch.gua.set[k])
				old->gua.set[k] = true, old->gua.v[k] = ch.gua.v[k];
		}
	}
	rc = 0;
out:
	free(xml);
	free(ex);
	return rc;
}

void virt_cpu_quota(double limit, unsigned host_cpus, unsigned vcpus, long long *quota,
		    unsigned long long *period)
{
	if (limit >= 100.0 || limit <= 0 || host_cpus == 0 || vcpus == 0) {
		*quota = -1;
		*period = DEFAULT_PERIOD;
		return;
	}
	double q = limit / 100.0 * DEFAULT_PERIOD * host_cpus / vcpus;
	double mult = q > MIN_QUOTA ? 1.0 : 1.0 + MIN_QUOTA / q;
	double p = mult * DEFAULT_PERIOD;
	q *= mult;
	if (p > MAX_PERIOD) {             /* libvirt's bound: keep the ratio */
		q = q * MAX_PERIOD / p;
		p = MAX_PERIOD;
	}
	*quota = q < MIN_QUOTA ? MIN_QUOTA : (long long)q;
	*period = (unsigned long long)p;
}

static int apply_vcpu_limit(virDomainPtr dom, const char *limit, char *why, size_t whylen)
{
	char *endp;
	double l = strtod(limit, &endp);
	if (endp == limit || *endp) {
		snprintf(why, whylen, "vcpuLimit: a number, got \"%s\"", limit);
		return -1;
	}
	virNodeInfo ni;
	int vcpus = virDomainGetVcpusFlags(dom, VIR_DOMAIN_AFFECT_LIVE);
	if (virNodeGetInfo(virDomainGetConnect(dom), &ni) < 0 || vcpus <= 0) {
		snprintf(why, whylen, "%s", virt_last_error());
		return -1;
	}
	long long quota;
	unsigned long long period;
	virt_cpu_quota(l, ni.cpus, (unsigned)vcpus, &quota, &period);
	virTypedParameter tp[2];
	memset(tp, 0, sizeof tp);
	snprintf(tp[0].field, sizeof tp[0].field, "%s", VIR_DOMAIN_SCHEDULER_VCPU_PERIOD);
	tp[0].type = VIR_TYPED_PARAM_ULLONG;
	tp[0].value.ul = period;
	snprintf(tp[1].field, sizeof tp[1].field, "%s", VIR_DOMAIN_SCHEDULER_VCPU_QUOTA);
	tp[1].type = VIR_TYPED_PARAM_LLONG;
	tp[1].value.l = quota;
	if (virDomainSetSchedulerParametersFlags(dom, tp, 2, VIR_DOMAIN_AFFECT_LIVE) < 0) {
		snprintf(why, whylen, "%s", virt_last_error());
		return -1;
	}
	log_info("virt: vcpuLimit %s%%: vcpu_quota %lld, vcpu_period %llu (%u host CPUs, %d vCPUs)",
		 limit, quota, period, ni.cpus, vcpus);
	return 0;
}

static int apply_iotune(virDomainPtr dom, const struct iopol *p, char *why, size_t whylen)
{
	virTypedParameter tp[6];
	memset(tp, 0, sizeof tp);
	for (int k = 0; k < 6; k++) {
		snprintf(tp[k].field, sizeof tp[k].field, "%s", tune_keys[k]);
		tp[k].type = VIR_TYPED_PARAM_ULLONG;
		tp[k].value.ul = p->max.set[k] ? p->max.v[k] : 0;
	}
	const char *disk = p->name[0] ? p->name : p->path;
	if (virDomainSetBlockIoTune(dom, disk, tp, 6, VIR_DOMAIN_AFFECT_LIVE) < 0) {
		snprintf(why, whylen, "I/O limits of %.200s: %s", disk, virt_last_error());
		return -1;
	}
	return 0;
}

static int act_update_policy(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			     const char *id)
{
	const struct vd_value *params = rpc_arg(c, "params");
	if (!params || params->type != VD_OBJECT || params->v.obj.n == 0)
		return rpc_fail(c, RPC_E_MISSING_PARAM, "updateVmPolicy got an empty policy.");
	const struct vd_value *limit = vd_obj_get(params, "vcpuLimit");
	const struct vd_value *io = vd_obj_get(params, "ioTune");
	struct qos q;
	char why[512] = "";
	int rc = -1;
	struct vd_buf xml = VD_BUF_INIT;
	if (virDomainIsActive(dom) != 1) {
		rpc_fail(c, RPC_E_VM_POLICY, "VM %s is not running", id);
		return -1;
	}
	if (qos_read(dom, &q) < 0) {
		rpc_fail(c, RPC_E_VM_POLICY, "%s", virt_last_error());
		goto out;
	}
	if (limit && limit->type != VD_NULL) {
		if (limit->type == VD_INT)
			snprintf(q.limit, sizeof q.limit, "%" PRId64, limit->v.i);
		else if (limit->type == VD_STRING && limit->v.s.len < sizeof q.limit)
			snprintf(q.limit, sizeof q.limit, "%.*s", (int)limit->v.s.len, limit->v.s.ptr);
		else if (limit->type == VD_DOUBLE)
			snprintf(q.limit, sizeof q.limit, "%g", limit->v.d);
		else {
			rpc_fail(c, RPC_E_VM_POLICY, "vcpuLimit: a number");
			goto out;
		}
		q.has_limit = true;
		if (apply_vcpu_limit(dom, q.limit, why, sizeof why) < 0) {
			log_warn("virt: updateVmPolicy of %s: %s", id, why);
			rpc_fail(c, RPC_E_VM_POLICY, "%s", why);
			goto out;
		}
	}
	if (io && io->type != VD_NULL) {
		if (merge_iotune(io, dom, &q, why, sizeof why) < 0) {
			rpc_fail(c, RPC_E_VM_POLICY, "%s", why);
			goto out;
		}
		for (unsigned i = 0; i < q.npol; i++)
			if (apply_iotune(dom, &q.pol[i], why, sizeof why) < 0) {
				log_warn("virt: updateVmPolicy of %s: %s", id, why);
				rpc_fail(c, RPC_E_VM_POLICY, "%s", why);
				goto out;
			}
	}
	for (size_t i = 0; i < params->v.obj.n; i++) {
		const struct vd_member *m = &params->v.obj.members[i];
		if (!(m->klen == 9 && memcmp(m->key, "vcpuLimit", 9) == 0) &&
		    !(m->klen == 6 && memcmp(m->key, "ioTune", 6) == 0))
			log_warn("virt: updateVmPolicy of %s: unknown parameter %.*s", id,
				 (int)m->klen, m->key);
	}
	qos_write(&q, &xml);
	if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml.data, TUNE_PREFIX, TUNE_NS,
				 VIR_DOMAIN_AFFECT_LIVE) < 0) {
		if (virt_last_error_code() == VIR_ERR_NO_DOMAIN)
			rpc_fail(c, RPC_E_NO_VM, "%s", id);
		else
			rpc_fail(c, RPC_E_VM_POLICY, "%s", virt_last_error());
		goto out;
	}
	virt_mark_xml_stale(s, id);
	rpc_write_done(c);
	rc = 0;
out:
	free(q.pol);
	buf_free(&xml);
	return rc;
}

int virt_verb_update_vm_policy(struct rpc_call *c)
{
	return virt_on_domain(c, act_update_policy);
}

/* ---- VM.getIoTunePolicy --------------------------------------------- */

static void write_tune6(struct vd_writer *w, const char *key, const struct tune6 *t)
{
	vw_keyz(w, key);
	vw_begin_object(w);
	for (int k = 0; k < 6; k++)
		if (t->set[k]) {
			vw_keyz(w, tune_keys[k]);
			vw_uint(w, t->v[k]);
		}
	vw_end_object(w);
}

static int act_get_policy(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			  const char *id)
{
	(void)s;
	struct qos q;
	if (qos_read(dom, &q) < 0) {
		free(q.pol);
		return virt_fail_libvirt(c, "getIoTunePolicy", id);
	}
	vw_begin_array(c->w);
	for (unsigned i = 0; i < q.npol; i++) {
		const struct iopol *p = &q.pol[i];
		vw_begin_object(c->w);
		if (p->name[0])
			vw_kstr(c->w, "name", p->name);
		if (p->path[0])
			vw_kstr(c->w, "path", p->path);
		write_tune6(c->w, "maximum", &p->max);
		write_tune6(c->w, "guaranteed", &p->gua);
		vw_end_object(c->w);
	}
	vw_end_array(c->w);
	free(q.pol);
	return 0;
}

int virt_verb_get_iotune_policy(struct rpc_call *c)
{
	return virt_on_domain(c, act_get_policy);
}
