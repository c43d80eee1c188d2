/* vdsmd/virt/memory.c - memory of a running VM, changed live (VDSM 4.4):
 *
 *   VM.hotplugMemory {vmID, params: {vmId, xml | memory, memGuaranteedSize?}}
 *       one DIMM is attached: params.xml holds one <memory model='dimm'>
 *       element (the engine's form), or params.memory {size MiB, node,
 *       alias?} describes it (the older form, turned into the same XML).
 *       The domain must have been started with <maxMemory slots=..> and a
 *       NUMA cell (the engine's XML has both).  Answers the VmDefinition.
 *   VM.hotunplugMemory {vmID, params: same}   the DIMM named by its alias
 *       (else by the XML itself) is detached.  QEMU finishes the unplug only
 *       when the guest OS releases the memory (ACPI); libvirt answers once
 *       the request is made, so the DIMM may stay until the guest lets go.
 *
 * memGuaranteedSize (MiB) becomes the balloon's minimum (balloonInfo
 * balloon_min), as VDSM does.  Failures answer VDSM's codes 70 / 85. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define MAX_MEM_XML (64u << 10)

static struct virt_state *state_of(const struct rpc_call *c)
{
	const struct vdsmd *d = c->app;
	return d ? d->virt : NULL;
}

/* The first <memory ...> element of xml (not <memoryBacking>, ...), as an
 * arena copy; NULL when there is none. */
static char *memory_element(struct rpc_call *c, const char *xml)
{
	for (const char *p = strstr(xml, "<memory"); p; p = strstr(p + 1, "<memory")) {
		char n = p[7];
		if (n != ' ' && n != '>' && n != '\n' && n != '\t' && n != '/')
			continue;
		const char *e = dx_elem_end(p, "memory");
		return e ? arena_strndup(c->arena, p, (size_t)(e - p)) : NULL;
	}
	return NULL;
}

static bool plain(const char *s)
{
	return !strpbrk(s, "<>&'\"");
}

/* An unsigned integer member (JSON int or decimal string); -1 if absent or bad. */
static int64_t member_uint(const struct vd_value *obj, const char *key)
{
	const struct vd_value *v = vd_obj_get(obj, key);
	if (v && v->type == VD_INT)
		return v->v.i >= 0 ? v->v.i : -1;
	if (v && v->type == VD_STRING && v->v.s.len > 0 && v->v.s.len < 12) {
		int64_t x = 0;
		for (size_t i = 0; i < v->v.s.len; i++) {
			if (v->v.s.ptr[i] < '0' || v->v.s.ptr[i] > '9')
				return -1;
			x = x * 10 + (v->v.s.ptr[i] - '0');
		}
		return x;
	}
	return -1;
}

/* The DIMM's XML from params (xml, else memory {size, node, alias}); NULL
 * after failing the call with -32602. */
static char *dimm_xml(struct rpc_call *c, const struct vd_value *p)
{
	const struct vd_value *x = vd_obj_get(p, "xml");
	if (x && x->type != VD_NULL) {
		if (x->type != VD_STRING || x->v.s.len == 0 || x->v.s.len > MAX_MEM_XML ||
		    memchr(x->v.s.ptr, 0, x->v.s.len)) {
			rpc_fail(c, RPC_E_PARAMS, "params.xml: the memory device XML (up to %u bytes)",
				 MAX_MEM_XML);
			return NULL;
		}
		char *el = memory_element(c, arena_strndup(c->arena, x->v.s.ptr, x->v.s.len));
		if (!el)
			rpc_fail(c, RPC_E_PARAMS, "params.xml: no <memory> device element");
		return el;
	}
	const struct vd_value *m = vd_obj_get(p, "memory");
	int64_t size = member_uint(m, "size"), node = member_uint(m, "node");
	if (!m || m->type != VD_OBJECT || size <= 0 || size > (16LL << 20) || node < 0 ||
	    node > 4096) {
		rpc_fail(c, RPC_E_PARAMS, "params: xml, or memory {size: MiB, node} expected");
		return NULL;
	}
	struct vd_buf b = VD_BUF_INIT;
	buf_printf(&b, "<memory model='dimm'><target><size unit='KiB'>%lld</size>"
		   "<node>%lld</node></target>", (long long)size * 1024, (long long)node);
	const struct vd_value *a = vd_obj_get(m, "alias");
	if (a && a->type == VD_STRING && a->v.s.len > 0) {
		char *alias = arena_strndup(c->arena, a->v.s.ptr, a->v.s.len);
		if (a->v.s.len > 128 || !plain(alias) || memchr(a->v.s.ptr, 0, a->v.s.len)) {
			buf_free(&b);
			rpc_fail(c, RPC_E_PARAMS, "params.memory.alias: up to 128 plain characters");
			return NULL;
		}
		buf_printf(&b, "<alias name='%s'/>", alias);
	}
	buf_puts(&b, "</memory>");
	buf_putc(&b, '\0');
	char *r = arena_strndup(c->arena, b.data, b.len - 1);
	buf_free(&b);
	return r;
}

/* The alias name of a device element, "" when it has none. */
static void alias_of(const char *el, char *out, size_t outlen)
{
	out[0] = '\0';
	const char *a = dx_find_child(el, el + strlen(el), "alias");
	const char *vs = a ? strstr(a, "name=") : NULL;
	if (!vs || (vs[5] != '"' && vs[5] != '\''))
		return;
	const char *ve = strchr(vs + 6, vs[5]);
	if (ve && (size_t)(ve - vs - 6) < outlen)
		snprintf(out, outlen, "%.*s", (int)(ve - vs - 6), vs + 6);
}

/* params.memGuaranteedSize (MiB): the balloon's minimum from now on. */
static int guaranteed(struct rpc_call *c, struct virt_state *s, const char *id)
{
	const struct vd_value *p = rpc_arg(c, "params");
	const struct vd_value *g = vd_obj_get(p, "memGuaranteedSize");
	if (!g || g->type == VD_NULL)
		return 0;
	int64_t mib = member_uint(p, "memGuaranteedSize");
	if (mib < 0 || mib > (16LL << 20))
		return rpc_fail(c, RPC_E_PARAMS, "params.memGuaranteedSize: MiB, >= 0");
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	if (t)
		t->balloon_min_kib = (uint64_t)mib * 1024;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int act_plug(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	const struct vd_value *p = rpc_arg(c, "params");
	char *dev = dimm_xml(c, p);
	if (!dev)
		return -1;
	int64_t gm = member_uint(p, "memGuaranteedSize");
	if (vd_obj_get(p, "memGuaranteedSize") && (gm < 0 || gm > (16LL << 20)))
		return rpc_fail(c, RPC_E_PARAMS, "params.memGuaranteedSize: MiB, >= 0");
	if (virDomainAttachDeviceFlags(dom, dev, VIR_DOMAIN_AFFECT_LIVE) < 0) {
		if (virt_last_error_code() == VIR_ERR_NO_DOMAIN)
			return rpc_fail(c, RPC_E_NO_VM, "%s", id);
		return rpc_fail(c, RPC_E_HOTPLUG_MEM, "%s: %s", id, virt_last_error());
	}
	log_info("virt: memory hot-plugged into %s", id);
	return guaranteed(c, s, id);
}

static int act_unplug(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	const struct vd_value *p = rpc_arg(c, "params");
	char *dev = dimm_xml(c, p);
	if (!dev)
		return -1;
	char alias[160];
	alias_of(dev, alias, sizeof alias);
	int r = alias[0] ? virDomainDetachDeviceAlias(dom, alias, VIR_DOMAIN_AFFECT_LIVE)
			 : virDomainDetachDeviceFlags(dom, dev, VIR_DOMAIN_AFFECT_LIVE);
	if (r < 0) {
		if (virt_last_error_code() == VIR_ERR_NO_DOMAIN)
			return rpc_fail(c, RPC_E_NO_VM, "%s", id);
		return rpc_fail(c, RPC_E_HOTUNPLUG_MEM, "%s: %s", id, virt_last_error());
	}
	log_info("virt: memory %s unplug requested from %s", alias, id);
	return guaranteed(c, s, id);
}

/* Act, then let the next sample re-read the devices and the balloon. */
static int mem_verb(struct rpc_call *c, domain_action act, bool want_def)
{
	if (virt_on_domain(c, act) < 0)
		return -1;
	struct virt_state *s = state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	virt_mark_xml_stale(s, id);
	virt_refresh(s);
	if (want_def)
		virt_write_definition(c, s, id);
	return 0;
}

int virt_verb_hotplug_memory(struct rpc_call *c) { return mem_verb(c, act_plug, true); }
int virt_verb_hotunplug_memory(struct rpc_call *c) { return mem_verb(c, act_unplug, false); }
