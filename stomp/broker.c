/* stomp/broker.c - the mini-broker: destinations (hashed by name),
 * subscriptions, routing of replies, events and forwarded SENDs, and the
 * MESSAGE writer.  Per-connection command handling is in session.c.
 *
 * Everything here runs on the loop thread; nothing is locked. */
#include "broker_int.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_REPLY_DEST STOMP_REPLY_DEST

static bool name_is(const char *d, size_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(d, lit, n);
}

static bool builtin_reserved(const char *name, size_t len)
{
	return name_is(name, len, STOMP_EVENTS_DEST) || name_is(name, len, DEFAULT_REPLY_DEST);
}

uint32_t stomp_hash(const char *s, size_t n)
{
	uint32_t h = STOMP_HASH_INIT;
	for (size_t i = 0; i < n; i++)
		h = stomp_hash_step(h, (unsigned char)s[i]);
	return h;
}

struct stomp_broker *stomp_broker_new(const struct stomp_broker_config *cfg,
				      const struct stomp_broker_ops *ops, void *host)
{
	struct stomp_broker *b = xcalloc(1, sizeof(*b));
	b->cfg = *cfg;
	if (!b->cfg.limits.max_frame || !b->cfg.limits.max_headers ||
	    !b->cfg.limits.max_header_line) {
		struct stomp_limits d = STOMP_LIMITS_DEFAULT;
		b->cfg.limits = d;
	}
	b->server_name = xstrdup(cfg->server_name ? cfg->server_name : "vdsmd");
	b->cfg.server_name = b->server_name;
	if (ops)
		b->ops = *ops;
	b->host = host;
	b->nbuckets = 64;
	b->buckets = xcalloc(b->nbuckets, sizeof(*b->buckets));
	b->hdr = xcalloc(b->cfg.limits.max_headers, sizeof(*b->hdr));
	return b;
}

void stomp_broker_set_write_direct(struct stomp_broker *b, stomp_write_direct_fn fn)
{
	b->write_direct = fn;
}

void stomp_broker_set_frame_hook(struct stomp_broker *b, stomp_frame_fn fn)
{
	b->frame_hook = fn;
}

void stomp_broker_set_pad_hook(struct stomp_broker *b, stomp_pad_fn fn)
{
	b->pad_hook = fn;
}

void stomp_broker_free(struct stomp_broker *b)
{
	if (!b)
		return;
	/* Sessions should be gone; free what subscriptions remain anyway. */
	for (size_t i = 0; i < b->nbuckets; i++) {
		struct stomp_dest *d = b->buckets[i];
		while (d) {
			struct stomp_dest *nd = d->next;
			struct stomp_sub *sub = d->subs;
			while (sub) {
				struct stomp_sub *ns = sub->dnext;
				sub->s->subs = NULL;
				free(sub);
				sub = ns;
			}
			free(d);
			d = nd;
		}
	}
	free(b->buckets);
	free(b->hdr);
	free(b->server_name);
	free(b);
}

void stomp_broker_stats(const struct stomp_broker *b, struct stomp_broker_stats *out)
{
	*out = b->st;
}

/* ---- destinations -------------------------------------------------------- */

struct stomp_dest *stomp_dest_find(struct stomp_broker *b, const char *name, size_t len,
				   uint32_t hash)
{
	for (struct stomp_dest *d = b->buckets[hash & (b->nbuckets - 1)]; d; d = d->next)
		if (d->hash == hash && d->len == len && !memcmp(d->name, name, len))
			return d;
	return NULL;
}

static void dest_rehash(struct stomp_broker *b, size_t n)
{
	struct stomp_dest **nb = xcalloc(n, sizeof(*nb));
	for (size_t i = 0; i < b->nbuckets; i++) {
		struct stomp_dest *d = b->buckets[i];
		while (d) {
			struct stomp_dest *next = d->next;
			d->next = nb[d->hash & (n - 1)];
			nb[d->hash & (n - 1)] = d;
			d = next;
		}
	}
	free(b->buckets);
	b->buckets = nb;
	b->nbuckets = n;
}

static struct stomp_dest *dest_get(struct stomp_broker *b, const char *name, size_t len)
{
	uint32_t h = stomp_hash(name, len);
	struct stomp_dest *d = stomp_dest_find(b, name, len, h);
	if (d)
		return d;
	if (b->ndests >= b->nbuckets)
		dest_rehash(b, b->nbuckets * 2);
	d = xmalloc(sizeof(*d) + len + 1 + stomp_escaped_max(len));
	d->hash = h;
	d->len = len;
	d->subs = NULL;
	d->tail = NULL;
	d->reserved = builtin_reserved(name, len);
	memcpy(d->name, name, len);
	d->name[len] = '\0';
	d->esc = d->name + len + 1;
	d->esclen = (size_t)(stomp_put_escaped(d->esc, name, len, true) - d->esc);
	struct stomp_dest **slot = &b->buckets[h & (b->nbuckets - 1)];
	d->next = *slot;
	*slot = d;
	b->ndests++;
	return d;
}

static void dest_drop(struct stomp_broker *b, struct stomp_dest *d)
{
	struct stomp_dest **pp = &b->buckets[d->hash & (b->nbuckets - 1)];
	while (*pp != d)
		pp = &(*pp)->next;
	*pp = d->next;
	b->ndests--;
	free(d);
}

bool stomp_dest_reserved(struct stomp_broker *b, const char *dest, size_t dlen)
{
	if (builtin_reserved(dest, dlen))
		return true;
	struct stomp_dest *d = b->ndests ? stomp_dest_find(b, dest, dlen, stomp_hash(dest, dlen))
		: NULL;
	return d && d->reserved;
}

void stomp_dest_reserve(struct stomp_broker *b, const char *dest, size_t dlen)
{
	if (!dest || !dlen)
		return;  /* the default: always reserved */
	struct stomp_dest *d = b->ndests ? stomp_dest_find(b, dest, dlen, stomp_hash(dest, dlen))
		: NULL;
	if (d)
		d->reserved = true;
}

/* ---- subscriptions ------------------------------------------------------- */

struct stomp_sub *stomp_sub_find(struct stomp_session *s, const char *id, size_t idlen)
{
	for (struct stomp_sub *sub = s->subs; sub; sub = sub->snext)
		if (sub->idlen == idlen && !memcmp(sub->id, id, idlen))
			return sub;
	return NULL;
}

void stomp_sub_add(struct stomp_session *s, const char *dest, size_t dlen,
		   const char *id, size_t idlen, const char *ack, size_t acklen)
{
	struct stomp_broker *b = s->b;
	size_t bytes = sizeof(struct stomp_sub) + idlen + 1 + stomp_escaped_max(idlen);
	struct stomp_sub *sub = xcalloc(1, bytes);
	/* the destination's name, in case this subscription created it */
	sub->bytes = bytes + sizeof(struct stomp_dest) + 3 * dlen + 1;
	s->sub_bytes += sub->bytes;
	memcpy(sub->id, id, idlen);
	sub->id[idlen] = '\0';
	sub->idlen = idlen;
	sub->escid = sub->id + idlen + 1;
	sub->escidlen = (size_t)(stomp_put_escaped(sub->escid, id, idlen, true) - sub->escid);
	if (ack) {
		acklen = VD_MIN(acklen, sizeof(sub->ack) - 1);
		memcpy(sub->ack, ack, acklen);
		sub->ack[acklen] = '\0';
		sub->ack_hdr = !strcmp(sub->ack, "client") || !strcmp(sub->ack, "client-individual");
	}
	sub->s = s;
	sub->dest = dest_get(b, dest, dlen);
	/* Append at the tail of the destination list: deliveries follow
	 * subscription order. */
	struct stomp_dest *d = sub->dest;
	sub->dprev = d->tail;
	if (d->tail)
		d->tail->dnext = sub;
	else
		d->subs = sub;
	d->tail = sub;
	/* Session list: also in subscription order (bounded per session). */
	struct stomp_sub **sp = &s->subs;
	while (*sp)
		sp = &(*sp)->snext;
	*sp = sub;
	s->nsubs++;
	b->st.subscriptions++;
}

void stomp_sub_remove(struct stomp_session *s, struct stomp_sub *sub)
{
	struct stomp_broker *b = s->b;
	struct stomp_sub **sp = &s->subs;
	while (*sp != sub)
		sp = &(*sp)->snext;
	*sp = sub->snext;
	struct stomp_dest *d = sub->dest;
	if (sub->dprev)
		sub->dprev->dnext = sub->dnext;
	else
		d->subs = sub->dnext;
	if (sub->dnext)
		sub->dnext->dprev = sub->dprev;
	else
		d->tail = sub->dprev;
	s->nsubs--;
	s->sub_bytes -= sub->bytes;
	if (!d->subs)
		dest_drop(b, d);
	b->st.subscriptions--;
	free(sub);
}

/* ---- output -------------------------------------------------------------- */

static bool skip_extra(const struct stomp_header *h)
{
	switch (h->nlen) {
	case 7:
		return !memcmp(h->name, "receipt", 7);
	case 10:
		return !memcmp(h->name, "message-id", 10);
	case 11:
		return !memcmp(h->name, "destination", 11) || !memcmp(h->name, "transaction", 11);
	case 12:
		return !memcmp(h->name, "content-type", 12) || !memcmp(h->name, "subscription", 12);
	case 14:
		return !memcmp(h->name, "content-length", 14);
	}
	return false;
}

/* The most bytes one MESSAGE for sub may take in its session's output. */
static size_t frame_need(const struct stomp_sub *sub, const char *dest, size_t dlen,
			 size_t ctlen, const struct stomp_header *extra, unsigned nextra,
			 size_t len)
{
	size_t dl = dest ? stomp_escaped_max(dlen) : sub->dest->esclen;
	size_t need = sizeof("MESSAGE\ndestination:\ncontent-type:\nsubscription:\n"
			     "message-id:\ncontent-length:\nack:\n\n") + 60 +
		      dl + stomp_escaped_max(ctlen) + sub->escidlen + len;
	for (unsigned i = 0; i < nextra; i++)
		need += stomp_escaped_max(extra[i].nlen) + stomp_escaped_max(extra[i].vlen) + 2;
	return need;
}

void stomp_deliver(struct stomp_broker *b, struct stomp_sub *sub,
		   const char *dest, size_t dlen, const char *ct, size_t ctlen,
		   const struct stomp_header *extra, unsigned nextra,
		   const char *body, size_t len)
{
	const struct stomp_iov one = { body, len };
	stomp_deliver_iov(b, sub, dest, dlen, ct, ctlen, extra, nextra, &one, 1);
}

/* The head of a MESSAGE ends at w, its content-length value (len, cln
 * digits) at cl, both in out past out->len; the frame (len bytes of body
 * and the NUL to come) is to grow to the size the pad hook asks, if any.
 * Rewrites content-length for the padding and returns the head's new end
 * (out may have moved); *pad: the spaces to write after the body. */
static char *pad_head(struct stomp_broker *b, struct stomp_session *s, char *w, char *cl,
		      unsigned cln, size_t len, size_t *pad)
{
	struct vd_buf *out = s->out;
	size_t hlen = (size_t)(w - (out->data + out->len)), flen = hlen + len + 1;
	size_t target = b->pad_hook(b->host, s, s->conn, out->len, flen);
	*pad = 0;
	if (target <= flen)
		return w;
	unsigned dd;
	size_t n = stomp_pad_count(flen, len, cln, target, &dd);
	size_t wo = (size_t)(w - out->data), co = (size_t)(cl - out->data);
	buf_reserve(out, hlen + dd + len + n + 1);
	w = out->data + wo;
	cl = out->data + co;
	memmove(cl + cln + dd, cl + cln, (size_t)(w - (cl + cln)));
	stomp_put_u64(cl, len + n);
	*pad = n;
	return w + dd;
}

/* What write_direct left of the pieces (skip bytes already written),
 * appended to out. */
static void append_rest(struct vd_buf *out, const struct stomp_iov *body, unsigned n, size_t skip)
{
	for (unsigned i = 0; i < n; i++) {
		if (skip >= body[i].len) {
			skip -= body[i].len;
			continue;
		}
		buf_append(out, body[i].base + skip, body[i].len - skip);
		skip = 0;
	}
}

void stomp_deliver_iov(struct stomp_broker *b, struct stomp_sub *sub,
		       const char *dest, size_t dlen, const char *ct, size_t ctlen,
		       const struct stomp_header *extra, unsigned nextra,
		       const struct stomp_iov *body, unsigned nbody)
{
	struct vd_buf *out = sub->s->out;
	size_t len = 0;
	for (unsigned i = 0; i < nbody; i++)
		len += body[i].len;
	size_t need = frame_need(sub, dest, dlen, ctlen, extra, nextra, len);
	bool direct = len >= STOMP_DIRECT_MIN && out->len == 0 && b->write_direct;
	buf_reserve(out, direct ? need - len : need);
	char *w = out->data + out->len;
	w = STOMP_PUT_LIT(w, "MESSAGE\ndestination:");
	if (dest)
		w = stomp_put_escaped(w, dest, dlen, true);
	else
		w = stomp_put(w, sub->dest->esc, sub->dest->esclen);
	if (ct) {
		w = STOMP_PUT_LIT(w, "\ncontent-type:");
		w = stomp_put_escaped(w, ct, ctlen, true);
	}
	w = STOMP_PUT_LIT(w, "\nsubscription:");
	w = stomp_put(w, sub->escid, sub->escidlen);
	w = STOMP_PUT_LIT(w, "\nmessage-id:");
	uint64_t mid = ++b->msg_seq;
	w = stomp_put_u64(w, mid);
	w = STOMP_PUT_LIT(w, "\ncontent-length:");
	char *cl = w;
	w = stomp_put_u64(w, len);
	if (sub->ack_hdr) {
		/* STOMP 1.2: the id a client ACKs or NACKs (the message id). */
		w = STOMP_PUT_LIT(w, "\nack:");
		w = stomp_put_u64(w, mid);
	}
	*w++ = '\n';
	for (unsigned i = 0; i < nextra; i++) {
		const struct stomp_header *h = &extra[i];
		if (skip_extra(h))
			continue;
		w = stomp_put_escaped(w, h->name, h->nlen, true);
		*w++ = ':';
		w = stomp_put_escaped(w, h->value, h->vlen, true);
		*w++ = '\n';
	}
	*w++ = '\n';
	if (direct) {
		/* Large body, nothing queued before it: the host writes head and
		 * body from where they are; only what it could not write is
		 * copied into the buffer. */
		size_t hlen = (size_t)(w - out->data);
		struct stomp_iov iov[STOMP_BODY_PIECES + 2];
		unsigned k = 0;
		iov[k++] = (struct stomp_iov){ out->data, hlen };
		for (unsigned i = 0; i < nbody && i < STOMP_BODY_PIECES; i++)
			if (body[i].len)
				iov[k++] = body[i];
		iov[k++] = (struct stomp_iov){ "", 1 };
		size_t done = b->write_direct(b->host, sub->s, sub->s->conn, iov, k);
		out->len = hlen;
		buf_consume(out, done);  /* the head, or what is left of it */
		if (done < hlen + len)
			append_rest(out, body, nbody, done > hlen ? done - hlen : 0);
		if (done < hlen + len + 1)
			buf_putc(out, '\0');
		b->st.frames_out++;
		stomp_frame_done(b, sub->s);
		if (out->len && sub->s != b->feeding && b->ops.output)
			b->ops.output(b->host, sub->s, sub->s->conn);
		return;
	}
	size_t pad = 0;
	if (b->pad_hook && ct && len && stomp_ct_is_json(ct, ctlen))
		w = pad_head(b, sub->s, w, cl, stomp_u64_digits(len), len, &pad);
	for (unsigned i = 0; i < nbody; i++)
		if (body[i].len)
			w = stomp_put(w, body[i].base, body[i].len);
	memset(w, ' ', pad);
	w += pad;
	*w++ = '\0';
	out->len = (size_t)(w - out->data);
	b->st.frames_out++;
	stomp_frame_done(b, sub->s);
	if (sub->s != b->feeding && b->ops.output)
		b->ops.output(b->host, sub->s, sub->s->conn);
}

/* A message of len bytes would take the session over its output bound: it
 * is dropped for it (counted), before anything is queued. */
static bool over_bound(struct stomp_broker *b, struct stomp_session *s, size_t len)
{
	if (b->cfg.max_output && s->out->len + len > b->cfg.max_output) {
		s->dropped++;
		b->st.messages_dropped++;
		return true;
	}
	return false;
}

/* The host's memory budget cannot take need more bytes for s: the message
 * is dropped for it (counted), before anything is queued. */
static bool over_budget(struct stomp_broker *b, struct stomp_session *s, size_t need)
{
	if (!b->ops.admit || b->ops.admit(b->host, s, s->conn, need))
		return false;
	s->dropped++;
	b->st.messages_dropped++;
	b->st.budget_dropped++;
	return true;
}

/* The subscriptions a SEND to dest reaches: each dot-separated prefix (and
 * the whole name) is one exact lookup; the hash is carried along so a long
 * name costs O(length).  Reserved destinations (replies, events) are never
 * forwarded into.  The next subscription is taken before the current one is
 * handed out: delivering may close the current one's connection. */
struct match_iter {
	struct stomp_broker *b;
	const char *dest;
	size_t dlen, i;
	uint32_t h;
	struct stomp_sub *next;
};

static void match_start(struct match_iter *it, struct stomp_broker *b, const char *dest,
			size_t dlen)
{
	it->b = b;
	it->dest = dest;
	it->dlen = dlen;
	it->i = 0;
	it->h = STOMP_HASH_INIT;
	it->next = NULL;
}

static struct stomp_sub *match_next(struct match_iter *it)
{
	while (!it->next && it->i <= it->dlen) {
		size_t i = it->i++;
		if (i == it->dlen || it->dest[i] == '.') {
			struct stomp_dest *d = it->b->ndests ?
				stomp_dest_find(it->b, it->dest, i, it->h) : NULL;
			if (d && !d->reserved)
				it->next = d->subs;
		}
		if (i < it->dlen)
			it->h = stomp_hash_step(it->h, (unsigned char)it->dest[i]);
	}
	struct stomp_sub *sub = it->next;
	if (sub)
		it->next = sub->dnext;
	return sub;
}

size_t stomp_forward(struct stomp_broker *b, const char *dest, size_t dlen,
		     const char *ct, size_t ctlen, const struct stomp_header *extra,
		     unsigned nextra, const char *body, size_t len, bool *refused)
{
	size_t n = 0, total = 0;
	*refused = false;
	/* What the fan-out would queue, all subscribers together, is charged
	 * before any of it is: it fits whole or nobody gets it (issue 27: one
	 * 12 MiB SEND to 300 subscribers queued 5 GB past a 256 MiB budget). */
	struct match_iter it;
	struct stomp_sub *sub;
	for (match_start(&it, b, dest, dlen); (sub = match_next(&it));) {
		n++;
		if (!b->cfg.max_output || sub->s->out->len + len <= b->cfg.max_output)
			total += frame_need(sub, dest, dlen, ctlen, extra, nextra, len);
	}
	if (n && b->ops.admit_fanout && !b->ops.admit_fanout(b->host, b->feeding, n, total)) {
		b->st.fanout_refused++;
		*refused = true;
		return n;
	}
	for (match_start(&it, b, dest, dlen); (sub = match_next(&it));) {
		/* matched, even when dropped for a slow reader */
		if (over_bound(b, sub->s, len) ||
		    over_budget(b, sub->s, frame_need(sub, dest, dlen, ctlen, extra, nextra, len)))
			continue;
		stomp_deliver(b, sub, dest, dlen, ct, ctlen, extra, nextra, body, len);
	}
	return n;
}

size_t stomp_broker_reply(struct stomp_broker *b, struct stomp_session *origin,
			  const char *dest, size_t dlen, const char *content_type,
			  const char *body, size_t len)
{
	const struct stomp_iov one = { body, len };
	return stomp_broker_reply_iov(b, origin, dest, dlen, content_type, &one, 1);
}

size_t stomp_broker_reply_iov(struct stomp_broker *b, struct stomp_session *origin,
			      const char *dest, size_t dlen, const char *content_type,
			      const struct stomp_iov *body, unsigned n)
{
	if (!dest || !dlen) {  /* no (or an empty) reply-to */
		dest = DEFAULT_REPLY_DEST;
		dlen = sizeof(DEFAULT_REPLY_DEST) - 1;
	}
	/* Replies are private: the requesting session's first subscription on
	 * the destination, once, or nobody. */
	if (origin && origin->alive) {
		for (struct stomp_sub *sub = origin->subs; sub; sub = sub->snext) {
			if (sub->dest->len != dlen || memcmp(sub->dest->name, dest, dlen))
				continue;
			sub->dest->reserved = true;
			size_t ctlen = content_type ? strlen(content_type) : 0;
			stomp_deliver_iov(b, sub, NULL, 0, content_type, ctlen, NULL, 0, body, n);
			return 1;
		}
	}
	b->st.replies_unrouted++;
	return 0;
}

size_t stomp_broker_publish(struct stomp_broker *b, const char *dest,
			    const char *content_type, const char *body, size_t len)
{
	size_t dlen = strlen(dest);
	struct stomp_dest *d = stomp_dest_find(b, dest, dlen, stomp_hash(dest, dlen));
	if (!d)
		return 0;
	size_t ctlen = content_type ? strlen(content_type) : 0;
	size_t n = 0;
	for (struct stomp_sub *sub = d->subs; sub; sub = sub->dnext) {
		if (over_bound(b, sub->s, len) ||
		    over_budget(b, sub->s, frame_need(sub, NULL, 0, ctlen, NULL, 0, len)))
			continue;
		stomp_deliver(b, sub, NULL, 0, content_type, ctlen, NULL, 0, body, len);
		n++;
	}
	return n;
}
