/* vdsmd/virt/merge.c - VM.merge: live merge of a disk's snapshot layer
 * into its base, as VDSM's livemerge does it:
 *
 *   VM.merge {vmID, drive: {domainID, imageID, volumeID, poolID?},
 *             baseVolUUID, topVolUUID, bandwidth?, jobUUID?}
 *
 * drive names the disk by its current (active) volume in the ovirt-vm
 * metadata (no such disk: code 13).  Base and top are prepared through
 * storage for their paths and libvirt's block commit copies top (and what
 * lies between) into base, keeping the backing files relative.  When top is
 * the active volume the commit is "active": once base has caught up, the
 * disk pivots to base and the metadata names base.  The job is reported in
 * the VM's stats under vmJobs (VDSM's shape: {jobUUID: {id, jobType:
 * "block", blockJobType: "commit", imgUUID, drive, bandwidth, cur, end}},
 * cur/end as strings) until it has ended; then it is gone and the chain in
 * Host.dumpxmls shows the result (as the engine checks it).  A commit that
 * cannot start is MergeFailed (52).  The sampler copies the jobs of each VM
 * into its stats (virt_blockjobs_copy); encode.c writes them (vmJobs).
 *
 * The jobs of a VM are kept in its domain's metadata (our own element,
 * <jobs><job id= dev= .../></jobs> in VIRT_JOBS_NS) while they run: libvirt
 * goes on with a commit when vdsmd restarts, and the new vdsmd follows it
 * again (virt_merge_recover: reported in vmJobs, pivoted, metadata
 * updated), as VDSM recovers its live merges. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <libvirt/virterror.h>

#include "../../common/log.h"

#define POLL_MS 50
#define VIRT_JOBS_NS "http://ovirt.org/vdsmd/jobs/1.0"
#define PIVOT_TIMEOUT_MS (10 * 60 * 1000)

static struct virt_blockjob *find_job(struct virt_state *s, const char *id)
{
	for (unsigned i = 0; i < s->nbjobs; i++)
		if (strcmp(s->bjobs[i].id, id) == 0)
			return &s->bjobs[i];
	return NULL;
}

static void drop_job(struct virt_state *s, const char *id)
{
	pthread_mutex_lock(&s->lock);
	struct virt_blockjob *j = find_job(s, id);
	if (j)
		*j = s->bjobs[--s->nbjobs];
	pthread_mutex_unlock(&s->lock);
}

void virt_blockjobs_copy(struct virt_state *s, struct virt_vm *vm)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->nbjobs; i++)
		if (strcmp(s->bjobs[i].vm, vm->uuid) == 0)
			n++;
	if (!n)
		return;
	vm->bjobs = xcalloc(n, sizeof *vm->bjobs);
	for (unsigned i = 0; i < s->nbjobs; i++)
		if (strcmp(s->bjobs[i].vm, vm->uuid) == 0)
			vm->bjobs[vm->nbjobs++] = s->bjobs[i];
}

/* The disk's metadata names volume to instead of from. */
static void set_volume_metadata(virDomainPtr dom, const char *vm, const char *dev,
				const char *from, const char *to)
{
	char *cur = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VIRT_OVIRT_VM_NS,
					 VIR_DOMAIN_AFFECT_LIVE);
	if (!cur)
		return;
	if (engxml_swap_volume(cur, dev, from, to) &&
	    virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, cur, "ovirt-vm",
				 VIRT_OVIRT_VM_NS, VIR_DOMAIN_AFFECT_LIVE) < 0)
		log_warn("virt: %s: the metadata after the merge: %s", vm, virt_last_error());
	free(cur);
}

/* Keep the VM's running merges in its metadata (none: the element goes). */
static void persist_jobs(struct virt_state *s, virDomainPtr dom, const char *vm)
{
	struct vd_buf b = VD_BUF_INIT;
	unsigned n = 0;
	buf_puts(&b, "<jobs>");
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->nbjobs; i++) {
		const struct virt_blockjob *j = &s->bjobs[i];
		if (strcmp(j->vm, vm) != 0)
			continue;
		/* UUIDs and a target name: nothing to escape */
		buf_printf(&b, "<job id='%s' dev='%s' domain='%s' pool='%s' image='%s' base='%s' "
			   "top='%s' active='%d' bandwidth='%lu'/>", j->id, j->dev, j->domain,
			   j->pool, j->image, j->base, j->top, j->active ? 1 : 0, j->bandwidth);
		n++;
	}
	pthread_mutex_unlock(&s->lock);
	buf_puts(&b, "</jobs>");
	buf_putc(&b, '\0');
	if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, n ? b.data : NULL,
				 n ? "vdsmd-jobs" : NULL, VIRT_JOBS_NS, VIR_DOMAIN_AFFECT_LIVE) < 0)
		log_warn("virt: %s: keeping the merge jobs in the metadata: %s", vm,
			 virt_last_error());
	buf_free(&b);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void *merge_main(void *arg)
{
	struct virt_blockjob *job = arg;   /* a private copy */
	struct virt_state *s = job->s;
	virConnectPtr c;
	virDomainPtr d = virt_bg_domain(s, job->vm, &c);
	uint64_t t0 = vd_now_ms();
	bool pivoted = false, ok = false;
	char err[512] = "the VM is gone";
	while (d && !virt_stopping(s)) {
		virDomainBlockJobInfo info;
		int r = virDomainGetBlockJobInfo(d, job->dev, &info, 0);
		if (r < 0) {
			snprintf(err, sizeof err, "%s", virt_last_error());
			break;
		}
		if (r == 0) {   /* the job has ended: done if top left the chain */
			char *xml = virDomainGetXMLDesc(d, 0);
			ok = xml && !strstr(xml, job->top_path);
			if (!ok)
				snprintf(err, sizeof err, "volume %s is still in the chain", job->top);
			free(xml);
			break;
		}
		pthread_mutex_lock(&s->lock);
		struct virt_blockjob *j = find_job(s, job->id);
		if (j) {
			j->cur = info.cur;
			j->end = info.end;
			j->bandwidth = info.bandwidth;
		}
		pthread_mutex_unlock(&s->lock);
		if (job->active && !pivoted && info.end > 0 && info.cur == info.end) {
			/* base caught up: the disk continues on it (libvirt refuses
			 * until the job is ready; tried again on the next round) */
			if (virDomainBlockJobAbort(d, job->dev, VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT) == 0)
				pivoted = true;
			else if (vd_now_ms() - t0 > PIVOT_TIMEOUT_MS) {
				snprintf(err, sizeof err, "pivot: %s", virt_last_error());
				break;
			}
		}
		sleep_ms(POLL_MS);
	}
	if (ok) {
		if (job->active)
			set_volume_metadata(d, job->vm, job->dev, job->top, job->base);
		log_info("virt: %s: merged volume %s into %s on %s in %llu ms (job %s)", job->vm,
			 job->top, job->base, job->dev, (unsigned long long)(vd_now_ms() - t0), job->id);
	} else if (virt_stopping(s)) {
		log_info("virt: %s: merge job %s of %s left to libvirt (vdsmd stops; the next one "
			 "follows it)", job->vm, job->id, job->dev);
	} else {
		log_warn("virt: %s: merge job %s of %s failed: %s", job->vm, job->id, job->dev, err);
	}
	drop_job(s, job->id);
	if (d && !virt_stopping(s))   /* stopping: the next vdsmd follows it */
		persist_jobs(s, d, job->vm);
	virt_mark_xml_stale(s, job->vm);
	virt_kick(s);
	virt_bg_release(c, d);
	virt_bg_done(s, job);
	return NULL;
}

/* Start the commit; 0, or -1 with the call failed. */
static int start(struct rpc_call *c, struct virt_state *s, virDomainPtr dom,
		 struct virt_blockjob *job)
{
	const struct vd_value *drive = rpc_arg(c, "drive");
	struct virt_pdiv dv;
	memset(&dv, 0, sizeof dv);
	if (!virt_uuid_member(drive, "domainID", dv.domain) ||
	    !virt_uuid_member(drive, "imageID", dv.image) ||
	    !virt_uuid_member(drive, "volumeID", dv.volume))
		return rpc_fail(c, RPC_E_PARAMS, "drive: {domainID, imageID, volumeID, poolID?} "
				"(UUIDs) expected");
	virt_uuid_member(drive, "poolID", dv.pool);
	const struct virt_engxml *ex = virt_live_engxml(c, dom, job->vm, "merge", RPC_E_MERGE);
	if (!ex)
		return -1;
	const struct virt_engdisk *dk = NULL;
	for (unsigned k = 0; k < ex->ndisks && !dk; k++)
		if (ex->disks[k].has_volume && strcasecmp(ex->disks[k].image, dv.image) == 0 &&
		    strcasecmp(ex->disks[k].volume, dv.volume) == 0)
			dk = &ex->disks[k];
	if (!dk)   /* VDSM: ImageFileNotFound */
		return rpc_fail(c, RPC_E_NO_IMAGE_FILE, "no disk of VM %s is on volume %s of "
				"image %s", job->vm, dv.volume, dv.image);
	if (strcmp(job->base, job->top) == 0)
		return rpc_fail(c, RPC_E_MERGE, "base and top are the same volume");
	snprintf(job->dev, sizeof job->dev, "%s", dk->dev);
	snprintf(job->image, sizeof job->image, "%s", dv.image);
	if (!dv.pool[0])
		snprintf(dv.pool, sizeof dv.pool, "%s", dk->pool);
	snprintf(job->domain, sizeof job->domain, "%s", dv.domain);
	snprintf(job->pool, sizeof job->pool, "%s", dv.pool);
	job->active = strcasecmp(job->top, dv.volume) == 0;
	struct virt_pdiv v = dv;
	snprintf(v.volume, sizeof v.volume, "%s", job->base);
	if (virt_prepare_volume(c, s, &v, "base", RPC_E_MERGE, job->base_path,
				sizeof job->base_path) < 0)
		return -1;
	snprintf(v.volume, sizeof v.volume, "%s", job->top);
	if (virt_prepare_volume(c, s, &v, "top", RPC_E_MERGE, job->top_path,
				sizeof job->top_path) < 0)
		return -1;
	pthread_mutex_lock(&s->lock);
	bool busy = find_job(s, job->id) != NULL;
	for (unsigned i = 0; i < s->nbjobs && !busy; i++)
		busy = strcmp(s->bjobs[i].vm, job->vm) == 0 && strcmp(s->bjobs[i].dev, job->dev) == 0;
	bool full = s->nbjobs == VIRT_MAX_BJOBS;
	if (!busy && !full)
		s->bjobs[s->nbjobs++] = *job;   /* reported from now on */
	pthread_mutex_unlock(&s->lock);
	if (busy || full)
		return rpc_fail(c, RPC_E_MERGE, busy ? "job %s exists, or disk %s is merging"
				: "too many merges (%s, %s)", job->id, job->dev);
	persist_jobs(s, dom, job->vm);
	/* relative backing files, as VDSM asks: the chain stays usable from any
	 * mount point */
	unsigned flags = VIR_DOMAIN_BLOCK_COMMIT_RELATIVE;
	if (job->active)
		flags |= VIR_DOMAIN_BLOCK_COMMIT_ACTIVE;
	if (virDomainBlockCommit(dom, job->dev, job->base_path, job->top_path, job->bandwidth,
				 flags) < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s", virt_last_error());
		drop_job(s, job->id);
		persist_jobs(s, dom, job->vm);
		return rpc_fail(c, RPC_E_MERGE, "block commit of %s: %s", job->dev, msg);
	}
	return 0;
}

int virt_verb_merge(struct rpc_call *c)
{
	struct virt_state *s = virt_state_of(c);
	const char *id = rpc_arg_str(c, "vmID", NULL);
	int64_t bw = rpc_arg_int(c, "bandwidth", 0);
	if (bw < 0 || bw > (1 << 20))
		return rpc_fail(c, RPC_E_PARAMS, "bandwidth: MiB/s, 0 (no limit)..%d", 1 << 20);
	virConnectPtr conn = virt_begin(c, s);
	if (!conn)
		return -1;
	int rc = -1;
	struct virt_blockjob *job = xcalloc(1, sizeof *job);
	job->s = s;
	snprintf(job->vm, sizeof job->vm, "%s", id);
	snprintf(job->base, sizeof job->base, "%s", rpc_arg_str(c, "baseVolUUID", NULL));
	snprintf(job->top, sizeof job->top, "%s", rpc_arg_str(c, "topVolUUID", NULL));
	virt_job_uuid(c, job->id);
	job->bandwidth = (unsigned long)bw;
	virDomainPtr dom = virt_lookup_active(c, s, conn, id);
	if (!dom)
		goto out;
	if (start(c, s, dom, job) < 0)
		goto out;
	log_info("virt: %s: merging %s into %s on %s (%s commit, job %s)", id, job->top,
		 job->base, job->dev, job->active ? "active" : "internal", job->id);
	if (virt_bg_spawn(s, merge_main, job) < 0) {
		/* the commit runs on in libvirt; it is just not followed */
		drop_job(s, job->id);
		rpc_fail(c, RPC_E_MERGE, "cannot follow the merge of %s", job->dev);
		goto out;
	}
	job = NULL;   /* the thread owns it */
	virt_refresh(s);   /* the job is in the stats when the reply is read */
	rc = 0;
out:
	free(job);
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

/* ---- recovery ------------------------------------------------------------- */

/* The value of attribute name in the tag at p (either quote); false if none. */
static bool attr(const char *p, const char *end, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);
	for (const char *q = p; q + nl + 2 < end; q++) {
		if ((q[-1] != ' ' && q[-1] != '\t' && q[-1] != '\n') || strncmp(q, name, nl) != 0 ||
		    q[nl] != '=' || (q[nl + 1] != '\'' && q[nl + 1] != '"'))
			continue;
		const char *v = q + nl + 2;
		const char *e = memchr(v, q[nl + 1], (size_t)(end - v));
		if (!e || (size_t)(e - v) >= outlen)
			return false;
		memcpy(out, v, (size_t)(e - v));
		out[e - v] = '\0';
		return true;
	}
	return false;
}

static void recover_domain(struct virt_state *s, virDomainPtr dom)
{
	char vm[VIR_UUID_STRING_BUFLEN];
	if (virDomainGetUUIDString(dom, vm) < 0)
		return;
	char *md = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VIRT_JOBS_NS,
					VIR_DOMAIN_AFFECT_LIVE);
	if (!md)
		return;
	pthread_mutex_lock(&s->lock);
	struct virt_deps deps = s->deps;
	pthread_mutex_unlock(&s->lock);
	for (const char *p = strstr(md, "<job "); p; p = strstr(p + 1, "<job ")) {
		const char *end = strchr(p, '>');
		if (!end)
			break;
		struct virt_blockjob *job = xcalloc(1, sizeof *job);
		job->s = s;
		snprintf(job->vm, sizeof job->vm, "%s", vm);
		char active[4] = "", bw[24] = "0";
		bool ok = attr(p, end, "id", job->id, sizeof job->id) &&
			  attr(p, end, "dev", job->dev, sizeof job->dev) &&
			  attr(p, end, "domain", job->domain, sizeof job->domain) &&
			  attr(p, end, "pool", job->pool, sizeof job->pool) &&
			  attr(p, end, "image", job->image, sizeof job->image) &&
			  attr(p, end, "base", job->base, sizeof job->base) &&
			  attr(p, end, "top", job->top, sizeof job->top) &&
			  attr(p, end, "active", active, sizeof active);
		attr(p, end, "bandwidth", bw, sizeof bw);
		job->active = strcmp(active, "1") == 0;
		job->bandwidth = strtoul(bw, NULL, 10);
		char why[256] = "";
		/* the top's path: how merge_main sees the end of the job */
		if (ok && deps.prepare_image &&
		    deps.prepare_image(deps.prepare_ctx, job->pool, job->domain, job->image,
				       job->top, job->top_path, sizeof job->top_path, why,
				       sizeof why) < 0)
			ok = false;
		pthread_mutex_lock(&s->lock);
		bool known = find_job(s, job->id) != NULL;
		bool room = s->nbjobs < VIRT_MAX_BJOBS;
		if (ok && !known && room)
			s->bjobs[s->nbjobs++] = *job;
		pthread_mutex_unlock(&s->lock);
		if (!ok || known || !room) {
			if (!ok)
				log_warn("virt: %s: a merge job in the metadata cannot be followed %s",
					 vm, why);
			free(job);
			continue;
		}
		log_info("virt: %s: following again merge job %s (%s into %s on %s)", vm, job->id,
			 job->top, job->base, job->dev);
		if (virt_bg_spawn(s, merge_main, job) < 0) {
			drop_job(s, job->id);
			free(job);
		}
	}
	free(md);
}

void virt_merge_recover(struct virt_state *s, virConnectPtr c)
{
	virDomainPtr *doms = NULL;
	int n = virConnectListAllDomains(c, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
	for (int i = 0; i < n; i++) {
		recover_domain(s, doms[i]);
		virDomainFree(doms[i]);
	}
	free(doms);
}
