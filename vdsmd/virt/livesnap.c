/* vdsmd/virt/livesnap.c - VM.snapshot: a live external snapshot of a VM's
 * disks, as VDSM takes it.  The engine first creates, through the storage
 * verbs, one new COW volume per disk on top of the disk's current volume,
 * then calls
 *
 *   VM.snapshot {vmID, snapDrives: [{domainID, imageID, volumeID,
 *                baseVolumeID}], snapMemory?, frozen?, jobUUID?, timeout?,
 *                freeze_timeout?}
 *
 * Each drive's disk is the one whose ovirt-vm metadata names baseVolumeID
 * (a drive already on volumeID is skipped, as VDSM does); the new volumes
 * are prepared through storage and libvirt switches the disks to them in one
 * snapshot: external, REUSE_EXT (the volumes exist, their backing file is
 * the base), NO_METADATA (libvirt keeps no snapshot object), DISK_ONLY
 * unless snapMemory names memory volumes (VDSM's hibernation handle; the VM
 * state goes to the dump volume, the conf volume gets vdsmd's record).
 * Disks not named are left out (snapshot='no').  The metadata then names
 * the new volume, so dumpxmls and a restart see the new chain.
 *
 * As in VDSM the work is a host job (jobs.c): the verb checks the request,
 * prepares the volumes, answers true and a thread takes the snapshot; the
 * engine follows it with Host.getJobs {job_type: virt, job_ids: [jobUUID]}
 * or the |jobs|status|<jobUUID> events.  A failure is the job's error with
 * code 48 (SnapshotFailed).  frozen=false would make VDSM freeze the
 * guest's filesystems through its agent first; vdsmd reads no guest agent,
 * so the snapshot is crash-consistent (as VDSM's is without an agent). */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define MAX_TIMEOUT_MIN (24 * 60)

struct snap_disk {
	char dev[32];
	struct virt_pdiv vol;      /* the new volume */
	char base[37];
	char path[1024];           /* the new volume's path */
};

struct snap_job {
	struct virt_state *s;
	char id[37];
	char vm[37];
	struct snap_disk disks[VIRT_ENG_MAX_DEV];
	unsigned ndisks;
	char others[VIRT_ENG_MAX_DEV][32];   /* disks left out */
	unsigned nothers;
	bool memory;
	char mem_path[1024];
};

/* The metadata of each snapped disk names its new volume (libvirt hands
 * the element out without the namespace prefix: <vm><device name=..>). */
static void update_metadata(virDomainPtr dom, const struct snap_job *j)
{
	char *cur = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VIRT_OVIRT_VM_NS,
					 VIR_DOMAIN_AFFECT_LIVE);
	if (!cur)
		return;
	for (unsigned i = 0; i < j->ndisks; i++)
		engxml_swap_volume(cur, j->disks[i].dev, j->disks[i].base, j->disks[i].vol.volume);
	if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, cur, "ovirt-vm",
				 VIRT_OVIRT_VM_NS, VIR_DOMAIN_AFFECT_LIVE) < 0)
		log_warn("virt: %s: the metadata of the snapshot's volumes: %s", j->vm,
			 virt_last_error());
	free(cur);
}

static void *snapshot_main(void *arg)
{
	struct snap_job *j = arg;
	struct virt_state *s = j->s;
	virt_job_set(s, j->id, VJ_RUNNING, 0, NULL);
	uint64_t t0 = vd_now_ns();
	struct vd_buf x = VD_BUF_INIT;
	buf_puts(&x, "<domainsnapshot><disks>");
	for (unsigned i = 0; i < j->ndisks; i++) {
		buf_puts(&x, "<disk name='");
		virt_xml_escape(&x, j->disks[i].dev);
		buf_puts(&x, "' snapshot='external' type='file'><driver type='qcow2'/><source file='");
		virt_xml_escape(&x, j->disks[i].path);
		buf_puts(&x, "'/></disk>");
	}
	for (unsigned i = 0; i < j->nothers; i++) {
		buf_puts(&x, "<disk name='");
		virt_xml_escape(&x, j->others[i]);
		buf_puts(&x, "' snapshot='no'/>");
	}
	buf_puts(&x, "</disks>");
	unsigned flags = VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT | VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA;
	if (j->memory) {
		buf_puts(&x, "<memory snapshot='external' file='");
		virt_xml_escape(&x, j->mem_path);
		buf_puts(&x, "'/>");
	} else {
		flags |= VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY;
	}
	buf_puts(&x, "</domainsnapshot>");
	buf_putc(&x, '\0');
	virConnectPtr c;
	virDomainPtr d = virt_bg_domain(s, j->vm, &c);
	char err[512] = "the VM is gone";
	bool ok = false;
	if (!c) {
		snprintf(err, sizeof err, "libvirt is not reachable");
	} else if (d && j->ndisks == 0 && !j->memory) {
		ok = true;   /* every drive is already on its new volume */
	} else if (d) {
		virDomainSnapshotPtr snap = virDomainSnapshotCreateXML(d, x.data, flags);
		if (snap) {
			virDomainSnapshotFree(snap);
			ok = true;
		} else {
			snprintf(err, sizeof err, "%s", virt_last_error());
		}
	}
	if (ok) {
		update_metadata(d, j);
		log_info("virt: %s: live snapshot of %u disk(s)%s in %.0f ms (job %s)", j->vm,
			 j->ndisks, j->memory ? " with memory" : "",
			 (double)(vd_now_ns() - t0) / 1e6, j->id);
		virt_mark_xml_stale(s, j->vm);
		virt_kick(s);
		virt_job_set(s, j->id, VJ_DONE, 0, NULL);
	} else {
		log_warn("virt: %s: snapshot failed (job %s): %s", j->vm, j->id, err);
		virt_job_set(s, j->id, VJ_FAILED, rpc_err_code(RPC_E_SNAPSHOT), err);
	}
	virt_bg_release(c, d);
	buf_free(&x);
	virt_bg_done(s, j);
	return NULL;
}

/* Fill j from the request and the live domain; 0, or -1 with the call
 * failed. */
static int plan(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, struct snap_job *j)
{
	const struct vd_value *drives = rpc_arg(c, "snapDrives");
	if (!drives || drives->type != VD_ARRAY || drives->v.arr.n > VIRT_ENG_MAX_DEV)
		return rpc_fail(c, RPC_E_PARAMS, "snapDrives: a list of up to %d drives",
				VIRT_ENG_MAX_DEV);
	const struct virt_engxml *ex = virt_live_engxml(c, dom, j->vm, "snapshot", RPC_E_SNAPSHOT);
	if (!ex)
		return -1;
	bool snapped[VIRT_ENG_MAX_DEV] = { false };
	for (size_t i = 0; i < drives->v.arr.n; i++) {
		const struct vd_value *dv = &drives->v.arr.items[i];
		struct snap_disk *sd = &j->disks[j->ndisks];
		memset(sd, 0, sizeof *sd);
		if (dv->type != VD_OBJECT || !virt_uuid_member(dv, "domainID", sd->vol.domain) ||
		    !virt_uuid_member(dv, "imageID", sd->vol.image) ||
		    !virt_uuid_member(dv, "volumeID", sd->vol.volume) ||
		    !virt_uuid_member(dv, "baseVolumeID", sd->base))
			return rpc_fail(c, RPC_E_PARAMS, "snapDrives[%zu]: {domainID, imageID, "
					"volumeID, baseVolumeID} (UUIDs) expected", i);
		virt_uuid_member(dv, "poolID", sd->vol.pool);
		int base = -1, already = -1;
		for (unsigned k = 0; k < ex->ndisks; k++) {
			const struct virt_engdisk *dk = &ex->disks[k];
			if (!dk->has_volume || strcasecmp(dk->image, sd->vol.image) != 0)
				continue;
			if (strcasecmp(dk->volume, sd->base) == 0)
				base = (int)k;
			else if (strcasecmp(dk->volume, sd->vol.volume) == 0)
				already = (int)k;
		}
		if (base < 0 && already >= 0) {
			log_info("virt: %s: disk %s is already on volume %s", j->vm,
				 ex->disks[already].dev, sd->vol.volume);
			snapped[already] = true;
			continue;
		}
		if (base < 0)
			return rpc_fail(c, RPC_E_SNAPSHOT, "no disk of VM %s is on volume %s of image %s",
					j->vm, sd->base, sd->vol.image);
		if (snapped[base])
			return rpc_fail(c, RPC_E_PARAMS, "snapDrives: disk %s named twice",
					ex->disks[base].dev);
		snapped[base] = true;
		snprintf(sd->dev, sizeof sd->dev, "%s", ex->disks[base].dev);
		if (!sd->vol.pool[0])
			snprintf(sd->vol.pool, sizeof sd->vol.pool, "%s", ex->disks[base].pool);
		if (virt_prepare_volume(c, s, &sd->vol, "snapshot", RPC_E_SNAPSHOT, sd->path,
					sizeof sd->path) < 0)
			return -1;
		j->ndisks++;
	}
	for (unsigned k = 0; k < ex->ndisks; k++)
		if (!snapped[k] && ex->disks[k].dev[0])
			snprintf(j->others[j->nothers++], sizeof j->others[0], "%s", ex->disks[k].dev);
	return 0;
}

int virt_verb_snapshot(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	int64_t timeout = rpc_arg_int(c, "timeout", 30);
	int64_t ftimeout = rpc_arg_int(c, "freeze_timeout", 8);
	if (timeout <= 0 || timeout > MAX_TIMEOUT_MIN)
		return rpc_fail(c, RPC_E_PARAMS, "timeout: minutes, 1..%d", MAX_TIMEOUT_MIN);
	if (ftimeout <= 0 || ftimeout > MAX_TIMEOUT_MIN)
		return rpc_fail(c, RPC_E_PARAMS, "freeze_timeout: minutes, 1..%d", MAX_TIMEOUT_MIN);
	size_t ml = 0;
	const char *mem = rpc_arg_str(c, "snapMemory", &ml);
	struct virt_pdiv dump, conf;
	memset(&dump, 0, sizeof dump);
	memset(&conf, 0, sizeof conf);
	if (mem && *mem && (ml > 512 || !virt_parse_hiber_handle(mem, &dump, &conf)))
		return rpc_fail(c, RPC_E_PARAMS, "snapMemory: \"domainID,poolID,dumpImageID,"
				"dumpVolumeID,confImageID,confVolumeID\" expected");
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	struct snap_job *j = xcalloc(1, sizeof *j);
	j->s = s;
	snprintf(j->vm, sizeof j->vm, "%s", id);
	virt_job_uuid(c, j->id);
	virDomainPtr dom = virt_lookup_active(c, s, conn, id);
	if (!dom)
		goto out;
	if (plan(c, s, dom, j) < 0)
		goto out;
	if (mem && *mem) {
		char conf_path[1024], why[256];
		if (virt_prepare_volume(c, s, &dump, "memory dump", RPC_E_SNAPSHOT, j->mem_path,
					sizeof j->mem_path) < 0 ||
		    virt_prepare_volume(c, s, &conf, "memory conf", RPC_E_SNAPSHOT, conf_path,
					sizeof conf_path) < 0)
			goto out;
		if (virt_write_hiber_conf(conf_path, id, why, sizeof why) < 0) {
			rpc_fail(c, RPC_E_SNAPSHOT, "memory conf volume %s: %s", conf.volume, why);
			goto out;
		}
		j->memory = true;
	}
	if (!rpc_arg_bool(c, "frozen", false))
		log_info("virt: %s: no guest agent channel read here: the snapshot does not "
			 "freeze the guest's filesystems", id);
	int jr = virt_job_add(s, j->id, id, "snapshot_vm");
	if (jr < 0) {
		rpc_fail(c, RPC_E_SNAPSHOT, jr == VD_EEXIST ? "job %s exists" : "too many jobs (%s)",
			 j->id);
		goto out;
	}
	/* logged before the thread starts: it frees j when it ends */
	char job[sizeof j->id];
	memcpy(job, j->id, sizeof job);
	log_info("virt: %s: snapshot job %s starting (%u disk(s)%s)", id, job, j->ndisks,
		 j->memory ? ", memory" : "");
	if (virt_bg_spawn(s, snapshot_main, j) < 0) {
		virt_job_set(s, job, VJ_FAILED, rpc_err_code(RPC_E_SNAPSHOT), "no thread");
		rpc_fail(c, RPC_E_SNAPSHOT, "cannot start the snapshot job");
		goto out;
	}
	j = NULL;   /* the thread owns it */
	rc = 0;
out:
	free(j);
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}
