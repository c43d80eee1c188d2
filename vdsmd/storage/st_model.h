/* vdsmd/storage/st_model.h - the on-disk model of the storage backend:
 * domains, images and volumes as their metadata files describe them, and
 * the in-memory index of them.
 *
 * Owns: the index (st_index.c: the UUID map, struct st_domain / st_image /
 * st_volume), a domain's metadata and the registry of known domains
 * (st_domain.c), a volume's metadata and data files (st_volume.c), the
 * encoded pool domain map (st_pool_doms.c).  Built on st_file.h only; the
 * functions taking a struct storage_state use its lock (st_state.h). */
#ifndef VD_VDSMD_STORAGE_ST_MODEL_H
#define VD_VDSMD_STORAGE_ST_MODEL_H

#include "st_file.h"

struct storage_state;

#define ST_BLANK_UUID "00000000-0000-0000-0000-000000000000"
#define ST_DESC_MAX 210
#define ST_NAME_MAX 256

enum st_domtype { ST_DT_NFS = 1, ST_DT_LOCALFS = 4, ST_DT_POSIXFS = 6 };
enum st_domclass { ST_DC_DATA = 1, ST_DC_ISO = 2, ST_DC_BACKUP = 3 };
enum st_volfmt { ST_FMT_COW = 4, ST_FMT_RAW = 5 };
enum st_alloc { ST_PREALLOCATED = 1, ST_SPARSE = 2 };

/* ---- st_index.c --------------------------------------------------------- */

/* Hash map from a 36-character UUID to a pointer. */
struct st_map_ent;
struct st_map {
	struct st_map_ent **b;
	size_t nb, n;
};
void map_init(struct st_map *m);
void map_free(struct st_map *m);      /* frees entries, not values */
void *map_get(const struct st_map *m, const char *key);
void map_put(struct st_map *m, const char *key, void *val);  /* replaces */
void *map_del(struct st_map *m, const char *key);
/* Iteration: for (it = map_first(m); it; it = map_next(m, it)) */
struct st_map_ent *map_first(const struct st_map *m);
struct st_map_ent *map_next(const struct st_map *m, struct st_map_ent *e);
const char *map_key(const struct st_map_ent *e);
void *map_val(const struct st_map_ent *e);

struct st_volume {
	char uuid[37], image[37], parent[37];
	int format;             /* ST_FMT_* */
	int alloc;              /* ST_PREALLOCATED / ST_SPARSE */
	char disktype[16];
	int64_t capacity;
	char *description;
	bool legal;
	bool busy;              /* create/delete in flight */
	bool shared;            /* VOLTYPE=SHARED (a template's volume: SDM.update_volume) */
	unsigned nchildren;     /* volumes backed by this one (any image) */
	int64_t ctime, mtime;
	unsigned generation;
	int sequence;
	int64_t apparent, truesize;  /* from the last stat (disk usage) */
};

struct st_image {
	char uuid[37];
	bool deleting;             /* Image.delete in flight */
	size_t n, cap;
	struct st_volume **vols;   /* in creation order */
};

struct st_domain {
	char uuid[37];
	int type, dclass, version;
	char *name;
	char *remote;      /* typeArgs as given */
	char *base;        /* the mounted directory holding <sdUUID>/ */
	char *dir;         /* <base>/<sdUUID> */
	char pool[37];     /* attached pool or "" */
	bool master;
	/* the pool as the master domain keeps it (shared by every host) */
	int master_ver;
	char *pool_desc;
	char *pool_doms;   /* master: POOL_DOMAINS "sdUUID:Active,sdUUID:Attached" */
	unsigned lease_renew_ms, lease_time_ms, lease_io_ms, lease_retries;
	bool formatting;
	unsigned busy;     /* operations in flight on this domain */
	struct st_map images;   /* imgUUID -> st_image */
	struct st_map volumes;  /* volUUID -> st_volume */
	/* monitor results */
	int mon_code;
	double mon_delay;       /* seconds */
	uint64_t mon_last_ms;   /* vd_now_ms() of the last check, 0 = never */
	bool mon_valid;
	int64_t disktotal, diskfree;
};

struct st_domain *dom_new(const char *uuid);
void dom_free(struct st_domain *d);
struct st_volume *vol_new(void);
void vol_free(struct st_volume *v);
/* Index edits (caller holds s->lock). */
void index_add_volume(struct st_domain *d, struct st_volume *v);
void index_del_volume(struct st_domain *d, const char *vol);
bool index_has_children(const struct st_domain *d, const char *vol);
/* Recount every volume's children (after a scan added them in any order). */
void index_count_children(struct st_domain *d);

/* ---- domains (st_domain.c) -------------------------------------------------- */

/* Rewrite a domain's metadata from its index entry (caller must not hold
 * the lock; the entry must not go away meanwhile: format is refused while
 * d->busy). */
int st_domain_write_meta(struct storage_state *s, struct st_domain *d);
/* Write d's metadata as it would be with pool and role changed, and (when
 * pool_md) the pool's fields of pool_md; d itself is not touched (memory
 * follows once the disk has it).  0 or a primitive's rc (st_file.h). */
int st_domain_write_meta_as(struct storage_state *s, struct st_domain *d, const char *pool,
			    bool master, const struct st_domain *pool_md);
/* Snapshot the registry under the lock, write it outside (caller holds
 * neither lock). */
int st_registry_save(struct storage_state *s);
int st_dom_load(struct st_domain *d, const char *base);
/* Write master m's metadata with map as its POOL_DOMAINS, then set it in
 * memory (st_domain.c); caller holds neither lock, m pinned. */
int st_master_write_map(struct storage_state *s, struct st_domain *m, const char *map);
/* Give d a pool ("" detaches it) and a role (master or a regular member):
 * metadata first, memory after.  Attach and detach make regular members;
 * the pool intent's recovery puts a domain's old role back.  Caller holds
 * neither lock and has pinned d. */
int st_domain_set_pool(struct storage_state *s, struct st_domain *d, const char *pool,
		       bool master);
/* Caller holds the lock. */
struct st_domain *st_domain_get(struct storage_state *s, const char *sd, struct st_err *e);
const char *st_domtype_name(int type);
const char *st_domclass_name(int dclass);
int st_domclass_parse(const char *s);

/* ---- volumes (st_volume.c) ------------------------------------------------- */

/* Every path is taken relative to the domain's directory descriptor
 * (st_safe.c); none of these follows a symlink. */
int st_vol_write_meta(const struct st_domain *d, const struct st_volume *v);
/* Parse <ifd>/<name> (a .meta file) into v (v->image set by the caller). */
int st_vol_read_meta_at(int ifd, const char *name, struct st_volume *v);
/* Size of the data file (no lock held; may block on storage). */
int st_vol_stat(const struct st_domain *d, const char *img, const char *vol, int64_t *apparent,
		int64_t *truesize);
/* VDSM's hasVolumeLeases: NFS / POSIXFS domains of version 3 and up. */
bool st_dom_has_volume_leases(const struct st_domain *d);
#define ST_LEASE_EXT ".lease"
/* Remove the data file and its <vol>.lease (meta false) or <vol>.meta;
 * ENOENT is success. */
int st_vol_unlink(const struct st_domain *d, const char *img, const char *vol, bool meta);
/* postZero: overwrite the data with zeros; discard: punch it out. */
int st_vol_scrub(const struct st_domain *d, const char *img, const char *vol, bool zero,
		 bool discard);
/* The data file a volume is made with (Volume.create, cloneStructure). */
struct st_vol_spec {
	const char *img, *vol;
	int format, alloc;         /* ST_FMT_*, ST_PREALLOCATED / ST_SPARSE */
	int64_t size;
	const char *parent, *parent_img;   /* "" or blank: no parent */
	int parent_format;
#ifdef VD_TEST_HOOKS
	unsigned prealloc_chunk_delay_us;
	bool prealloc_force_write;
#endif
};
/* Allocate the data file of sp on d (O_EXCL: VD_ESYS(EEXIST) when one is there),
 * then its <vol>.lease where d has volume leases; io is polled for a stop
 * and told the progress.  A failure leaves neither file. */
int st_vol_create_data(const struct st_domain *d, const struct st_vol_spec *sp,
		       const struct st_io *io, char *err, size_t errlen);
const char *st_volfmt_name(int f);
const char *st_alloc_name(int a);

/* ---- the pool's domain map (st_pool_doms.c) ------------------------------
 *
 * As VDSM keeps it: POOL_DOMAINS in the master domain's metadata lists
 * every member with its status.  StoragePool.create makes the master
 * Active and the other domains Attached; StorageDomain.attach adds a domain
 * as Attached, activate makes it Active, deactivate Attached again, detach
 * removes it.  The master's metadata is written first, memory (the master's
 * pool_doms) follows; hosts that are not SPM re-read it on connect, refresh
 * and every monitor pass. */
enum { ST_DS_NONE = 0, ST_DS_UNKNOWN, ST_DS_ATTACHED, ST_DS_UNATTACHED, ST_DS_ACTIVE };
const char *st_dom_status_name(int st);
/* VDSM's validateSDStatus: case-insensitive, the deprecated "Inactive" is
 * Attached; 0 for anything else. */
int st_dom_status_parse(const char *s);
/* The status of sd in an encoded map, or ST_DS_NONE. */
int st_dommap_get(const char *map, const char *sd);
/* A new encoded map with sd set to status (ST_DS_NONE removes it). */
char *st_dommap_put(const char *map, const char *sd, int status);

#endif
