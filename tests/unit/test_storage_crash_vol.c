/* tests/unit/test_storage_crash_vol.c - kill -9 at every step of
 * SDM.update_volume, SDM.amend_volume and SDM.sparsify_volume (the
 * "update_volume.*", "amend.*" and "sparsify.*" steps of
 * vdsmd/storage/st_crash.h), then restart; and a qemu-img amend killed in
 * the middle of its downgrade.
 *
 * The image: BASE (qcow2 1.1, 1 MiB, written 0x11 all over) <- LEAF (qcow2
 * 1.1, 1 MiB) with a zero cluster over BASE's data at 64k, allocated zeros
 * over it at 0-64k (sparsify's first run, with the zero cluster) and
 * 256k-384k, and its own data at 512k; a second image holds SOLO (qcow2,
 * no parent, no child) for the SHARED update.  What the guest sees
 * through LEAF (qemu-img convert of the chain to raw) is saved first.  A forked child runs the job up to the step
 * named in VDSMD_TEST_CRASH_AT and must die there by SIGKILL; the parent
 * opens the tree as vdsmd does at startup and checks that the volume is in
 * its old state or its new one, never a mixture:
 *   - update_volume: legality, description, generation and type all old,
 *     or all new (one variant: ILLEGAL + description + generation 7 on
 *     LEAF; the other: SHARED + description on SOLO, generation bumped);
 *   - amend: qemu-img compare of the chain with the saved raw copy is
 *     equal whatever compat LEAF has; LEAF stays LEGAL; its generation is
 *     the old one or the old + 1, and + 1 only with compat 0.10; once
 *     qemu-img amend has returned (amend.amended) compat is 0.10; BASE
 *     keeps compat 1.1 and its generation; qemu-img check finds nothing
 *     (an interrupted amend's volume is checked and repaired at restart);
 *     no amend intent is left;
 *   - sparsify (LEAF; its qemu-nbd is killed with it, as systemd kills the
 *     cgroup, its qcow2 metadata cache never flushed): the chain reads as
 *     the saved copy (zeros at 0 and 256k, not BASE's 0x11); qemu-img
 *     check finds no corruption (leaked clusters allowed: 0 or 3); LEAF
 *     LEGAL, its generation old, + 1 only at sparsify.meta; BASE
 *     untouched;
 *   - mid-downgrade: qemu-img amend, its writes throttled to 2 a second by
 *     a qemu-img wrapper first in the child's PATH, is killed once it has
 *     written the L2 entry of the cluster it allocated for LEAF's zero
 *     cluster and before the refcount block (qemu 7.2's order): LEAF is
 *     then corrupt (qemu-img check: 2); after the restart it is whole
 *     again, as above, with the old generation;
 *   - unrepaired: qemu-img amend (a wrapper) breaks LEAF's active L1 table
 *     offset through the fd it was given and dies by SIGKILL, the real
 *     qemu-img check -r all cannot open the image, and vdsmd is killed
 *     between the intent's MARKED=1 and the ILLEGAL metadata
 *     (amend.marked): every start after that finds LEAF ILLEGAL (memory and
 *     metadata), the intent kept with MARKED=1; once the offset is put back
 *     the next start repairs it, LEAF is LEGAL again with its data and
 *     generation, the intent gone;
 *   - every volume's metadata parent is what its qcow2 header names; no
 *     job survives the restart; no *.tmp left; a second restart reports
 *     the same outcome.
 * Needs a VD_TEST_HOOKS build (make asan-unit, make tsan). */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#ifdef VD_TEST_HOOKS
#include "crash_harness.h"

#define SD1 "11111111-1111-1111-1111-111111111111"
#define IMG1 "aaaaaaaa-0000-0000-0000-000000000001"
#define IMG2 "aaaaaaaa-0000-0000-0000-000000000002"
#define BASE "bbbbbbbb-0000-0000-0000-000000000001"
#define LEAF "bbbbbbbb-0000-0000-0000-000000000002"
#define SOLO "bbbbbbbb-0000-0000-0000-000000000003"
#define JOB1 "dddddddd-0000-0000-0000-000000000001"
#define OLD_DESC "made by the crash test"
#define NEW_DESC "updated by SDM.update_volume"
#define NEW_GEN 7
#define MiB (1024 * 1024)

/* What the child runs (under ST_CO_UPDATE_VOL, ST_CO_SPARSIFY or ST_CO_AMEND). */
enum vol_op { OP_UPDATE_ATTRS, OP_UPDATE_SHARED, OP_SPARSIFY, OP_AMEND, OP_AMEND_MID,
	      OP_AMEND_BROKEN };

/* Each operation's volume (img, vol) and the one it leaves alone besides
 * BASE (other). */
static const struct op_target {
	const char *img, *vol, *other;
} targets[] = {
	[OP_UPDATE_ATTRS] = { IMG1, LEAF, SOLO },
	[OP_UPDATE_SHARED] = { IMG2, SOLO, LEAF },
	[OP_SPARSIFY] = { IMG1, LEAF, SOLO },
	[OP_AMEND] = { IMG1, LEAF, SOLO },
	[OP_AMEND_MID] = { IMG1, LEAF, SOLO },
	[OP_AMEND_BROKEN] = { IMG1, LEAF, SOLO },
};

static char root[200], state[240], tpl[240];

static struct storage_state *open_state(void)
{
	char why[256] = "";
	struct storage_state *s = st_open(state, why, sizeof(why));
	ck_assert_msg(s != NULL, "%s", why);
	return s;
}

static char *vpath(const char *img, const char *vol)
{
	return st_pathf("%s/e1/%s/images/%s/%s", root, SD1, img, vol);
}

static void mkvol(struct storage_state *s, const char *img, const char *vol, int64_t size,
		  const char *pvol)
{
	struct st_volreq r = { SD1, img, vol, size, ST_FMT_COW, ST_SPARSE, "DATA", OLD_DESC,
			       pvol ? img : NULL, pvol, false, false, 0, 0 };
	struct st_err e = {0};
	char tid[37];
	ck_assert_msg(st_volume_create(s, &r, tid, &e) == 0, "%s", e.msg);
	struct st_task_status st;
	ck_assert_int_eq(st_task_wait(s, tid, 30000, &st), 0);
	ck_assert_int_eq(st.result, ST_TR_SUCCESS);
	ck_assert_int_eq(st_task_clear(s, tid, &e), 0);
}

static void qemu_io(const char *img, const char *vol, const char *cmd)
{
	char *p = vpath(img, vol);
	ck_assert_int_eq(crash_sh("qemu-io -f qcow2 -c '%s' %s >/dev/null", cmd, p), 0);
	free(p);
}

/* 1 for compat 0.10, 0 for 1.1 (anything else fails). */
static int compat_010(const char *img, const char *vol, const char *ctx)
{
	char *p = vpath(img, vol);
	int c11 = crash_sh("qemu-img info -U %s | grep -Eq '^ +compat: 1\\.1$'", p);
	int c010 = crash_sh("qemu-img info -U %s | grep -Eq '^ +compat: 0\\.10$'", p);
	free(p);
	ck_assert_msg((c11 == 0) != (c010 == 0), "%s: %s: compat neither 1.1 nor 0.10", ctx, vol);
	return c010 == 0;
}

static void build_template(void)
{
	char *e1 = st_pathf("%s/e1", root);
	ck_assert_int_eq(mkdir(e1, 0755), 0);
	struct storage_state *s = open_state();
	ck_assert_int_eq(st_start_workers(s, 1), 0);
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(s, SD1, ST_DT_LOCALFS, e1, "d1", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
	mkvol(s, IMG1, BASE, MiB, NULL);
	qemu_io(IMG1, BASE, "write -P 0x11 0 1M");
	mkvol(s, IMG1, LEAF, MiB, BASE);
	qemu_io(IMG1, LEAF, "write -z 64k 64k");
	qemu_io(IMG1, LEAF, "write -P 0 0 64k");
	qemu_io(IMG1, LEAF, "write -P 0 256k 128k");
	qemu_io(IMG1, LEAF, "write -P 0x33 512k 64k");
	mkvol(s, IMG2, SOLO, MiB, NULL);
	qemu_io(IMG2, SOLO, "write -P 0x44 0 64k");
	st_close(s);
	/* the zero cluster is one (a 0.10 image cannot have it), over data */
	char *p = vpath(IMG1, LEAF);
	ck_assert_int_eq(crash_sh("qemu-img map -U --output=json %s | grep '\"start\": 65536,' | "
			    "grep -q '\"zero\": true, \"data\": false'", p), 0);
	ck_assert_int_eq(crash_sh("qemu-img convert -O raw %s %s/guest.raw", p, root), 0);
	ck_assert_int_eq(crash_sh("cmp -s -n 65536 -i 65536:0 %s/guest.raw /dev/zero", root), 0);
	free(p);
	ck_assert_int_eq(compat_010(IMG1, LEAF, "template"), 0);
	ck_assert_int_eq(crash_sh("rm -rf %s && mkdir -p %s && cp -a %s/state %s/e1 %s/guest.raw %s/",
			    tpl, tpl, root, root, root, tpl), 0);
	free(e1);
}

static void restore(void)
{
	ck_assert_int_eq(crash_sh("rm -rf %s/state %s/e1 && cp -a %s/. %s/", root, root, tpl, root), 0);
}

/* ---- the child: the job, up to the crash ------------------------------------ */

static void child_wait_job(struct storage_state *s)
{
	for (int i = 0; i < 3000; i++) {
		pthread_mutex_lock(&s->lock);
		struct st_job *j = map_get(&s->jobs, JOB1);
		enum st_job_status st = j->info.status;
		pthread_mutex_unlock(&s->lock);
		if (st == ST_JOB_DONE)
			return;
		if (st == ST_JOB_FAILED || st == ST_JOB_ABORTED)
			_exit(5);
		usleep(10000);
	}
	_exit(6);
}

static void run_op(enum vol_op op)
{
	char why[256];
	struct storage_state *s = st_open(state, why, sizeof(why));
	if (!s || st_start_workers(s, 1) < 0)
		_exit(2);
	struct st_err e = {0};
	const char *const ids[3] = { SD1, targets[op].img, targets[op].vol };
	int rc;
	if (op == OP_AMEND) {
		rc = st_amend_job(s, JOB1, ids, 0, "0.10", &e);
	} else if (op == OP_SPARSIFY) {
		s->run_dir = st_pathf("%s/run", root);   /* its qemu-nbd's socket */
		rc = st_sparsify_job(s, JOB1, ids, 0, &e);
	} else {
		struct st_vol_attr a = { .legality = -1, .generation = -1, .has_desc = true };
		snprintf(a.desc, sizeof(a.desc), "%s", NEW_DESC);
		if (op == OP_UPDATE_ATTRS) {
			a.legality = 0;
			a.generation = NEW_GEN;
		} else {
			a.shared = true;
		}
		rc = st_update_job(s, JOB1, ids, 0, &a, &e);
	}
	if (rc < 0)
		_exit(4);
	child_wait_job(s);
	st_close(s);
}

/* ---- the parent: what restart finds ----------------------------------------- */

static struct st_volume *vol(struct storage_state *s, const char *id)
{
	struct st_domain *d = map_get(&s->domains, SD1);
	return map_get(&d->volumes, id);
}

/* The metadata's parent of every COW volume is its qcow2 backing file. */
static void assert_headers_agree(struct storage_state *s, const char *ctx)
{
	struct st_domain *d = map_get(&s->domains, SD1);
	for (struct st_map_ent *it = map_first(&d->volumes); it; it = map_next(&d->volumes, it)) {
		struct st_volume *v = map_val(it);
		char *p = vpath(v->image, v->uuid);
		bool none = strcmp(v->parent, ST_BLANK_UUID) == 0;
		int rc = none ? crash_sh("! qemu-img info -U %s | grep -q '^backing file:'", p)
			      : crash_sh("qemu-img info -U %s | grep -Eq '^backing file: %s( |$)'", p, v->parent);
		ck_assert_msg(rc == 0, "%s: %s: metadata parent %s, qcow2 header differs", ctx,
			      v->uuid, v->parent);
		free(p);
	}
}

/* A volume the operation does not touch is as the template made it. */
static void assert_untouched(struct storage_state *s, const char *id, const char *ctx)
{
	struct st_volume *v = vol(s, id);
	ck_assert_msg(v != NULL, "%s: %s lost", ctx, id);
	ck_assert_msg(v->legal && !v->shared && v->generation == 0 &&
		      strcmp(v->description, OLD_DESC) == 0, "%s: %s changed (%s, gen %u, '%s')",
		      ctx, id, v->legal ? "LEGAL" : "ILLEGAL", v->generation, v->description);
}

/* update_volume: 1 all new, 0 all old; anything else fails. */
static int check_update(struct storage_state *s, enum vol_op op, const char *ctx)
{
	const char *id = targets[op].vol;
	struct st_volume *v = vol(s, id);
	ck_assert_msg(v != NULL, "%s: %s lost", ctx, id);
	bool old = v->legal && !v->shared && v->generation == 0 &&
		   strcmp(v->description, OLD_DESC) == 0;
	bool neu = op == OP_UPDATE_ATTRS
		? !v->legal && !v->shared && v->generation == NEW_GEN
		: v->legal && v->shared && v->generation == 1;
	neu = neu && strcmp(v->description, NEW_DESC) == 0;
	ck_assert_msg(old || neu, "%s: %s is a mixture: %s%s, generation %u, description '%s'",
		      ctx, id, v->legal ? "LEGAL" : "ILLEGAL", v->shared ? " SHARED" : "",
		      v->generation, v->description);
	return neu;
}

/* What amend and sparsify leave of LEAF, whatever the step: the chain reads
 * as the saved copy, qemu-img check exits 0 (or also_ok: 3, leaked clusters
 * only), LEAF is LEGAL, not SHARED, its description the old one. */
static struct st_volume *check_leaf(struct storage_state *s, const char *ctx, int also_ok)
{
	char *leaf = vpath(IMG1, LEAF);
	ck_assert_msg(crash_sh("qemu-img compare -q -U -f raw %s/guest.raw %s", root, leaf) == 0,
		      "%s: the guest's data through the chain changed", ctx);
	int crc = crash_sh("qemu-img check -q -U %s >/dev/null 2>&1", leaf);
	ck_assert_msg(crc == 0 || crc == also_ok, "%s: qemu-img check of LEAF: %d (2: corrupt)",
		      ctx, crc);
	free(leaf);
	struct st_volume *v = vol(s, LEAF);
	ck_assert_msg(v != NULL && v->legal && !v->shared, "%s: LEAF lost or changed", ctx);
	ck_assert_str_eq(v->description, OLD_DESC);
	return v;
}

static int check_amend(struct storage_state *s, const char *step, const char *ctx)
{
	struct st_volume *v = check_leaf(s, ctx, 0);
	ck_assert_msg(v->generation <= 1, "%s: LEAF generation %u", ctx, v->generation);
	int amended = compat_010(IMG1, LEAF, ctx);
	if (v->generation == 1)
		ck_assert_msg(amended, "%s: generation bumped, compat still 1.1", ctx);
	if (strcmp(step, "amend.amended") == 0 || strcmp(step, "amend.meta") == 0)
		ck_assert_msg(amended, "%s: qemu-img amend returned, compat still 1.1", ctx);
	ck_assert_int_eq(compat_010(IMG1, BASE, ctx), 0);
	return (int)v->generation;
}

static int check_sparsify(struct storage_state *s, const char *step, const char *ctx)
{
	struct st_volume *v = check_leaf(s, ctx, 3);
	ck_assert_msg(v->generation == (strcmp(step, "sparsify.meta") == 0 ? 1u : 0u),
		      "%s: LEAF generation %u", ctx, v->generation);
	return (int)v->generation;
}

/* 1: the new state, 0: the old one. */
static int check_outcome(struct storage_state *s, enum vol_op op, const char *step,
			 const char *ctx)
{
	assert_headers_agree(s, ctx);
	ck_assert_int_eq(crash_sh("! find %s/e1 -name '*.tmp' | grep -q .", root), 0);
	pthread_mutex_lock(&s->lock);
	ck_assert_msg(map_first(&s->jobs) == NULL, "%s: a job survived", ctx);   /* jobs end with vdsmd */
	pthread_mutex_unlock(&s->lock);
	ck_assert_msg(crash_sh("! ls %s | grep -q '^amend-'", state) == 0,
		      "%s: an amend intent was left", ctx);
	int outcome = op == OP_SPARSIFY ? check_sparsify(s, step, ctx)
		      : op >= OP_AMEND ? check_amend(s, step, ctx) : check_update(s, op, ctx);
	assert_untouched(s, BASE, ctx);
	assert_untouched(s, targets[op].other, ctx);
	return outcome;
}

/* ---- the amend killed mid-downgrade ------------------------------------------ */

/* <root>/<dir>/qemu-img, a wrapper run first in the child's PATH: script
 * (taken, freed here) as its text. */
static void install_wrapper(const char *dir, char *script)
{
	char *d = st_pathf("%s/%s", root, dir), *path = st_pathf("%s/%s/qemu-img", root, dir);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(script, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, 0755), 0);
	free(script);
	free(d);
	free(path);
}

/* qemu-img amend -o compat=X SPEC with the writes to the volume (fd 3)
 * throttled to 2 a second; everything else the real qemu-img. */
static void write_wrapper(void)
{
	char *real = st_find_exe("qemu-img");
	ck_assert_ptr_nonnull(real);
	static const char top[] = "\"file\":{\"driver\":\"file\",\"filename\":\"/proc/self/fd/3\"}";
	install_wrapper("bin", st_pathf("#!/bin/sh\n"
		"if [ \"$1\" = amend ] && [ $# -eq 4 ]; then\n"
		"\tspec=$(printf '%%s' \"$4\" | sed 's|%s|\"file\":{\"driver\":\"throttle\","
		"\"throttle-group\":\"tg0\",%s}|')\n"
		"\texec %s amend --object throttle-group,id=tg0,x-iops-write=2 \"$2\" \"$3\" "
		"\"$spec\"\n"
		"fi\n"
		"exec %s \"$@\"\n", top, top, real, real));
	free(real);
}

static uint64_t be_at(int fd, off_t off, int bytes)
{
	unsigned char b[8] = { 0 };
	if (pread(fd, b, (size_t)bytes, off) != bytes)
		return 0;
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v = v << 8 | b[i];
	return v;
}

/* LEAF's volume file, opened with flags (-1 when it cannot be). */
static int open_leaf(int flags)
{
	char *p = vpath(IMG1, LEAF);
	int fd = open(p, flags);
	free(p);
	return fd;
}

/* LEAF's L2 entry for guest offset 64k (a zero cluster in the template)
 * now names a data cluster: qemu-img allocated it and wrote the table. */
static bool zero_cluster_expanded(void)
{
	int fd = open_leaf(O_RDONLY);
	if (fd < 0)
		return false;
	const uint64_t mask = 0x00fffffffffffe00ULL;
	uint64_t cbits = be_at(fd, 20, 4), l1 = be_at(fd, 40, 8);
	uint64_t l2 = cbits >= 9 && cbits <= 21 ? be_at(fd, (off_t)l1, 8) & mask : 0;
	uint64_t ent = l2 ? be_at(fd, (off_t)(l2 + 8 * (65536 >> cbits)), 8) : 1;
	close(fd);
	return (ent & 1) == 0 && (ent & mask) != 0;
}

/* While the throttled qemu-img runs (its vdsmd gone): wait for the L2
 * write, then it is killed (crash_fork_at_then); what it left is corrupt. */
static void wait_l2_written(const char *ctx)
{
	for (int i = 0; i < 10000 && !zero_cluster_expanded(); i++)
		usleep(2000);
	ck_assert_msg(zero_cluster_expanded(), "%s: qemu-img never wrote LEAF's L2 entry", ctx);
}

static void assert_left_corrupt(const char *ctx)
{
	char *leaf = vpath(IMG1, LEAF);
	int crc = crash_sh("qemu-img check -q -U %s >/dev/null 2>&1", leaf);
	free(leaf);
	ck_assert_msg(crc == 2, "%s: qemu-img killed between the L2 table and the refcount "
		      "block, yet qemu-img check says %d (2: corrupt)", ctx, crc);
}

/* qemu-img amend that writes an unaligned active L1 table offset (header
 * bytes 40..47) into the volume it got as fd 3, then kills itself;
 * everything else the real qemu-img. */
static void write_broken_wrapper(void)
{
	char *real = st_find_exe("qemu-img");
	ck_assert_ptr_nonnull(real);
	install_wrapper("bin2", st_pathf("#!/bin/sh\n"
		"if [ \"$1\" = amend ]; then\n"
		"\tprintf '\\000\\000\\000\\000\\000\\000\\022\\064' | "
		"dd of=/proc/self/fd/3 bs=1 seek=40 conv=notrunc status=none\n"
		"\tkill -9 $$\n"
		"fi\n"
		"exec %s \"$@\"\n", real));
	free(real);
}

static void child_op(unsigned op)
{
	if (op == OP_AMEND_MID || op == OP_AMEND_BROKEN) {
		char *p = st_pathf("%s/%s:%s", root, op == OP_AMEND_MID ? "bin" : "bin2",
				   getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
		setenv("PATH", p, 1);
		free(p);
		op = OP_AMEND;
	}
	run_op((enum vol_op)op);
}

static void crash_run(const char *step, enum vol_op op, unsigned *outcomes)
{
	char ctx[160];
	snprintf(ctx, sizeof(ctx), "step %s, operation %d", step, (int)op);
	restore();
	crash_fork_at_then(step, (unsigned)op, child_op, ctx,
			   op == OP_AMEND_MID ? wait_l2_written : NULL);
	if (op == OP_AMEND_MID)
		assert_left_corrupt(ctx);
	struct storage_state *s = open_state();
	int first = check_outcome(s, op, step, ctx);
	st_close(s);
	s = open_state();   /* persisted: a second start says the same */
	ck_assert_int_eq(check_outcome(s, op, step, ctx), first);
	st_close(s);
	*outcomes |= 1u << first;
}

struct steps_arg {
	enum vol_op op;
	unsigned outcomes;
};

static void crash_run_step(const char *step, void *arg)
{
	struct steps_arg *a = arg;
	crash_run(step, a->op, &a->outcomes);
}

static void run_all_steps(enum vol_op op, unsigned want_outcomes)
{
	struct steps_arg a = { op, 0 };
	unsigned n = crash_each_step(op == OP_AMEND ? ST_CO_AMEND
				     : op == OP_SPARSIFY ? ST_CO_SPARSIFY : ST_CO_UPDATE_VOL,
				     crash_run_step, &a);
	/* both ends are reached: the early steps leave the old state, the late the new */
	ck_assert_uint_eq(a.outcomes, want_outcomes);
	printf("crash vol: operation %d: killed at %u step(s), each recovered to one state; "
	       "%u qemu-img child(ren) killed\n", (int)op, n, crash_orphans_killed);
}

static void suite_setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-crash-vol-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(tpl, sizeof(tpl), "%s/tpl", root);
	build_template();
	write_wrapper();
	write_broken_wrapper();
}

static void suite_teardown(void)
{
	st_rmtree(root);
}

START_TEST(crash_update_attributes)
{
	run_all_steps(OP_UPDATE_ATTRS, 3);
}
END_TEST

START_TEST(crash_update_shared)
{
	run_all_steps(OP_UPDATE_SHARED, 3);
}
END_TEST

START_TEST(crash_amend_downgrade)
{
	run_all_steps(OP_AMEND, 3);
}
END_TEST

START_TEST(crash_sparsify)
{
	run_all_steps(OP_SPARSIFY, 3);
}
END_TEST

START_TEST(crash_amend_mid_downgrade)
{
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	unsigned outcomes = 0;
	crash_run("amend.amending", OP_AMEND_MID, &outcomes);
	ck_assert_uint_eq(outcomes, 1);   /* the old generation: the amend did not finish */
	printf("crash vol: qemu-img amend killed mid-downgrade (L2 written, refcount not): "
	       "repaired at restart\n");
}
END_TEST

/* LEAF's 8 header bytes at 40 (the active L1 table offset). */
static uint64_t leaf_l1(void)
{
	int fd = open_leaf(O_RDONLY);
	ck_assert_int_ge(fd, 0);
	uint64_t v = be_at(fd, 40, 8);
	close(fd);
	return v;
}

static void set_leaf_l1(uint64_t v)
{
	unsigned char b[8];
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (unsigned char)(v & 0xff);
	int fd = open_leaf(O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, b, 8, 40), 8);
	close(fd);
}

START_TEST(crash_amend_unrepaired)
{
	const char *ctx = "step amend.marked, repair failing";
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	unsigned n = 0;
	for (size_t i = 0; i < st_crash_nsteps; i++)
		n += (st_crash_steps[i].ops & ST_CO_AMEND_UNREPAIRED) != 0;
	ck_assert_uint_eq(n, 1);   /* amend.marked, run here */
	restore();
	uint64_t l1 = leaf_l1();
	crash_fork_at_then("amend.marked", OP_AMEND_BROKEN, child_op, ctx, NULL);
	ck_assert_uint_eq(leaf_l1(), 0x1234);   /* what the killed "amend" left */
	char *meta = st_pathf("%s/e1/%s/images/%s/%s.meta", root, SD1, IMG1, LEAF);
	ck_assert_msg(crash_sh("grep -qx LEGALITY=LEGAL %s", meta) == 0,
		      "%s: killed before the ILLEGAL metadata, yet it is written", ctx);
	for (int start = 0; start < 2; start++) {   /* each start: the repair fails again */
		struct storage_state *s = open_state();
		struct st_volume *v = vol(s, LEAF);
		ck_assert_msg(v && !v->legal, "%s, start %d: LEAF served LEGAL", ctx, start + 1);
		ck_assert_uint_eq(v->generation, 0);
		assert_untouched(s, BASE, ctx);
		assert_untouched(s, SOLO, ctx);
		st_close(s);
		ck_assert_int_eq(crash_sh("grep -qx LEGALITY=ILLEGAL %s", meta), 0);
		ck_assert_msg(crash_sh("grep -qx MARKED=1 %s/amend-%s.intent", state, LEAF) == 0,
			      "%s, start %d: the intent or its MARKED is gone", ctx, start + 1);
	}
	set_leaf_l1(l1);   /* put right: the next start repairs it */
	struct storage_state *s = open_state();
	struct st_volume *v = vol(s, LEAF);
	ck_assert_msg(v && v->legal && v->generation == 0, "%s: repaired, yet not LEGAL", ctx);
	st_close(s);
	ck_assert_int_eq(crash_sh("grep -qx LEGALITY=LEGAL %s", meta), 0);
	ck_assert_msg(crash_sh("! ls %s | grep -q '^amend-'", state) == 0, "%s: intent left", ctx);
	char *leaf = vpath(IMG1, LEAF);
	ck_assert_int_eq(crash_sh("qemu-img check -q -U %s", leaf), 0);
	ck_assert_msg(crash_sh("qemu-img compare -q -U -f raw %s/guest.raw %s", root, leaf) == 0,
		      "%s: the guest's data changed", ctx);
	free(leaf);
	free(meta);
	printf("crash vol: amend killed, repair failing, vdsmd killed at amend.marked: ILLEGAL "
	       "at every start until repaired, then LEGAL\n");
}
END_TEST
#endif /* VD_TEST_HOOKS */

/* The tests, in their order: run (a VD_TEST_HOOKS build) or each skipped. */
#define CRASH_VOL_TESTS(X) X(crash_update_attributes) X(crash_update_shared) \
	X(crash_amend_downgrade) X(crash_amend_mid_downgrade) X(crash_amend_unrepaired) \
	X(crash_sparsify)

static Suite *suite(void)
{
	Suite *s = suite_create("storage_crash_vol");
	TCase *tc = tcase_create("crash");
#ifdef VD_TEST_HOOKS
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
#define ADD_TEST(t) tcase_add_test(tc, t);
	CRASH_VOL_TESTS(ADD_TEST)
#undef ADD_TEST
#else
	const char *why = "kill -9 at named steps needs the crash points of a VD_TEST_HOOKS "
			  "build (runs in make asan-unit / tsan)";
#define SKIP_TEST(t) check_skip(#t, why);
	CRASH_VOL_TESTS(SKIP_TEST)
#undef SKIP_TEST
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
