/* vdsmd/image/ticket.c - the ticket table (see ticket.h for the semantics). */
#include "ticket.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/vd.h"

struct range {
	uint64_t start, end;  /* [start, end) */
};

struct ticket_op {
	struct ticket *tk;
	uint64_t offset, done;
	struct ticket_op *prev, *next;  /* the ticket's ongoing ops */
};

/* struct ticket_ref is a struct ticket: a reference is the pointer. */
struct ticket {
	struct ticket_table *table;
	struct ticket_spec s;             /* immutable after add */
	int64_t expires, access;          /* monotonic seconds */
	bool canceled, linked;
	unsigned refs;                    /* references, +1 while linked */
	unsigned connections;
	unsigned nongoing;
	unsigned writers;                 /* write operations running */
	struct ticket_op *ongoing;
	struct range *ranges;             /* sorted, disjoint, not adjacent */
	size_t nranges, rcap;
};

struct ticket_table {
	pthread_mutex_t mu;
	pthread_cond_t unused;            /* broadcast when a canceled ticket's last op ends */
	ticket_clock clock;
	void *clock_ctx;
	size_t max, n;
	struct ticket **tk;               /* the linked tickets, n of max */
};

static struct ticket *ref_tk(const struct ticket_ref *r)
{
	return (struct ticket *)r;
}

const char *ticket_refusal_name(enum ticket_refusal r)
{
	switch (r) {
	case TICKET_OK: return "ok";
	case TICKET_UNKNOWN: return "unknown";
	case TICKET_CANCELED: return "canceled";
	case TICKET_EXPIRED: return "expired";
	case TICKET_FORBIDDEN: return "forbidden";
	case TICKET_PAST_SIZE: return "past size";
	}
	return "?";
}

/* ---- parsing --------------------------------------------------------------- */

static int bad(char *why, size_t whylen, const char *key, const char *reason)
{
	snprintf(why, whylen, "Invalid value for '%s': %s", key, reason);
	return VD_EINVAL;
}

static int missing(char *why, size_t whylen, const char *key)
{
	snprintf(why, whylen, "Required ticket parameter is missing: %s", key);
	return VD_EINVAL;
}

/* A present, non-null member (optional keys: null counts as absent). */
static const struct vd_value *member(const struct vd_value *d, const char *key)
{
	const struct vd_value *v = vd_obj_get(d, key);
	return v && v->type != VD_NULL ? v : NULL;
}

static int get_int(const struct vd_value *d, const char *key, bool required, int64_t dflt,
		   int64_t max, int64_t *out, char *why, size_t whylen)
{
	const struct vd_value *v = required ? vd_obj_get(d, key) : member(d, key);
	if (!v) {
		if (required)
			return missing(why, whylen, key);
		*out = dflt;
		return 0;
	}
	if (v->type != VD_INT)
		return bad(why, whylen, key, v->type == VD_UINT ? "too large"
					  : "expecting an integer value");
	if (v->v.i < 0 || v->v.i > max) {
		char r[64];
		snprintf(r, sizeof(r), "%lld: expecting 0..%lld", (long long)v->v.i, (long long)max);
		return bad(why, whylen, key, r);
	}
	*out = v->v.i;
	return 0;
}

static int get_str(const struct vd_value *d, const char *key, bool required, size_t max,
		   char **out, char *why, size_t whylen)
{
	const struct vd_value *v = required ? vd_obj_get(d, key) : member(d, key);
	*out = NULL;
	if (!v)
		return required ? missing(why, whylen, key) : 0;
	if (v->type != VD_STRING)
		return bad(why, whylen, key, "expecting a string value");
	if (v->v.s.len > max) {
		char r[64];
		snprintf(r, sizeof(r), "longer than %zu bytes", max);
		return bad(why, whylen, key, r);
	}
	if (memchr(v->v.s.ptr, '\0', v->v.s.len))
		return bad(why, whylen, key, "contains a NUL byte");
	*out = xstrndup(v->v.s.ptr, v->v.s.len);
	return 0;
}

static int get_bool(const struct vd_value *d, const char *key, bool *out, char *why,
		    size_t whylen)
{
	const struct vd_value *v = member(d, key);
	*out = false;
	if (!v)
		return 0;
	if (v->type != VD_BOOL)
		return bad(why, whylen, key, "expecting a boolean value");
	*out = v->v.b;
	return 0;
}

static int get_ops(const struct vd_value *d, struct ticket_spec *s, char *why, size_t whylen)
{
	const struct vd_value *v = vd_obj_get(d, "ops");
	if (!v)
		return missing(why, whylen, "ops");
	if (v->type != VD_ARRAY)
		return bad(why, whylen, "ops", "expecting a list value");
	if (v->v.arr.n > TICKET_OPS_MAX)
		return bad(why, whylen, "ops", "too many entries");
	for (size_t i = 0; i < v->v.arr.n; i++) {
		const struct vd_value *o = &v->v.arr.items[i];
		unsigned bit = vd_str_eq(o, "read") ? TICKET_OP_READ
			       : vd_str_eq(o, "write") ? TICKET_OP_WRITE : 0;
		if (!bit)
			return bad(why, whylen, "ops", "entries must be \"read\" or \"write\"");
		s->oplist[s->nops++] = (unsigned char)bit;
		s->ops |= bit;
	}
	return 0;
}

static bool url_scheme_ok(const char *url)
{
	return strncmp(url, "file:", 5) == 0 || strncmp(url, "nbd:", 4) == 0;
}

int ticket_parse(const struct vd_value *d, struct ticket_spec *s, char *why, size_t whylen)
{
	memset(s, 0, sizeof(*s));
	if (!d || d->type != VD_OBJECT) {
		snprintf(why, whylen, "Invalid ticket: expecting a dict");
		return VD_EINVAL;
	}
	int64_t size = 0;
	int rc;
	const struct vd_value *u = vd_obj_get(d, "uuid");
	if (!u) {
		rc = missing(why, whylen, "uuid");
		goto out;
	}
	if (u->type != VD_STRING || !vd_is_uuid(u->v.s.ptr, u->v.s.len)) {
		rc = bad(why, whylen, "uuid", "expecting a uuid string");
		goto out;
	}
	memcpy(s->uuid, u->v.s.ptr, 36);
	s->uuid[36] = '\0';
	if ((rc = get_int(d, "size", true, 0, INT64_MAX, &size, why, whylen)) ||
	    (rc = get_ops(d, s, why, whylen)) ||
	    (rc = get_int(d, "timeout", true, 0, TICKET_TIMEOUT_MAX, &s->timeout, why, whylen)) ||
	    (rc = get_int(d, "inactivity_timeout", false, TICKET_INACTIVITY_DEFAULT,
			  TICKET_TIMEOUT_MAX, &s->inactivity_timeout, why, whylen)) ||
	    (rc = get_str(d, "url", true, TICKET_URL_MAX, &s->url, why, whylen)) ||
	    (rc = get_str(d, "transfer_id", false, TICKET_STR_MAX, &s->transfer_id, why, whylen)) ||
	    (rc = get_str(d, "filename", false, TICKET_STR_MAX, &s->filename, why, whylen)) ||
	    (rc = get_bool(d, "sparse", &s->sparse, why, whylen)) ||
	    (rc = get_bool(d, "dirty", &s->dirty, why, whylen)))
		goto out;
	s->size = (uint64_t)size;
	if (!url_scheme_ok(s->url)) {
		rc = bad(why, whylen, "url", "unsupported url scheme (file: or nbd:)");
		goto out;
	}
	if (!s->transfer_id) {
		/* imageio: engines before 4.2.7 sent none; half the uuid names it */
		char id[32];
		snprintf(id, sizeof(id), "(ticket/%.18s)", s->uuid);
		s->transfer_id = xstrdup(id);
	}
	return 0;
out:
	ticket_spec_clear(s);
	return rc;
}

void ticket_spec_clear(struct ticket_spec *s)
{
	free(s->url);
	free(s->transfer_id);
	free(s->filename);
	memset(s, 0, sizeof(*s));
}

/* ---- the table ------------------------------------------------------------- */

static int64_t mono_seconds(void *ctx)
{
	(void)ctx;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec;
}

struct ticket_table *ticket_table_new(size_t max, ticket_clock clock, void *clock_ctx)
{
	struct ticket_table *t = xcalloc(1, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->unused, &ca);
	pthread_condattr_destroy(&ca);
	t->clock = clock ? clock : mono_seconds;
	t->clock_ctx = clock_ctx;
	t->max = max ? max : 1;
	t->tk = xcalloc(t->max, sizeof(*t->tk));
	return t;
}

static void tk_free(struct ticket *k)
{
	ticket_spec_clear(&k->s);
	free(k->ranges);
	free(k);
}

/* Drops one reference; the caller holds the table lock. */
static void tk_put(struct ticket *k)
{
	if (--k->refs == 0)
		tk_free(k);
}

static size_t find(const struct ticket_table *t, const char *uuid)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->tk[i]->s.uuid, uuid) == 0)
			return i;
	return SIZE_MAX;
}

static void unlink_at(struct ticket_table *t, size_t i)
{
	struct ticket *k = t->tk[i];
	t->tk[i] = t->tk[--t->n];
	k->linked = false;
	tk_put(k);
}

void ticket_table_free(struct ticket_table *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	while (t->n)
		unlink_at(t, t->n - 1);
	pthread_mutex_unlock(&t->mu);
	pthread_cond_destroy(&t->unused);
	pthread_mutex_destroy(&t->mu);
	free(t->tk);
	free(t);
}

int64_t ticket_table_now(struct ticket_table *t)
{
	return t->clock(t->clock_ctx);
}

size_t ticket_table_count(struct ticket_table *t)
{
	pthread_mutex_lock(&t->mu);
	size_t n = t->n;
	pthread_mutex_unlock(&t->mu);
	return n;
}

int ticket_add(struct ticket_table *t, struct ticket_spec *s)
{
	int64_t now = ticket_table_now(t);
	pthread_mutex_lock(&t->mu);
	size_t i = find(t, s->uuid);
	if (i == SIZE_MAX && t->n >= t->max) {
		pthread_mutex_unlock(&t->mu);
		ticket_spec_clear(s);
		return VD_EBUSY;
	}
	struct ticket *k = xcalloc(1, sizeof(*k));
	k->table = t;
	k->s = *s;
	memset(s, 0, sizeof(*s));
	k->expires = now + k->s.timeout;
	k->access = now;
	k->linked = true;
	k->refs = 1;
	if (i != SIZE_MAX)
		unlink_at(t, i);
	t->tk[t->n++] = k;
	pthread_mutex_unlock(&t->mu);
	return 0;
}

/* Bytes of the union of the completed ranges and the ongoing ops' ranges. */
static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static uint64_t transferred(const struct ticket *k)
{
	if (!k->nongoing) {
		uint64_t sum = 0;
		for (size_t i = 0; i < k->nranges; i++)
			sum += k->ranges[i].end - k->ranges[i].start;
		return sum;
	}
	size_t n = 0;
	struct range *all = xmalloc((k->nranges + k->nongoing) * sizeof(*all));
	if (k->nranges)  /* ranges is NULL before the first one */
		memcpy(all, k->ranges, k->nranges * sizeof(*all));
	n = k->nranges;
	for (const struct ticket_op *op = k->ongoing; op; op = op->next)
		if (op->done)
			all[n++] = (struct range){ op->offset, op->offset + op->done };
	qsort(all, n, sizeof(*all), cmp_range);
	uint64_t sum = 0, cur_s = 0, cur_e = 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || all[i].start > cur_e) {
			sum += cur_e - cur_s;
			cur_s = all[i].start;
			cur_e = all[i].end;
		} else if (all[i].end > cur_e) {
			cur_e = all[i].end;
		}
	}
	sum += cur_e - cur_s;
	free(all);
	return sum;
}

static void fill_info(const struct ticket *k, int64_t now, struct ticket_info *o)
{
	memset(o, 0, sizeof(*o));
	memcpy(o->uuid, k->s.uuid, sizeof(o->uuid));
	o->size = k->s.size;
	o->ops = k->s.ops;
	o->nops = k->s.nops;
	memcpy(o->oplist, k->s.oplist, sizeof(o->oplist));
	o->timeout = k->s.timeout;
	o->inactivity_timeout = k->s.inactivity_timeout;
	o->expires = k->expires;
	o->active = k->nongoing > 0;
	o->idle_time = o->active ? 0 : now - k->access;
	o->canceled = k->canceled;
	o->sparse = k->s.sparse;
	o->dirty = k->s.dirty;
	o->connections = k->connections;
	o->has_transferred = k->s.nops == 1;
	if (o->has_transferred)
		o->transferred = transferred(k);
	snprintf(o->url, sizeof(o->url), "%s", k->s.url);
	snprintf(o->transfer_id, sizeof(o->transfer_id), "%s", k->s.transfer_id);
	if (k->s.filename)
		snprintf(o->filename, sizeof(o->filename), "%s", k->s.filename);
}

int ticket_get(struct ticket_table *t, const char *uuid, struct ticket_info *out)
{
	int64_t now = ticket_table_now(t);
	pthread_mutex_lock(&t->mu);
	size_t i = find(t, uuid);
	if (i != SIZE_MAX)
		fill_info(t->tk[i], now, out);
	pthread_mutex_unlock(&t->mu);
	return i == SIZE_MAX ? VD_ENOENT : 0;
}

int ticket_extend(struct ticket_table *t, const char *uuid, int64_t timeout)
{
	if (timeout < 0 || timeout > TICKET_TIMEOUT_MAX)
		return VD_EINVAL;
	int64_t now = ticket_table_now(t);
	pthread_mutex_lock(&t->mu);
	size_t i = find(t, uuid);
	if (i != SIZE_MAX)
		t->tk[i]->expires = now + timeout;
	pthread_mutex_unlock(&t->mu);
	return i == SIZE_MAX ? VD_ENOENT : 0;
}

int ticket_remove(struct ticket_table *t, const char *uuid, unsigned wait_ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += wait_ms / 1000;
	dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	int rc = 0;
	pthread_mutex_lock(&t->mu);
	size_t i = find(t, uuid);
	if (i == SIZE_MAX)
		goto out;  /* already removed: DELETE is idempotent */
	struct ticket *k = t->tk[i];
	k->canceled = true;
	k->refs++;  /* k stays valid while we sleep, even if replaced */
	while (k->nongoing && wait_ms) {
		int e = pthread_cond_timedwait(&t->unused, &t->mu, &dl);
		if (e == ETIMEDOUT)
			break;
	}
	if (k->nongoing) {
		rc = VD_ETIMEDOUT;
	} else if (k->linked) {
		i = find(t, uuid);
		if (i != SIZE_MAX && t->tk[i] == k)
			unlink_at(t, i);
	}
	tk_put(k);
out:
	pthread_mutex_unlock(&t->mu);
	return rc;
}

/* ---- the server's side ----------------------------------------------------- */

static bool may(const struct ticket *k, unsigned op)
{
	/* imageio: "write" implies "read" */
	if (op == TICKET_OP_READ)
		return (k->s.ops & (TICKET_OP_READ | TICKET_OP_WRITE)) != 0;
	return op == TICKET_OP_WRITE && (k->s.ops & TICKET_OP_WRITE);
}

enum ticket_refusal ticket_authorize(struct ticket_table *t, const char *uuid, unsigned op,
				     uint64_t offset, uint64_t length, struct ticket_ref **ref,
				     char *why, size_t whylen)
{
	*ref = NULL;
	int64_t now = ticket_table_now(t);
	enum ticket_refusal r = TICKET_OK;
	pthread_mutex_lock(&t->mu);
	size_t i = find(t, uuid);
	struct ticket *k = i == SIZE_MAX ? NULL : t->tk[i];
	if (!k) {
		r = TICKET_UNKNOWN;
		snprintf(why, whylen, "No such ticket %s", uuid);
	} else if (k->canceled) {
		r = TICKET_CANCELED;
		snprintf(why, whylen, "Transfer=%s was canceled", k->s.transfer_id);
	} else if (k->expires <= now) {
		r = TICKET_EXPIRED;
		snprintf(why, whylen, "Transfer=%s expired", k->s.transfer_id);
	} else if (!may(k, op)) {
		r = TICKET_FORBIDDEN;
		snprintf(why, whylen, "Transfer=%s forbids %s", k->s.transfer_id,
			 op == TICKET_OP_WRITE ? "write" : "read");
	} else if (offset > k->s.size || length > k->s.size - offset) {
		r = TICKET_PAST_SIZE;
		snprintf(why, whylen, "Requested range %llu+%llu is past the ticket size %llu",
			 (unsigned long long)offset, (unsigned long long)length,
			 (unsigned long long)k->s.size);
	} else {
		k->refs++;
		*ref = (struct ticket_ref *)k;
	}
	pthread_mutex_unlock(&t->mu);
	return r;
}

void ticket_ref_release(struct ticket_ref *r)
{
	if (!r)
		return;
	struct ticket *k = ref_tk(r);
	struct ticket_table *t = k->table;
	pthread_mutex_lock(&t->mu);
	tk_put(k);
	pthread_mutex_unlock(&t->mu);
}

const char *ticket_ref_url(const struct ticket_ref *r) { return ref_tk(r)->s.url; }
const char *ticket_ref_transfer_id(const struct ticket_ref *r) { return ref_tk(r)->s.transfer_id; }
const char *ticket_ref_filename(const struct ticket_ref *r) { return ref_tk(r)->s.filename; }
uint64_t ticket_ref_size(const struct ticket_ref *r) { return ref_tk(r)->s.size; }
unsigned ticket_ref_ops(const struct ticket_ref *r) { return ref_tk(r)->s.ops; }
bool ticket_ref_sparse(const struct ticket_ref *r) { return ref_tk(r)->s.sparse; }
bool ticket_ref_dirty(const struct ticket_ref *r) { return ref_tk(r)->s.dirty; }

int64_t ticket_ref_inactivity_timeout(const struct ticket_ref *r)
{
	return ref_tk(r)->s.inactivity_timeout;
}

bool ticket_ref_canceled(const struct ticket_ref *r)
{
	struct ticket *k = ref_tk(r);
	pthread_mutex_lock(&k->table->mu);
	bool c = k->canceled;
	pthread_mutex_unlock(&k->table->mu);
	return c;
}

int ticket_conn_attach(struct ticket_ref *r)
{
	struct ticket *k = ref_tk(r);
	int rc = 0;
	pthread_mutex_lock(&k->table->mu);
	if (k->canceled)
		rc = VD_EPERM;
	else
		k->connections++;
	pthread_mutex_unlock(&k->table->mu);
	return rc;
}

void ticket_conn_detach(struct ticket_ref *r)
{
	struct ticket *k = ref_tk(r);
	pthread_mutex_lock(&k->table->mu);
	if (k->connections)
		k->connections--;
	pthread_mutex_unlock(&k->table->mu);
}

int ticket_op_begin(struct ticket_ref *r, uint64_t offset, struct ticket_op **out)
{
	struct ticket *k = ref_tk(r);
	*out = NULL;
	pthread_mutex_lock(&k->table->mu);
	if (k->canceled) {
		pthread_mutex_unlock(&k->table->mu);
		return VD_EPERM;
	}
	struct ticket_op *op = xcalloc(1, sizeof(*op));
	op->tk = k;
	op->offset = offset;
	op->next = k->ongoing;
	if (k->ongoing)
		k->ongoing->prev = op;
	k->ongoing = op;
	k->nongoing++;
	k->refs++;  /* the op holds the ticket too */
	pthread_mutex_unlock(&k->table->mu);
	*out = op;
	return 0;
}

int ticket_writer_begin(struct ticket_ref *r, unsigned max)
{
	struct ticket *k = ref_tk(r);
	pthread_mutex_lock(&k->table->mu);
	int rc = k->writers >= max ? VD_EBUSY : 0;
	if (!rc)
		k->writers++;
	pthread_mutex_unlock(&k->table->mu);
	return rc;
}

void ticket_writer_end(struct ticket_ref *r)
{
	struct ticket *k = ref_tk(r);
	pthread_mutex_lock(&k->table->mu);
	if (k->writers)
		k->writers--;
	pthread_mutex_unlock(&k->table->mu);
}

void ticket_op_progress(struct ticket_op *op, uint64_t done)
{
	if (done > UINT64_MAX - op->offset)
		done = UINT64_MAX - op->offset;
	pthread_mutex_lock(&op->tk->table->mu);
	op->done = done;
	pthread_mutex_unlock(&op->tk->table->mu);
}

bool ticket_op_canceled(const struct ticket_op *op)
{
	pthread_mutex_lock(&op->tk->table->mu);
	bool c = op->tk->canceled;
	pthread_mutex_unlock(&op->tk->table->mu);
	return c;
}

/* Merge the pair of neighbours with the smallest gap (the list is full). */
static void ranges_squeeze(struct ticket *k)
{
	size_t best = 0;
	uint64_t gap = UINT64_MAX;
	for (size_t i = 0; i + 1 < k->nranges; i++) {
		uint64_t g = k->ranges[i + 1].start - k->ranges[i].end;
		if (g < gap) {
			gap = g;
			best = i;
		}
	}
	k->ranges[best].end = k->ranges[best + 1].end;
	memmove(&k->ranges[best + 1], &k->ranges[best + 2],
		(k->nranges - best - 2) * sizeof(*k->ranges));
	k->nranges--;
}

static void ranges_add(struct ticket *k, uint64_t start, uint64_t end)
{
	if (start >= end)
		return;
	/* first range whose end reaches start (touching ranges merge) */
	size_t i = 0;
	while (i < k->nranges && k->ranges[i].end < start)
		i++;
	size_t j = i;
	while (j < k->nranges && k->ranges[j].start <= end) {
		start = VD_MIN(start, k->ranges[j].start);
		end = VD_MAX(end, k->ranges[j].end);
		j++;
	}
	if (j > i) {  /* [i, j) merge into one */
		k->ranges[i] = (struct range){ start, end };
		memmove(&k->ranges[i + 1], &k->ranges[j], (k->nranges - j) * sizeof(*k->ranges));
		k->nranges -= j - i - 1;
		return;
	}
	if (k->nranges == k->rcap) {
		k->rcap = k->rcap ? VD_MIN(k->rcap * 2, (size_t)TICKET_RANGES_MAX + 1) : 8;
		k->ranges = xrealloc(k->ranges, k->rcap * sizeof(*k->ranges));
	}
	memmove(&k->ranges[i + 1], &k->ranges[i], (k->nranges - i) * sizeof(*k->ranges));
	k->ranges[i] = (struct range){ start, end };
	k->nranges++;
	if (k->nranges > TICKET_RANGES_MAX)
		ranges_squeeze(k);
}

int ticket_op_end(struct ticket_op *op)
{
	struct ticket *k = op->tk;
	struct ticket_table *t = k->table;
	int64_t now = ticket_table_now(t);
	int rc = 0;
	pthread_mutex_lock(&t->mu);
	if (op->prev)
		op->prev->next = op->next;
	else
		k->ongoing = op->next;
	if (op->next)
		op->next->prev = op->prev;
	k->nongoing--;
	if (k->canceled) {
		if (!k->nongoing)
			pthread_cond_broadcast(&t->unused);
		rc = VD_EPERM;
	} else {
		/* imageio reports transferred bytes for single-op tickets only */
		if (k->s.nops == 1)
			ranges_add(k, op->offset, op->offset + op->done);
		k->expires = now + k->s.timeout;
		k->access = now;
	}
	tk_put(k);
	pthread_mutex_unlock(&t->mu);
	free(op);
	return rc;
}
