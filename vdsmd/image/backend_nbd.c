/* vdsmd/image/backend_nbd.c - the nbd:unix: backend: an NBD export (the
 * qemu-nbd NBD.start_server runs) read and written through libnbd.
 *
 * Url: nbd:unix:<socket>[:exportname=<name>], the form VDSM's nbd.py hands
 * the engine; the socket must resolve beneath opts->nbd_dir (the daemon's
 * <run_dir>/nbd), anything else is VD_EPERM.
 *
 * Semantics follow ovirt-imageio's backends/nbd.py, nbd.py and nbdutil.py:
 *  - meta contexts base:allocation and qemu:allocation-depth are asked for;
 *    with a dirty ticket the server is first asked which
 *    "qemu:dirty-bitmap:" contexts it exports and the one it names is used
 *    (none, or more than one: no dirty extents, as imageio);
 *  - zero extents: zero = NBD_STATE_ZERO of base:allocation; hole = depth 0
 *    in qemu:allocation-depth (not allocated anywhere in the chain), false
 *    when the server has no allocation depth (a raw export); a server
 *    without base:allocation reports the whole image as one data extent;
 *  - dirty extents: the bitmap's dirty bit merged with base:allocation's
 *    zero bit;
 *  - block status is asked for in steps of at most 2 GiB, replies are
 *    clipped to the step and consecutive extents merged; reads and writes
 *    are split under the server's maximum block size (32 MiB when it
 *    reports none), zero in steps of at most 1 GiB (imageio's MAX_ZERO);
 *  - zero sends NBD_CMD_WRITE_ZEROES, with NBD_CMD_FLAG_NO_HOLE unless the
 *    ticket is sparse; flush is NBD_CMD_FLUSH when the server offers it;
 *  - max_readers and max_writers are both max_connections (qemu-nbd is
 *    started with --shared=8).
 * Where we differ: a server that cannot zero gets zeroes written instead
 * (imageio refuses the request). */
#include "backend.h"

#include <errno.h>
#include <libnbd.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/log.h"

#define NBD_BLOCK_DEFAULT (32u << 20)     /* imageio's maximum_block_size */
#define NBD_STATUS_STEP ((uint64_t)2 << 30)
#define NBD_ZERO_STEP ((uint64_t)1 << 30)
#define NBD_WRITE_ZERO_BUF (1u << 20)
/* entries (length, flags pairs) one block status reply may bring per context */
#define NBD_REPLY_ENTRIES_MAX (1u << 20)

#define CTX_ALLOC "base:allocation"
#define CTX_DEPTH "qemu:allocation-depth"
#define CTX_BITMAP_PREFIX "qemu:dirty-bitmap:"

struct nbd_backend {
	struct img_backend base;
	struct nbd_handle *h;
	uint64_t size;
	uint64_t max_block;
	bool has_alloc, has_depth;
	char *bitmap;            /* the dirty bitmap's context name, or NULL */
};

static struct nbd_backend *nb(struct img_backend *be)
{
	return (struct nbd_backend *)be;
}

/* A libnbd call failed: keep its errno, log its message. */
static int nbd_fail(struct img_backend *be, const char *what, int err)
{
	be->err_no = nbd_get_errno();
	log_warn("image: nbd: %s: %s", what, nbd_get_error() ? nbd_get_error() : "(no message)");
	return err;
}

static int nbdb_size(struct img_backend *be, uint64_t *size)
{
	*size = nb(be)->size;
	return 0;
}

static long nbdb_pread(struct img_backend *be, void *buf, size_t len, uint64_t off)
{
	struct nbd_backend *n = nb(be);
	if (len > (size_t)LONG_MAX)
		return VD_EINVAL;
	if (off >= n->size)
		return 0;
	if (len > n->size - off)
		len = (size_t)(n->size - off);
	size_t done = 0;
	while (done < len) {
		size_t step = (size_t)VD_MIN((uint64_t)(len - done), n->max_block);
		if (nbd_pread(n->h, (char *)buf + done, step, off + done, 0) < 0)
			return nbd_fail(be, "read", VD_EIO);
		done += step;
	}
	return (long)done;
}

static bool in_image(const struct nbd_backend *n, uint64_t off, uint64_t len)
{
	return off <= n->size && len <= n->size - off;
}

static int nbdb_pwrite(struct img_backend *be, const void *buf, size_t len, uint64_t off)
{
	struct nbd_backend *n = nb(be);
	if (!be->writable)
		return VD_EPERM;
	if (!in_image(n, off, len)) /* an NBD export does not grow */
		return VD_EINVAL;
	size_t done = 0;
	while (done < len) {
		size_t step = (size_t)VD_MIN((uint64_t)(len - done), n->max_block);
		if (nbd_pwrite(n->h, (const char *)buf + done, step, off + done, 0) < 0)
			return nbd_fail(be, "write", VD_EIO);
		done += step;
	}
	return 0;
}

static int write_zeros(struct img_backend *be, uint64_t off, uint64_t len)
{
	size_t chunk = (size_t)VD_MIN(len, (uint64_t)NBD_WRITE_ZERO_BUF);
	char *z = xcalloc(1, chunk ? chunk : 1);
	int rc = 0;
	while (len && rc == 0) {
		size_t step = (size_t)VD_MIN(len, (uint64_t)chunk);
		rc = nbdb_pwrite(be, z, step, off);
		off += step;
		len -= step;
	}
	free(z);
	return rc;
}

static int nbdb_zero(struct img_backend *be, uint64_t off, uint64_t len, bool punch)
{
	struct nbd_backend *n = nb(be);
	if (!be->writable)
		return VD_EPERM;
	if (!in_image(n, off, len))
		return VD_EINVAL;
	if (nbd_can_zero(n->h) != 1)
		return write_zeros(be, off, len);
	uint32_t flags = punch ? 0 : LIBNBD_CMD_FLAG_NO_HOLE;
	while (len) {
		uint64_t step = VD_MIN(len, NBD_ZERO_STEP);
		if (nbd_zero(n->h, step, off, flags) < 0)
			return nbd_fail(be, "zero", VD_EIO);
		off += step;
		len -= step;
	}
	return 0;
}

static int nbdb_flush(struct img_backend *be)
{
	struct nbd_backend *n = nb(be);
	if (nbd_can_flush(n->h) != 1)
		return 0;
	if (nbd_flush(n->h, 0) < 0)
		return nbd_fail(be, "flush", VD_EIO);
	return 0;
}

/* One context's reply to one block status command: (length, flags) pairs. */
struct status_list {
	uint32_t *v;
	size_t n;   /* uint32 count (twice the pairs) */
	bool seen;
};

struct status_reply {
	const struct nbd_backend *nbe;
	struct status_list alloc, other;  /* other: depth or the bitmap */
	const char *other_name;
	bool too_many;
};

static int status_cb(void *user, const char *ctx, uint64_t offset, uint32_t *entries,
		     size_t nr, int *error)
{
	struct status_reply *r = user;
	struct status_list *l = strcmp(ctx, CTX_ALLOC) == 0 ? &r->alloc
				: r->other_name && strcmp(ctx, r->other_name) == 0 ? &r->other
										    : NULL;
	if (!l || l->seen) /* a context we did not ask for here, or a repeat */
		return 0;
	nr &= ~(size_t)1;
	if (nr > 2 * (size_t)NBD_REPLY_ENTRIES_MAX) {
		r->too_many = true;
		return 0;
	}
	l->v = xmalloc(nr ? nr * sizeof(*l->v) : sizeof(*l->v));
	memcpy(l->v, entries, nr * sizeof(*l->v));
	l->n = nr;
	l->seen = true;
	return 0;
}

/* Flags in one word, as imageio's Extent: bit 0 hole, 1 zero (base
 * allocation), 2 dirty, 3 backing (depth 0). */
#define X_ZERO (1u << 1)
#define X_DIRTY (1u << 2)
#define X_BACKING (1u << 3)

static uint32_t map_flags(bool alloc, bool depth, uint32_t f)
{
	if (alloc)
		return f & (LIBNBD_STATE_HOLE | LIBNBD_STATE_ZERO);
	if (depth)
		return f == 0 ? X_BACKING : 0;
	return (f & 1u) ? X_DIRTY : 0; /* NBD_STATE_DIRTY */
}

static int add_extent(struct img_extents *out, uint64_t start, uint64_t len, uint32_t f,
		      enum img_extent_context ctx)
{
	bool zero = (f & X_ZERO) != 0;
	if (ctx == IMG_EXTENTS_DIRTY)
		return img_extents_add(out, start, len, zero, false, (f & X_DIRTY) != 0);
	return img_extents_add(out, start, len, zero, (f & X_BACKING) != 0, false);
}

/* Merges the two lists of one reply (imageio's nbdutil.merged) into out,
 * clipped to [*pos, end); *pos advances past what was covered. */
static int merge_reply(const struct status_reply *r, bool depth, enum img_extent_context ctx,
		       uint64_t *pos, uint64_t end, struct img_extents *out)
{
	size_t ia = 0, ib = 0;
	uint64_t la = 0, lb = 0;   /* what is left of the current entries */
	uint32_t fa = 0, fb = 0;
	bool two = r->other_name != NULL;
	while (*pos < end) {
		if (la == 0) {
			if (ia + 1 >= r->alloc.n + (r->alloc.seen ? 0 : 2))
				break;
			if (r->alloc.seen) {
				la = r->alloc.v[ia];
				fa = map_flags(true, false, r->alloc.v[ia + 1]);
			} else { /* no base:allocation: all data */
				la = end - *pos;
				fa = 0;
			}
			ia += 2;
			if (la == 0)
				return VD_EIO;
		}
		if (two && lb == 0) {
			if (ib + 1 >= r->other.n)
				break;
			lb = r->other.v[ib];
			fb = map_flags(false, depth, r->other.v[ib + 1]);
			ib += 2;
			if (lb == 0)
				return VD_EIO;
		}
		uint64_t len = two ? VD_MIN(la, lb) : la;
		len = VD_MIN(len, end - *pos);
		int rc = add_extent(out, *pos, len, fa | (two ? fb : 0), ctx);
		if (rc < 0)
			return rc;
		*pos += len;
		la -= VD_MIN(la, len);
		if (two)
			lb -= VD_MIN(lb, len);
	}
	return 0;
}

static int nbdb_extents(struct img_backend *be, enum img_extent_context ctx,
			struct img_extents *out)
{
	struct nbd_backend *n = nb(be);
	out->n = 0;
	if (ctx == IMG_EXTENTS_DIRTY && !n->bitmap)
		return VD_EUNSUPP;
	if (ctx == IMG_EXTENTS_ZERO && !n->has_alloc)
		return img_extents_add(out, 0, n->size, false, false, false);
	bool depth = ctx == IMG_EXTENTS_ZERO && n->has_depth;
	const char *other = ctx == IMG_EXTENTS_DIRTY ? n->bitmap : depth ? CTX_DEPTH : NULL;
	uint64_t pos = 0;
	int rc = 0;
	while (pos < n->size && rc == 0) {
		uint64_t end = pos + VD_MIN(n->size - pos, NBD_STATUS_STEP);
		struct status_reply r = { .nbe = n, .other_name = other };
		nbd_extent_callback cb = { .callback = status_cb, .user_data = &r };
		if (nbd_block_status(n->h, end - pos, pos, cb, 0) < 0) {
			rc = nbd_fail(be, "block status", VD_EIO);
		} else if (r.too_many) {
			rc = VD_ETOOBIG;
		} else if ((n->has_alloc && !r.alloc.seen) || (other && !r.other.seen)) {
			log_warn("image: nbd: block status at %llu: the server left out a context",
				 (unsigned long long)pos);
			rc = VD_EIO;
		} else {
			uint64_t before = pos;
			rc = merge_reply(&r, depth, ctx, &pos, end, out);
			if (rc == 0 && pos == before)
				rc = VD_EIO; /* no progress: never loop on it */
		}
		free(r.alloc.v);
		free(r.other.v);
	}
	if (rc < 0)
		out->n = 0;
	return rc;
}

static void nbdb_close(struct img_backend *be)
{
	struct nbd_backend *n = nb(be);
	if (n->h) {
		if (nbd_aio_is_ready(n->h) == 1)
			nbd_shutdown(n->h, 0);
		nbd_close(n->h);
	}
	free(n->bitmap);
	free(n);
}

static const struct img_backend_ops nbd_ops = {
	.name = "nbd",
	.size = nbdb_size,
	.pread = nbdb_pread,
	.pwrite = nbdb_pwrite,
	.zero = nbdb_zero,
	.flush = nbdb_flush,
	.extents = nbdb_extents,
	.close = nbdb_close,
};

int img_nbd_url_parse(const char *url, char *path, size_t pathlen, char *name, size_t namelen)
{
	if (strncmp(url, "nbd:unix:", 9) != 0)
		return VD_EINVAL;
	const char *p = url + 9;
	if (p[0] != '/')
		return VD_EINVAL;
	const char *colon = strchr(p, ':');
	size_t plen = colon ? (size_t)(colon - p) : strlen(p);
	const char *export = "";
	if (colon) {
		if (strncmp(colon, ":exportname=", 12) != 0)
			return VD_EINVAL;
		export = colon + 12;
	}
	if (plen >= pathlen || strlen(export) >= namelen || strlen(export) > 4096)
		return VD_ETOOBIG;
	memcpy(path, p, plen);
	path[plen] = '\0';
	memcpy(name, export, strlen(export) + 1);
	return 0;
}

/* Is the resolved path p beneath the resolved directory root? */
static bool beneath(const char *p, const char *root)
{
	size_t rl = strlen(root);
	return strncmp(p, root, rl) == 0 && p[rl] == '/' && p[rl + 1] != '\0';
}

static bool has_dot_component(const char *p)
{
	for (const char *s = p; *s;) {
		while (*s == '/')
			s++;
		const char *e = s;
		while (*e && *e != '/')
			e++;
		size_t len = (size_t)(e - s);
		if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
			return true;
		s = e;
	}
	return false;
}

struct ctx_list {
	char *first;
	unsigned count;
};

static int list_cb(void *user, const char *name)
{
	struct ctx_list *l = user;
	if (strncmp(name, CTX_BITMAP_PREFIX, strlen(CTX_BITMAP_PREFIX)) != 0)
		return 0;
	if (l->count++ == 0)
		l->first = xstrdup(name);
	return 0;
}

/* The export's dirty bitmap context (imageio's _query_dirty_bitmap): the
 * one "qemu:dirty-bitmap:" context the server lists, else NULL. */
static char *query_bitmap(struct img_backend *be, struct nbd_handle *h)
{
	struct ctx_list l = { 0 };
	nbd_context_callback cb = { .callback = list_cb, .user_data = &l };
	if (nbd_clear_meta_contexts(h) < 0 || nbd_add_meta_context(h, CTX_BITMAP_PREFIX) < 0 ||
	    nbd_opt_list_meta_context(h, cb) < 0) {
		nbd_fail(be, "listing the dirty bitmaps", 0);
		free(l.first);
		return NULL;
	}
	if (l.count == 0)
		log_warn("image: nbd: the export has no dirty bitmap");
	if (l.count > 1)
		log_warn("image: nbd: the export has %u dirty bitmaps; cannot use more than one",
			 l.count);
	if (l.count != 1) {
		free(l.first);
		return NULL;
	}
	return l.first;
}

/* Connects n->h to the socket and negotiates the meta contexts. */
static int nbd_negotiate(struct nbd_backend *n, const char *sock, const char *export,
			 bool dirty)
{
	struct img_backend *be = &n->base;
	struct nbd_handle *h = n->h;
	if (nbd_set_export_name(h, export) < 0 || nbd_set_opt_mode(h, true) < 0)
		return nbd_fail(be, "setting up the handle", VD_EIO);
	if (nbd_connect_unix(h, sock) < 0)
		return nbd_fail(be, "connecting", VD_EIO);
	if (dirty)
		n->bitmap = query_bitmap(be, h);
	if (nbd_clear_meta_contexts(h) < 0 || nbd_add_meta_context(h, CTX_ALLOC) < 0 ||
	    nbd_add_meta_context(h, CTX_DEPTH) < 0 ||
	    (n->bitmap && nbd_add_meta_context(h, n->bitmap) < 0))
		return nbd_fail(be, "asking for meta contexts", VD_EIO);
	if (nbd_opt_go(h) < 0)
		return nbd_fail(be, "opening the export", VD_EIO);
	n->has_alloc = nbd_can_meta_context(h, CTX_ALLOC) == 1;
	n->has_depth = nbd_can_meta_context(h, CTX_DEPTH) == 1;
	if (n->bitmap && nbd_can_meta_context(h, n->bitmap) != 1) {
		free(n->bitmap);
		n->bitmap = NULL;
	}
	int64_t size = nbd_get_size(h);
	if (size < 0)
		return nbd_fail(be, "getting the size", VD_EIO);
	n->size = (uint64_t)size;
	int64_t max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
	n->max_block = max > 0 ? VD_MIN((uint64_t)max, (uint64_t)NBD_BLOCK_DEFAULT)
			       : NBD_BLOCK_DEFAULT;
	if (be->writable && nbd_is_read_only(h) == 1) {
		log_warn("image: nbd: a write ticket for the read-only export %s", sock);
		return VD_EPERM;
	}
	return 0;
}

int img_backend_nbd_open(const char *url, const struct img_backend_opts *opts,
			 struct img_backend **out)
{
	*out = NULL;
	if (!opts->nbd_dir || opts->nbd_dir[0] != '/')
		return VD_EPERM;
	char path[PATH_MAX], export[4097];
	int rc = img_nbd_url_parse(url, path, sizeof(path), export, sizeof(export));
	if (rc < 0)
		return rc;
	if (has_dot_component(path))
		return VD_EPERM;
	char real[PATH_MAX], dir[PATH_MAX];
	if (!realpath(path, real))
		return errno == ENOENT || errno == ENOTDIR ? VD_ENOENT : VD_EPERM;
	if (!realpath(opts->nbd_dir, dir) || !beneath(real, dir))
		return VD_EPERM;
	struct stat st;
	if (stat(real, &st) < 0)
		return VD_ENOENT;
	if (!S_ISSOCK(st.st_mode))
		return VD_EINVAL;
	struct nbd_backend *n = xcalloc(1, sizeof(*n));
	n->base.ops = &nbd_ops;
	n->base.max_readers = opts->max_connections ? opts->max_connections : 8;
	n->base.max_writers = n->base.max_readers;
	n->base.writable = opts->writable;
	n->h = nbd_create();
	if (!n->h) {
		rc = nbd_fail(&n->base, "creating a handle", VD_EIO);
		free(n);
		return rc;
	}
	rc = nbd_negotiate(n, real, export, opts->dirty);
	if (rc < 0) {
		nbdb_close(&n->base);
		return rc;
	}
	*out = &n->base;
	return 0;
}
