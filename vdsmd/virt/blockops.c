/* vdsmd/virt/blockops.c - VM.diskSizeExtend: grow a running VM's disk.
 *
 * As VDSM's vm.py does: the drive is found by the domainID/imageID/volumeID
 * of driveSpecs in the VM's ovirt-vm metadata (code 13 when none matches);
 * then by the volume's format, which storage knows (virt_deps.volume_size):
 *   qcow2: QEMU grows the image itself (virDomainBlockResize to newSize, never
 *          smaller than the disk's current virtual size: code 58), and the
 *          virtual size QEMU reports afterwards (it may round up) is recorded
 *          as the volume's capacity (virt_deps.set_capacity);
 *   raw:   the volume was grown by storage first (Volume.extendSize); the
 *          guest is told the data file's size, whatever newSize says.
 * The answer is the disk's new size in bytes, as a string.  A failed resize
 * is code 56 (VDSM's updateDevice); a bad newSize code 58. */
#include "virt_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"

/* newSize as an integer (a JSON integer or a string of digits); -1 if not. */
static int64_t new_size_arg(const struct rpc_call *c)
{
	int64_t n = rpc_arg_int(c, "newSize", -1);
	return n > 0 ? n : -1;
}

/* A UUID field of driveSpecs into out[37]; false if absent or not 36 chars. */
static bool spec_uuid(const struct vd_value *spec, const char *key, char out[37])
{
	const struct vd_value *v = spec ? vd_obj_get(spec, key) : NULL;
	if (!v || v->type != VD_STRING || v->v.s.len != 36)
		return false;
	memcpy(out, v->v.s.ptr, 36);
	out[36] = '\0';
	return true;
}

static int block_capacity(virDomainPtr dom, const char *dev, uint64_t *cap)
{
	virDomainBlockInfo bi;
	if (virDomainGetBlockInfo(dom, dev, &bi, 0) < 0)
		return -1;
	*cap = bi.capacity;
	return 0;
}

static int act_extend(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		      const char *id)
{
	int64_t want = new_size_arg(c);
	const struct vd_value *spec = rpc_arg(c, "driveSpecs");
	char sd[37], img[37], vol[37], dev[32];
	if (!spec_uuid(spec, "domainID", sd) || !spec_uuid(spec, "imageID", img) ||
	    !spec_uuid(spec, "volumeID", vol))
		return rpc_fail(c, RPC_E_NO_IMAGE_FILE,
				"driveSpecs: domainID, imageID and volumeID of a VM disk");
	if (!s->deps.volume_size || !s->deps.set_capacity)
		return rpc_fail(c, RPC_E_GENERAL, "no storage to resize volumes");
	int rc = -1;
	char *xml = virDomainGetXMLDesc(dom, 0);
	struct virt_engxml *ex = xcalloc(1, sizeof *ex);
	char why[256] = "";
	if (!xml) {
		virt_fail_libvirt(c, "diskSizeExtend", id);
		goto out;
	}
	const struct virt_engdisk *d = engxml_parse(xml, ex, why, sizeof why) == 0 ?
				       virt_find_vol_drive(ex, sd, img, vol) : NULL;
	if (!d) {
		rpc_fail(c, RPC_E_NO_IMAGE_FILE, "VM %s has no drive %s/%s/%s", id, sd, img, vol);
		goto out;
	}
	snprintf(dev, sizeof dev, "%s", d->dev);
	struct virt_volsize vs;
	int r = s->deps.volume_size(s->deps.prepare_ctx, sd, img, vol, &vs, why, sizeof why);
	if (r < 0) {
		rpc_fail(c, r == VD_ENOENT ? RPC_E_NO_IMAGE_FILE : RPC_E_GENERAL, "%s", why);
		goto out;
	}
	uint64_t size = 0;
	if (vs.cow) {
		uint64_t cur;
		if (want < 0 || block_capacity(dom, dev, &cur) < 0) {
			rpc_fail(c, RPC_E_RESIZE, "%s", want < 0 ? "newSize: bytes, a positive integer"
				 : virt_last_error());
			goto out;
		}
		if (cur > (uint64_t)want) {
			rpc_fail(c, RPC_E_RESIZE, "%" PRId64 " is smaller than disk %s (%" PRIu64 ")",
				 want, dev, cur);
			goto out;
		}
		size = (uint64_t)want;
	} else {
		if (want < 0) {
			rpc_fail(c, RPC_E_RESIZE, "newSize: bytes, a positive integer");
			goto out;
		}
		if (vs.apparent != want)
			log_warn("virt: %s: requested size %" PRId64 " is not volume %s's %" PRId64
				 ", using the volume's", id, want, vol, vs.apparent);
		size = (uint64_t)vs.apparent;
	}
	log_info("virt: resizing disk %s of %s to %" PRIu64 " bytes", dev, id, size);
	if (virDomainBlockResize(dom, dev, size, VIR_DOMAIN_BLOCK_RESIZE_BYTES) < 0) {
		log_warn("virt: cannot resize disk %s of %s: %s", dev, id, virt_last_error());
		rpc_fail(c, RPC_E_UPDATE_DEVICE, "resize of %s: %s", dev, virt_last_error());
		goto out;
	}
	if (vs.cow) {
		/* QEMU may have rounded the size up: record what it reports */
		if (block_capacity(dom, dev, &size) < 0) {
			rpc_fail(c, RPC_E_RESIZE, "%s", virt_last_error());
			goto out;
		}
		r = s->deps.set_capacity(s->deps.prepare_ctx, sd, img, vol, (int64_t)size, why,
					 sizeof why);
		if (r < 0) {
			rpc_fail(c, RPC_E_GENERAL, "volume %s: %s", vol, why);
			goto out;
		}
	}
	vw_u64str(c->w, size);
	rc = 0;
out:
	free(xml);
	free(ex);
	if (rc == 0)
		virt_mark_xml_stale(s, id);
	return rc;
}

int virt_verb_disk_size_extend(struct rpc_call *c)
{
	return virt_on_domain(c, act_extend);
}
