/* vdsmd/storage/st_scan.c - startup reconciliation of a domain's images/
 * directory with its index.
 *
 * Rules (every action is logged; nothing half-made is ever served):
 *   <vol>.meta LEGAL with its data file      -> indexed
 *   <vol>.meta ILLEGAL (creation or deletion cut short) -> data + meta removed
 *   <vol>.meta unreadable / bad checksum     -> data + meta removed
 *   <vol>.meta LEGAL but data missing        -> meta removed
 *   data file without .meta (orphan)         -> removed
 *   *.tmp (an interrupted atomic write)      -> removed
 *   image directory left empty               -> removed
 * Names that are not ours (not UUID-shaped) are reported and left alone. */
#include "st.h"
#include "../../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && strcmp(s + n - m, suf) == 0;
}

static void remove_file(struct storage_state *s, const char *dir, const char *name,
			const char *why)
{
	char *p = st_path(dir, name);
	if (unlink(p) == 0) {
		s->scan_removed++;
		log_warn("storage: scan: removed %s (%s)", p, why);
	} else if (errno != ENOENT) {
		log_error("storage: scan: cannot remove %s (%s): %s", p, why, strerror(errno));
	}
	free(p);
}

static void scan_image(struct storage_state *s, struct st_domain *d, const char *img,
		       const char *idir)
{
	DIR *dh = opendir(idir);
	if (!dh)
		return;
	/* Pass 1: metadata files decide what each volume is. */
	struct dirent *de;
	char **datafiles = NULL;
	size_t ndata = 0;
	while ((de = readdir(dh))) {
		const char *n = de->d_name;
		if (n[0] == '.')
			continue;
		if (ends_with(n, ".tmp")) {
			remove_file(s, idir, n, "interrupted write");
			continue;
		}
		if (strlen(n) == 36 && vd_is_uuid(n, 36)) {
			datafiles = xrealloc(datafiles, (ndata + 1) * sizeof(*datafiles));
			datafiles[ndata++] = xstrdup(n);
			continue;
		}
		if (!(strlen(n) == 41 && ends_with(n, ".meta") && vd_is_uuid(n, 36))) {
			log_warn("storage: scan: unknown file %s/%s left alone", idir, n);
			continue;
		}
		char vol[37];
		snprintf(vol, sizeof(vol), "%.36s", n);
		struct st_volume *v = vol_new();
		snprintf(v->uuid, sizeof(v->uuid), "%.36s", vol);
		snprintf(v->image, sizeof(v->image), "%.36s", img);
		char *mp = st_path(idir, n), *dp = st_path(idir, vol);
		int rc = st_vol_read_meta(mp, v);
		struct stat st;
		bool have_data = lstat(dp, &st) == 0 && S_ISREG(st.st_mode);
		const char *why = NULL;
		if (rc)
			why = "unreadable or corrupt metadata";
		else if (!v->legal)
			why = "ILLEGAL leftover of an interrupted operation";
		else if (!have_data)
			why = "metadata without data";
		else if (map_get(&d->volumes, vol))
			why = "duplicate volume id";
		if (why) {
			if (have_data && strcmp(why, "duplicate volume id") != 0)
				remove_file(s, idir, vol, why);
			remove_file(s, idir, n, why);
			vol_free(v);
		} else {
			v->apparent = st.st_size;
			v->truesize = (int64_t)st.st_blocks * 512;
			index_add_volume(d, v);
		}
		free(mp);
		free(dp);
	}
	closedir(dh);
	/* Pass 2: data files nobody describes are orphans. */
	for (size_t i = 0; i < ndata; i++) {
		struct st_volume *v = map_get(&d->volumes, datafiles[i]);
		if (!v || strcmp(v->image, img) != 0)
			remove_file(s, idir, datafiles[i], "orphan data without metadata");
		free(datafiles[i]);
	}
	free(datafiles);
	if (!map_get(&d->images, img) && rmdir(idir) == 0)
		log_info("storage: scan: removed empty image directory %s", idir);
}

int st_scan_domain(struct storage_state *s, struct st_domain *d)
{
	char *images = st_path(d->dir, "images");
	DIR *dh = opendir(images);
	if (!dh) {
		log_error("storage: domain %s: cannot read %s: %s", d->uuid, images, strerror(errno));
		free(images);
		return VD_EIO;
	}
	struct dirent *de;
	while ((de = readdir(dh))) {
		const char *n = de->d_name;
		if (n[0] == '.')
			continue;
		char *idir = st_path(images, n);
		struct stat st;
		if (strlen(n) == 36 && vd_is_uuid(n, 36) && lstat(idir, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			scan_image(s, d, n, idir);
		else
			log_warn("storage: scan: unknown entry %s left alone", idir);
		free(idir);
	}
	closedir(dh);
	free(images);
	index_count_children(d);
	/* A volume whose parent is gone cannot be read: serve it ILLEGAL. */
	for (struct st_map_ent *e = map_first(&d->volumes); e; e = map_next(&d->volumes, e)) {
		struct st_volume *v = map_val(e);
		if (strcmp(v->parent, ST_BLANK_UUID) != 0 && !map_get(&d->volumes, v->parent)) {
			log_error("storage: scan: volume %s/%s: parent %s is missing; marked ILLEGAL",
				  v->image, v->uuid, v->parent);
			v->legal = false;
		}
	}
	st_fsync_dir(d->dir);
	return 0;
}
