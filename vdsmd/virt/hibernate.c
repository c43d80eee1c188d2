/* vdsmd/virt/hibernate.c - VM.hibernate and the restore through VM.create,
 * as VDSM does them (its hibernation is a "migration to a file"):
 *
 *   VM.hibernate {vmID, hibernationVolHandle}
 *       The handle names two volumes of one storage domain:
 *       "domainID,poolID,dumpImageID,dumpVolumeID,confImageID,confVolumeID"
 *       (the engine created them).  Both are prepared through the storage
 *       interface; the conf volume gets a small record of the VM (written in
 *       place, never truncated: a block volume cannot be, a preallocated file
 *       must keep its size), the VM is reported "Saving State" (event) and the
 *       verb answers at once.  A background job saves the memory state with
 *       libvirt's virDomainSaveFlags into the dump volume; the domain stops
 *       and events.c reports it Down with exitCode 0, exitReason 5 "SaveState
 *       succeeded" (the engine then calls VM.destroy).  A failed save leaves
 *       the VM running: it is reported Up again and VM.getMigrationStatus
 *       says why (VDSM's migrateErr, RPC_E_MIGRATION).
 *
 *   VM.create {vmID, vmParams: {vmId, xml?, memoryDumpVolume, memoryConfVolume}}
 *       (or the older vmParams.hiberVolHandle string): the volumes are
 *       prepared, the domain XML is the one saved in the dump (VDSM takes it
 *       from there too: virDomainSaveImageGetXMLDesc) with its disks prepared
 *       again through storage from its ovirt-vm metadata, and libvirt restores
 *       the domain running.  The reply says "Restoring state"; events.c
 *       publishes Restoring state -> Up when libvirt reports it started.  The
 *       domain keeps its UUID and metadata (they are in the saved XML).
 *
 * The conf record is ours, not VDSM's Python pickle: a VM hibernated by VDSM
 * restores here (the record is only checked when it is ours), not the other
 * way round. */
#include "virt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define CONF_MAGIC "vdsmd-hibernation 1\n"
#define CONF_BLOCK 4096
#define MAX_HANDLE 512

#define pdiv virt_pdiv

/* VDSM's hibernation handle: six comma-separated UUIDs. */
bool virt_parse_hiber_handle(const char *h, struct virt_pdiv *dump, struct virt_pdiv *conf)
{
	const char *f[6];
	size_t n[6];
	const char *p = h;
	for (int i = 0; i < 6; i++) {
		const char *comma = strchr(p, ',');
		if ((i < 5) != (comma != NULL))
			return false;
		f[i] = p;
		n[i] = comma ? (size_t)(comma - p) : strlen(p);
		p = comma ? comma + 1 : p + n[i];
	}
	if (!virt_uuid_put(dump->domain, f[0], n[0]) || !virt_uuid_put(dump->pool, f[1], n[1]) ||
	    !virt_uuid_put(dump->image, f[2], n[2]) || !virt_uuid_put(dump->volume, f[3], n[3]) ||
	    !virt_uuid_put(conf->image, f[4], n[4]) || !virt_uuid_put(conf->volume, f[5], n[5]))
		return false;
	memcpy(conf->domain, dump->domain, sizeof conf->domain);
	memcpy(conf->pool, dump->pool, sizeof conf->pool);
	return true;
}

/* A {poolID?, domainID, imageID, volumeID} object (VDSM's PDIV). */
static bool parse_pdiv(const struct vd_value *o, struct pdiv *out)
{
	if (!o || o->type != VD_OBJECT)
		return false;
	static const char *const keys[] = { "domainID", "imageID", "volumeID", "poolID" };
	char *dst[] = { out->domain, out->image, out->volume, out->pool };
	memset(out, 0, sizeof *out);
	for (int i = 0; i < 4; i++) {
		const struct vd_value *v = vd_obj_get(o, keys[i]);
		if (i == 3 && (!v || v->type == VD_NULL))
			break;   /* the pool is optional */
		if (!virt_uuid_member(o, keys[i], dst[i]))
			return false;
	}
	return true;
}

/* The conf record, written in place and padded to a 4 KiB block. */
int virt_write_hiber_conf(const char *path, const char *id, char *why, size_t whylen)
{
	char rec[CONF_BLOCK];
	memset(rec, 0, sizeof rec);
	snprintf(rec, sizeof rec, CONF_MAGIC "vmId=%s\nsavedAt=%lld\n", id, (long long)time(NULL));
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		snprintf(why, whylen, "open: %s", strerror(errno));
		return VD_EIO;
	}
	size_t off = 0;
	while (off < sizeof rec) {
		ssize_t w = pwrite(fd, rec + off, sizeof rec - off, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(why, whylen, "write: %s", w < 0 ? strerror(errno) : "short");
			close(fd);
			return VD_EIO;
		}
		off += (size_t)w;
	}
	int rc = fsync(fd) == 0 ? 0 : VD_EIO;
	if (rc < 0)
		snprintf(why, whylen, "fsync: %s", strerror(errno));
	close(fd);
	return rc;
}

/* Read the conf record: 1 ours and for id, 0 not ours (VDSM's or empty),
 * -1 ours but for another VM (saved into vm_out). */
static int read_conf(const char *path, const char *id, char *vm_out, size_t vmlen)
{
	char rec[CONF_BLOCK + 1];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	ssize_t n = pread(fd, rec, CONF_BLOCK, 0);
	close(fd);
	if (n <= 0)
		return 0;
	rec[n] = '\0';
	if (strncmp(rec, CONF_MAGIC, strlen(CONF_MAGIC)) != 0)
		return 0;
	const char *v = strstr(rec, "\nvmId=");
	if (!v)
		return 0;
	v += 6;
	size_t l = strcspn(v, "\n");
	snprintf(vm_out, vmlen, "%.*s", (int)(l < 36 ? l : 36), v);
	return l == 36 && strncasecmp(v, id, 36) == 0 ? 1 : -1;
}

/* ---- VM.hibernate ---------------------------------------------------------- */

struct hib_job {
	struct virt_state *s;
	char id[37];
	char path[1024];
	bool was_paused;
};

static void *hibernate_main(void *arg)
{
	struct hib_job *j = arg;
	struct virt_state *s = j->s;
	uint64_t t0 = vd_now_ns();
	virConnectPtr c;
	virDomainPtr d = virt_bg_domain(s, j->id, &c);
	char err[512] = "libvirt is not reachable";
	int rc = -1;
	if (d) {
		rc = virDomainSaveFlags(d, j->path, NULL, 0);
		if (rc < 0)
			snprintf(err, sizeof err, "%s", virt_last_error());
	}
	if (rc == 0) {
		log_info("virt: %s hibernated to %s in %.0f ms", j->id, j->path,
			 (double)(vd_now_ns() - t0) / 1e6);
		pthread_mutex_lock(&s->lock);
		struct virt_track *t = track_find(s, j->id);
		if (t) {
			t->mig_code = 0;
			t->mig_progress = 100;
			snprintf(t->mig_message, sizeof t->mig_message, "SaveState done");
		}
		pthread_mutex_unlock(&s->lock);
	} else {
		/* VDSM: the VM goes on running, reported Up (migrateErr) */
		log_warn("virt: hibernation of %s failed: %s", j->id, err);
		int state = 0, reason = 0;
		if (d && virDomainGetState(d, &state, &reason, 0) == 0 &&
		    state == VIR_DOMAIN_PAUSED && !j->was_paused && virDomainResume(d) < 0)
			log_warn("virt: cannot resume %s: %s", j->id, virt_last_error());
		bool alive = d && virDomainIsActive(d) == 1;
		pthread_mutex_lock(&s->lock);
		struct virt_track *t = track_find(s, j->id);
		enum virt_status st = j->was_paused ? VS_PAUSED : VS_UP;
		if (t) {
			t->saving = false;
			t->mig_code = rpc_err_code(RPC_E_MIGRATION);
			snprintf(t->mig_message, sizeof t->mig_message, "%.*s",
				 (int)sizeof t->mig_message - 1, err);
			if (alive && t->status != VS_DOWN)
				t->status = st;
		}
		pthread_mutex_unlock(&s->lock);
		if (alive)
			virt_publish_status(s, j->id, st, NULL);
	}
	virt_kick(s);
	virt_bg_release(c, d);
	virt_bg_done(s, j);
	return NULL;
}

int virt_verb_hibernate(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	size_t hl = 0;
	const char *handle = rpc_arg_str(c, "hibernationVolHandle", &hl);
	struct pdiv dump, conf;
	memset(&dump, 0, sizeof dump);
	memset(&conf, 0, sizeof conf);
	if (!handle || hl > MAX_HANDLE || !virt_parse_hiber_handle(handle, &dump, &conf))
		return rpc_fail(c, RPC_E_PARAMS, "hibernationVolHandle: \"domainID,poolID,"
				"dumpImageID,dumpVolumeID,confImageID,confVolumeID\" expected");
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	virDomainPtr dom = virt_lookup(c, s, conn, id);
	if (!dom)
		goto out;
	int state = 0, reason = 0;
	if (virDomainGetState(dom, &state, &reason, 0) < 0) {
		virt_fail_libvirt(c, "hibernate", id);
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_find(s, id);
	bool busy = t && (t->migrating || t->saving || t->incoming);
	bool starting = t && (t->launching || t->restoring);
	pthread_mutex_unlock(&s->lock);
	if (state != VIR_DOMAIN_RUNNING && state != VIR_DOMAIN_PAUSED &&
	    state != VIR_DOMAIN_BLOCKED) {
		rpc_fail(c, RPC_E_NO_VM, "%s is not running", id);   /* VDSM: noVM */
		goto out;
	}
	if (starting) {
		rpc_fail(c, RPC_E_NO_VM, "%s is still starting", id);
		goto out;
	}
	if (busy) {
		rpc_fail(c, RPC_E_MIGRATION, "%s is already migrating or saving its state", id);
		goto out;
	}
	struct hib_job *j = xcalloc(1, sizeof *j);
	char conf_path[1024];
	if (virt_prepare_volume(c, s, &dump, "memory dump", RPC_E_MIGRATION, j->path, sizeof j->path) < 0 ||
	    virt_prepare_volume(c, s, &conf, "memory conf", RPC_E_MIGRATION, conf_path, sizeof conf_path) < 0) {
		free(j);
		goto out;
	}
	char why[512];
	if (virt_write_hiber_conf(conf_path, id, why, sizeof why) < 0) {
		free(j);
		rpc_fail(c, RPC_E_MIGRATION, "memory conf volume %s: %s", conf.volume, why);
		goto out;
	}
	j->s = s;
	snprintf(j->id, sizeof j->id, "%s", id);
	j->was_paused = state == VIR_DOMAIN_PAUSED;
	virt_transfer_begin(s, dom, id, VS_SAVING_STATE, "Hibernation process starting");
	if (virt_bg_spawn(s, hibernate_main, j) < 0) {
		free(j);
		pthread_mutex_lock(&s->lock);
		t = track_find(s, id);
		if (t) {
			t->saving = false;
			t->status = state == VIR_DOMAIN_PAUSED ? VS_PAUSED : VS_UP;
		}
		pthread_mutex_unlock(&s->lock);
		virt_publish_status(s, id, state == VIR_DOMAIN_PAUSED ? VS_PAUSED : VS_UP, NULL);
		rpc_fail(c, RPC_E_MIGRATION, "cannot start the hibernation of %s", id);
		goto out;
	}
	log_info("virt: hibernating %s (memory volume %s, conf volume %s)", id, dump.volume,
		 conf.volume);
	virt_refresh(s);
	rc = 0;
out:
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

/* ---- restore: VM.create with the memory volumes ------------------------------ */

bool virt_is_restore(const struct vd_value *vmparams)
{
	return vd_obj_get(vmparams, "hiberVolHandle") || vd_obj_get(vmparams, "memoryDumpVolume");
}

int virt_create_restore(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	const struct vd_value *p = rpc_arg(c, "vmParams");
	struct pdiv dump, conf;
	memset(&dump, 0, sizeof dump);
	memset(&conf, 0, sizeof conf);
	const struct vd_value *hv = vd_obj_get(p, "hiberVolHandle");
	if (hv) {
		const char *h = hv->type == VD_STRING && hv->v.s.len <= MAX_HANDLE &&
				!memchr(hv->v.s.ptr, 0, hv->v.s.len)
				? arena_strndup(c->arena, hv->v.s.ptr, hv->v.s.len) : NULL;
		if (!h || !virt_parse_hiber_handle(h, &dump, &conf))
			return rpc_fail(c, RPC_E_PARAMS, "vmParams.hiberVolHandle: \"domainID,poolID,"
					"dumpImageID,dumpVolumeID,confImageID,confVolumeID\" expected");
	} else if (!parse_pdiv(vd_obj_get(p, "memoryDumpVolume"), &dump) ||
		   !parse_pdiv(vd_obj_get(p, "memoryConfVolume"), &conf)) {
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.memoryDumpVolume and memoryConfVolume: "
				"{domainID, imageID, volumeID, poolID?} each");
	}
	const struct vd_value *vid = vd_obj_get(p, "vmId");
	if (vid && !vd_str_eq(vid, id))
		return rpc_fail(c, RPC_E_PARAMS, "vmParams.vmId differs from vmID");
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	uint64_t t0 = vd_now_ns();
	int rc = -1;
	char *xml = NULL;
	struct vd_buf x = VD_BUF_INIT;
	char dump_path[1024], conf_path[1024];
	if (virt_known_vm(s, conn, id)) {
		rpc_fail(c, RPC_E_VM_EXISTS, "%s", id);
		goto out;
	}
	if (virt_prepare_volume(c, s, &dump, "memory dump", RPC_E_NO_IMAGE_FILE, dump_path,
		    sizeof dump_path) < 0 ||
	    virt_prepare_volume(c, s, &conf, "memory conf", RPC_E_NO_IMAGE_FILE, conf_path,
		    sizeof conf_path) < 0)
		goto out;
	char other[40] = "";
	int cr = read_conf(conf_path, id, other, sizeof other);
	if (cr < 0) {
		rpc_fail(c, RPC_E_CREATE_VM, "the memory volumes hold the state of VM %s, not %s",
			 other, id);
		goto out;
	}
	if (cr == 0)
		log_info("virt: %s: the memory conf volume is not vdsmd's record; the saved "
			 "domain XML alone is used", id);
	xml = virDomainSaveImageGetXMLDesc(conn, dump_path, 0);
	if (!xml) {
		rpc_fail(c, RPC_E_CREATE_VM, "no saved state in memory volume %s: %s", dump.volume,
			 virt_last_error());
		goto out;
	}
	struct virt_engxml *ex = arena_alloc(c->arena, sizeof *ex);
	char why[256];
	if (engxml_parse(xml, ex, why, sizeof why) < 0) {
		rpc_fail(c, RPC_E_CREATE_VM, "saved domain: %s", why);
		goto out;
	}
	if (strcasecmp(ex->uuid, id) != 0) {
		rpc_fail(c, RPC_E_CREATE_VM, "the memory volume holds VM %s, not %s", ex->uuid, id);
		goto out;
	}
	/* the disks are prepared again (their paths may differ on this host) */
	if (virt_resolve_disks(c, s, ex) < 0 || virt_resolve_nics(c, s, ex, RPC_E_CREATE_VM) < 0)
		goto out;
	engxml_rewrite(xml, ex, NULL, &x);
	pthread_mutex_lock(&s->lock);
	struct virt_track *t = track_claim(s, id, ex->name);
	bool dup = !t;
	if (!dup) {
		t->restoring = true;
		t->launching = false;
		t->created = false;
		t->status = VS_RESTORING_STATE;
	}
	pthread_mutex_unlock(&s->lock);
	if (dup) {
		rpc_fail(c, RPC_E_VM_EXISTS, "%s", id);
		goto out;
	}
	/* the saved XML as it is unless a disk's path changed (the test
	 * driver, for one, takes no replacement XML) */
	const char *dxml = strcmp(x.data, xml) != 0 ? x.data : NULL;
	if (virDomainRestoreFlags(conn, dump_path, dxml, 0) < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s", virt_last_error());
		pthread_mutex_lock(&s->lock);
		t = track_find(s, id);
		if (t && t->restoring)
			track_remove(s, id);
		pthread_mutex_unlock(&s->lock);
		rpc_fail(c, RPC_E_CREATE_VM, "restore %s: %s", id, msg);
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	t = track_find(s, id);
	if (t)
		t->created = true;
	pthread_mutex_unlock(&s->lock);
	/* a VM saved paused comes back paused: VDSM resumes it (cont) */
	virDomainPtr dom = virDomainLookupByUUIDString(conn, id);
	int state = 0, reason = 0;
	if (dom && virDomainGetState(dom, &state, &reason, 0) == 0 && state == VIR_DOMAIN_PAUSED &&
	    virDomainResume(dom) < 0)
		log_warn("virt: cannot resume the restored %s: %s", id, virt_last_error());
	if (dom)
		virDomainFree(dom);
	log_info("virt: restored VM %s (%s) from memory volume %s in %.1f ms", id, ex->name,
		 dump.volume, (double)(vd_now_ns() - t0) / 1e6);
	virt_refresh(s);
	virt_write_created(c, id, ex->name, VS_RESTORING_STATE, (int64_t)ex->mem_mib,
			   ex->smp ? ex->smp : 1);
	rc = 0;
out:
	free(xml);
	buf_free(&x);
	virConnectClose(conn);
	return rc;
}
