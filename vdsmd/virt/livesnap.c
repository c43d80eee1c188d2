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

static struct virt_state *state_of(const struct rpc_call *c)
{
	const struct vdsmd *d = c->app;
	return d ? d->virt : NULL;
}

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

static const char *mstr(const struct vd_value *o, const char *key, char out[37])
{
	const struct vd_value *v = vd_obj_get(o, key);
	if (!v || v->type != VD_STRING || v->v.s.len != 36 || !vd_is_uuid(v->v.s.ptr, 36))
		return NULL;
	memcpy(out, v->v.s.ptr, 36);
	out[36] = '\0';
	return out;
}

static void xml_attr(struct vd_buf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': buf_puts(b, "&amp;"); break;
		case '<': buf_puts(b, "&lt;"); break;
		case '\'': buf_puts(b, "&apos;"); break;
		case '"': buf_puts(b, "&quot;"); break;
		default: buf_putc(b, *s); break;
		}
	}
}

/* The metadata of each snapped disk names its new volume (libvirt hands
 * the element out without the namespace prefix: <vm><device name=..>). */
static void update_metadata(virDomainPtr dom, const struct snap_job *j)
{
	char *cur = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VIRT_OVIRT_VM_NS,
					 VIR_DOMAIN_AFFECT_LIVE);
	if (!cur)
		return;
	struct vd_buf b = VD_BUF_INIT;
	buf_puts(&b, cur);
	buf_putc(&b, '\0');
	for (unsigned i = 0; i < j->ndisks; i++) {
		char n1[64], n2[64], from[64];
		snprintf(n1, sizeof n1, "name=\"%s\"", j->disks[i].dev);
		snprintf(n2, sizeof n2, "name='%s'", j->disks[i].dev);
		snprintf(from, sizeof from, "<volumeID>%s</volumeID>", j->disks[i].base);
		for (char *p = strstr(b.data, "<device"); p; p = strstr(p + 1, "<device")) {
			char *gt = strchr(p, '>');
			if (!gt || (!memmem(p, (size_t)(gt - p), n1, strlen(n1)) &&
				    !memmem(p, (size_t)(gt - p), n2, strlen(n2))))
				continue;
			char *end = strstr(gt, "</device>");
			char *v = strstr(gt, from);
			if (v && end && v < end)   /* same length: replaced in place */
				memcpy(v + strlen("<volumeID>"), j->disks[i].vol.volume, 36);
			break;
		}
	}
	if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, b.data, "ovirt-vm",
				 VIRT_OVIRT_VM_NS, VIR_DOMAIN_AFFECT_LIVE) < 0)
		log_warn("virt: %s: the metadata of the snapshot's volumes: %s", j->vm,
			 virt_last_error());
	buf_free(&b);
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
		xml_attr(&x, j->disks[i].dev);
		buf_puts(&x, "' snapshot='external' type='file'><driver type='qcow2'/><source file='");
		xml_attr(&x, j->disks[i].path);
		buf_puts(&x, "'/></disk>");
	}
	for (unsigned i = 0; i < j->nothers; i++) {
		buf_puts(&x, "<disk name='");
		xml_attr(&x, j->others[i]);
		buf_puts(&x, "' snapshot='no'/>");
	}
	buf_puts(&x, "</disks>");
	unsigned flags = VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT | VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA;
	if (j->memory) {
		buf_puts(&x, "<memory snapshot='external' file='");
		xml_attr(&x, j->mem_path);
		buf_puts(&x, "'/>");
	} else {
		flags |= VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY;
	}
	buf_puts(&x, "</domainsnapshot>");
	buf_putc(&x, '\0');
	virConnectPtr c = virt_conn_get(s);
	virDomainPtr d = c ? virDomainLookupByUUIDString(c, j->vm) : NULL;
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
	if (d)
		virDomainFree(d);
	if (c)
		virConnectClose(c);
	buf_free(&x);
	pthread_mutex_lock(&s->lock);
	s->bg_jobs--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	free(j);
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
	char *xml = virDomainGetXMLDesc(dom, 0);
	if (!xml)
		return virt_fail_libvirt(c, "snapshot", j->vm);
	struct virt_engxml *ex = arena_alloc(c->arena, sizeof *ex);
	char why[256];
	int prc = engxml_parse(xml, ex, why, sizeof why);
	free(xml);
	if (prc < 0)
		return rpc_fail(c, RPC_E_SNAPSHOT, "the VM's XML: %s", why);
	bool snapped[VIRT_ENG_MAX_DEV] = { false };
	for (size_t i = 0; i < drives->v.arr.n; i++) {
		const struct vd_value *dv = &drives->v.arr.items[i];
		struct snap_disk *sd = &j->disks[j->ndisks];
		memset(sd, 0, sizeof *sd);
		if (dv->type != VD_OBJECT || !mstr(dv, "domainID", sd->vol.domain) ||
		    !mstr(dv, "imageID", sd->vol.image) || !mstr(dv, "volumeID", sd->vol.volume) ||
		    !mstr(dv, "baseVolumeID", sd->base))
			return rpc_fail(c, RPC_E_PARAMS, "snapDrives[%zu]: {domainID, imageID, "
					"volumeID, baseVolumeID} (UUIDs) expected", i);
		mstr(dv, "poolID", sd->vol.pool);
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
	struct virt_state *s = state_of(c);
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
	const char *jid = rpc_arg_str(c, "jobUUID", NULL);
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	struct snap_job *j = xcalloc(1, sizeof *j);
	j->s = s;
	snprintf(j->vm, sizeof j->vm, "%s", id);
	if (jid)
		snprintf(j->id, sizeof j->id, "%s", jid);
	else
		vd_uuid_generate(j->id);
	virDomainPtr dom = virt_lookup(c, s, conn, id);
	if (!dom)
		goto out;
	if (virDomainIsActive(dom) != 1) {
		rpc_fail(c, RPC_E_NO_VM, "%s is not running", id);
		goto out;
	}
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
	pthread_mutex_lock(&s->lock);
	s->bg_jobs++;
	pthread_mutex_unlock(&s->lock);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	int e = pthread_create(&th, &at, snapshot_main, j);
	pthread_attr_destroy(&at);
	if (e != 0) {
		pthread_mutex_lock(&s->lock);
		s->bg_jobs--;
		pthread_mutex_unlock(&s->lock);
		virt_job_set(s, j->id, VJ_FAILED, rpc_err_code(RPC_E_SNAPSHOT), "no thread");
		rpc_fail(c, RPC_E_SNAPSHOT, "cannot start the snapshot job");
		goto out;
	}
	log_info("virt: %s: snapshot job %s started (%u disk(s)%s)", id, j->id, j->ndisks,
		 j->memory ? ", memory" : "");
	j = NULL;   /* the thread owns it */
	rc = 0;
out:
	free(j);
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}
