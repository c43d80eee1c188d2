/* vdsmd/storage/st_ops.c - what the operations share (finding a volume,
 * the end of a job on an image, the common outcomes of a recovered task)
 * and the small volume verbs that need no task (Volume.setDescription,
 * getInfo).  Each long operation is its own file, st_op_*.c, with the
 * descriptor it registers with the task engine (st_optable.c). */
#include "st_ops.h"
#include "../../common/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct st_volume *find_vol(struct storage_state *s, const char *sd, const char *img,
				  const char *vol, struct st_domain **dp, struct st_err *e)
{
	return st_find_volume(s, sd, img, vol, dp, e);
}

struct st_volume *st_find_volume(struct storage_state *s, const char *sd, const char *img,
				 const char *vol, struct st_domain **dp, struct st_err *e)
{
	if (!st_is_uuid(img) || !st_is_uuid(vol)) {
		st_fail(e, RPC_E_PARAMS, "%s: not a UUID", st_is_uuid(img) ? "volumeID" : "imageID");
		return NULL;
	}
	struct st_domain *d = st_domain_get(s, sd, e);
	if (!d)
		return NULL;
	if (!map_get(&d->images, img)) {
		st_fail(e, RPC_E_NO_IMAGE, "%s in domain %s", img, sd);
		return NULL;
	}
	struct st_volume *v = map_get(&d->volumes, vol);
	if (!v || strcmp(v->image, img) != 0) {
		st_fail(e, RPC_E_NO_VOLUME, "%s in image %s", vol, img);
		return NULL;
	}
	*dp = d;
	return v;
}

/* The end of a job on one image: its directory goes when the image has no
 * volume left (empty), and the domain is no longer busy with the job. */
void st_op_job_release(struct storage_state *s, struct st_domain *d, const char *img,
			bool empty)
{
	if (empty)
		st_img_rmdir(d, img);
	pthread_mutex_lock(&s->lock);
	d->busy--;
	pthread_mutex_unlock(&s->lock);
}

struct st_domain *st_op_recover_domain(struct storage_state *s, struct st_task *t)
{
	struct st_domain *d = map_get(&s->domains, t->sd);
	if (!d) {
		t->result = ST_TR_CLEAN_FAILURE;
		t->code = rpc_err_code(RPC_E_GENERAL);
		snprintf(t->message, sizeof(t->message),
			 "interrupted by restart; storage domain %s is not available", t->sd);
	}
	return d;
}

void st_op_recovered(struct st_task *t, bool done)
{
	t->result = done ? ST_TR_SUCCESS : ST_TR_CLEAN_SUCCESS;
	t->code = done ? 0 : rpc_err_code(RPC_E_TASK_ABORTED);
	snprintf(t->message, sizeof(t->message), "%s",
		 done ? "1 jobs completed successfully" : "aborted by restart");
}

/* ---- Volume.setDescription / getInfo ------------------------------------- */

int st_volume_set_description(struct storage_state *s, const char *sd, const char *img,
			      const char *vol, const char *desc, struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = find_vol(s, sd, img, vol, &d, e);
	if (!v) {
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	if (v->busy || !v->legal) {
		pthread_mutex_unlock(&s->lock);
		return st_fail(e, RPC_E_GENERAL, "volume %s is busy or ILLEGAL", vol);
	}
	v->busy = true;
	d->busy++;
	struct st_volume copy = *v;
	pthread_mutex_unlock(&s->lock);
	char *nd = st_clean_text(desc, ST_DESC_MAX);
	copy.description = nd;
	copy.mtime = (int64_t)time(NULL);
	int rc = st_vol_write_meta(d, &copy);
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		free(v->description);
		v->description = nd;
		v->mtime = copy.mtime;
	} else {
		free(nd);
	}
	v->busy = false;
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc < 0)
		return st_fail_rc(e, RPC_E_GENERAL, rc, "writing volume metadata");
	return 0;
}

int st_volume_info(struct storage_state *s, const char *sd, const char *img, const char *vol,
		   struct st_volume *out, struct st_err *e)
{
	struct st_domain *d = NULL;
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = find_vol(s, sd, img, vol, &d, e);
	if (v) {
		*out = *v;
		out->description = xstrdup(v->description ? v->description : "");
	}
	pthread_mutex_unlock(&s->lock);
	return v ? 0 : -1;
}
