/* vdsmd/storage/st_ops.h - the operations of the storage backend, what the
 * verbs call: each long one a file that registers its task descriptor
 * (st_op_create.c, st_op_delete.c, st_op_extend.c, st_op_spmstart.c,
 * st_op_merge.c, st_imgcopy.c; the table: st_optable.c), and the domain, pool, SPM,
 * connection, image and host-job operations.  Built on st_state.h. */
#ifndef VD_VDSMD_STORAGE_ST_OPS_H
#define VD_VDSMD_STORAGE_ST_OPS_H

#include "st_state.h"

/* The operations' kinds (the KIND of a task record; never renumbered).  The
 * task engine knows none of them: each operation registers its descriptor
 * (struct st_task_op) under its kind, st_ops_register. */
enum st_task_kind { ST_TK_CREATE, ST_TK_DELETE, ST_TK_IMAGE_DELETE, ST_TK_SPM_START,
		    ST_TK_EXTEND, ST_TK_IMAGE_COPY, ST_TK_PREPARE_MERGE, ST_TK_FINALIZE_MERGE };
/* st_optable.c: register every operation (st_open, before the records are
 * read). */
void st_ops_register(struct storage_state *s);

/* ---- task operations (st_op_*.c, st_imgcopy.c; st_ops.c what they share) - */

/* Their descriptors (st_optable.c registers them). */
extern const struct st_task_op st_op_create, st_op_delete, st_op_image_delete,
	st_op_spm_start, st_op_extend, st_op_image_copy, st_op_prepare_merge,
	st_op_finalize_merge;
/* recover: the task's domain (t->sd), or NULL with t failed "storage domain
 * ... is not available" (code 100). */
struct st_domain *st_op_recover_domain(struct storage_state *s, struct st_task *t);
/* recover: done (success, "1 jobs completed successfully") or not
 * (cleanSuccess, 411 "aborted by restart"). */
void st_op_recovered(struct st_task *t, bool done);
/* The end of a job on an image: images/<img> goes when empty, d->busy--. */
void st_op_job_release(struct storage_state *s, struct st_domain *d, const char *img,
		       bool empty);

struct st_volreq {
	const char *sd, *img, *vol;
	int64_t size;
	int format, alloc;
	const char *disktype;   /* NULL = "DATA" */
	const char *desc;
	const char *src_img, *src_vol;  /* NULL or blank = no parent */
	bool illegal;           /* legal=false: stays ILLEGAL once created */
	bool initial_given;     /* initialSize sent */
	int64_t initial_size;
	int sequence;
};
struct st_delopts {
	bool postzero, discard, force;
};
int st_volume_create(struct storage_state *s, const struct st_volreq *r, char task_id[37],
		     struct st_err *e);
int st_volume_delete(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     const struct st_delopts *o, char task_id[37], struct st_err *e);
int st_image_delete(struct storage_state *s, const char *sd, const char *img,
		    const struct st_delopts *o, char task_id[37], struct st_err *e);
/* Image.deleteVolumes: several volumes of one image as one task (children
 * first; a volume whose children are not all listed is refused). */
int st_volumes_delete(struct storage_state *s, const char *sd, const char *img,
		      const char *const *ids, size_t n, const struct st_delopts *o,
		      char task_id[37], struct st_err *e);
int st_volume_set_description(struct storage_state *s, const char *sd, const char *img,
			      const char *vol, const char *desc, struct st_err *e);
/* Copy one volume's index entry (description duplicated into out, caller
 * frees it with free()). */
int st_volume_info(struct storage_state *s, const char *sd, const char *img, const char *vol,
		   struct st_volume *out, struct st_err *e);

/* ---- cold merge (st_op_merge.c: the SPM tasks; st_jobs_merge.c: the job) -- */

/* VDSM's SubchainInfo: top and its parent base in image img of domain sd;
 * base_gen < 0 when not given. */
struct st_subchain {
	char sd[37], img[37], top[37], base[37];
	int64_t base_gen;
};
/* Caller holds s->lock: VDSM's SubchainInfo.validate on the image's chain
 * (leaf down to its base, plus a template it is cloned from): base and top
 * in it (920), top's parent is base (921), neither a template's shared
 * volume (219); unknown domain 358, image 268.  *child is the volume
 * backed by top (NULL: top is the leaf). */
int st_subchain_check(struct storage_state *s, const struct st_subchain *sc,
		      struct st_domain **dp, struct st_volume **top, struct st_volume **base,
		      struct st_volume **child, struct st_err *e);
/* StoragePool.prepareMerge / finalizeMerge: queue the SPM task (sp blank:
 * any pool, else the domain must be attached to sp). */
int st_merge_prepare(struct storage_state *s, const char *sp, const struct st_subchain *sc,
		     char task_id[37], struct st_err *e);
int st_merge_finalize(struct storage_state *s, const char *sp, const struct st_subchain *sc,
		      char task_id[37], struct st_err *e);
/* SDM.merge: start the host job (qemu-img commit of top into base). */
int st_merge_job(struct storage_state *s, const char *job_id, const struct st_subchain *sc,
		 bool merge_bitmaps, struct st_err *e);

/* ---- storage server connections (st_conn.c) ------------------------------ */

/* One entry of connectStorageServer's connectionParams. */
struct st_conn_req {
	const char *id;           /* connection UUID */
	const char *connection;   /* LOCALFS: a directory; NFS: server:/export;
				   * POSIXFS: the mount(8) spec */
	const char *vfs_type;     /* POSIXFS: -t */
	const char *mnt_options;  /* extra -o options */
	const char *protocol_version;  /* NFS: "auto", "3", "4", "4.1", "4.2" */
	int timeo, retrans;       /* NFS, 0 = VDSM's defaults (100, 3) */
};
/* VDSM's fileUtils.normalize_path of a connection: "host:/a//b/" is
 * "host:/a/b", "[v6]:/x" keeps its brackets, "host:port:/p" keeps the port,
 * a local path is normpath'ed.  NULL when a host:tail has an empty part. */
char *st_conn_normalize(const char *spec);
/* <root>/mnt/<normalized spec, '_' doubled, '/' as '_'> (VDSM's
 * transformPath under its mount root), fresh string. */
char *st_conn_mountpoint_at(const char *root, const char *spec);
/* Whether a normalized spec has no "." or ".." component (in its path or
 * its host:tail's tail): only then is its mount point strictly under
 * <root>/mnt/.  connect and disconnect refuse others (451). */
bool st_conn_spec_canonical(const char *norm);
/* Whether path (resolved: symlinks, "..") is a directory of the system
 * (/, /etc, /usr, /proc, ...) that is never storage: storage_root, a
 * LOCALFS connection or domain.  Returns the system directory it is or is
 * under, or NULL. */
const char *st_system_dir(const char *path);
char *st_conn_mountpoint(const struct storage_state *s, const char *spec);
/* The mount(8) command for an NFS or POSIXFS connection, as VDSM runs it:
 *   mount -t nfs -o soft,nosharecache,timeo=T,retrans=R[,nfsvers=N
 *         [,minorversion=M]][,<mnt_options>][,nolock] <spec> <mount point>
 * (T/R default 100/3; protocol_version absent is "3", "auto" adds no
 * nfsvers; nolock for v3/auto unless mnt_options says lock or nolock);
 *   mount -t <vfs_type> [-o <mnt_options>] <spec> <mount point>.
 * A pure function (nothing is run or created); 0 or a status as
 * st_conn_connect's.  argv points into m (st_mount_cmd_free). */
struct st_mount_cmd {
	char *argv[10];
	char *spec, *mountpoint, *opts;
};
int st_conn_mount_cmd(const char *root, int domtype, const struct st_conn_req *r,
		      struct st_mount_cmd *m, char *msg, size_t msglen);
void st_mount_cmd_free(struct st_mount_cmd *m);
/* The per-connection status VDSM reports: 0 connected (already mounted is
 * success), 477 mount failed, 469 LOCALFS directory unusable, 451 bad
 * connection, 470 unknown type; msg says why. */
int st_conn_connect(struct storage_state *s, int domtype, const struct st_conn_req *r,
		    char *msg, size_t msglen);
/* Unmounts (NFS/POSIXFS: umount -f -l, as VDSM) and removes the mount
 * point: 0 or 452. */
int st_conn_disconnect(struct storage_state *s, int domtype, const struct st_conn_req *r,
		       char *msg, size_t msglen);
/* Remember a connected LOCALFS directory (searched by st_conn_find_domain). */
void st_conn_note_localfs(struct storage_state *s, const char *dir);
/* Look for domain sd on connected storage (LOCALFS directories, mounts
 * under <storage_root>/mnt); a loaded, unregistered domain or NULL. */
struct st_domain *st_conn_find_domain(struct storage_state *s, const char *sd);
/* Load every domain found on connected storage (LOCALFS directories,
 * mounts under <storage_root>/mnt) that this host does not know yet, as
 * VDSM's sdCache finds them (Host.getStorageDomains; blocking I/O). */
void st_conn_discover(struct storage_state *s);
/* Whether dir is a mount point (from /proc/self/mountinfo). */
bool st_is_mounted(const char *dir);

/* ---- the connected pool's domain map (st_pool_doms.c; the map itself:
 * st_model.h) */
/* Caller holds the lock: sd's status in the connected pool (ST_DS_NONE
 * when not a member or no pool is connected). */
int st_pool_dom_status(struct storage_state *s, const char *sd);
/* Caller holds the lock: the connected pool's encoded map ("" none). */
const char *st_pool_dommap(struct storage_state *s);
/* Set sd's status in the master's metadata, then in memory; caller holds
 * neither lock.  0 or a primitive's rc (VD_ENOENT: no master here). */
int st_pool_set_dom_status(struct storage_state *s, const char *sd, int status);
/* Re-read the master's POOL_DOMAINS and MASTER_VERSION (another host may
 * have changed them); caller holds neither lock. */
void st_pool_reload(struct storage_state *s);
/* A domain another host made, found on connected storage (LOCALFS
 * directories, mounts): scanned and registered here; 0 when already known,
 * -1 with e (RPC_E_NO_DOMAIN when not found).  Caller holds neither lock. */
int st_domain_adopt(struct storage_state *s, const char *sd, struct st_err *e);
/* Adopt every member of the connected pool's map not loaded here yet (so a
 * host that is not SPM serves the domains the SPM attached). */
void st_pool_adopt_members(struct storage_state *s);
/* StorageDomain.activate / deactivate (st_pool_doms.c). */
int st_domain_activate(struct storage_state *s, const char *sd, const char *sp, bool activate,
		       const char *new_master, struct st_err *e);

/* ---- SPM (st_spm.c) -------------------------------------------------------- */

/* Lease timing of the connected pool from its master domain (st_open). */
void st_pool_lease_from_master(struct storage_state *s);
/* Contend for the pool's SPM lease (may wait up to the lease time); 0,
 * VD_EBUSY held by a live host, VD_ECANCELED task stopped, VD_ENOENT no pool or
 * master domain, a primitive's rc. */
int st_spm_acquire(struct storage_state *s, const struct st_io *io, char *err, size_t errlen);
/* StoragePool.reconstructMaster: hold the lease in dirs[0] (a domain
 * directory) for host me, by the spmStart protocol, while no live host
 * holds dirs[1..n-1] (n <= 4) either; 0 (*lver the version taken), VD_EBUSY
 * (err names the holder), a primitive's rc.  Blocks up to ltime + renew ms. */
int st_lease_hold(struct storage_state *s, const char *const *dirs, size_t n, int me,
		  unsigned renew, unsigned ltime, int64_t *lver, char *err, size_t errlen);
/* Free it again if it is still ours (holder me, version lver). */
int st_lease_drop(const char *dir, int me, int64_t lver);
/* Give the role up and free the lease (clean stop). */
int st_spm_release(struct storage_state *s);
/* Non-SPM hosts: refresh the holder / version seen in the lease (monitor). */
void st_spm_observe(struct storage_state *s);
/* StoragePool.getSpmStatus on a host that does not hold the role: read the
 * master domain's lease now, as VDSM inspects its cluster lock.  *holder is
 * the hostID holding it (-1: free, or a holder that has not renewed for the
 * lease time, as sanlock reports a dead host's lease), *lver its version
 * (-1: never taken);
 * a host that is not contending keeps them as the last seen.  0, VD_ENOENT
 * without a pool or master domain, or the read's failure (a primitive's rc;
 * VD_EPROTO a torn lease record, VD_EIO an unreadable one).  Caller
 * holds no lock. */
int st_spm_inspect(struct storage_state *s, int *holder, int64_t *lver);
/* Caller holds the lock: this host holds the SPM lease and its last
 * renewal began less than lease time - renewal interval / 2 ago (a renewer
 * stuck in storage I/O stops counting as SPM before a contender may take
 * over). */
bool st_spm_valid(const struct storage_state *s);
/* Caller holds the lock: a domain attached to a pool is changed only by
 * its SPM (RPC_E_NOT_SPM otherwise), and only while it is a member of the
 * connected pool, Active or Attached (RPC_E_NOT_MEMBER otherwise). */
int st_spm_require(struct storage_state *s, const struct st_domain *d, struct st_err *e);
/* StoragePool.spmStart: queue the task (st_op_spmstart.c). */
int st_spm_start(struct storage_state *s, const char *sp, char task_id[37], struct st_err *e);
int st_spm_stop(struct storage_state *s, const char *sp, struct st_err *e);

/* ---- host jobs: SDM.copy_data (st_jobs.c) ------------------------------- */

enum st_job_status { ST_JOB_PENDING, ST_JOB_RUNNING, ST_JOB_DONE, ST_JOB_FAILED, ST_JOB_ABORTED };
#define ST_MAX_JOBS 16

struct st_job_info {
	char id[37];
	enum st_job_status status;
	int progress;              /* 0..100 */
	int err_code;              /* failed/aborted */
	char err_msg[256];
	char desc[160];
};

enum st_job_kind { ST_JOB_COPY, ST_JOB_ADD_BITMAP, ST_JOB_REMOVE_BITMAP, ST_JOB_CLEAR_BITMAPS,
		   ST_JOB_MERGE, ST_JOB_AMEND, ST_JOB_UPDATE, ST_JOB_SPARSIFY };
#define ST_MAX_GENERATION 999   /* VDSM's sc.MAX_GENERATION: GEN is 3 ASCII digits */

/* SDM.update_volume's vol_attr (VDSM's validators.VolumeAttributes): what
 * is not given is left as it is. */
struct st_vol_attr {
	int legality;              /* -1 not given, 0 ILLEGAL, 1 LEGAL */
	int64_t generation;        /* -1: not given (the job bumps it) */
	bool shared;               /* type SHARED */
	bool has_desc;
	char desc[ST_DESC_MAX + 1];
};
#define ST_BITMAP_NAME_MAX 1023   /* qemu's limit on a persistent bitmap's name */

struct st_job {
	struct st_job_info info;   /* under s->lock */
	enum st_job_kind kind;
	char src[3][37], dst[3][37];   /* sd, img, vol (bitmap jobs: src only) */
	int64_t gen;               /* bitmap jobs: vol_info.generation, -1 if not given */
	char bitmap[ST_BITMAP_NAME_MAX + 1];
	bool merge_bitmaps;        /* SDM.merge */
	char compat[8];            /* amend: qcow2 compat "0.10" / "1.1" */
	struct st_vol_attr attr;   /* update_volume */
	/* stopping it (under s->lock but abort, an atomic flag) */
	bool abort;
	char abort_why[64];
	pid_t child;               /* qemu-img running for it */
	struct storage_state *s;
	pthread_t thread;
	bool joined;
};

const char *st_job_status_name(enum st_job_status st);
/* Validate and start a copy of volume src into the existing volume dst
 * (qemu-img convert -n, on a thread); the job is visible at once. */
int st_copy_data(struct storage_state *s, const char *job_id, const char *const src[3],
		 const char *const dst[3], struct st_err *e);
/* Shared by the job files: publish j's state (|jobs|status|<id>); the
 * st_io callbacks of a job's qemu-img (abort, child pid); under s->lock,
 * whether job_id may start (unused id, fewer than ST_MAX_JOBS running). */
void st_job_publish(struct storage_state *s, struct st_job *j);
bool st_job_stopped(void *ctx, char *why, size_t len);
void st_job_child(void *ctx, pid_t pid);
/* st_run_tool_cb output callback of a job's qemu-img -p: its progress. */
void st_job_output(void *ctx, const char *data, size_t n);
int st_job_admit(struct storage_state *s, const char *job_id, struct st_err *e);
/* A job record for job_id (PENDING, kind, s; the caller fills the rest). */
struct st_job *st_job_new(struct storage_state *s, const char *job_id, enum st_job_kind kind);
/* Under s->lock: enter j in s->jobs and start run(j) on its thread; -1
 * (j left out of the map, still the caller's to free) when no thread starts. */
int st_job_launch(struct storage_state *s, struct st_job *j, void *(*run)(void *));
/* Under s->lock: j's end state: DONE (rc 0), else ABORTED (code 411) or
 * FAILED with code and msg. */
void st_job_end(struct st_job *j, int rc, bool aborted, enum rpc_err code, const char *msg);
/* A job on one volume (amend, update): job_id checked, the record made
 * with desc, ids and gen (NULL, e filled, when job_id is no UUID). */
struct st_job *st_job_prep(struct storage_state *s, const char *job_id, enum st_job_kind kind,
			   const char *desc, const char *const ids[3], int64_t gen,
			   struct st_err *e);
/* Admit and launch j on run (j freed when it cannot start), publish it. */
int st_job_start(struct storage_state *s, struct st_job *j, void *(*run)(void *),
		 struct st_err *e);
/* The job's volume src[] made busy (a copy of its record in *copy; its
 * description pointer stays the volume's), or NULL with e filled (unknown,
 * busy); st_job_vol_release ends it. */
struct st_volume *st_job_vol_busy(struct storage_state *s, struct st_job *j,
				  struct st_domain **d, struct st_volume *copy, struct st_err *e);
void st_job_vol_release(struct storage_state *s, struct st_job *j, struct st_domain *d);
/* A job thread's body: RUNNING, work(), its end state, log, publish. */
/* The job's volume data file (src = sd, img, vol) opened read-write,
 * O_NOFOLLOW beneath its image directory, a regular file: the fd, or -1
 * with e set (RPC_E_GENERAL). */
int st_job_open_data(struct st_domain *d, const struct st_job *j, struct st_err *e);
/* The same for volume vol of image img (an interrupted amend's repair). */
int st_vol_open_data(const struct st_domain *d, const char *img, const char *vol,
		     struct st_err *e);
void *st_job_thread(struct st_job *j, int (*work)(struct storage_state *, struct st_job *,
						    struct st_err *));
/* SDM.add_bitmap / remove_bitmap / clear_bitmaps (st_jobs_bitmap.c): a
 * job on volume ids {sd, img, vol}; gen < 0 when not given; bitmap NULL
 * for clear.  Errors of the volume are the job's, as VDSM's. */
int st_bitmap_job(struct storage_state *s, enum st_job_kind kind, const char *job_id,
		  const char *const ids[3], int64_t gen, const char *bitmap, struct st_err *e);
/* SDM.amend_volume (st_jobs_amend.c): qemu-img amend -o compat= of a
 * qcow2 volume as a host job; compat must be "0.10" or "1.1" (else 100 at
 * once, as VDSM's ValueError). */
int st_amend_job(struct storage_state *s, const char *job_id, const char *const ids[3],
		 int64_t gen, const char *compat, struct st_err *e);
/* At startup (st_open): each volume whose qemu-img amend was interrupted
 * (its <storage_root>/amend-<vol>.intent left) is checked and repaired
 * (qemu-img check -r all), then its intent goes; when the repair fails the
 * volume is marked ILLEGAL and the intent stays (see st_jobs_amend.c). */
void st_amend_recover(struct storage_state *s);
/* The engine sets vol's legality (Volume.setLegality, SDM.update_volume):
 * a later successful amend repair must not make it LEGAL again, so the
 * intent's MARKED goes (before the metadata is written). */
void st_amend_unmark(struct storage_state *s, const char *vol);
/* SDM.sparsify_volume (st_jobs_sparsify.c): the all-zero runs of a leaf
 * volume's own data written as zeroes that may unmap, through qemu-nbd, as
 * a host job; gen < 0 when not given. */
int st_sparsify_job(struct storage_state *s, const char *job_id, const char *const ids[3],
		    int64_t gen, struct st_err *e);
/* SDM.update_volume (st_jobs_update.c): a metadata update as a host job;
 * gen < 0 (not given) fails the job with 911, as VDSM's. */
int st_update_job(struct storage_state *s, const char *job_id, const char *const ids[3],
		  int64_t gen, const struct st_vol_attr *attr, struct st_err *e);
/* Volume.verify_untrusted (st_volverify.c): the uploaded data of a volume
 * checked against its metadata (code 484 when it does not match). */
int st_volume_verify_untrusted(struct storage_state *s, const char *sp, const char *sd,
			       const char *img, const char *vol, struct st_err *e);
/* Abort a running job (its qemu-img is killed). */
int st_job_abort(struct storage_state *s, const char *id, struct st_err *e);
/* Shutdown: abort every job and join its thread. */
void st_jobs_stop(struct storage_state *s);

/* ---- NBD servers (st_nbd.c) ----------------------------------------------- */

/* NBD.start_server's config (VDSM's NBDServerConfig); bitmap NULL: none. */
struct st_nbd_cfg {
	const char *sd, *img, *vol;
	bool readonly, discard, detect_zeroes, backing_chain;
	const char *bitmap;
};
/* Export the volume with qemu-nbd on <run_dir>/nbd/<id>.sock; answers once
 * the socket accepts connections.  *url: "nbd:unix:<socket>" (owned by the
 * caller).  Blocks (qemu-img info, the wait): a worker thread. */
int st_nbd_start(struct storage_state *s, const char *id, const struct st_nbd_cfg *cfg,
		 char **url, struct st_err *e);
/* Terminate the server and wait (bounded), remove its socket.  An unknown
 * id succeeds (VDSM).  Blocks. */
int st_nbd_stop(struct storage_state *s, const char *id, struct st_err *e);
/* Shutdown: stop every server (st_close). */
void st_nbd_stop_all(struct storage_state *s);

/* ---- images (st_image.c) -------------------------------------------------- */

/* A disk's volume chain: paths[0] is the leaf (the volume asked for), then
 * its parent, ... down to the base. */
struct st_chain {
	char **paths;
	size_t n;
	bool leases;   /* the domain has volume leases: <path>.lease, offset 0 */
};
void st_chain_free(struct st_chain *c);
/* sp blank/NULL: any pool; otherwise the domain must be attached to it. */
int st_image_prepare(struct storage_state *s, const char *sd, const char *sp, const char *img,
		     const char *vol, struct st_chain *out, struct st_err *e);
/* The same; allow_illegal lets ILLEGAL volumes of the chain through, as
 * VDSM's prepareImage(allowIllegal) does for every volume of the image
 * (Image.prepare's allowIllegal; VM.diskReplicateStart's destination: a
 * layer a failed or interrupted Image.syncData left ILLEGAL). */
int st_image_prepare2(struct storage_state *s, const char *sd, const char *sp, const char *img,
		      const char *vol, bool allow_illegal, struct st_chain *out,
		      struct st_err *e);
/* Only the image: its domain, the pool it is attached to and the image. */
int st_image_check(struct storage_state *s, const char *sd, const char *sp, const char *img,
		   struct st_err *e);

/* qemu-img's view of vol and its chain taken from our metadata, not from
 * the qcow2 headers (whoever can write a volume can point its backing file
 * anywhere): "json:{driver, file, backing: {...} | null}", every path
 * checked (st_vol_stat).  NULL with err filled.  Caller holds no lock. */
char *st_chain_json(struct storage_state *s, const struct st_domain *d, const char *vol,
		    char *err, size_t errlen);
/* The same for the volume alone (its backing null): NBD's backing_chain=false. */
char *st_chain_json_top(struct storage_state *s, const struct st_domain *d, const char *vol,
			char *err, size_t errlen);
/* A volume opened on fd 3 (/proc/self/fd/3), for qemu-img: raw, or qcow2
 * whose backing is parent's chain from our metadata (st_chain_json), null
 * when parent is NULL or blank.  NULL with err filled.  Caller holds no lock. */
char *st_fd3_json(struct storage_state *s, const struct st_domain *d, int fmt,
		  const char *parent, char *err, size_t errlen);

/* ---- image copy between domains (st_imgcopy.c, st_imgcopy_run.c) ------- */

enum { ST_IC_CLONE = 1, ST_IC_SYNC, ST_IC_COPY, ST_IC_MOVE };
enum { ST_SYNC_ALL = 0, ST_SYNC_INTERNAL, ST_SYNC_LEAF };
struct st_imgcopy_req {
	const char *sp, *sd, *img, *dst_sd;
	int op;            /* ST_IC_* */
	int sync_type;     /* ST_SYNC_* (syncData) */
	bool postzero, discard, force;   /* move: how the source is removed */
};
/* "ALL" / "INTERNAL" / "LEAF" -> ST_SYNC_*, -1 otherwise. */
int st_sync_type_parse(const char *s);
/* Image.cloneStructure / syncData / move: validate, pin, queue the task. */
int st_image_copy(struct storage_state *s, const struct st_imgcopy_req *r, char task_id[37],
		  struct st_err *e);
void st_image_copy_release(struct storage_state *s, struct st_task *t);

/* ---- volume maintenance (st_volops.c) ------------------------------------ */

/* Caller holds the lock: the volume or NULL with e filled. */
struct st_volume *st_find_volume(struct storage_state *s, const char *sd, const char *img,
				 const char *vol, struct st_domain **dp, struct st_err *e);
int st_volume_set_legality(struct storage_state *s, const char *sd, const char *img,
			   const char *vol, bool legal, struct st_err *e);
/* Re-read the size of the data file (a blocking verb). */
int st_volume_refresh(struct storage_state *s, const char *sd, const char *img, const char *vol,
		      struct st_err *e);
/* One persistent bitmap of a qcow2 volume (qemu-img info's format-specific
 * data): flags ST_QBM_IN_USE / ST_QBM_AUTO. */
enum { ST_QBM_IN_USE = 1, ST_QBM_AUTO = 2 };
struct st_qbitmap {
	char *name;
	int64_t granularity;
	unsigned flags;
};
/* What qemu-img info reported; has_* say whether it reported the key at
 * all (a raw volume has no cluster size, no compat, no bitmaps list).
 * bitmaps is owned: st_qinfo_free. */
struct st_qinfo {
	char format[16];
	int64_t virtual_size, cluster_size;
	char backing[256];
	char compat[8];
	bool has_cluster, has_bitmaps;
	struct st_qbitmap *bitmaps;
	size_t nbitmaps;
};
void st_qinfo_free(struct st_qinfo *q);
/* Volume.extendSize: grow a volume to new_size bytes, as a task (SPM). */
int st_volume_extend(struct storage_state *s, const char *sd, const char *img, const char *vol,
		     int64_t new_size, char task_id[37], struct st_err *e);
/* Whether v's data already holds size bytes (RAW: file size; COW: the
 * qcow2 header's virtual size): an extend killed before its metadata. */
bool st_volume_grown(const struct st_domain *d, const struct st_volume *v, int64_t size);
/* qemu-img measure -O (RAW/COW) of the volume with its backing chain. */
int st_volume_measure(struct storage_state *s, const char *sd, const char *img, const char *vol,
		      int dst_format, int64_t *required, struct st_err *e);
/* qemu-img info on the volume's checked path. */
int st_volume_qemu_info(struct storage_state *s, const char *sd, const char *img,
			const char *vol, struct st_qinfo *out, struct st_err *e);
/* The same on a path the caller checked (a volume its job holds busy). */
int st_qemu_info_path(const char *path, struct st_qinfo *out, struct st_err *e);
/* ---- domains and the pool (st_sdcreate.c, st_pool.c, st_pool_ops.c, st_poolrec.c) */

int st_domain_create(struct storage_state *s, const char *sd, int type, const char *type_args,
		     const char *name, int dclass, int version, struct st_err *e);
int st_domain_format(struct storage_state *s, const char *sd, struct st_err *e);
/* SPM lease timing of a pool (StoragePool.create's lockRenewalIntervalSec
 * / leaseTimeSec, kept in the master domain's metadata).  NULL: 5 s / 60 s. */
struct st_lease_cfg {
	unsigned renew_ms, lease_ms;
	unsigned io_timeout_ms;   /* a renewal slower than this counts as failed */
	unsigned retries;         /* failed renewals tolerated before the SPM steps down */
};
int st_pool_create(struct storage_state *s, const char *sp, const char *name, const char *master,
		   int master_ver, const char *const *doms, size_t ndoms,
		   const struct st_lease_cfg *lease, struct st_err *e);
/* The work of both: statuses (NULL: the master Active, the others
 * Attached; ST_DS_NONE: written as a member but left out of the map) make
 * POOL_DOMAINS; reconstruct_host > 0 is StoragePool.reconstructMaster
 * (refused while this host is connected to sp: RPC_E_POOL_CONNECTED; every
 * domain must be free or already in sp; the pool is left disconnected with
 * that hostID). */
int st_pool_setup(struct storage_state *s, const char *sp, const char *name, const char *master,
		  int master_ver, const char *const *doms, const int *statuses, size_t ndoms,
		  const struct st_lease_cfg *lease, int reconstruct_host, struct st_err *e);
/* st_pool_ops.c: StoragePool.reconstructMaster - master becomes the pool's
 * master domain at master_ver, the listed domains its members with their
 * statuses (POOL_DOMAINS), and any other domain recorded as the pool's
 * master is demoted.  Refused while the pool is connected here (325); the
 * new master's SPM lease is held for host_id during the rebuild (651 while
 * a live host holds it, or the old master's). */
int st_pool_reconstruct(struct storage_state *s, const char *sp, int host_id, const char *name,
			const char *master, int master_ver, const char *const *doms,
			const int *statuses, size_t ndoms, const struct st_lease_cfg *lease,
			struct st_err *e);
/* st_poolrec.c: the intent record of a pool setup (see there); entries
 * with skip[i] (reconstructMaster's members not loaded here, NULL: none)
 * are left out: the setup does not write them. */
int st_pool_intent_write(struct storage_state *s, const char *sp, const char *const *doms,
			 const char (*old_pool)[37], const bool *old_master, const bool *skip,
			 size_t n);
void st_pool_intent_clear(struct storage_state *s);
void st_pool_intent_recover(struct storage_state *s);
/* Read <storage_root>/pool.meta into s (st_open). */
void st_pool_load(struct storage_state *s);
/* Forget the pool (pool.meta emptied first, then memory). */
int st_pool_forget(struct storage_state *s);
/* st_pool_ops.c: StorageDomain.attach/detach, StoragePool.destroy/refresh. */
int st_domain_attach(struct storage_state *s, const char *sd, const char *sp, bool attach,
		     struct st_err *e);
/* StorageDomain.detach force=true, as VDSM: sp blank clears the domain's
 * own pool (metadata, under the domain's lease: 651 while a live host
 * holds it); a connected pool (SPM) drops the domain from its map only.
 * Never the connected pool's master (383). */
int st_domain_force_detach(struct storage_state *s, const char *sd, const char *sp,
			   struct st_err *e);
int st_pool_destroy(struct storage_state *s, const char *sp, struct st_err *e);
int st_pool_refresh(struct storage_state *s, const char *sp, const char *master,
		    int master_ver, struct st_err *e);
/* connect: hostID 1..2000 is kept (getSpmStatus); a master other than
 * blank must be the pool's (and masterVersion, when > 0, its version):
 * RPC_E_WRONG_MASTER otherwise.  Unknown pool: RPC_E_NO_POOL. */
int st_pool_connect(struct storage_state *s, const char *sp, bool connect, int host_id,
		    const char *master, int master_ver, struct st_err *e);

#endif
