/* vdsmd/virt/replicate.c - live storage migration of a running VM's disk,
 * VDSM's VM.diskReplicateStart / VM.diskReplicateFinish:
 *
 *   VM.diskReplicateStart {vmID, srcDisk, dstDisk, needExtend?}
 *   VM.diskReplicateFinish {vmID, srcDisk, dstDisk}
 *
 * srcDisk and dstDisk are VDSM's DriveSpecVolume {domainID, imageID,
 * volumeID, poolID?, device?, diskType?}: the engine sends the same image and
 * volume on the source and the destination domain (VmReplicateDiskVDSCommand).
 * The engine's order (LiveMigrateDiskCommand): VM.snapshot (a new leaf),
 * Image.cloneStructure to the destination (the chain, empty, LEGAL as VDSM's),
 * VM.diskReplicateStart (libvirt's block copy of the leaf: SHALLOW |
 * REUSE_EXT | TRANSIENT_JOB, so the destination's own backing chain is
 * used and the guest's writes go to both), Image.syncData INTERNAL (the
 * layers below the leaf), then VM.diskReplicateFinish with dstDisk on the
 * destination domain (pivot: the disk continues on the destination chain
 * and the drive's metadata names the destination domain), or with dstDisk
 * equal to srcDisk to abort (the VM stays on the source).
 *
 * As VDSM, the replication is recorded in the drive's ovirt-vm metadata
 * (<device name=vda>...<diskReplicate>{the destination}</diskReplicate>)
 * before the volume is prepared and the copy starts, and removed when it
 * ends: libvirt keeps that metadata and the copy job across a restart of
 * vdsmd, so the next vdsmd finishes (or aborts) it; one that stopped after
 * libvirt pivoted but before the metadata said so finds the disk on the
 * recorded destination and completes the metadata.  Errors, VDSM's:
 * no such VM 1; no drive on srcDisk 13 (imageErr); one running already, a
 * volume that cannot be prepared, a copy that cannot start, or a finish
 * without libvirt's job 55 (replicaErr; the record is dropped); finish
 * before the copy caught up 40 (unavail: the engine asks again next cycle);
 * a pivot or abort libvirt refuses 41 (changeDisk; the record stays, the
 * engine may retry); finish of a drive not replicating 88
 * (ReplicationNotInProgress).  needExtend concerns thin block volumes
 * (VDSM extends chunked drives first); vdsmd's file volumes need none. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

/* The destination as the drive's metadata keeps it. */
struct replica {
	struct virt_pdiv v;
	char disk_type[8];           /* file or block */
	char path[1024];             /* "" until prepared */
};

/* One DriveSpecVolume argument: 0, or -1 with the call failed. */
static int spec_arg(struct rpc_call *c, const char *name, struct replica *r)
{
	const struct vd_value *o = rpc_arg(c, name);
	memset(r, 0, sizeof *r);
	if (!virt_uuid_member(o, "domainID", r->v.domain) ||
	    !virt_uuid_member(o, "imageID", r->v.image) ||
	    !virt_uuid_member(o, "volumeID", r->v.volume))
		return rpc_fail(c, RPC_E_PARAMS, "%s: {domainID, imageID, volumeID, poolID?, "
				"diskType?} (UUIDs) expected", name);
	virt_uuid_member(o, "poolID", r->v.pool);
	const struct vd_value *t = vd_obj_get(o, "diskType");
	if (t && t->type == VD_STRING) {
		size_t n = t->v.s.len;
		if (!((n == 4 && memcmp(t->v.s.ptr, "file", 4) == 0) ||
		      (n == 5 && memcmp(t->v.s.ptr, "block", 5) == 0)))
			return rpc_fail(c, RPC_E_PARAMS, "%s.diskType: file or block", name);
		memcpy(r->disk_type, t->v.s.ptr, n);
		r->disk_type[n] = '\0';
	}
	return 0;
}

/* The </device> closing the element whose content starts at p: the
 * replica record holds a <device>disk</device> of its own. */
static const char *close_of(const char *p)
{
	unsigned depth = 1;
	while (p) {
		const char *o = strstr(p, "<device"), *e = strstr(p, "</device>");
		if (!e)
			return NULL;
		if (o && o < e && (o[7] == '>' || o[7] == ' ')) {
			const char *gt = strchr(o, '>');
			if (gt && gt[-1] != '/')
				depth++;
			p = o + 7;
			continue;
		}
		if (--depth == 0)
			return e;
		p = e + 9;
	}
	return NULL;
}

/* The <device ... name=dev>...</device> of md: [*start, *end) (end at the
 * closing tag); false when md has none. */
static bool device_span(const char *md, const char *dev, size_t *start, size_t *end)
{
	char n1[64], n2[64];
	snprintf(n1, sizeof n1, "name=\"%s\"", dev);
	snprintf(n2, sizeof n2, "name='%s'", dev);
	for (const char *p = strstr(md, "<device"); p; p = strstr(p + 1, "<device")) {
		const char *gt = strchr(p, '>');
		if (!gt)
			return false;
		if (!memmem(p, (size_t)(gt - p), n1, strlen(n1)) &&
		    !memmem(p, (size_t)(gt - p), n2, strlen(n2)))
			continue;
		if (gt[-1] == '/')   /* <device .../>: no volume, no record */
			return false;
		const char *e = close_of(gt + 1);
		if (!e)
			return false;
		*start = (size_t)(p - md);
		*end = (size_t)(e - md);
		return true;
	}
	return false;
}

/* The <diskReplicate> element of dev's device in md: [*rs, *re) (re past its
 * end) and its contents in r when r; false when the drive has none. */
static bool replica_find(const char *md, const char *dev, size_t *rs, size_t *re,
			 struct replica *r)
{
	size_t s, e;
	if (!device_span(md, dev, &s, &e))
		return false;
	const char *p = dx_find_child(md + s, md + e, "diskReplicate");
	if (!p)
		return false;
	const char *end = dx_elem_end(p, "diskReplicate");
	if (!end || end > md + e)
		return false;
	*rs = (size_t)(p - md);
	*re = (size_t)(end - md);
	if (r) {
		memset(r, 0, sizeof *r);
		dx_child_text(p, end, "poolID", r->v.pool, sizeof r->v.pool);
		dx_child_text(p, end, "domainID", r->v.domain, sizeof r->v.domain);
		dx_child_text(p, end, "imageID", r->v.image, sizeof r->v.image);
		dx_child_text(p, end, "volumeID", r->v.volume, sizeof r->v.volume);
		dx_child_text(p, end, "diskType", r->disk_type, sizeof r->disk_type);
	}
	return true;
}

static char *get_md(virDomainPtr dom)
{
	return virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VIRT_OVIRT_VM_NS,
				    VIR_DOMAIN_AFFECT_LIVE);
}

static int set_md(virDomainPtr dom, const char *md)
{
	return virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, md, "ovirt-vm",
				    VIRT_OVIRT_VM_NS, VIR_DOMAIN_AFFECT_LIVE);
}

/* md with dev's replica record replaced by r (NULL: removed), and when
 * to_domain every <domainID>from_domain</domainID> of the device (the drive
 * and its volume chain) naming to_domain instead; NUL-terminated in b.
 * False when md has no such device. */
static bool edit_md(const char *md, const char *dev, const struct replica *r,
		    const char *from_domain, const char *to_domain, struct vd_buf *b)
{
	size_t s, e, rs, re;
	if (!device_span(md, dev, &s, &e))
		return false;
	if (!replica_find(md, dev, &rs, &re, NULL))
		rs = re = e;   /* a new one goes before </device> */
	buf_append(b, md, rs);
	if (r) {
		/* VDSM's keys (the replica dict of diskReplicateStart) */
		buf_printf(b, "<diskReplicate><cache>none</cache><device>disk</device>"
			   "<diskType>%s</diskType><domainID>%s</domainID><format>cow</format>"
			   "<imageID>%s</imageID>", r->disk_type[0] ? r->disk_type : "file",
			   r->v.domain, r->v.image);
		if (r->path[0]) {
			buf_puts(b, "<path>");
			virt_xml_escape(b, r->path);
			buf_puts(b, "</path>");
		}
		buf_printf(b, "<poolID>%s</poolID><propagateErrors>off</propagateErrors>"
			   "<volumeID>%s</volumeID></diskReplicate>", r->v.pool, r->v.volume);
	}
	buf_puts(b, md + re);
	buf_putc(b, '\0');
	if (to_domain) {
		char old[64];
		snprintf(old, sizeof old, "<domainID>%s</domainID>", from_domain);
		/* the device's span in the new text: from s to its </device> */
		char *dv = b->data + s;
		const char *dgt = strchr(dv, '>');
		const char *dend = dgt ? close_of(dgt + 1) : NULL;
		for (char *q = strstr(dv, old); q && dend && q < dend; q = strstr(q + 1, old))
			memcpy(q + strlen("<domainID>"), to_domain, 36);   /* UUIDs: in place */
	}
	return true;
}

/* Write dev's record (r) or remove it (r NULL), pivoting the domain when
 * to_domain: 0, or -1 with why. */
static int write_md(virDomainPtr dom, const char *dev, const struct replica *r,
		    const char *from_domain, const char *to_domain, char *why, size_t whylen)
{
	char *md = get_md(dom);
	if (!md) {
		snprintf(why, whylen, "the VM has no ovirt-vm metadata: %s", virt_last_error());
		return -1;
	}
	struct vd_buf b = VD_BUF_INIT;
	int rc = -1;
	if (!edit_md(md, dev, r, from_domain, to_domain, &b))
		snprintf(why, whylen, "the metadata has no device %s", dev);
	else if (set_md(dom, b.data) < 0)
		snprintf(why, whylen, "writing the metadata: %s", virt_last_error());
	else
		rc = 0;
	buf_free(&b);
	free(md);
	return rc;
}

/* The drive of dom on spec (VDSM's findDriveByUUIDs): its target into dev,
 * its source into path (when path); 0, or -1 with the call failed (13 when
 * there is none). */
static int find_drive(struct rpc_call *c, virDomainPtr dom, const char *id,
		      const struct replica *spec, char dev[32], char *path, size_t pathlen)
{
	const struct virt_engxml *ex = virt_live_engxml(c, dom, id, "replicate", RPC_E_REPLICA);
	if (!ex)
		return -1;
	const struct virt_engdisk *d = virt_find_vol_drive(ex, spec->v.domain, spec->v.image,
							   spec->v.volume);
	if (!d)   /* VDSM: imageErr */
		return rpc_fail(c, RPC_E_NO_IMAGE_FILE, "VM %s has no drive on volume %s/%s/%s", id,
				spec->v.domain, spec->v.image, spec->v.volume);
	snprintf(dev, 32, "%s", d->dev);
	if (path)
		snprintf(path, pathlen, "%s", d->path);
	return 0;
}

/* The destination volume's path (prepared with allowIllegal: a volume of an
 * interrupted Image.syncData or SDM.copy_data may be ILLEGAL): 0, or -1 with
 * why. */
static int prepare_dst(struct virt_state *s, struct replica *r, char *why, size_t whylen)
{
	pthread_mutex_lock(&s->lock);
	struct virt_deps deps = s->deps;
	pthread_mutex_unlock(&s->lock);
	int (*prep)(void *, const char *, const char *, const char *, const char *, char *,
		    size_t, char *, size_t) = deps.prepare_image_illegal ? deps.prepare_image_illegal
		: deps.prepare_image;
	if (!prep) {
		snprintf(why, whylen, "no storage to prepare volume %s", r->v.volume);
		return -1;
	}
	char w[256] = "";
	if (prep(deps.prepare_ctx, r->v.pool, r->v.domain, r->v.image, r->v.volume, r->path,
		 sizeof r->path, w, sizeof w) < 0) {
		snprintf(why, whylen, "volume %s of image %s in domain %s: %s", r->v.volume,
			 r->v.image, r->v.domain, w[0] ? w : "cannot be prepared");
		return -1;
	}
	return 0;
}

/* libvirt's block copy of dev's active layer onto r (its own backing chain
 * reused), as VDSM's _startDriveReplication. */
static int start_copy(virDomainPtr dom, const char *dev, const struct replica *r)
{
	struct vd_buf x = VD_BUF_INIT;
	bool block = strcmp(r->disk_type, "block") == 0;
	buf_printf(&x, "<disk type='%s' device='disk' snapshot='no'><source %s='",
		   block ? "block" : "file", block ? "dev" : "file");
	virt_xml_escape(&x, r->path);
	buf_puts(&x, "'/><driver name='qemu' type='qcow2' cache='none'/></disk>");
	buf_putc(&x, '\0');
	/* TRANSIENT_JOB: the copy need not survive a restart of the domain (a
	 * persistent domain is refused without it); VDSM passes it always */
	unsigned flags = VIR_DOMAIN_BLOCK_COPY_SHALLOW | VIR_DOMAIN_BLOCK_COPY_REUSE_EXT |
			 VIR_DOMAIN_BLOCK_COPY_TRANSIENT_JOB;
	int rc = virDomainBlockCopy(dom, dev, x.data, NULL, 0, flags);
	buf_free(&x);
	return rc;
}

static int act_start(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		     const char *id)
{
	struct replica src, dst;
	char dev[32], why[512];
	if (spec_arg(c, "srcDisk", &src) < 0 || spec_arg(c, "dstDisk", &dst) < 0 ||
	    find_drive(c, dom, id, &src, dev, NULL, 0) < 0)
		return -1;
	if (!dst.v.pool[0])
		snprintf(dst.v.pool, sizeof dst.v.pool, "%s", src.v.pool);
	char *md = get_md(dom);
	size_t rs, re;
	bool busy = md && replica_find(md, dev, &rs, &re, NULL);
	free(md);
	if (busy)
		return rpc_fail(c, RPC_E_REPLICA, "disk %s already has an ongoing replication", dev);
	/* first the record, so that a crash after the volume is prepared is
	 * cleaned up by diskReplicateFinish (VDSM's order) */
	if (write_md(dom, dev, &dst, NULL, NULL, why, sizeof why) < 0)
		return rpc_fail(c, RPC_E_REPLICA, "disk %s: %s", dev, why);
	if (prepare_dst(s, &dst, why, sizeof why) < 0)
		goto fail;
	struct stat st;
	const char *type = stat(dst.path, &st) == 0 && S_ISBLK(st.st_mode) ? "block" : "file";
	if (strcmp(dst.disk_type, type) != 0) {
		/* detected when prepared: kept, so that a restarted vdsmd knows it */
		snprintf(dst.disk_type, sizeof dst.disk_type, "%s", type);
		if (write_md(dom, dev, &dst, NULL, NULL, why, sizeof why) < 0)
			goto fail;
	}
	if (start_copy(dom, dev, &dst) < 0) {
		snprintf(why, sizeof why, "block copy of %s to %.200s: %.200s", dev, dst.path,
			 virt_last_error());
		goto fail;
	}
	log_info("virt: %s: replicating %s (volume %s) to domain %s (%s)", id, dev, src.v.volume,
		 dst.v.domain, dst.path);
	virt_mark_xml_stale(s, id);
	return 0;
fail:;
	char why2[256];
	if (write_md(dom, dev, NULL, NULL, NULL, why2, sizeof why2) < 0)
		log_warn("virt: %s: dropping the replication record of %s: %s", id, dev, why2);
	return rpc_fail(c, RPC_E_REPLICA, "disk %s: %s", dev, why);
}

/* After a pivot: the destination leaf the block copy wrote is LEGAL (the
 * clone and the engine's Volume.create make it LEGAL already; this covers a
 * leaf a failed copy marked ILLEGAL), so the VM's next start prepares it.
 * Only logged on failure: the VM already runs on it. */
static void dst_legal(struct virt_state *s, const char *id, const struct replica *r)
{
	pthread_mutex_lock(&s->lock);
	struct virt_deps deps = s->deps;
	pthread_mutex_unlock(&s->lock);
	char why[256] = "";
	if (deps.set_legal && deps.set_legal(deps.prepare_ctx, r->v.domain, r->v.image,
					     r->v.volume, why, sizeof why) < 0)
		log_warn("virt: %s: marking volume %s of domain %s LEGAL after the pivot: %s", id,
			 r->v.volume, r->v.domain, why);
}

/* libvirt refused the pivot because the copy is not ready yet. */
static bool not_ready(void)
{
	int code = virt_last_error_code();
	return code == VIR_ERR_BLOCK_COPY_ACTIVE ||
	       (code == VIR_ERR_OPERATION_INVALID && strstr(virt_last_error(), "ready"));
}

/* Finish found no copy job.  When the disk runs on the record's destination
 * already (libvirt pivoted; vdsmd stopped before it wrote the metadata) and
 * that is where the engine pivots to, the metadata is completed: 0.  Else,
 * as VDSM, the stale record goes and the call fails with 55. */
static int finish_without_job(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
			      const char *id, const char *dev, const char *cur_path,
			      const struct replica *src, const struct replica *rec, bool pivot,
			      const char *reason)
{
	struct replica want = *rec;
	char why[512];
	if (pivot && prepare_dst(s, &want, why, sizeof why) == 0 &&
	    strcmp(want.path, cur_path) == 0) {
		if (write_md(dom, dev, NULL, src->v.domain, rec->v.domain, why, sizeof why) < 0)
			return rpc_fail(c, RPC_E_REPLICA, "disk %s: %s", dev, why);
		log_info("virt: %s: %s had pivoted to domain %s already; its metadata now says so",
			 id, dev, rec->v.domain);
		dst_legal(s, id, rec);
		virt_mark_xml_stale(s, id);
		return 0;
	}
	if (write_md(dom, dev, NULL, NULL, NULL, why, sizeof why) < 0)
		log_warn("virt: %s: dropping the replication record of %s: %s", id, dev, why);
	return rpc_fail(c, RPC_E_REPLICA, "disk %s: the replication job is not found (%s)", dev,
			reason);
}

static int act_finish(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		      const char *id)
{
	struct replica src, dst, rec;
	char dev[32], why[512], cur[1024];
	if (spec_arg(c, "srcDisk", &src) < 0 || spec_arg(c, "dstDisk", &dst) < 0 ||
	    find_drive(c, dom, id, &src, dev, cur, sizeof cur) < 0)
		return -1;
	char *md = get_md(dom);
	size_t rs, re;
	bool on = md && replica_find(md, dev, &rs, &re, &rec);
	free(md);
	if (!on)
		return rpc_fail(c, RPC_E_NO_REPLICATION, "VM %s, drive %s (volume %s)", id, dev,
				src.v.volume);
	bool pivot = strcasecmp(src.v.domain, dst.v.domain) != 0 ||
		     strcasecmp(src.v.image, dst.v.image) != 0 ||
		     strcasecmp(src.v.volume, dst.v.volume) != 0;
	if (pivot && (strcasecmp(dst.v.domain, rec.v.domain) != 0 ||
		      strcasecmp(dst.v.volume, rec.v.volume) != 0))
		return rpc_fail(c, RPC_E_REPLICA, "disk %s replicates to volume %s of domain %s, "
				"not to %s of %s", dev, rec.v.volume, rec.v.domain, dst.v.volume,
				dst.v.domain);
	virDomainBlockJobInfo info;
	int r = virDomainGetBlockJobInfo(dom, dev, &info, 0);
	if (r <= 0 || info.type != VIR_DOMAIN_BLOCK_JOB_TYPE_COPY)
		return finish_without_job(c, s, dom, id, dev, cur, &src, &rec, pivot,
					  r < 0 ? virt_last_error() : "no copy job");
	if (info.cur != info.end)
		return rpc_fail(c, RPC_E_UNAVAIL, "disk %s: the replication has not caught up yet "
				"(%llu of %llu)", dev, (unsigned long long)info.cur,
				(unsigned long long)info.end);
	if (virDomainBlockJobAbort(dom, dev, pivot ? VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT : 0) < 0) {
		if (not_ready())
			return rpc_fail(c, RPC_E_UNAVAIL, "disk %s: %s", dev, virt_last_error());
		return rpc_fail(c, RPC_E_CHANGE_DISK, "stopping the replication of %s: %s", dev,
				virt_last_error());
	}
	if (write_md(dom, dev, NULL, src.v.domain, pivot ? dst.v.domain : NULL, why,
		     sizeof why) < 0)
		log_warn("virt: %s: the metadata after the replication of %s: %s", id, dev, why);
	if (pivot)
		dst_legal(s, id, &dst);
	log_info("virt: %s: replication of %s %s (volume %s, domain %s)", id, dev,
		 pivot ? "pivoted to the destination" : "aborted, staying on the source",
		 src.v.volume, pivot ? dst.v.domain : src.v.domain);
	virt_mark_xml_stale(s, id);
	virt_kick(s);
	return 0;
}

/* One Start or Finish at a time: each reads the drive's record, then writes
 * it (two Starts of a drive must not both pass the check, nor a failing one
 * drop the record of the one that runs).  They are rare and short. */
static pthread_mutex_t repl_lock = PTHREAD_MUTEX_INITIALIZER;

int virt_verb_disk_replicate_start(struct rpc_call *c)
{
	pthread_mutex_lock(&repl_lock);
	int rc = virt_on_domain(c, act_start);
	pthread_mutex_unlock(&repl_lock);
	return rc;
}

int virt_verb_disk_replicate_finish(struct rpc_call *c)
{
	pthread_mutex_lock(&repl_lock);
	int rc = virt_on_domain(c, act_finish);
	pthread_mutex_unlock(&repl_lock);
	return rc;
}
