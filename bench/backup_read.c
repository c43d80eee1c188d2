/* bench/backup_read.c - the reading side of a backup for bench/backup.py
 * (`make bench`): one libnbd connection to a backup's NBD export reads the
 * extents a backup application reads, into a file at their offsets.
 *
 *   backup_read URI CONTEXT OUT
 *
 * CONTEXT is the NBD metadata context that selects the extents:
 *   base:allocation                 a full backup: every extent that is
 *                                   neither a hole nor reads as zero
 *   qemu:dirty-bitmap:NAME          an incremental one: the dirty extents
 * OUT is opened without truncation, so an incremental read written over a
 * copy of the full one is the restored disk.  Block status is asked for the
 * whole disk first (in requests of up to 1 GiB), adjacent selected extents
 * are merged, then each is read with synchronous 4 MiB preads and written
 * with pwrite.  Prints one machine-readable line:
 *   RESULT context=... size=DISK extents=N bytes=DATA_READ requests=READS
 *          status_s=S read_s=S total_s=S
 * bytes counts the payload read over NBD (what the backup moves). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libnbd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (4u << 20)
#define STATUS_WINDOW (1ull << 30)
#define EXTENTS_MAX (1u << 22)     /* bound on what one disk may report */

struct range {
	uint64_t off, len;
};

struct walk {
	bool dirty;                    /* qemu:dirty-bitmap: select flag 1 */
	const char *context;
	struct range *r;
	size_t n, cap;
	uint64_t next;                 /* offset after the last entry seen */
	bool overflow;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool selected(const struct walk *w, uint32_t flags)
{
	if (w->dirty)
		return (flags & 1u) != 0;
	return (flags & (LIBNBD_STATE_HOLE | LIBNBD_STATE_ZERO)) == 0;
}

static int add_range(struct walk *w, uint64_t off, uint64_t len)
{
	if (w->n && w->r[w->n - 1].off + w->r[w->n - 1].len == off) {
		w->r[w->n - 1].len += len;
		return 0;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 1024;
		if (cap > EXTENTS_MAX) {
			w->overflow = true;
			return -1;
		}
		struct range *r = realloc(w->r, cap * sizeof *r);
		if (!r)
			return -1;
		w->r = r;
		w->cap = cap;
	}
	w->r[w->n++] = (struct range){ off, len };
	return 0;
}

static int on_extents(void *opaque, const char *ctx, uint64_t off, uint32_t *e, size_t n,
		      int *error)
{
	struct walk *w = opaque;
	(void)error;
	if (strcmp(ctx, w->context) != 0)
		return 0;
	for (size_t i = 0; i + 1 < n; i += 2) {
		if (selected(w, e[i + 1]) && add_range(w, off, e[i]) < 0)
			return -1;
		off += e[i];
	}
	w->next = off;
	return 0;
}

static int walk_extents(struct nbd_handle *h, struct walk *w, uint64_t size)
{
	uint64_t off = 0;
	while (off < size) {
		uint64_t len = size - off < STATUS_WINDOW ? size - off : STATUS_WINDOW;
		w->next = off;
		nbd_extent_callback cb = { .callback = on_extents, .user_data = w };
		if (nbd_block_status(h, len, off, cb, 0) < 0) {
			fprintf(stderr, "backup_read: block status at %" PRIu64 ": %s\n", off,
				w->overflow ? "too many extents" : nbd_get_error());
			return -1;
		}
		if (w->next <= off) {
			fprintf(stderr, "backup_read: block status at %" PRIu64 " made no progress\n", off);
			return -1;
		}
		off = w->next > size ? size : w->next;
	}
	return 0;
}

static int copy_ranges(struct nbd_handle *h, const struct walk *w, int fd, uint64_t *bytes,
		       uint64_t *requests)
{
	char *buf = malloc(CHUNK);
	if (!buf)
		return -1;
	for (size_t i = 0; i < w->n; i++) {
		for (uint64_t done = 0; done < w->r[i].len;) {
			uint64_t step = w->r[i].len - done < CHUNK ? w->r[i].len - done : CHUNK;
			uint64_t off = w->r[i].off + done;
			if (nbd_pread(h, buf, step, off, 0) < 0) {
				fprintf(stderr, "backup_read: read at %" PRIu64 ": %s\n", off, nbd_get_error());
				free(buf);
				return -1;
			}
			if (pwrite(fd, buf, step, (off_t)off) != (ssize_t)step) {
				fprintf(stderr, "backup_read: write: %s\n", strerror(errno));
				free(buf);
				return -1;
			}
			done += step;
			*bytes += step;
			(*requests)++;
		}
	}
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: backup_read URI CONTEXT OUT\n");
		return 2;
	}
	struct walk w = { .context = argv[2],
			  .dirty = strncmp(argv[2], "qemu:dirty-bitmap:", 18) == 0 };
	if (!w.dirty && strcmp(argv[2], LIBNBD_CONTEXT_BASE_ALLOCATION) != 0) {
		fprintf(stderr, "backup_read: context must be base:allocation or qemu:dirty-bitmap:NAME\n");
		return 2;
	}
	int fd = open(argv[3], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "backup_read: %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	double t0 = now_s();
	struct nbd_handle *h = nbd_create();
	int rc = 1;
	if (!h || nbd_add_meta_context(h, argv[2]) < 0 || nbd_connect_uri(h, argv[1]) < 0) {
		fprintf(stderr, "backup_read: connect %s: %s\n", argv[1], nbd_get_error());
		goto out;
	}
	if (nbd_can_meta_context(h, argv[2]) != 1) {
		fprintf(stderr, "backup_read: the export does not offer %s\n", argv[2]);
		goto out;
	}
	int64_t size = nbd_get_size(h);
	if (size < 0 || ftruncate(fd, (off_t)size) < 0) {
		fprintf(stderr, "backup_read: size: %s\n", size < 0 ? nbd_get_error() : strerror(errno));
		goto out;
	}
	if (walk_extents(h, &w, (uint64_t)size) < 0)
		goto out;
	double t1 = now_s();
	uint64_t bytes = 0, requests = 0;
	if (copy_ranges(h, &w, fd, &bytes, &requests) < 0)
		goto out;
	if (nbd_shutdown(h, 0) < 0) {
		fprintf(stderr, "backup_read: shutdown: %s\n", nbd_get_error());
		goto out;
	}
	double t2 = now_s();
	printf("RESULT context=%s size=%" PRId64 " extents=%zu bytes=%" PRIu64 " requests=%" PRIu64
	       " status_s=%.4f read_s=%.4f total_s=%.4f\n", argv[2], size, w.n, bytes, requests,
	       t1 - t0, t2 - t1, t2 - t0);
	rc = 0;
out:
	if (h)
		nbd_close(h);
	free(w.r);
	if (close(fd) < 0 && rc == 0) {
		fprintf(stderr, "backup_read: close: %s\n", strerror(errno));
		rc = 1;
	}
	return rc;
}
