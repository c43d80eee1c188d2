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
	/* size (MiB) and node: JSON integers or strings of digits, read by rpc/ */
	int64_t size = 0, node = -1;
	if (rpc_member_int(c, "params.memory", m, "size", 1, 16LL << 20, 0, &size) < 0 ||
	    rpc_member_int(c, "params.memory", m, "node", 0, 4096, -1, &node) < 0)
		return NULL;
	if (!m || m->type != VD_OBJECT || size <= 0 || node < 0) {
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
	int64_t mib;
	if (rpc_member_int(c, "params", p, "memGuaranteedSize", 0, 16LL << 20, -1, &mib) < 0)
		return -1;
	if (mib < 0)   /* absent or null */
		return 0;
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
	int64_t gm;   /* checked before the device goes in; guaranteed() applies it */
	if (rpc_member_int(c, "params", p, "memGuaranteedSize", 0, 16LL << 20, 0, &gm) < 0)
		return -1;
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

int virt_verb_hotplug_memory(struct rpc_call *c) { return virt_on_devices(c, act_plug, true); }
int virt_verb_hotunplug_memory(struct rpc_call *c) { return virt_on_devices(c, act_unplug, false); }
