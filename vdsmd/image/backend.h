/* vdsmd/image/backend.h - what an image transfer reads and writes through.
 *
 * A backend is opened from a ticket's url and used by one transfer (one
 * connection) at a time; each connection of a ticket opens its own, as
 * imageio's backends are cloned per connection.  The ops struct is the
 * seam for the backends: file:// (backend_file.c) and nbd:unix: (libnbd,
 * backend_nbd.c).
 *
 * Errors: 0 (or a byte count where said) on success, a negative enum vd_err
 * otherwise; be->err_no keeps the errno of the last failed system call for
 * the log.  VD_EPERM: a url outside the allowed root; VD_EINVAL: a malformed
 * url or range; VD_EUNSUPP: a scheme or extent context the backend does not
 * serve; VD_ETOOBIG: more extents than IMG_EXTENTS_MAX; VD_EIO: the storage
 * failed. */
#ifndef VD_IMAGE_BACKEND_H
#define VD_IMAGE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/vd.h"

/* One extent in imageio's form (extent.py): ZeroExtent has start, length,
 * zero, hole; DirtyExtent has start, length, dirty, zero. */
struct img_extent {
	uint64_t start;
	uint64_t length;
	bool zero;
	bool hole;
	bool dirty;
};

enum img_extent_context { IMG_EXTENTS_ZERO = 0, IMG_EXTENTS_DIRTY };

/* Longest extent list a backend returns (a badly fragmented file could
 * otherwise grow the list without bound): 1M extents, 32 MiB. */
#define IMG_EXTENTS_MAX (1u << 20)

struct img_extents {
	struct img_extent *v;
	size_t n, cap;
};

void img_extents_free(struct img_extents *e);
/* Appends one extent, merging it into the previous one when they touch and
 * agree in zero, hole and dirty.  VD_ETOOBIG past IMG_EXTENTS_MAX. */
int img_extents_add(struct img_extents *e, uint64_t start, uint64_t length, bool zero, bool hole,
		    bool dirty);

struct img_backend_opts {
	const char *root;        /* the url's path must resolve beneath it, */
	/* or, when set, be a path this says yes to (the resolved path) */
	bool (*allowed)(void *ctx, const char *real);
	void *allowed_ctx;
	const char *nbd_dir;     /* nbd:unix: sockets must resolve beneath it */
	bool writable;           /* the ticket has "write" in ops */
	bool dirty;              /* the ticket has dirty: look up the bitmap */
	unsigned max_connections;/* readers (and writers where allowed); 0: 8 */
};

struct img_backend;

struct img_backend_ops {
	const char *name; /* "file", "nbd" */
	int (*size)(struct img_backend *be, uint64_t *size);
	/* Reads up to len bytes at off; returns the count read, short only at
	 * the end of the image (0 at or past it). */
	long (*pread)(struct img_backend *be, void *buf, size_t len, uint64_t off);
	/* Writes all len bytes at off (extending a file if needed). */
	int (*pwrite)(struct img_backend *be, const void *buf, size_t len, uint64_t off);
	/* Makes [off, off+len) read as zeroes; punch (the ticket is sparse):
	 * release the space when possible, otherwise keep it allocated. */
	int (*zero)(struct img_backend *be, uint64_t off, uint64_t len, bool punch);
	int (*flush)(struct img_backend *be);
	/* Replaces *out's content with the image's extents in ctx, covering
	 * [0, size) in order. */
	int (*extents)(struct img_backend *be, enum img_extent_context ctx, struct img_extents *out);
	void (*close)(struct img_backend *be);
	/* The image's file descriptor when it is a plain file (NULL: none). */
	int (*fd)(struct img_backend *be);
};

struct img_backend {
	const struct img_backend_ops *ops;
	unsigned max_readers;   /* OPTIONS reports these */
	unsigned max_writers;
	bool writable;
	int err_no;             /* errno of the last failed call, for the log */
};

/* Opens the backend the url's scheme names (file: or nbd:).  *out is set on success; img_backend_close() ends it. */
int img_backend_open(const char *url, const struct img_backend_opts *opts, struct img_backend **out);

/* The file backend (backend_file.c): url file:///absolute/path of a regular
 * file resolving (symlinks and "..") beneath opts->root. */
int img_backend_file_open(const char *url, const struct img_backend_opts *opts,
			  struct img_backend **out);

/* The nbd backend (backend_nbd.c): url nbd:unix:<socket>[:exportname=<name>]
 * (VDSM's form), the socket resolving beneath opts->nbd_dir.  VD_EIO when
 * the NBD server cannot be reached or negotiated with (the log has libnbd's
 * message); VD_EPERM for a write ticket over a read-only export. */
int img_backend_nbd_open(const char *url, const struct img_backend_opts *opts,
			 struct img_backend **out);
/* Splits an nbd:unix: url into the socket path and the export name ("" when
 * none).  VD_EINVAL: not that form; VD_ETOOBIG: a part past its buffer. */
int img_nbd_url_parse(const char *url, char *path, size_t pathlen, char *name, size_t namelen);

static inline void img_backend_close(struct img_backend *be)
{
	if (be)
		be->ops->close(be);
}

#endif
