/* vdsmd/storage/st_volverify.c - Volume.verify_untrusted.
 *
 * The engine calls it after an upload (the data came from a user) and
 * before it uses the volume.  As VDSM's hsm.verify_untrusted_volume:
 * qemu-img info of the untrusted data under qemuimg.info(trusted_image=
 * False)'s limits (prlimit: 30 s of CPU, 1 GiB of address space), letting
 * qemu probe the format (a forced format would hide a qcow2 header in a
 * RAW volume); then, each a 484 ImageVerificationError:
 *   - the probed format is the metadata's (raw / qcow2);
 *   - the virtual size is not above the volume's capacity (below it only
 *     logs, as VDSM: old engines rounded sizes up to a GiB);
 *   - the backing file is the metadata's parent: none for a base volume,
 *     the parent's UUID for a top volume (vdsmd's own form for a parent in
 *     another image, "../<image>/<parent>", is accepted too);
 *   - a qcow2 compat the domain supports (0.10 and 1.1 from version 4 on,
 *     else 0.10 only).
 * Beyond VDSM (issue 28): a qcow2 volume must pass `qemu-img check`
 * (corruptions or check errors: 484; leaked clusters waste space, harm no
 * data and pass, as qemuimg.check treats exit code 3).  qemu-img only gets
 * the data file opened here with O_NOFOLLOW, as /proc/self/fd/3, and the
 * check opens it with "backing": null - the header's backing file name is
 * the untrusted part.  A qemu-img that fails or says nothing usable is a
 * 100, as VDSM's cmdutils.Error. */
#include "st_ops.h"
#include "../../codecs/codec.h"
#include "../../common/arena.h"
#include "../../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNTRUSTED_CPU "--cpu=30"
#define UNTRUSTED_AS "--as=1073741824"

struct vinfo {
	char format[16], backing[256], compat[8];
	int64_t vsize;
	long long corruptions, check_errors, leaks;
};

static void copy_str(const struct vd_value *v, char *out, size_t len)
{
	if (v && v->type == VD_STRING)
		snprintf(out, len, "%.*s", (int)VD_MIN(v->v.s.len, len - 1), v->v.s.ptr);
}

static long long get_int(const struct vd_value *v, long long dflt)
{
	return v && v->type == VD_INT ? v->v.i : dflt;
}

/* prlimit ... qemu-img <args> on fd 3; the JSON object of its output
 * (after any warning lines) into *root, its strings pointing into *b (the
 * caller frees b after the tree).  check: exit codes 2 and 3 carry a
 * report too. */
static int untrusted_json(char *const *args, size_t nargs, int fd, bool check,
			  struct vd_arena *a, struct vd_buf *b, struct vd_value **root,
			  struct st_err *e)
{
	char *argv[16] = { (char *)"prlimit", (char *)UNTRUSTED_CPU, (char *)UNTRUSTED_AS,
			   (char *)"qemu-img" };
	size_t n = 4;
	for (size_t i = 0; i < nargs && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	char err[256];
	int rc = st_run_tool_out(NULL, "prlimit", "util-linux", argv, fd, b, err, sizeof(err));
	bool report = check && rc == VD_EIO && (strstr(err, "(exit 2)") || strstr(err, "(exit 3)"));
	if (rc < 0 && !report)
		return st_fail(e, RPC_E_GENERAL, "%s", err);
	const char *start = b->data ? memchr(b->data, '{', b->len) : NULL;
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error cerr;
	const struct vd_codec *json = codec_find("fallback");
	*root = NULL;
	rc = json && start ? json->decode(a, start, b->len - (size_t)(start - b->data), &lim, root,
					  &cerr) : -1;
	if (rc != 0 || !*root || (*root)->type != VD_OBJECT)
		return st_fail(e, RPC_E_GENERAL, "qemu-img %s: unexpected output", args[0]);
	return 0;
}

static int probe(int fd, struct vinfo *vi, struct st_err *e)
{
	char *args[] = { (char *)"info", (char *)"--output=json", (char *)"/proc/self/fd/3" };
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_value *root = NULL;
	struct vd_buf b = VD_BUF_INIT;
	int rc = untrusted_json(args, 3, fd, false, &a, &b, &root, e);
	if (rc == 0) {
		const struct vd_value *vs = vd_obj_get(root, "virtual-size");
		copy_str(vd_obj_get(root, "format"), vi->format, sizeof(vi->format));
		if (!vs || vs->type != VD_INT || !vi->format[0])
			rc = st_fail(e, RPC_E_GENERAL, "qemu-img info: no format or virtual-size");
		vi->vsize = get_int(vs, 0);
		copy_str(vd_obj_get(root, "backing-filename"), vi->backing, sizeof(vi->backing));
		const struct vd_value *fs = vd_obj_get(root, "format-specific");
		const struct vd_value *data = fs ? vd_obj_get(fs, "data") : NULL;
		copy_str(data ? vd_obj_get(data, "compat") : NULL, vi->compat, sizeof(vi->compat));
	}
	arena_free(&a);
	buf_free(&b);
	return rc;
}

static int check_qcow2(int fd, struct vinfo *vi, struct st_err *e)
{
	char *args[] = { (char *)"check", (char *)"--output=json",
			 (char *)"json:{\"driver\":\"qcow2\",\"file\":{\"driver\":\"file\","
			 "\"filename\":\"/proc/self/fd/3\"},\"backing\":null}" };
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_value *root = NULL;
	struct vd_buf b = VD_BUF_INIT;
	int rc = untrusted_json(args, 3, fd, true, &a, &b, &root, e);
	if (rc == 0) {
		vi->corruptions = get_int(vd_obj_get(root, "corruptions"), 0);
		vi->check_errors = get_int(vd_obj_get(root, "check-errors"), 0);
		vi->leaks = get_int(vd_obj_get(root, "leaks"), 0);
	}
	arena_free(&a);
	buf_free(&b);
	return rc;
}

/* What the metadata says, copied under the lock. */
struct vmeta {
	int format, version;
	int64_t capacity;
	char parent[37], pimage[37];
};

static int verify(const struct vmeta *m, int fd, const char *vol, struct st_err *e)
{
	struct vinfo vi = { 0 };
	if (probe(fd, &vi, e) < 0)
		return -1;
	const char *mfmt = m->format == ST_FMT_COW ? "qcow2" : "raw";
	if (strcmp(vi.format, mfmt) != 0)
		return st_fail(e, RPC_E_IMAGE_VERIFY, "reason=Volume's format specified by QEMU is "
			       "%s, while the format specified in VDSM metadata is %s", vi.format,
			       mfmt);
	if (vi.vsize > m->capacity)
		return st_fail(e, RPC_E_IMAGE_VERIFY, "reason=Image virtual size %lld is bigger "
			       "than volume size %lld", (long long)vi.vsize, (long long)m->capacity);
	if (vi.vsize < m->capacity)
		log_warn("storage: volume %s: image virtual size %lld is smaller than volume size "
			 "%lld, image should be resized", vol, (long long)vi.vsize,
			 (long long)m->capacity);
	char other[80];
	snprintf(other, sizeof(other), "../%s/%s", m->pimage, m->parent);
	const char *qparent = vi.backing[0] ? vi.backing : ST_BLANK_UUID;
	if (strcmp(qparent, m->parent) != 0 &&
	    (strcmp(m->parent, ST_BLANK_UUID) == 0 || strcmp(qparent, other) != 0))
		return st_fail(e, RPC_E_IMAGE_VERIFY, "reason=Image backing file '%.64s' does not "
			       "match volume parent uuid '%s'", qparent, m->parent);
	if (strcmp(vi.format, "qcow2") != 0)
		return 0;
	bool compat_ok = strcmp(vi.compat, "0.10") == 0 ||
			 (m->version >= 4 && strcmp(vi.compat, "1.1") == 0);
	if (!compat_ok)
		return st_fail(e, RPC_E_IMAGE_VERIFY, "reason=qcow2 compat '%s' not supported on "
			       "this domain", vi.compat);
	if (check_qcow2(fd, &vi, e) < 0)
		return -1;
	if (vi.corruptions > 0 || vi.check_errors > 0)
		return st_fail(e, RPC_E_IMAGE_VERIFY, "reason=qemu-img check found %lld "
			       "corruption(s) and %lld check error(s)", vi.corruptions,
			       vi.check_errors);
	if (vi.leaks > 0)
		log_warn("storage: volume %s: %lld leaked cluster(s) (space only)", vol, vi.leaks);
	return 0;
}

int st_volume_verify_untrusted(struct storage_state *s, const char *sp, const char *sd,
			       const char *img, const char *vol, struct st_err *e)
{
	(void)sp;   /* VDSM ignores the pool too: the domain names the volume */
	struct st_domain *d = NULL;
	struct vmeta m = { 0 };
	pthread_mutex_lock(&s->lock);
	struct st_volume *v = st_find_volume(s, sd, img, vol, &d, e);
	if (v) {
		d->busy++;
		m.format = v->format;
		m.version = d->version;
		m.capacity = v->capacity;
		snprintf(m.parent, sizeof(m.parent), "%s", v->parent);
		const struct st_volume *p = map_get(&d->volumes, v->parent);
		snprintf(m.pimage, sizeof(m.pimage), "%s", p ? p->image : img);
	}
	pthread_mutex_unlock(&s->lock);
	if (!v)
		return -1;
	struct stat st;
	int fd = st_vol_open(d, img, vol, O_RDONLY, &st);
	int rc;
	if (fd < 0)
		rc = st_fail_rc(e, RPC_E_GENERAL, fd, "volume %s data file", vol);
	else
		rc = verify(&m, fd, vol, e);
	if (fd >= 0)
		close(fd);
	pthread_mutex_lock(&s->lock);
	d->busy--;
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		log_info("storage: volume %s/%s/%s verified", sd, img, vol);
	return rc;
}
