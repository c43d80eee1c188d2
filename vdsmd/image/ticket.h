/* vdsmd/image/ticket.h - the image server's ticket table (ovirt-imageio's
 * auth.Ticket / auth.Authorizer semantics).
 *
 * A ticket lets whoever knows its uuid transfer one image url (file: or nbd:)
 * with the ops it allows ("read", "write"; write implies read), within size
 * bytes, until it expires.  The engine adds, polls, extends and removes
 * tickets through the Host.*_image_ticket verbs (verbs.c); the image server
 * authorizes every request through this table from its own threads.
 *
 * Thread safety: every function may be called from any thread; the table
 * has one mutex, held only for memory work (no I/O, no callback) except
 * ticket_remove(), which sleeps on a condition variable until the ticket's
 * operations end.
 *
 * Time: the table reads a clock given at creation (whole monotonic seconds;
 * tests pass their own).  A ticket expires at add + timeout; extend sets
 * expires = now + timeout; the end of every operation "touches" it: expires =
 * now + timeout, last access = now.  An expired ticket stays in the table:
 * get and extend still work, authorize refuses it.  Only remove takes a
 * ticket out.
 *
 * Ownership: ticket_authorize() returns a held reference; the holder calls
 * ticket_ref_release() exactly once.  A ticket removed (or replaced by an add
 * of the same uuid) while referenced is unlinked at once and freed with its
 * last reference; its operations see it canceled. */
#ifndef VD_IMAGE_TICKET_H
#define VD_IMAGE_TICKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../codecs/value.h"

/* Bounds on what a ticket dict may carry (checked by ticket_parse). */
#define TICKET_URL_MAX 4096        /* bytes of url */
#define TICKET_STR_MAX 255         /* bytes of transfer_id, filename */
#define TICKET_TIMEOUT_MAX 2147483647LL  /* timeout, inactivity_timeout: the engine's int */
#define TICKET_INACTIVITY_DEFAULT 60     /* imageio's daemon.inactivity_timeout */
#define TICKET_REMOVE_WAIT_MS 60000      /* imageio's control.remove_timeout */
#define TICKET_OPS_MAX 8           /* entries of ops */
#define TICKET_RANGES_MAX 4096     /* transferred ranges kept per ticket (see ticket_op_end) */

enum ticket_ops {
	TICKET_OP_READ = 1u << 0,
	TICKET_OP_WRITE = 1u << 1,
};

/* Why ticket_authorize() refused; the server answers 403 with imageio's
 * message (ticket_authorize fills it) for all but TICKET_PAST_SIZE, which
 * imageio answers 416 (Requested Range Not Satisfiable). */
enum ticket_refusal {
	TICKET_OK = 0,
	TICKET_UNKNOWN,     /* "No such ticket <uuid>" */
	TICKET_CANCELED,    /* "Transfer=<id> was canceled" */
	TICKET_EXPIRED,     /* "Transfer=<id> expired" */
	TICKET_FORBIDDEN,   /* "Transfer=<id> forbids <op>" */
	TICKET_PAST_SIZE,   /* offset + length > size */
};
/* "unknown", "canceled", "expired", "forbidden", "past size". */
const char *ticket_refusal_name(enum ticket_refusal r);

/* A validated ticket dict (imageio's Ticket.__init__).  Strings are
 * NUL-terminated, owned by the spec until ticket_spec_clear(). */
struct ticket_spec {
	char uuid[37];
	uint64_t size;
	unsigned ops;                 /* enum ticket_ops bits */
	unsigned nops;                /* entries of the ops list (transferred: 1 only) */
	unsigned char oplist[TICKET_OPS_MAX];  /* the list as given (info reports it) */
	int64_t timeout;
	int64_t inactivity_timeout;
	char *url;
	char *transfer_id;            /* never NULL: "(ticket/<uuid[:18]>)" when absent */
	char *filename;               /* NULL when absent */
	bool sparse, dirty;
};

/* Reads a ticket dict: required uuid (canonical form), size (integer >= 0),
 * ops (a list of at most TICKET_OPS_MAX "read"/"write"), timeout (0..TICKET_TIMEOUT_MAX),
 * url (file: or nbd:, the schemes vdsmd's image server serves, at most
 * TICKET_URL_MAX bytes, no NUL);
 * optional inactivity_timeout (default 60), transfer_id, filename (strings,
 * at most TICKET_STR_MAX bytes), sparse, dirty (booleans, default false); a
 * null optional counts as absent; other keys are ignored.  0, or VD_EINVAL
 * with why[] naming the key as imageio does ("Required ticket parameter is
 * missing: size", "Invalid value for 'ops': ..."). */
int ticket_parse(const struct vd_value *dict, struct ticket_spec *out, char *why, size_t whylen);
void ticket_spec_clear(struct ticket_spec *s);

/* Whole monotonic seconds. */
typedef int64_t (*ticket_clock)(void *ctx);

struct ticket_table;

/* A table holding at most max tickets (> 0); clock NULL = CLOCK_MONOTONIC. */
struct ticket_table *ticket_table_new(size_t max, ticket_clock clock, void *clock_ctx);
/* Cancels and frees every ticket; no reference may be held any more. */
void ticket_table_free(struct ticket_table *t);
int64_t ticket_table_now(struct ticket_table *t);
size_t ticket_table_count(struct ticket_table *t);

/* Adds the ticket, taking the spec's strings (the spec is cleared).  A
 * ticket of the same uuid is replaced (imageio's dict assignment): the old
 * one is unlinked, not canceled; references to it keep working on it.  0,
 * or VD_EBUSY when the table holds max tickets (the spec is cleared too). */
int ticket_add(struct ticket_table *t, struct ticket_spec *s);

/* imageio's Ticket.info() at the table's now. */
struct ticket_info {
	char uuid[37];
	uint64_t size;
	unsigned ops, nops;
	unsigned char oplist[TICKET_OPS_MAX];
	int64_t timeout, inactivity_timeout;
	int64_t expires;              /* monotonic seconds */
	int64_t idle_time;            /* 0 while an operation runs */
	bool active, canceled, sparse, dirty;
	unsigned connections;
	bool has_transferred;         /* false unless ops held exactly one entry */
	uint64_t transferred;         /* bytes of the union of the operations' ranges */
	char url[TICKET_URL_MAX + 1];
	char transfer_id[TICKET_STR_MAX + 24];
	char filename[TICKET_STR_MAX + 1];  /* "" when absent */
};
/* 0, or VD_ENOENT. */
int ticket_get(struct ticket_table *t, const char *uuid, struct ticket_info *out);
/* expires = now + timeout (0..TICKET_TIMEOUT_MAX, else VD_EINVAL).  0, or
 * VD_ENOENT. */
int ticket_extend(struct ticket_table *t, const char *uuid, int64_t timeout);
/* Cancels the ticket (no operation or connection can start on it; running
 * operations see ticket_op_canceled()) and waits up to wait_ms (real time)
 * for its operations to end, then removes it.  0 (also for an unknown
 * ticket), or VD_ETIMEDOUT when operations still run: the ticket stays,
 * canceled, and a later remove can finish the job (imageio's 409).  With
 * wait_ms 0 it does not wait. */
int ticket_remove(struct ticket_table *t, const char *uuid, unsigned wait_ms);

/* ---- the image server's side ---------------------------------------------- */

struct ticket_ref;

/* May the holder of uuid do op (one of enum ticket_ops) on bytes
 * [offset, offset + length)?  TICKET_OK with *ref held, or the refusal with
 * why[] filled with imageio's reason text.  Refusals are checked in imageio's
 * order: unknown, canceled, expired (expires <= now), op, then size. */
enum ticket_refusal ticket_authorize(struct ticket_table *t, const char *uuid, unsigned op,
				     uint64_t offset, uint64_t length, struct ticket_ref **ref,
				     char *why, size_t whylen);
void ticket_ref_release(struct ticket_ref *r);

/* What the server needs of a held ticket (constant for its life). */
const char *ticket_ref_url(const struct ticket_ref *r);
const char *ticket_ref_transfer_id(const struct ticket_ref *r);
const char *ticket_ref_filename(const struct ticket_ref *r);  /* NULL when none */
uint64_t ticket_ref_size(const struct ticket_ref *r);
unsigned ticket_ref_ops(const struct ticket_ref *r);
bool ticket_ref_sparse(const struct ticket_ref *r);
bool ticket_ref_dirty(const struct ticket_ref *r);
/* True once the ticket is canceled (removed): an idle connection holding
 * it closes. */
bool ticket_ref_canceled(const struct ticket_ref *r);
/* Seconds a client connection may stay idle before the server closes it. */
int64_t ticket_ref_inactivity_timeout(const struct ticket_ref *r);

/* A client connection uses the ticket (imageio's add_context): counted in
 * info.connections until detached.  0, or VD_EPERM when canceled. */
int ticket_conn_attach(struct ticket_ref *r);
void ticket_conn_detach(struct ticket_ref *r);

/* One operation (a GET, PUT, zero or flush) on [offset, ...): while it runs
 * the ticket is active (idle_time 0) and remove waits for it.  begin: 0, or
 * VD_EPERM when canceled.  progress: bytes done so far (transferred counts
 * them while the op runs).  end: the op's range [offset, offset + done)
 * joins the transferred ranges (single-op tickets only; beyond
 * TICKET_RANGES_MAX ranges the two closest merge, counting their gap), the
 * ticket is touched; VD_EPERM when it was canceled meanwhile (the server
 * ends the transfer), else 0.  The op handle is freed by end. */
struct ticket_op;
/* A write (PUT, PATCH zero) runs as a writer: at most max at once per
 * ticket (the backend's max_writers, which OPTIONS announces).  0, or
 * VD_EBUSY when max writers run; each 0 is ended by ticket_writer_end(). */
int ticket_writer_begin(struct ticket_ref *r, unsigned max);
void ticket_writer_end(struct ticket_ref *r);
int ticket_op_begin(struct ticket_ref *r, uint64_t offset, struct ticket_op **op);
void ticket_op_progress(struct ticket_op *op, uint64_t done);
/* True once the ticket is canceled: the server stops at its next I/O. */
bool ticket_op_canceled(const struct ticket_op *op);
int ticket_op_end(struct ticket_op *op);

#endif
