/* vdsmd/image/handler.c - ovirt-imageio's HTTP API on one connection (see
 * handler.h). */
#include "handler.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "../../codecs/codec.h"
#include "../../codecs/value.h"
#include "../../common/arena.h"
#include "../../common/buf.h"
#include "../../common/log.h"
#include "../../common/vd.h"
#include "../../io/io.h"
#include "../vdsmd.h"
#include "backend.h"
#include "http_req.h"
#include "http_resp.h"
#include "ticket.h"

/* The header section of one request, with room for what arrives after it. */
#define IN_CAP (32u * 1024u)
/* A plaintext download of a plain file is sent from windows of the file
 * mapped this long (see send_mapped). */
#define MAP_WINDOW (8u << 20)
/* ... in send() calls of this much: the socket's data is still in the
 * caches when the receiver copies it (8 MiB sends left it to DRAM: the
 * client's CPU per GiB rose by half and the download was no faster). */
#define SEND_SLICE (1u << 20)
/* Waits between requests and inside bodies are cut in slices this long, so
 * a removed ticket or a stopping server ends an idle connection soon. */
#define WAIT_SLICE_MS 1000u

struct conn {
	struct image_handler *h;
	struct io_conn *c;
	const char *peer;
	volatile sig_atomic_t *stop;
	char in[IN_CAP];
	size_t in_len;
	char *chunk;                 /* IMAGE_CHUNK bytes while a body streams */
	/* the ticket this connection holds (attached) and its backend */
	struct ticket_ref *ref;
	char ref_id[IMG_HTTP_TICKET_MAX + 1];
	struct img_backend *be;
	bool close;                  /* end after this answer */
	bool body_pending;           /* the request's body is not read yet */
};

static void count(uint64_t *n, uint64_t by)
{
	__atomic_add_fetch(n, by, __ATOMIC_RELAXED);
}

static int send_all(struct conn *k, const void *p, size_t n)
{
	int rc = io_write_all(k->c, p, n, vd_now_ms() + k->h->timeout_ms, k->stop);
	if (rc != 0)
		k->close = true;
	return rc;
}

static int send_error(struct conn *k, int status, const char *msg, uint64_t available)
{
	char out[1024];
	if (k->body_pending)
		k->close = true;  /* a body left unread ends the connection */
	struct img_http_resp r = { .status = status, .close = k->close, .date = time(NULL) };
	if (status == IMG_HTTP_RANGE_NOT_SATISFIABLE) {
		r.cr_kind = IMG_CR_UNSATISFIED;
		r.cr_complete = available;
	}
	long n = img_http_format_error(out, sizeof(out), &r, msg);
	count(&k->h->n.errors, 1);
	if (status >= 500)
		log_warn("image: %s: %d %s", k->peer, status, msg);
	else
		log_debug("image: %s: %d %s", k->peer, status, msg);
	return n > 0 ? send_all(k, out, (size_t)n) : VD_EIO;
}

static int send_head(struct conn *k, struct img_http_resp *r)
{
	char out[1024];
	r->close = k->close;
	r->date = time(NULL);
	long n = img_http_format_head(out, sizeof(out), r);
	return n > 0 ? send_all(k, out, (size_t)n) : VD_EIO;
}

static int send_json(struct conn *k, int status, struct vd_buf *b, const char *allow)
{
	struct img_http_resp r = { .status = status, .content_length = b->len,
				   .content_type = "application/json", .allow = allow };
	int rc = send_head(k, &r);
	if (rc == 0 && b->len)
		rc = send_all(k, b->data, b->len);
	return rc;
}

static void drop_ticket(struct conn *k)
{
	img_backend_close(k->be);
	k->be = NULL;
	if (k->ref) {
		ticket_conn_detach(k->ref);
		ticket_ref_release(k->ref);
		k->ref = NULL;
	}
	k->ref_id[0] = '\0';
}

/* Authorize op on [offset, offset + length) and make the connection hold
 * the ticket and its backend.  0, or an answer was sent (rc < 0 when the
 * connection must end, 1 when it may go on). */
static int authorize(struct conn *k, const char *id, unsigned op, uint64_t offset,
		     uint64_t length)
{
	char why[256] = "";
	struct ticket_ref *r = NULL;
	enum ticket_refusal no = ticket_authorize(k->h->tickets, id, op, offset, length, &r, why,
						  sizeof(why));
	if (no != TICKET_OK) {
		int status = no == TICKET_PAST_SIZE ? IMG_HTTP_RANGE_NOT_SATISFIABLE
						    : IMG_HTTP_FORBIDDEN;
		uint64_t avail = 0;
		if (no == TICKET_PAST_SIZE && k->ref && strcmp(k->ref_id, id) == 0)
			avail = ticket_ref_size(k->ref);
		int rc = send_error(k, status, why[0] ? why : "Forbidden", avail);
		return rc < 0 ? rc : 1;
	}
	if (k->ref && strcmp(k->ref_id, id) == 0) {
		ticket_ref_release(r);  /* the connection holds it already */
		return 0;
	}
	drop_ticket(k);
	if (ticket_conn_attach(r) != 0) {
		ticket_ref_release(r);
		int rc = send_error(k, IMG_HTTP_FORBIDDEN, "Ticket was canceled", 0);
		return rc < 0 ? rc : 1;
	}
	k->ref = r;
	snprintf(k->ref_id, sizeof(k->ref_id), "%s", id);
	struct img_backend_opts o = { .root = k->h->root, .allowed = k->h->path_allowed,
				      .allowed_ctx = k->h->path_ctx, .nbd_dir = k->h->nbd_dir,
				      .dirty = ticket_ref_dirty(r),
				      .writable = (ticket_ref_ops(r) & TICKET_OP_WRITE) != 0 };
	int rc = img_backend_open(ticket_ref_url(r), &o, &k->be);
	if (rc != 0) {
		k->be = NULL;
		const char *msg = rc == VD_EPERM ? "Ticket url is outside the storage root"
				  : rc == VD_EUNSUPP ? "Ticket url scheme is not supported by this server"
				  : rc == VD_ENOENT ? "Ticket url does not exist"
						    : "Cannot open the ticket's image";
		log_warn("image: %s: transfer %s: %s (%s)", k->peer, ticket_ref_transfer_id(r), msg,
			 vd_strerror(rc));
		drop_ticket(k);
		int s = send_error(k, rc == VD_EUNSUPP || rc == VD_EPERM ? IMG_HTTP_BAD_REQUEST
							     : IMG_HTTP_INTERNAL_ERROR, msg, 0);
		return s < 0 ? s : 1;
	}
	return 0;
}

/* Read exactly n body bytes into buf: bytes already buffered first. */
static int body_read(struct conn *k, char *buf, size_t n)
{
	size_t got = 0;
	if (k->in_len) {
		size_t take = k->in_len < n ? k->in_len : n;
		memcpy(buf, k->in, take);
		memmove(k->in, k->in + take, k->in_len - take);
		k->in_len -= take;
		got = take;
	}
	while (got < n) {
		long r = io_read_wait(k->c, buf + got, n - got, vd_now_ms() + k->h->timeout_ms,
				      k->stop);
		if (r <= 0) {
			k->close = true;
			return r == 0 ? VD_ECLOSED : (int)r;
		}
		got += (size_t)r;
	}
	return 0;
}

/* Take IMAGE_CHUNK bytes of the memory budget: false when they do not fit
 * below 7/8 of it with what the main port and the other transfers hold. */
static bool budget_take(struct image_handler *h)
{
	struct vd_mem_share *m = h->mem;
	if (m) {
		size_t budget = __atomic_load_n(&m->budget, __ATOMIC_RELAXED);
		size_t cur = __atomic_load_n(&m->image, __ATOMIC_RELAXED);
		do {
			size_t loop = __atomic_load_n(&m->loop, __ATOMIC_RELAXED);
			if (budget && loop + cur + IMAGE_CHUNK > budget - budget / 8)
				return false;
		} while (!__atomic_compare_exchange_n(&m->image, &cur, cur + IMAGE_CHUNK, true,
						      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	}
	count(&h->n.buffered, IMAGE_CHUNK);
	return true;
}

static void chunk_put(struct conn *k)
{
	if (!k->chunk)
		return;
	free(k->chunk);
	k->chunk = NULL;
	if (k->h->mem)
		__atomic_sub_fetch(&k->h->mem->image, IMAGE_CHUNK, __ATOMIC_RELAXED);
	count(&k->h->n.buffered, -(uint64_t)IMAGE_CHUNK);
}

/* 503 in imageio's JSON error form, the connection closed after it (a PUT's
 * body is not read), one log line a second at most. */
static int refuse_busy(struct conn *k, const char *what)
{
	struct image_handler *h = k->h;
	uint64_t n = __atomic_add_fetch(&h->n.budget_refused, 1, __ATOMIC_RELAXED);
	count(&h->n.errors, 1);
	size_t budget = h->mem ? __atomic_load_n(&h->mem->budget, __ATOMIC_RELAXED) : 0;
	size_t loop = h->mem ? __atomic_load_n(&h->mem->loop, __ATOMIC_RELAXED) : 0;
	size_t img = h->mem ? __atomic_load_n(&h->mem->image, __ATOMIC_RELAXED) : 0;
	uint64_t now = vd_now_ms(), last = __atomic_load_n(&h->budget_log_ms, __ATOMIC_RELAXED);
	if (now - last >= 1000 && __atomic_compare_exchange_n(&h->budget_log_ms, &last, now, false,
							      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		log_warn("image: %s: %s refused (503): its %u-byte buffer does not fit "
			 "memory_budget %zu (main port %zu, image transfers %zu in use; %" PRIu64
			 " refused so far)", k->peer, what, IMAGE_CHUNK, budget, loop, img, n);
	char msg[160];
	snprintf(msg, sizeof(msg), "Server is out of transfer memory (memory_budget %zu bytes "
		 "in use), retry later", budget);
	struct vd_buf b = VD_BUF_INIT;
	buf_printf(&b, "{\"explanation\": ");
	img_http_json_string(&b, msg, strlen(msg));
	buf_printf(&b, ", \"code\": %d, \"title\": \"%s\"}\n", IMG_HTTP_SERVICE_UNAVAILABLE,
		   img_http_reason(IMG_HTTP_SERVICE_UNAVAILABLE));
	k->close = true;
	int rc = send_json(k, IMG_HTTP_SERVICE_UNAVAILABLE, &b, NULL);
	buf_free(&b);
	return rc;
}

/* The transfer buffer for one body, charged to the budget; NULL when it
 * does not fit (nothing was charged). */
static char *chunk_take(struct conn *k)
{
	if (k->chunk)
		return k->chunk;
	if (!budget_take(k->h))
		return NULL;
	k->chunk = xmalloc(IMAGE_CHUNK);
	return k->chunk;
}

/* More writers than the backend takes at once (its max_writers, which
 * OPTIONS announced): refused rather than interleaved. */
static int too_many_writers(struct conn *k)
{
	char msg[128];
	snprintf(msg, sizeof(msg), "Too many writers: this image takes %u at a time "
		 "(OPTIONS max_writers)", k->be->max_writers);
	return send_error(k, IMG_HTTP_CONFLICT, msg, 0);
}

static int do_options(struct conn *k, const struct img_http_req *q)
{
	struct img_http_options o = { .unix_socket = k->h->unix_socket,
				      .unix_socket_len = k->h->unix_socket
							 ? strlen(k->h->unix_socket) : 0 };
	if (strcmp(q->ticket_id, "*") == 0) {
		o.any_ticket = true;
	} else {
		int rc = authorize(k, q->ticket_id, TICKET_OP_READ, 0, 0);
		if (rc)
			return rc < 0 ? rc : 0;
		unsigned ops = ticket_ref_ops(k->ref);
		o.readable = (ops & TICKET_OP_READ) != 0;
		o.writable = (ops & TICKET_OP_WRITE) != 0;
		o.max_readers = k->be->max_readers;
		o.max_writers = k->be->max_writers;
	}
	struct vd_buf b = VD_BUF_INIT;
	img_http_options_json(&b, &o);
	int rc = send_json(k, IMG_HTTP_OK, &b, img_http_options_allow(&o));
	buf_free(&b);
	return rc;
}

static int do_extents(struct conn *k, const struct img_http_req *q)
{
	if (q->context == IMG_CONTEXT_BAD)
		return send_error(k, IMG_HTTP_BAD_REQUEST, "Invalid context", 0);
	int rc = authorize(k, q->ticket_id, TICKET_OP_READ, 0, 0);
	if (rc)
		return rc < 0 ? rc : 0;
	bool dirty = q->context == IMG_CONTEXT_DIRTY;
	if (dirty && !ticket_ref_dirty(k->ref))
		return send_error(k, IMG_HTTP_NOT_FOUND, "Ticket does not support dirty extents", 0);
	struct img_extents e = { 0 };
	rc = k->be->ops->extents(k->be, dirty ? IMG_EXTENTS_DIRTY : IMG_EXTENTS_ZERO, &e);
	if (rc != 0) {
		img_extents_free(&e);
		if (rc == VD_EUNSUPP)
			return send_error(k, IMG_HTTP_NOT_FOUND,
					  "Backend does not support this extents context", 0);
		return send_error(k, IMG_HTTP_INTERNAL_ERROR, "Cannot read the image's extents", 0);
	}
	struct vd_buf b = VD_BUF_INIT;
	img_http_extents_json(&b, e.v, e.n, dirty ? IMG_EXTENTS_DIRTY : IMG_EXTENTS_ZERO);
	img_extents_free(&e);
	rc = send_json(k, IMG_HTTP_OK, &b, NULL);
	buf_free(&b);
	return rc;
}

/* A download of a plain file over plain TCP: each MAP_WINDOW of the file is
 * mapped (populated from the page cache) and handed to send(), so the
 * kernel copies the page cache straight into the socket; pread() into the
 * chunk and send() from it copied every byte twice (perf: the pread copy was
 * 40% of the daemon's CPU; interleaved runs: download/dd 0.33x -> 0.55x,
 * the daemon's CPU per GiB 0.34 s -> 0.20 s).  The mapping is never touched here, only by the
 * kernel: a file cut short under the download makes send() fail (EFAULT),
 * never a SIGBUS; sendfile(), which leaves the page cache pages in the
 * socket for the receiver to copy from, was slower here (git log).  Adds
 * to *done what was sent; 0, VD_EUNSUPP when nothing could be mapped (the
 * caller goes on with pread), or the failure (logged as the pread path
 * does when the image ended early). */
static int send_mapped(struct conn *k, struct ticket_op *op, uint64_t off, uint64_t len,
		       uint64_t *done)
{
	if (!k->be->ops->fd || io_is_tls(k->c))
		return VD_EUNSUPP;
	int fd = k->be->ops->fd(k->be);
	long page = sysconf(_SC_PAGESIZE);
	uint64_t mask = (uint64_t)(page > 0 ? page : 4096) - 1;
	int rc = 0;
	while (rc == 0 && *done < len) {
		if (ticket_op_canceled(op) || __atomic_load_n(k->stop, __ATOMIC_RELAXED))
			return VD_ECLOSED;
		uint64_t pos = off + *done, base = pos & ~mask;
		size_t want = len - *done < MAP_WINDOW ? (size_t)(len - *done) : MAP_WINDOW;
		size_t maplen = (size_t)(pos - base) + want;
		void *m = mmap(NULL, maplen, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)base);
		if (m == MAP_FAILED)
			return VD_EUNSUPP;  /* pread takes over from *done */
		for (size_t o = 0; rc == 0 && o < want; o += SEND_SLICE)
			rc = send_all(k, (const char *)m + (pos - base) + o,
				      want - o < SEND_SLICE ? want - o : SEND_SLICE);
		munmap(m, maplen);
		if (rc != 0) {
			uint64_t size = 0;
			if (k->be->ops->size(k->be, &size) == 0 && size < pos + want)
				log_warn("image: %s: transfer %s: read at %" PRIu64 " failed: end of image",
					 k->peer, ticket_ref_transfer_id(k->ref), size > pos ? size : pos);
			return rc;
		}
		*done += want;
		count(&k->h->n.bytes_read, want);
		ticket_op_progress(op, *done);
	}
	return 0;
}

static int do_get(struct conn *k, const struct img_http_req *q)
{
	if (q->range.bad)
		return send_error(k, IMG_HTTP_RANGE_NOT_SATISFIABLE, "Invalid range", 0);
	/* The ticket's size bounds what may be read; the image may be shorter. */
	int rc = authorize(k, q->ticket_id, TICKET_OP_READ, 0, 0);
	if (rc)
		return rc < 0 ? rc : 0;
	uint64_t size = 0;
	if (k->be->ops->size(k->be, &size) != 0)
		return send_error(k, IMG_HTTP_INTERNAL_ERROR, "Cannot read the image's size", 0);
	uint64_t tsize = ticket_ref_size(k->ref);
	if (tsize < size)
		size = tsize;
	uint64_t off = 0, len = size;
	if (q->range.present) {
		if (q->range.suffix) {
			len = q->range.last < size ? q->range.last : size;
			off = size - len;
		} else {
			off = q->range.first;
			if (off >= size)
				return send_error(k, IMG_HTTP_RANGE_NOT_SATISFIABLE,
						  "Requested range not satisfiable", size);
			/* past the ticket's size: refused below (416); past the
			 * image's end within the ticket: cut at the end */
			uint64_t last = q->range.has_last ? q->range.last : size - 1;
			if (last >= size && last < tsize)
				last = size - 1;
			len = last - off + 1;
		}
	}
	if ((rc = authorize(k, q->ticket_id, TICKET_OP_READ, off, len)))
		return rc < 0 ? rc : 0;
	char *buf = chunk_take(k);
	if (!buf)
		return refuse_busy(k, "download");
	struct ticket_op *op = NULL;
	if (ticket_op_begin(k->ref, off, &op) != 0) {
		chunk_put(k);
		return send_error(k, IMG_HTTP_FORBIDDEN, "Ticket was canceled", 0);
	}
	const char *fname = ticket_ref_filename(k->ref);
	char disp[320];
	if (fname)
		snprintf(disp, sizeof(disp), "attachment; filename=%s", fname);
	struct img_http_resp r = { .status = q->range.present ? IMG_HTTP_PARTIAL_CONTENT
								: IMG_HTTP_OK,
				   .content_length = len,
				   .content_type = "application/octet-stream",
				   .content_disposition = fname ? disp : NULL };
	if (q->range.present) {
		r.cr_kind = IMG_CR_RANGE;
		r.cr_first = off;
		r.cr_last = off + len - 1;
		r.cr_complete = size;
	}
	/* active before the head goes out: a client that has the head sees it */
	count(&k->h->n.transfers_active, 1);
	rc = send_head(k, &r);
	uint64_t done = 0;
	if (rc == 0 && (rc = send_mapped(k, op, off, len, &done)) == VD_EUNSUPP)
		rc = 0;
	while (rc == 0 && done < len) {
		if (ticket_op_canceled(op) || __atomic_load_n(k->stop, __ATOMIC_RELAXED)) {
			rc = VD_ECLOSED;
			break;
		}
		size_t want = len - done < IMAGE_CHUNK ? (size_t)(len - done) : IMAGE_CHUNK;
		long n = k->be->ops->pread(k->be, buf, want, off + done);
		if (n <= 0) {
			/* the head promised len bytes: the only honest end is a close */
			log_warn("image: %s: transfer %s: read at %" PRIu64 " failed: %s", k->peer,
				 ticket_ref_transfer_id(k->ref), off + done,
				 n == 0 ? "end of image" : strerror(k->be->err_no));
			rc = VD_EIO;
			break;
		}
		rc = send_all(k, buf, (size_t)n);
		if (rc == 0) {
			done += (uint64_t)n;
			count(&k->h->n.bytes_read, (uint64_t)n);
			ticket_op_progress(op, done);
		}
	}
	count(&k->h->n.transfers_active, (uint64_t)-1);
	chunk_put(k);
	if (ticket_op_end(op) != 0 || rc != 0)
		k->close = true;
	return rc;
}

static int do_put(struct conn *k, const struct img_http_req *q)
{
	if (q->crange.bad)
		return send_error(k, IMG_HTTP_BAD_REQUEST, "Invalid Content-Range header", 0);
	if (q->flush == IMG_FLUSH_BAD)
		return send_error(k, IMG_HTTP_BAD_REQUEST, "Invalid flush value", 0);
	uint64_t off = q->crange.present ? q->crange.first : 0;
	uint64_t len = (uint64_t)q->content_length;
	if (q->crange.present && q->crange.has_last && q->crange.last - off + 1 != len)
		return send_error(k, IMG_HTTP_BAD_REQUEST,
				  "Content-Range does not match Content-Length", 0);
	int rc = authorize(k, q->ticket_id, TICKET_OP_WRITE, off, len);
	if (rc)
		return rc < 0 ? rc : 0;
	char *buf = len ? chunk_take(k) : NULL;
	if (len && !buf)
		return refuse_busy(k, "upload");
	if (ticket_writer_begin(k->ref, k->be->max_writers) != 0) {
		chunk_put(k);
		return too_many_writers(k);
	}
	struct ticket_op *op = NULL;
	if (ticket_op_begin(k->ref, off, &op) != 0) {
		chunk_put(k);
		ticket_writer_end(k->ref);
		return send_error(k, IMG_HTTP_FORBIDDEN, "Ticket was canceled", 0);
	}
	count(&k->h->n.transfers_active, 1);   /* before a 100 Continue goes out */
	if (q->expect_continue && k->in_len == 0) {
		char cont[64];
		long n = img_http_format_continue(cont, sizeof(cont));
		rc = n > 0 ? send_all(k, cont, (size_t)n) : VD_EIO;
	}
	uint64_t done = 0;
	while (rc == 0 && done < len) {
		if (ticket_op_canceled(op) || __atomic_load_n(k->stop, __ATOMIC_RELAXED)) {
			rc = VD_ECLOSED;
			k->close = true;
			break;
		}
		size_t want = len - done < IMAGE_CHUNK ? (size_t)(len - done) : IMAGE_CHUNK;
		if ((rc = body_read(k, buf, want)) != 0)
			break;
		if ((rc = k->be->ops->pwrite(k->be, buf, want, off + done)) != 0) {
			log_warn("image: %s: transfer %s: write at %" PRIu64 " failed: %s", k->peer,
				 ticket_ref_transfer_id(k->ref), off + done, strerror(k->be->err_no));
			k->close = true;  /* the rest of the body is not read */
			break;
		}
		done += want;
		count(&k->h->n.bytes_written, want);
		ticket_op_progress(op, done);
	}
	count(&k->h->n.transfers_active, (uint64_t)-1);
	chunk_put(k);
	if (rc == 0)
		k->body_pending = false;
	if (rc == 0 && q->flush != IMG_FLUSH_N && (rc = k->be->ops->flush(k->be)) != 0)
		log_warn("image: %s: transfer %s: flush failed: %s", k->peer,
			 ticket_ref_transfer_id(k->ref), strerror(k->be->err_no));
	bool canceled = ticket_op_end(op) != 0;
	ticket_writer_end(k->ref);
	if (rc == VD_ECLOSED || rc == VD_ETIMEDOUT || rc == VD_AGAIN) {
		if (done < len)
			log_info("image: %s: transfer %s: upload ended after %" PRIu64 " of %" PRIu64
				 " bytes (%s)", k->peer, ticket_ref_transfer_id(k->ref), done, len,
				 canceled ? "ticket removed" : "client gone");
		k->close = true;
		return rc;
	}
	if (rc != 0)
		return send_error(k, IMG_HTTP_INTERNAL_ERROR, "Cannot write the image", 0);
	if (canceled)
		k->close = true;
	struct img_http_resp r = { .status = IMG_HTTP_OK };
	return send_head(k, &r);
}

/* The PATCH body: {"op": "zero", "offset": N, "size": N, "flush": bool}
 * or {"op": "flush"}. */
static int do_patch(struct conn *k, const struct img_http_req *q)
{
	size_t n = q->content_length > 0 ? (size_t)q->content_length : 0;
	char body[4096 + 1];
	if (n >= sizeof(body))
		return send_error(k, IMG_HTTP_PAYLOAD_TOO_LARGE, "PATCH request body too large", 0);
	if (body_read(k, body, n) != 0)
		return VD_ECLOSED;
	k->body_pending = false;
	const struct vd_codec *json = codec_find("fallback");
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_limits lim = { .max_depth = 8, .max_size = sizeof(body), .max_elements = 64 };
	struct vd_value *v = NULL;
	struct vd_codec_error e;
	int rc;
	if (!json || json->decode(&a, body, n, &lim, &v, &e) != 0 || v->type != VD_OBJECT) {
		rc = send_error(k, IMG_HTTP_BAD_REQUEST, "Invalid JSON message", 0);
		goto out;
	}
	const struct vd_value *opv = vd_obj_get(v, "op");
	bool zero = vd_str_eq(opv, "zero"), flush = vd_str_eq(opv, "flush");
	if (!zero && !flush) {
		rc = send_error(k, IMG_HTTP_BAD_REQUEST, "Invalid operation", 0);
		goto out;
	}
	uint64_t off = 0, size = 0;
	bool then_flush = flush;
	if (zero) {
		const struct vd_value *o = vd_obj_get(v, "offset"), *s = vd_obj_get(v, "size"),
				      *f = vd_obj_get(v, "flush");
		if (!s || s->type != VD_INT || s->v.i < 0 ||
		    (o && (o->type != VD_INT || o->v.i < 0)) || (f && f->type != VD_BOOL)) {
			rc = send_error(k, IMG_HTTP_BAD_REQUEST,
					"Invalid zero request: offset and size must be integers >= 0, "
					"flush a boolean", 0);
			goto out;
		}
		off = o ? (uint64_t)o->v.i : 0;
		size = (uint64_t)s->v.i;
		then_flush = f && f->v.b;
	}
	if ((rc = authorize(k, q->ticket_id, TICKET_OP_WRITE, off, size))) {
		rc = rc < 0 ? rc : 0;
		goto out;
	}
	if (zero && ticket_writer_begin(k->ref, k->be->max_writers) != 0) {
		rc = too_many_writers(k);
		goto out;
	}
	struct ticket_op *op = NULL;
	if (ticket_op_begin(k->ref, off, &op) != 0) {
		if (zero)
			ticket_writer_end(k->ref);
		rc = send_error(k, IMG_HTTP_FORBIDDEN, "Ticket was canceled", 0);
		goto out;
	}
	int io = 0;
	if (zero && size)
		io = k->be->ops->zero(k->be, off, size, ticket_ref_sparse(k->ref));
	if (io == 0 && then_flush)
		io = k->be->ops->flush(k->be);
	if (io == 0)
		ticket_op_progress(op, size);
	if (ticket_op_end(op) != 0)
		k->close = true;
	if (zero)
		ticket_writer_end(k->ref);
	if (io != 0) {
		log_warn("image: %s: transfer %s: %s failed: %s", k->peer,
			 ticket_ref_transfer_id(k->ref), zero ? "zero" : "flush",
			 strerror(k->be->err_no));
		rc = send_error(k, IMG_HTTP_INTERNAL_ERROR,
				zero ? "Cannot zero the image" : "Cannot flush the image", 0);
		goto out;
	}
	struct img_http_resp r = { .status = IMG_HTTP_OK };
	rc = send_head(k, &r);
out:
	arena_free(&a);
	return rc;
}

static int dispatch(struct conn *k, const struct img_http_req *q)
{
	if (q->resource == IMG_RES_CHECKSUM)
		return send_error(k, IMG_HTTP_NOT_FOUND, "Checksums are not served", 0);
	if (q->resource == IMG_RES_EXTENTS) {
		if (q->method != IMG_HTTP_GET)
			return send_error(k, IMG_HTTP_METHOD_NOT_ALLOWED, "Invalid method", 0);
		return do_extents(k, q);
	}
	switch (q->method) {
	case IMG_HTTP_OPTIONS: return do_options(k, q);
	case IMG_HTTP_GET: return do_get(k, q);
	case IMG_HTTP_PUT: return do_put(k, q);
	case IMG_HTTP_PATCH: return do_patch(k, q);
	default: return send_error(k, IMG_HTTP_METHOD_NOT_ALLOWED, "Invalid method", 0);
	}
}

/* Wait for the next request's header section: > 0 its length, 0 the client
 * closed (or idled out, or the ticket it holds was removed), < 0 a framing
 * error that was answered. */
static long next_request(struct conn *k, const struct img_http_limits *lim,
			 struct img_http_req *q)
{
	uint64_t idle_ms = k->h->timeout_ms;
	if (k->ref) {
		int64_t t = ticket_ref_inactivity_timeout(k->ref);
		if (t > 0 && (uint64_t)t * 1000u < idle_ms)
			idle_ms = (uint64_t)t * 1000u;
	}
	uint64_t deadline = vd_now_ms() + idle_ms;
	for (;;) {
		if (k->in_len) {
			long n = img_http_parse(k->in, k->in_len, lim, q);
			if (n > 0)
				return n;
			if (n != VD_AGAIN) {
				k->close = true;
				send_error(k, q->status ? q->status : IMG_HTTP_BAD_REQUEST,
					   q->reason ? q->reason : "Bad request", 0);
				return -1;
			}
			if (k->in_len == sizeof(k->in)) {
				k->close = true;
				send_error(k, IMG_HTTP_HEADERS_TOO_LARGE, "Request header too large", 0);
				return -1;
			}
		}
		uint64_t now = vd_now_ms();
		if (now >= deadline || __atomic_load_n(k->stop, __ATOMIC_RELAXED) || (k->ref && ticket_ref_canceled(k->ref)))
			return 0;
		uint64_t slice = deadline - now < WAIT_SLICE_MS ? deadline : now + WAIT_SLICE_MS;
		long r = io_read_wait(k->c, k->in + k->in_len, sizeof(k->in) - k->in_len, slice,
				      k->stop);
		if (r == VD_ETIMEDOUT)
			continue;
		if (r <= 0)
			return 0;
		k->in_len += (size_t)r;
	}
}

void image_serve(void *arg, struct io_conn *c, const char *peer, volatile sig_atomic_t *stop)
{
	struct image_handler *h = arg;
	struct conn *k = xcalloc(1, sizeof(*k));
	k->h = h;
	k->c = c;
	k->peer = peer;
	k->stop = stop;
	struct img_http_limits lim;
	img_http_limits_default(&lim);
	count(&h->n.connections, 1);
	while (!k->close) {
		struct img_http_req q;
		long n = next_request(k, &lim, &q);
		if (n <= 0)
			break;
		memmove(k->in, k->in + n, k->in_len - (size_t)n);
		k->in_len -= (size_t)n;
		if (!q.keep_alive || q.close_query)
			k->close = true;
		k->body_pending = q.content_length > 0;
		count(&h->n.requests, 1);
		int rc = q.status ? send_error(k, q.status, q.reason ? q.reason : "Bad request", 0)
				  : dispatch(k, &q);
		/* A request whose body was not read cannot be followed by
		 * another on this connection. */
		if (rc < 0 || k->body_pending)
			k->close = true;
	}
	drop_ticket(k);
	chunk_put(k);
	free(k);
}
