/* vdsmd/virt/backup.c - live backup of a running VM in pull mode, as VDSM's
 * lib/vdsm/virt/backup.py takes it:
 *
 *   VM.start_backup {vmID, config: {backup_id, disks: [{domainID, imageID,
 *       volumeID, checkpoint, backup_mode?, scratch_disk?: {path, type}}],
 *       from_checkpoint_id?, to_checkpoint_id?, parent_checkpoint_id?,
 *       require_consistency?, creation_time?}}
 *     -> {disks: {imageID: "nbd:unix:<socket>:exportname=<dev>"},
 *         checkpoint?: <domaincheckpoint> XML of to_checkpoint_id}
 *   VM.backup_info {vmID, backup_id, checkpoint_id?}   the same result
 *   VM.stop_backup {vmID, backup_id}                   {code: 0, message: Done}
 *
 * libvirt's virDomainBackupBegin gets a <domainbackup mode='pull'> whose NBD
 * server is the unix socket <run_dir>/backup/<backup_id> (QEMU creates it),
 * one <disk> per drive with its scratch disk (the engine's, else a qcow2 of
 * the drive's capacity vdsmd creates under
 * <storage_root>/transient_disks/<vmID>/<backup_id>.<dev>, owned like the
 * drive's own file so the same QEMU can open it, as VDSM's transient disks;
 * DAC relabelling off as VDSM asks), and with from_checkpoint_id the
 * incremental source (the export then carries the bitmap
 * qemu:dirty-bitmap:backup-<dev>); with to_checkpoint_id a
 * <domaincheckpoint> whose disks with checkpoint true get a bitmap named
 * after it.  REUSE_EXTERNAL always: the scratch files exist.  Freezing: the
 * guest's filesystems are frozen through libvirt's agent call when it can
 * be; a failure fails the backup only with require_consistency (VDSM).
 *
 * Errors are VDSM's: 1600 BackupError (no disks, a disk the VM does not
 * have, incremental without a checkpoint, libvirt refusing: e.g. a backup
 * already running), 1601 NoSuchBackupError (backup_info with none), 1612
 * InconsistentCheckpointError (libvirt's CHECKPOINT_INCONSISTENT), 1 for a
 * VM libvirt does not run. */
#include "virt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"
#include "../vdsmd.h"

extern char **environ;

/* UUID member key of o: 1 set, 0 absent or null, -1 not a UUID. */
static int opt_uuid(const struct vd_value *o, const char *key, char out[37])
{
	const struct vd_value *v = vd_obj_get(o, key);
	out[0] = '\0';
	if (!v || v->type == VD_NULL)
		return 0;
	return virt_uuid_member(o, key, out) ? 1 : -1;
}

static bool opt_bool(const struct vd_value *o, const char *key)
{
	const struct vd_value *v = vd_obj_get(o, key);
	if (!v)
		return false;
	if (v->type == VD_BOOL)
		return v->v.b;
	return v->type == VD_STRING && v->v.s.len == 4 && strncasecmp(v->v.s.ptr, "true", 4) == 0;
}

/* String member key of o into out (cut at outlen-1 refused): true when set. */
static bool opt_str(const struct vd_value *o, const char *key, char *out, size_t outlen)
{
	const struct vd_value *v = vd_obj_get(o, key);
	out[0] = '\0';
	if (!v || v->type != VD_STRING || v->v.s.len >= outlen || memchr(v->v.s.ptr, '\0', v->v.s.len))
		return false;
	memcpy(out, v->v.s.ptr, v->v.s.len);
	out[v->v.s.len] = '\0';
	return true;
}

static int read_disk(struct rpc_call *c, const struct vd_value *dv, size_t i,
		     const struct virt_engxml *ex, const char *id, enum rpc_err code,
		     struct virt_bkdisk *d)
{
	char sd[37], img[37], vol[37];
	if (dv->type != VD_OBJECT || !virt_uuid_member(dv, "domainID", sd) ||
	    !virt_uuid_member(dv, "imageID", img) || !virt_uuid_member(dv, "volumeID", vol))
		return rpc_fail(c, RPC_E_PARAMS, "config.disks[%zu]: {domainID, imageID, volumeID} "
				"(UUIDs) expected", i);
	const struct virt_engdisk *dk = virt_find_vol_drive(ex, sd, img, vol);
	if (!dk)
		return rpc_fail(c, code, "Failed to find one of the backup disks: VM %s has no "
				"drive %s/%s/%s", id, sd, img, vol);
	memset(d, 0, sizeof *d);
	snprintf(d->dev, sizeof d->dev, "%s", dk->dev);
	snprintf(d->image, sizeof d->image, "%s", img);
	d->checkpoint = opt_bool(dv, "checkpoint");
	const struct vd_value *m = vd_obj_get(dv, "backup_mode");
	if (m && m->type != VD_NULL) {
		if (!opt_str(dv, "backup_mode", d->mode, sizeof d->mode) ||
		    (strcmp(d->mode, "full") != 0 && strcmp(d->mode, "incremental") != 0))
			return rpc_fail(c, RPC_E_PARAMS, "config.disks[%zu].backup_mode: full or "
					"incremental", i);
	}
	const struct vd_value *sc = vd_obj_get(dv, "scratch_disk");
	if (sc && sc->type != VD_NULL) {
		if (sc->type != VD_OBJECT || !opt_str(sc, "path", d->scratch, sizeof d->scratch) ||
		    d->scratch[0] != '/' || !opt_str(sc, "type", d->stype, sizeof d->stype) ||
		    (strcmp(d->stype, "file") != 0 && strcmp(d->stype, "block") != 0))
			return rpc_fail(c, RPC_E_PARAMS, "config.disks[%zu].scratch_disk: {path "
					"(absolute), type: file|block} expected", i);
	}
	return 0;
}

int virt_backup_config(struct rpc_call *c, virDomainPtr dom, const char *id,
		       const struct vd_value *cfg, enum rpc_err code, struct virt_bkconfig *out)
{
	memset(out, 0, sizeof *out);
	if (!cfg || cfg->type != VD_OBJECT || !virt_uuid_member(cfg, "backup_id", out->backup_id))
		return rpc_fail(c, RPC_E_PARAMS, "config: {backup_id (UUID), disks, ...} expected");
	if (opt_uuid(cfg, "from_checkpoint_id", out->from_cp) < 0 ||
	    opt_uuid(cfg, "to_checkpoint_id", out->to_cp) < 0)
		return rpc_fail(c, RPC_E_PARAMS, "config: from_checkpoint_id and to_checkpoint_id "
				"are UUIDs or null");
	out->require_consistency = opt_bool(cfg, "require_consistency");
	const struct vd_value *ct = vd_obj_get(cfg, "creation_time");
	if (ct && ct->type == VD_INT && ct->v.i > 0)
		out->creation_time = ct->v.i;
	else if (ct && ct->type == VD_UINT && ct->v.u <= INT64_MAX)
		out->creation_time = (int64_t)ct->v.u;
	else if (ct && ct->type != VD_NULL)
		return rpc_fail(c, RPC_E_PARAMS, "config.creation_time: seconds since the epoch");
	const struct vd_value *disks = vd_obj_get(cfg, "disks");
	if (disks && disks->type != VD_ARRAY)
		return rpc_fail(c, RPC_E_PARAMS, "config.disks: a list expected");
	size_t n = disks ? disks->v.arr.n : 0;
	if (n > VIRT_ENG_MAX_DEV)
		return rpc_fail(c, RPC_E_PARAMS, "config.disks: at most %d", VIRT_ENG_MAX_DEV);
	if (n == 0)
		return 0;
	const struct virt_engxml *ex = virt_live_engxml(c, dom, id, "backup", code);
	if (!ex)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct virt_bkdisk *d = &out->disks[out->ndisks];
		if (read_disk(c, &disks->v.arr.items[i], i, ex, id, code, d) < 0)
			return -1;
		for (unsigned k = 0; k < out->ndisks; k++)
			if (strcmp(out->disks[k].dev, d->dev) == 0)
				return rpc_fail(c, RPC_E_PARAMS, "config.disks: drive %s named twice",
						d->dev);
		if (!out->from_cp[0] && strcmp(d->mode, "incremental") == 0)
			return rpc_fail(c, code, "Cannot start an incremental backup for disk %s, full "
					"backup is requested", d->dev);
		out->ndisks++;
	}
	return 0;
}

void virt_checkpoint_xml(struct vd_buf *b, const struct virt_bkconfig *cfg)
{
	buf_printf(b, "<domaincheckpoint><name>%s</name><description>checkpoint for backup "
		   "'%s'</description>", cfg->to_cp, cfg->backup_id);
	if (cfg->creation_time > 0)
		buf_printf(b, "<creationTime>%lld</creationTime>", (long long)cfg->creation_time);
	if (cfg->ndisks) {
		buf_puts(b, "<disks>");
		for (unsigned i = 0; i < cfg->ndisks; i++) {
			if (!cfg->disks[i].checkpoint)
				continue;
			buf_puts(b, "<disk name='");
			virt_xml_escape(b, cfg->disks[i].dev);
			buf_printf(b, "' checkpoint='bitmap' bitmap='%s'/>", cfg->to_cp);
		}
		buf_puts(b, "</disks>");
	}
	buf_puts(b, "</domaincheckpoint>");
	buf_putc(b, '\0');
}

/* ---- the files ------------------------------------------------------- */

static const struct vd_config *cfg_of(const struct virt_state *s)
{
	return &s->d->cfg;
}

/* <run_dir>/backup/<backup_id> into out (created backup/ when missing, mode
 * 0770: the QEMU user's group must be able to create the socket, as VDSM's
 * /run/vdsm/backup); false when it cannot be a unix socket path. */
static bool socket_path(const struct virt_state *s, const char *backup_id, char *out,
			size_t outlen)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/backup", cfg_of(s)->run_dir);
	(void)mkdir(cfg_of(s)->run_dir, 0755);
	if (mkdir(dir, 0770) < 0 && errno != EEXIST)
		log_warn("virt: backup socket directory %s: %s", dir, strerror(errno));
	int n = snprintf(out, outlen, "%s/%s", dir, backup_id);
	return n > 0 && (size_t)n < outlen && (size_t)n < sizeof(((struct sockaddr_un *)0)->sun_path);
}

static void transient_dir(const struct virt_state *s, const char *vm, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s/transient_disks/%s", cfg_of(s)->storage_root, vm);
}

/* Run argv (stdout/stderr to /dev/null): 0, or -1. */
static int run_quiet(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void remove_scratch_disks(const struct virt_state *s, const char *vm, const char *backup_id)
{
	char dir[1024], pat[1100];
	transient_dir(s, vm, dir, sizeof dir);
	snprintf(pat, sizeof pat, "%s/%s.*", dir, backup_id);
	glob_t g;
	if (glob(pat, GLOB_NOSORT, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			if (unlink(g.gl_pathv[i]) == 0)
				log_info("virt: %s: removed scratch disk %s", vm, g.gl_pathv[i]);
		globfree(&g);
	}
	(void)rmdir(dir);
}

/* A qcow2 scratch disk of the drive's capacity for each disk the engine gave
 * none: 0, or -1 with the call failed (those made are removed). */
static int create_scratch_disks(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
				const char *vm, struct virt_bkconfig *cfg)
{
	char dir[1024];
	transient_dir(s, vm, dir, sizeof dir);
	for (unsigned i = 0; i < cfg->ndisks; i++) {
		struct virt_bkdisk *d = &cfg->disks[i];
		if (d->scratch[0])
			continue;
		virDomainBlockInfo bi;
		char src[1024] = "";
		struct stat st;
		if (virDomainGetBlockInfo(dom, d->dev, &bi, 0) < 0) {
			rpc_fail(c, RPC_E_BACKUP, "Failed to get drive %s capacity: %s", d->dev,
				 virt_last_error());
			goto fail;
		}
		char top[1024];
		snprintf(top, sizeof top, "%s/transient_disks", cfg_of(s)->storage_root);
		(void)mkdir(top, 0755);
		(void)mkdir(dir, 0755);
		/* built apart from cfg: GCC -O1 -Wrestrict sees d->scratch, backup_id
		 * and d->dev in the one object and would refuse the snprintf */
		char path[sizeof d->scratch];
		int plen = snprintf(path, sizeof path, "%.900s/%s.%s", dir, cfg->backup_id, d->dev);
		if (plen < 0 || plen >= (int)sizeof path) {
			rpc_fail(c, RPC_E_BACKUP, "storage_root is too long for a scratch disk");
			goto fail;
		}
		memcpy(d->scratch, path, (size_t)plen + 1);
		snprintf(d->stype, sizeof d->stype, "file");
		char size[32];
		snprintf(size, sizeof size, "%llu", (unsigned long long)bi.capacity);
		char a0[] = "qemu-img", a1[] = "create", a2[] = "-q", a3[] = "-f", a4[] = "qcow2";
		char *argv[] = { a0, a1, a2, a3, a4, d->scratch, size, NULL };
		if (run_quiet(argv) < 0) {
			rpc_fail(c, RPC_E_BACKUP, "Failed to create transient disk %s", d->scratch);
			d->scratch[0] = '\0';
			goto fail;
		}
		/* the QEMU that opens the drive's file opens this one */
		const struct virt_engxml *ex = virt_live_engxml(c, dom, vm, "backup", RPC_E_BACKUP);
		for (unsigned k = 0; ex && k < ex->ndisks; k++)
			if (strcmp(ex->disks[k].dev, d->dev) == 0)
				snprintf(src, sizeof src, "%s", ex->disks[k].path);
		if (src[0] && stat(src, &st) == 0) {
			if (chown(d->scratch, st.st_uid, st.st_gid) < 0)
				log_warn("virt: scratch disk %s: chown: %s", d->scratch, strerror(errno));
			(void)chmod(d->scratch, st.st_mode & 0666);
		}
		log_info("virt: %s: scratch disk %s for %s (%llu bytes)", vm, d->scratch, d->dev,
			 (unsigned long long)bi.capacity);
	}
	return 0;
fail:
	remove_scratch_disks(s, vm, cfg->backup_id);
	return -1;
}

/* ---- libvirt --------------------------------------------------------- */

static void backup_xml(struct vd_buf *b, const struct virt_bkconfig *cfg, const char *sock)
{
	buf_puts(b, "<domainbackup mode='pull'>");
	if (cfg->from_cp[0])
		buf_printf(b, "<incremental>%s</incremental>", cfg->from_cp);
	buf_puts(b, "<server transport='unix' socket='");
	virt_xml_escape(b, sock);
	buf_puts(b, "'/><disks>");
	for (unsigned i = 0; i < cfg->ndisks; i++) {
		const struct virt_bkdisk *d = &cfg->disks[i];
		buf_puts(b, "<disk name='");
		virt_xml_escape(b, d->dev);
		buf_printf(b, "' type='%s'", d->stype);
		if (d->mode[0]) {
			buf_printf(b, " backupmode='%s'", d->mode);
			if (strcmp(d->mode, "incremental") == 0)
				buf_printf(b, " incremental='%s'", cfg->from_cp);
		}
		buf_printf(b, "><scratch %s='", strcmp(d->stype, "block") == 0 ? "dev" : "file");
		virt_xml_escape(b, d->scratch);
		buf_puts(b, "'><seclabel model='dac' relabel='no'/></scratch></disk>");
	}
	buf_puts(b, "</disks></domainbackup>");
	buf_putc(b, '\0');
}

/* The running backup's XML (caller frees); NULL with the call failed: 1601
 * when the VM has none. */
static char *get_backup_xml(struct rpc_call *c, virDomainPtr dom, const char *id,
			    const char *backup_id)
{
	char *x = virDomainBackupGetXMLDesc(dom, 0);
	if (x)
		return x;
	if (virt_last_error_code() == VIR_ERR_NO_DOMAIN_BACKUP)
		rpc_fail(c, RPC_E_NO_BACKUP, "VM backup not exists: VM %s backup %s: %s", id,
			 backup_id, virt_last_error());
	else if (virt_last_error_code() == VIR_ERR_NO_DOMAIN)
		rpc_fail(c, RPC_E_NO_VM, "%s", id);
	else
		rpc_fail(c, RPC_E_BACKUP, "Failed to fetch VM backup info: %s", virt_last_error());
	return NULL;
}

/* The result: each backed-up disk's image -> its NBD URL, and the
 * checkpoint's XML when checkpoint_id is given and libvirt has it. */
static int write_info(struct rpc_call *c, virDomainPtr dom, const char *id, const char *xml,
		      const char *checkpoint_id)
{
	const char *srv = dx_find_child(xml, xml + strlen(xml), "server");
	char sock[256];
	if (!srv || !dx_tag_attr(srv, "socket", sock, sizeof sock))
		return rpc_fail(c, RPC_E_BACKUP, "Failed to parse invalid libvirt backup XML of VM %s",
				id);
	const struct virt_engxml *ex = virt_live_engxml(c, dom, id, "backup", RPC_E_BACKUP);
	if (!ex)
		return -1;
	vw_begin_object(c->w);
	vw_keyz(c->w, "disks");
	vw_begin_object(c->w);
	const char *end = xml + strlen(xml);
	for (const char *p = dx_find_child(xml, end, "disk"); p; p = dx_find_child(p + 1, end, "disk")) {
		char name[32], backup[8] = "", exp[64];
		if (!dx_tag_attr(p, "name", name, sizeof name))
			continue;
		dx_tag_attr(p, "backup", backup, sizeof backup);
		if (strcmp(backup, "yes") != 0)
			continue;
		if (!dx_tag_attr(p, "exportname", exp, sizeof exp))
			snprintf(exp, sizeof exp, "%s", name);
		for (unsigned k = 0; k < ex->ndisks; k++) {
			if (strcmp(ex->disks[k].dev, name) != 0 || !ex->disks[k].has_volume)
				continue;
			vw_kstrf(c->w, ex->disks[k].image, "nbd:unix:%s:exportname=%s", sock, exp);
			break;
		}
	}
	vw_end_object(c->w);
	if (checkpoint_id && *checkpoint_id) {
		virDomainCheckpointPtr cp = virDomainCheckpointLookupByName(dom, checkpoint_id, 0);
		char *cx = cp ? virDomainCheckpointGetXMLDesc(cp, 0) : NULL;
		if (cx)
			vw_kstr(c->w, "checkpoint", cx);
		else
			log_warn("virt: %s: checkpoint %s of the backup: %s", id, checkpoint_id,
				 virt_last_error());
		free(cx);
		if (cp)
			virDomainCheckpointFree(cp);
	}
	vw_end_object(c->w);
	return 0;
}

static int act_start(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	if (virDomainIsActive(dom) != 1)
		return rpc_fail(c, RPC_E_NO_VM, "VM %s is not running", id);
	struct virt_bkconfig *cfg = xcalloc(1, sizeof *cfg);
	struct vd_buf bx = VD_BUF_INIT, cx = VD_BUF_INIT;
	char sock[256];
	int rc = -1;
	if (virt_backup_config(c, dom, id, rpc_arg(c, "config"), RPC_E_BACKUP, cfg) < 0)
		goto out;
	if (cfg->ndisks == 0) {
		rpc_fail(c, RPC_E_BACKUP, "Cannot start a backup without disks (backup %s)",
			 cfg->backup_id);
		goto out;
	}
	/* libvirt would wait ~30 s for the running backup's job before it
	 * refuses; the answer is the same, now */
	char *running = virDomainBackupGetXMLDesc(dom, 0);
	if (running) {
		free(running);
		rpc_fail(c, RPC_E_BACKUP, "Error starting backup %s: VM %s has a backup running",
			 cfg->backup_id, id);
		goto out;
	}
	if (!socket_path(s, cfg->backup_id, sock, sizeof sock)) {
		rpc_fail(c, RPC_E_BACKUP, "run_dir is too long for a unix socket");
		goto out;
	}
	if (create_scratch_disks(c, s, dom, id, cfg) < 0)
		goto out;
	bool frozen = virDomainFSFreeze(dom, NULL, 0, 0) >= 0;
	if (!frozen && cfg->require_consistency) {
		rpc_fail(c, RPC_E_BACKUP, "Failed freeze VM: %s", virt_last_error());
		remove_scratch_disks(s, id, cfg->backup_id);
		goto out;
	}
	if (!frozen)
		log_info("virt: %s: backup %s without freezing the guest: %s", id, cfg->backup_id,
			 virt_last_error());
	backup_xml(&bx, cfg, sock);
	if (cfg->to_cp[0])
		virt_checkpoint_xml(&cx, cfg);
	log_info("virt: %s: starting backup %s (%u disk(s)%s%s%s%s)", id, cfg->backup_id,
		 cfg->ndisks, cfg->from_cp[0] ? ", from checkpoint " : "", cfg->from_cp,
		 cfg->to_cp[0] ? ", new checkpoint " : "", cfg->to_cp);
	int br = virDomainBackupBegin(dom, bx.data, cfg->to_cp[0] ? cx.data : NULL,
				      VIR_DOMAIN_BACKUP_BEGIN_REUSE_EXTERNAL);
	int code = br < 0 ? virt_last_error_code() : 0;
	char err[512];
	snprintf(err, sizeof err, "%s", br < 0 ? virt_last_error() : "");
	if (frozen && virDomainFSThaw(dom, NULL, 0, 0) < 0)
		log_warn("virt: %s: thaw after the backup began: %s", id, virt_last_error());
	if (br < 0) {
		remove_scratch_disks(s, id, cfg->backup_id);
		if (code == VIR_ERR_CHECKPOINT_INCONSISTENT)
			rpc_fail(c, RPC_E_CHECKPOINT_BAD, "Checkpoint can't be used: %s", err);
		else
			rpc_fail(c, RPC_E_BACKUP, "Error starting backup: %s", err);
		goto out;
	}
	char *xml = get_backup_xml(c, dom, id, cfg->backup_id);
	if (xml) {
		rc = write_info(c, dom, id, xml, cfg->to_cp);
		free(xml);
	}
out:
	buf_free(&bx);
	buf_free(&cx);
	free(cfg);
	return rc;
}

int virt_verb_start_backup(struct rpc_call *c)
{
	return virt_on_domain(c, act_start);
}

static int act_info(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	(void)s;
	const char *backup_id = rpc_arg_str(c, "backup_id", NULL);
	char *xml = get_backup_xml(c, dom, id, backup_id);
	if (!xml)
		return -1;
	int rc = write_info(c, dom, id, xml, rpc_arg_str(c, "checkpoint_id", NULL));
	free(xml);
	return rc;
}

int virt_verb_backup_info(struct rpc_call *c)
{
	return virt_on_domain(c, act_info);
}

static int act_stop(struct rpc_call *c, struct virt_state *s, virDomainPtr dom, const char *id)
{
	const char *backup_id = rpc_arg_str(c, "backup_id", NULL);
	char *xml = virDomainBackupGetXMLDesc(dom, 0);
	if (xml) {
		free(xml);
		if (virDomainAbortJob(dom) < 0 && virt_last_error_code() != VIR_ERR_OPERATION_INVALID)
			return rpc_fail(c, RPC_E_BACKUP, "Failed to end VM backup: %s",
					virt_last_error());
		/* libvirt ends the job once QEMU's block jobs are cancelled: wait
		 * (bounded) so that the scratch disks are free when removed */
		bool gone = false;
		for (int i = 0; i < 200 && !gone; i++) {
			char *x = virDomainBackupGetXMLDesc(dom, 0);
			gone = !x;
			free(x);
			if (!gone)
				usleep(50 * 1000);
		}
		if (!gone)
			log_warn("virt: %s: backup %s still ending after 10 s", id, backup_id);
		log_info("virt: %s: backup %s stopped", id, backup_id);
	} else {
		log_info("virt: %s: no backup to stop (backup %s): %s", id, backup_id,
			 virt_last_error());
	}
	remove_scratch_disks(s, id, backup_id);
	rpc_write_done(c);  /* VDSM's Bridge: 'ret': 'status' */
	return 0;
}

int virt_verb_stop_backup(struct rpc_call *c)
{
	return virt_on_domain(c, act_stop);
}
