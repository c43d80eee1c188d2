/* vdsmd/virt/info.c - Host.dumpxmls and VM.getExternalData (worker pool:
 * they ask libvirt for the live domain XML).
 *
 * Host.dumpxmls {vmList} answers {vmId: domain XML} with the XML as libvirt
 * has it now: device aliases, the ovirt-vm metadata, live ports.  The engine
 * calls it when a VM's "hash" changes.  An unknown id is code 1.
 *
 * VM.getExternalData {vmID, kind, lastHash?, forceUpdate?}: VDSM keeps a
 * VM's TPM and NVRAM state outside the domain; vdsmd reports no tpmHash or
 * nvramHash (it keeps no such data), so the engine never asks, and a call
 * answers VDSM's ExternalDataFailed (89) naming the reason. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define MAX_DUMP_VMS 4096

int virt_verb_dumpxmls(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const struct vd_value *list = rpc_arg(c, "vmList");
	size_t n = list && list->type == VD_ARRAY ? list->v.arr.n : 0;
	if (n > MAX_DUMP_VMS)
		return rpc_fail(c, RPC_E_PARAMS, "vmList: at most %d VMs", MAX_DUMP_VMS);
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *v = &list->v.arr.items[i];
		if (v->type != VD_STRING || !vd_is_uuid(v->v.s.ptr, v->v.s.len))
			return rpc_fail(c, RPC_E_PARAMS, "vmList[%zu]: not a UUID", i);
	}
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	/* every XML first: an unknown id fails the whole call, as in VDSM */
	char **xmls = xcalloc(n ? n : 1, sizeof *xmls);
	int rc = -1;
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *v = &list->v.arr.items[i];
		char id[37];
		snprintf(id, sizeof id, "%.*s", (int)v->v.s.len, v->v.s.ptr);
		virDomainPtr dom = virDomainLookupByUUIDString(conn, id);
		xmls[i] = dom ? virDomainGetXMLDesc(dom, 0) : NULL;
		if (dom)
			virDomainFree(dom);
		if (!xmls[i]) {
			rpc_fail(c, RPC_E_NO_VM, "%s", id);
			goto out;
		}
	}
	vw_begin_object(c->w);
	for (size_t i = 0; i < n; i++) {
		const struct vd_value *v = &list->v.arr.items[i];
		vw_key(c->w, v->v.s.ptr, v->v.s.len);
		vw_string(c->w, xmls[i], strlen(xmls[i]));
	}
	vw_end_object(c->w);
	rc = 0;
out:
	for (size_t i = 0; i < n; i++)
		free(xmls[i]);
	free(xmls);
	virConnectClose(conn);
	return rc;
}

int virt_verb_get_external_data(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	const char *kind = rpc_arg_str(c, "kind", NULL);
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	virDomainPtr dom = virt_lookup(c, s, conn, id);
	if (dom) {
		bool known = kind && (strcmp(kind, "tpm") == 0 || strcmp(kind, "nvram") == 0);
		rpc_fail(c, RPC_E_EXTERNAL_DATA, "%s data of %s: %s", kind ? kind : "?", id,
			 known ? "No such device available" : "Unsupported data kind");
		virDomainFree(dom);
	}
	virConnectClose(conn);
	return -1;
}
