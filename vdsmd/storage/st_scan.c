/* vdsmd/storage/st_scan.c - startup reconciliation of a domain's images/
 * directory with its index.
 *
 * Nothing is removed unless an unfinished task record claims it (task
 * records are loaded first): such a task died with vdsmd, and what it left
 * half-made is undone (st_tasks_recover then reports what happened).
 *   <vol>.meta LEGAL with its data file                    -> indexed
 *   claimed by an unfinished task, ILLEGAL / no data / corrupt -> removed
 *   ILLEGAL, unclaimed (a failed rollback, Volume.setLegality, legal=false)
 *                                                          -> indexed ILLEGAL
 *   LEGAL without data, unclaimed                          -> indexed ILLEGAL
 *   unreadable / corrupt .meta, unclaimed                  -> left alone, logged
 *   data file without .meta: claimed -> removed; else left alone, logged
 *   <vol>.lease of no indexed volume: claimed -> removed; else left alone,
 *                                                          logged
 *   *.tmp (an interrupted atomic write)                    -> removed
 *   image directory left empty                             -> removed
 * Every access is relative to the domain's directory descriptor and never
 * follows a symlink (st_safe.c): a planted link is reported, not entered. */
#include "st_state.h"
#include "../../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

static void remove_at(struct storage_state *s, int ifd, const char *idir, const char *name,
		      const char *why)
{
	if (unlinkat(ifd, name, 0) == 0) {
		s->scan_removed++;
		log_warn("storage: scan: removed %s/%s (%s)", idir, name, why);
	} else if (errno != ENOENT) {
		log_error("storage: scan: cannot remove %s/%s (%s): %s", idir, name, why,
			  strerror(errno));
	}
}

static void scan_image(struct storage_state *s, struct st_domain *d, const char *img, int ifd,
		       const char *idir)
{
	int lfd = fcntl(ifd, F_DUPFD_CLOEXEC, 0);
	DIR *dh = lfd >= 0 ? fdopendir(lfd) : NULL;
	if (!dh) {
		if (lfd >= 0)
			close(lfd);
		return;
	}
	/* Pass 1: metadata files decide what each volume is. */
	struct dirent *de;
	char **datafiles = NULL;
	size_t ndata = 0;
	while ((de = readdir(dh))) {
		const char *n = de->d_name;
		if (n[0] == '.')
			continue;
		if (ends_with(n, ".tmp")) {
			remove_at(s, ifd, idir, n, "interrupted write");
			continue;
		}
		/* data files and leases are looked at once the .meta files have
		 * said which volumes exist (pass 2) */
		if ((strlen(n) == 36 && vd_is_uuid(n, 36)) ||
		    (strlen(n) == 36 + strlen(ST_LEASE_EXT) && ends_with(n, ST_LEASE_EXT) &&
		     vd_is_uuid(n, 36))) {
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
		int rc = st_vol_read_meta_at(ifd, n, v);
		struct stat st;
		bool have_data = fstatat(ifd, vol, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISREG(st.st_mode);
		struct st_task *claim = st_task_claim(s, d->uuid, vol);
		if (map_get(&d->volumes, vol)) {
			log_error("storage: scan: duplicate volume id %s in %s left alone", vol, idir);
			vol_free(v);
		} else if (claim && (rc || !v->legal || !have_data)) {
			const char *why = "leftover of an interrupted task";
			/* a delete asked for postZero / discard: done before the
			 * data goes, as the task would have */
			if (have_data && (claim->postzero || claim->discard) &&
			    st_vol_scrub(d, img, vol, claim->postzero, claim->discard) < 0)
				log_error("storage: scan: %s/%s: postZero/discard failed", idir, vol);
			if (have_data)
				remove_at(s, ifd, idir, vol, why);
			remove_at(s, ifd, idir, n, why);
			vol_free(v);
		} else if (rc) {
			log_error("storage: scan: %s/%s: unreadable or corrupt metadata; volume left "
				  "alone and not served", idir, n);
			vol_free(v);
		} else {
			if (!have_data) {
				log_error("storage: scan: volume %s/%s has no data file; served ILLEGAL",
					  img, vol);
				v->legal = false;
			} else {
				v->apparent = st.st_size;
				v->truesize = (int64_t)st.st_blocks * 512;
				if (!v->legal)
					log_warn("storage: scan: volume %s/%s is ILLEGAL (no task owns "
						 "it); kept", img, vol);
			}
			index_add_volume(d, v);
		}
	}
	closedir(dh);
	/* Pass 2: data files and leases nobody describes. */
	for (size_t i = 0; i < ndata; i++) {
		char vol[37];
		snprintf(vol, sizeof(vol), "%.36s", datafiles[i]);
		bool lease = datafiles[i][36] != '\0';
		struct st_volume *v = map_get(&d->volumes, vol);
		if (!v || strcmp(v->image, img) != 0) {
			char mname[48];
			snprintf(mname, sizeof(mname), "%s.meta", vol);
			struct stat st;
			bool has_meta = fstatat(ifd, mname, &st, AT_SYMLINK_NOFOLLOW) == 0;
			if (st_task_claim(s, d->uuid, vol))
				remove_at(s, ifd, idir, datafiles[i], lease ? "lease of an interrupted "
					  "task" : "data of an interrupted task");
			else if (!has_meta)
				log_warn("storage: scan: %s %s/%s without metadata left alone",
					 lease ? "lease" : "data file", idir, datafiles[i]);
		}
		free(datafiles[i]);
	}
	free(datafiles);
}

int st_scan_domain(struct storage_state *s, struct st_domain *d)
{
	char *images = st_path(d->dir, "images");
	int imfd = st_dir_at(d->dir, "images");
	int lfd = imfd >= 0 ? fcntl(imfd, F_DUPFD_CLOEXEC, 0) : -1;
	DIR *dh = lfd >= 0 ? fdopendir(lfd) : NULL;
	if (!dh) {
		log_error("storage: domain %s: cannot read %s: %s", d->uuid, images, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		if (imfd >= 0)
			close(imfd);
		free(images);
		return VD_EIO;
	}
	struct dirent *de;
	while ((de = readdir(dh))) {
		const char *n = de->d_name;
		if (n[0] == '.')
			continue;
		char *idir = st_path(images, n);
		int ifd = strlen(n) == 36 && vd_is_uuid(n, 36)
			? openat(imfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
		if (ifd >= 0) {
			scan_image(s, d, n, ifd, idir);
			close(ifd);
			if (!map_get(&d->images, n) && unlinkat(imfd, n, AT_REMOVEDIR) == 0)
				log_info("storage: scan: removed empty image directory %s", idir);
		} else {
			log_warn("storage: scan: unknown entry %s left alone", idir);
		}
		free(idir);
	}
	closedir(dh);
	fsync(imfd);
	close(imfd);
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
	return 0;
}
