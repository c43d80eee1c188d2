/* vdsmd/virt/resolve.c - what a VM verb resolves before it acts, shared by
 * the verb files (each calls down here, nothing here calls a verb file):
 *
 *   the VM: the backend and its connection (virt_begin: code 99 before the
 *       first sample), the domain of vmID (virt_lookup: code 1 when neither
 *       libvirt nor the tracker knows it, else the VM is Down), the body of
 *       a verb on one existing domain (virt_on_domain; virt_on_devices also
 *       waits for the sample that re-reads its devices), libvirt's failure
 *       as the call's error, the live XML read as the engine's;
 *   the devices: disks whose metadata names a volume, prepared through the
 *       storage interface (virt_deps), NIC networks mapped to bridges, one
 *       volume by its UUIDs (virt_prepare_volume), the drive of a VM on a
 *       given volume (virt_find_vol_drive). */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <libvirt/virterror.h>

/* Checks common to every lifecycle verb; returns the connection (a
 * reference) or NULL after failing the call. */
virConnectPtr virt_begin(struct rpc_call *c, struct virt_state *s)
{
	if (!s) {
		rpc_fail(c, RPC_E_RECOVERING, "virt backend not started");
		return NULL;
	}
	struct virt_snapshot *snap = virt_snapshot_get(s);
	if (!snap) {
		rpc_fail(c, RPC_E_RECOVERING, "no VM sample yet (libvirt not reached)");
		return NULL;
	}
	snapshot_put(snap);
	virConnectPtr conn = virt_conn_get(s);
	if (!conn)
		rpc_fail(c, RPC_E_GENERAL, "libvirt is not reachable");
	return conn;
}

/* libvirt's domain for vmID; NULL with the call failed (code 1 when neither
 * libvirt nor the tracker knows it, else 100: the VM is Down). */
static virDomainPtr lookup_as(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
			      const char *id, enum rpc_err down)
{
	virDomainPtr dom = virDomainLookupByUUIDString(conn, id);
	if (dom)
		return dom;
	pthread_mutex_lock(&s->lock);
	bool known = track_find(s, id) != NULL && !tomb_has(s, id);
	pthread_mutex_unlock(&s->lock);
	if (known)
		rpc_fail(c, down, "VM %s is Down", id);
	else
		rpc_fail(c, RPC_E_NO_VM, "%s", id);
	return NULL;
}

virDomainPtr virt_lookup(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
			 const char *id)
{
	return lookup_as(c, s, conn, id, RPC_E_GENERAL);
}

virDomainPtr virt_lookup_active(struct rpc_call *c, struct virt_state *s, virConnectPtr conn,
				const char *id)
{
	virDomainPtr dom = virt_lookup(c, s, conn, id);
	if (dom && virDomainIsActive(dom) != 1) {
		rpc_fail(c, RPC_E_NO_VM, "%s is not running", id);
		virDomainFree(dom);
		return NULL;
	}
	return dom;
}

int virt_fail_libvirt(struct rpc_call *c, const char *what, const char *id)
{
	int code = virt_last_error_code();
	if (code == VIR_ERR_NO_DOMAIN)
		return rpc_fail(c, RPC_E_NO_VM, "%s", id);
	return rpc_fail(c, RPC_E_GENERAL, "%s %s: %s", what, id, virt_last_error());
}

/* virt_on_domain, with the code for a VM the tracker knows but libvirt
 * no longer has (Down after hibernate or destroy). */
int virt_on_domain_as(struct rpc_call *c, domain_action act, enum rpc_err down)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr dom = lookup_as(c, s, conn, id, down);
	if (dom) {
		rc = act(c, s, dom, id);
		virDomainFree(dom);
	}
	virConnectClose(conn);
	return rc;
}

int virt_on_domain(struct rpc_call *c, domain_action act)
{
	return virt_on_domain_as(c, act, RPC_E_GENERAL);
}

struct virt_engxml *virt_live_engxml(struct rpc_call *c, virDomainPtr dom, const char *id,
				     const char *what, enum rpc_err code)
{
	char *xml = virDomainGetXMLDesc(dom, 0);
	if (!xml) {
		virt_fail_libvirt(c, what, id);
		return NULL;
	}
	struct virt_engxml *ex = arena_alloc(c->arena, sizeof *ex);
	char why[256];
	int prc = engxml_parse(xml, ex, why, sizeof why);
	free(xml);
	if (prc < 0) {
		rpc_fail(c, code, "the VM's XML: %s", why);
		return NULL;
	}
	return ex;
}

int virt_on_devices(struct rpc_call *c, domain_action act, bool want_def)
{
	if (virt_on_domain(c, act) < 0)
		return -1;
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	virt_mark_xml_stale(s, id);
	virt_refresh(s);
	if (want_def)
		virt_write_definition(c, s, id);
	return 0;
}

bool virt_known_vm(struct virt_state *s, virConnectPtr conn, const char *id)
{
	virDomainPtr old = virDomainLookupByUUIDString(conn, id);
	if (old) {
		virDomainFree(old);
		return true;
	}
	pthread_mutex_lock(&s->lock);
	bool known = track_find(s, id) && !tomb_has(s, id);
	pthread_mutex_unlock(&s->lock);
	return known;
}

/* ---- devices and volumes ------------------------------------------------- */

/* dst = src, cut to dstlen (snprintf here trips -Wrestrict: both are
 * members of one struct). */
static void copy_str(char *dst, size_t dstlen, const char *src)
{
	size_t n = strnlen(src, dstlen - 1);
	memmove(dst, src, n);
	dst[n] = '\0';
}

/* Disk sources: each disk whose metadata names a volume gets the path the
 * storage interface prepared; without one, the XML's path must exist. */
static int resolve_disks(struct rpc_call *c, const struct virt_deps *deps,
			 struct virt_engxml *ex)
{
	for (unsigned i = 0; i < ex->ndisks; i++) {
		struct virt_engdisk *dk = &ex->disks[i];
		if (!dk->has_volume)
			continue;
		if (deps->prepare_image) {
			char why[256] = "";
			int rc = deps->prepare_image(deps->prepare_ctx, dk->pool, dk->domain,
						     dk->image, dk->volume, dk->resolved,
						     sizeof dk->resolved, why, sizeof why);
			if (rc < 0)
				return rpc_fail(c, RPC_E_NO_IMAGE_FILE, "disk %s: volume %s of image "
						"%s in domain %s: %s", dk->dev, dk->volume, dk->image,
						dk->domain, why[0] ? why : "cannot be prepared");
			continue;
		}
		struct stat st;
		if (!dk->has_src || stat(dk->path, &st) != 0)
			return rpc_fail(c, RPC_E_NO_IMAGE_FILE, "disk %s: volume %s of image %s "
					"in domain %s: no such file %s", dk->dev, dk->volume,
					dk->image, dk->domain, dk->has_src ? dk->path : "(none)");
		copy_str(dk->resolved, sizeof dk->resolved, dk->path);
	}
	return 0;
}

/* A Linux bridge of that name exists on the host. */
static bool host_bridge(const char *name)
{
	char p[128];
	struct stat st;
	snprintf(p, sizeof p, "/sys/class/net/%s/bridge", name);
	return stat(p, &st) == 0;
}

/* NIC networks to bridges.  The network interface (net/, handed over by the
 * daemon) knows the host's VDSM networks: a bridged one gives its bridge, a
 * bridgeless one cannot take a VM NIC.  A network net/ does not know is
 * used as the bridge of the same name when the host has such a bridge: VDSM
 * hands the engine's <source bridge=...> to libvirt as it is, so a bridge
 * made outside VDSM works there too.  Otherwise the call fails with code
 * (VM.create: 9, VM.hotplugNic: 49, VDSM's answers when libvirt cannot
 * find the bridge). */
static int resolve_nics(struct rpc_call *c, const struct virt_deps *deps,
			struct virt_engxml *ex, enum rpc_err code)
{
	for (unsigned i = 0; i < ex->nnics; i++) {
		struct virt_engnic *n = &ex->nics[i];
		if (!n->has_src || !n->network[0])
			continue;   /* not a bridged NIC (network, user, direct...) */
		int rc = VD_ENOENT;
		if (deps->network_bridge) {
			rc = deps->network_bridge(deps->network_ctx, n->network, n->bridge,
						  sizeof n->bridge);
			if (rc == 0 && !virt_netname_ok(n->bridge))
				rc = VD_ETOOBIG;
			if (rc == VD_EINVAL)
				return rpc_fail(c, code, "NIC %s: network %s is not a bridged (VM) "
						"network", n->mac[0] ? n->mac : "?", n->network);
		}
		if (rc == VD_ENOENT && host_bridge(n->network)) {
			copy_str(n->bridge, sizeof n->bridge, n->network);
			rc = 0;
		}
		if (rc < 0)
			return rpc_fail(c, code, "NIC %s: network %s does not exist "
					"on this host", n->mac[0] ? n->mac : "?", n->network);
	}
	return 0;
}

static struct virt_deps deps_of(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	struct virt_deps deps = s->deps;
	pthread_mutex_unlock(&s->lock);
	return deps;
}

int virt_resolve_disks(struct rpc_call *c, struct virt_state *s, struct virt_engxml *ex)
{
	struct virt_deps deps = deps_of(s);
	return resolve_disks(c, &deps, ex);
}

int virt_resolve_nics(struct rpc_call *c, struct virt_state *s, struct virt_engxml *ex,
		      enum rpc_err code)
{
	struct virt_deps deps = deps_of(s);
	return resolve_nics(c, &deps, ex, code);
}

bool virt_uuid_put(char out[37], const char *s, size_t n)
{
	if (n != 36 || !vd_is_uuid(s, n))
		return false;
	memcpy(out, s, 36);
	out[36] = '\0';
	return true;
}

bool virt_uuid_member(const struct vd_value *o, const char *key, char out[37])
{
	const struct vd_value *v = vd_obj_get(o, key);
	return v && v->type == VD_STRING && virt_uuid_put(out, v->v.s.ptr, v->v.s.len);
}

/* The volume's path through the storage interface; 0, or -1 with the call
 * failed with code. */
int virt_prepare_volume(struct rpc_call *c, struct virt_state *s, const struct virt_pdiv *v,
			const char *what, enum rpc_err code, char *path, size_t pathlen)
{
	pthread_mutex_lock(&s->lock);
	struct virt_deps deps = s->deps;
	pthread_mutex_unlock(&s->lock);
	if (!deps.prepare_image)
		return rpc_fail(c, code, "%s volume %s: no storage to prepare it", what, v->volume);
	char why[256] = "";
	if (deps.prepare_image(deps.prepare_ctx, v->pool, v->domain, v->image, v->volume, path,
			       pathlen, why, sizeof why) < 0)
		return rpc_fail(c, code, "%s volume %s of image %s in domain %s: %s", what,
				v->volume, v->image, v->domain, why[0] ? why : "cannot be prepared");
	return 0;
}

const struct virt_engdisk *virt_find_vol_drive(const struct virt_engxml *ex, const char *sd,
					     const char *img, const char *vol)
{
	for (unsigned i = 0; i < ex->ndisks; i++) {
		const struct virt_engdisk *d = &ex->disks[i];
		if (!d->has_volume || strcmp(d->domain, sd) != 0 || strcmp(d->image, img) != 0)
			continue;
		const char *base = strrchr(d->path, '/');
		if (strcmp(d->volume, vol) == 0 || (base && strcmp(base + 1, vol) == 0))
			return d;
	}
	return NULL;
}
