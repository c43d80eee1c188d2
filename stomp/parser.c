/* stomp/parser.c - pure, resumable STOMP 1.2 frame parser.
 *
 * Bytes in; bytes consumed, VD_AGAIN or a framing error out.  No I/O and no
 * allocation: header names and values are slices into the caller's buffer,
 * unescaped and NUL-terminated in place once the whole frame is present.
 *
 * A frame is scanned at most once: struct stomp_parser remembers how far the
 * previous call got (header line boundaries, the body start, the
 * content-length), so a long body arriving in many chunks costs O(n) in
 * total.  Every limit is checked on the bytes seen so far, before the caller
 * would need to grow its input buffer further. */
#include "stomp.h"
#include "internal.h"

#include <string.h>

#define STOMP_PF_CMD 1u   /* command line complete, p->cmd set */
#define STOMP_PF_BODY 2u  /* blank line seen, p->body_start set */
#define STOMP_PF_CLEN 4u  /* content-length header seen, p->clen set */

static const char *const cmd_names[] = {
	[STOMP_NONE] = "",
	[STOMP_CONNECT] = "CONNECT",
	[STOMP_STOMP] = "STOMP",
	[STOMP_SEND] = "SEND",
	[STOMP_SUBSCRIBE] = "SUBSCRIBE",
	[STOMP_UNSUBSCRIBE] = "UNSUBSCRIBE",
	[STOMP_ACK] = "ACK",
	[STOMP_NACK] = "NACK",
	[STOMP_BEGIN] = "BEGIN",
	[STOMP_COMMIT] = "COMMIT",
	[STOMP_ABORT] = "ABORT",
	[STOMP_DISCONNECT] = "DISCONNECT",
	[STOMP_CONNECTED] = "CONNECTED",
	[STOMP_MESSAGE] = "MESSAGE",
	[STOMP_RECEIPT] = "RECEIPT",
	[STOMP_ERROR] = "ERROR",
};

const char *stomp_cmd_name(enum stomp_cmd c)
{
	if ((unsigned)c >= VD_ARRAY_SIZE(cmd_names))
		return "";
	return cmd_names[c];
}

enum stomp_cmd stomp_cmd_lookup(const char *s, size_t n)
{
	/* Dispatch on length first: one memcmp per candidate at most. */
	switch (n) {
	case 3:
		if (!memcmp(s, "ACK", 3))
			return STOMP_ACK;
		break;
	case 4:
		if (!memcmp(s, "SEND", 4))
			return STOMP_SEND;
		if (!memcmp(s, "NACK", 4))
			return STOMP_NACK;
		break;
	case 5:
		if (!memcmp(s, "STOMP", 5))
			return STOMP_STOMP;
		if (!memcmp(s, "BEGIN", 5))
			return STOMP_BEGIN;
		if (!memcmp(s, "ABORT", 5))
			return STOMP_ABORT;
		if (!memcmp(s, "ERROR", 5))
			return STOMP_ERROR;
		break;
	case 6:
		if (!memcmp(s, "COMMIT", 6))
			return STOMP_COMMIT;
		break;
	case 7:
		if (!memcmp(s, "CONNECT", 7))
			return STOMP_CONNECT;
		if (!memcmp(s, "MESSAGE", 7))
			return STOMP_MESSAGE;
		if (!memcmp(s, "RECEIPT", 7))
			return STOMP_RECEIPT;
		break;
	case 9:
		if (!memcmp(s, "SUBSCRIBE", 9))
			return STOMP_SUBSCRIBE;
		if (!memcmp(s, "CONNECTED", 9))
			return STOMP_CONNECTED;
		break;
	case 10:
		if (!memcmp(s, "DISCONNECT", 10))
			return STOMP_DISCONNECT;
		break;
	case 11:
		if (!memcmp(s, "UNSUBSCRIBE", 11))
			return STOMP_UNSUBSCRIBE;
		break;
	}
	return STOMP_NONE;
}

bool stomp_cmd_escapes(enum stomp_cmd c)
{
	/* STOMP is CONNECT under another name: no escaping either. */
	return c != STOMP_CONNECT && c != STOMP_STOMP && c != STOMP_CONNECTED;
}

void stomp_parser_init(struct stomp_parser *p)
{
	memset(p, 0, sizeof(*p));
}

const char *stomp_frame_get(const struct stomp_frame *f, const char *name, size_t *vlen)
{
	size_t n = strlen(name);
	for (unsigned i = 0; i < f->nhdr; i++) {
		const struct stomp_header *h = &f->hdr[i];
		if (h->nlen == n && !memcmp(h->name, name, n)) {
			if (vlen)
				*vlen = h->vlen;
			return h->value;
		}
	}
	return NULL;
}

/* Unescapes s[0..n) in place; returns the new length or -1 on a bad escape. */
static long unescape(char *s, size_t n)
{
	char *p = memchr(s, '\\', n);
	if (!p)
		return (long)n;
	char *end = s + n, *w = p;
	while (p < end) {
		if (*p != '\\') {
			*w++ = *p++;
			continue;
		}
		if (p + 1 >= end)
			return -1;
		switch (p[1]) {
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 'c': *w++ = ':'; break;
		case '\\': *w++ = '\\'; break;
		default: return -1;
		}
		p += 2;
	}
	return w - s;
}

/* Strict decimal; rejects empty, signs, spaces and overflow past max. */
static bool parse_len(const char *s, size_t n, size_t max, size_t *out)
{
	size_t v = 0;
	if (n == 0 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (SIZE_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v > max)
		v = max + 1; /* caller reports the limit */
	*out = v;
	return true;
}

static long fail(const char **why, const char *msg, long err)
{
	if (why)
		*why = msg;
	return err;
}

/* Scan header lines of the frame at buf[0..len) from p->scanned on.  When
 * rec is set (the frame started in this call, so pointers into buf stay
 * valid), each header line is also split into f->hdr on the way: the
 * common whole-frame case then needs no second pass.  Every check runs on
 * every line either way, so an error is reported at the same byte however
 * the input was split (fuzz_stomp_parser checks this). */
static long scan_headers(struct stomp_parser *p, const struct stomp_limits *lim,
			 char *buf, size_t len, struct stomp_frame *f, bool rec,
			 const char **why)
{
	size_t i = p->scanned, from = i;
	long ret = VD_AGAIN;
	while (i < len) {
		char *nl = memchr(buf + i, '\n', len - i);
		if (!nl) {
			i = len;
			break;
		}
		size_t end = (size_t)(nl - buf);
		size_t ls = p->line_start, le = end;
		if (le > ls && buf[le - 1] == '\r')
			le--;
		size_t llen = le - ls;
		if (llen > lim->max_header_line)
			return fail(why, "Header line too long", VD_ETOOBIG);
		i = end + 1;
		p->line_start = i;
		if (!(p->flags & STOMP_PF_CMD)) {
			p->cmd = stomp_cmd_lookup(buf + ls, llen);
			if (p->cmd == STOMP_NONE)
				return fail(why, memchr(buf + ls, '\0', llen) ?
					    "NUL byte in frame headers" : "Unknown command", VD_EPROTO);
			p->flags |= STOMP_PF_CMD;
		} else if (llen == 0) {
			p->body_start = i;
			p->flags |= STOMP_PF_BODY;
			ret = 0;
			break;
		} else {
			if (++p->lines > lim->max_headers || p->lines > f->hdr_cap)
				return fail(why, "Too many headers", VD_ETOOBIG);
			if (!(p->flags & STOMP_PF_CLEN) && llen >= 15 &&
			    !memcmp(buf + ls, "content-length:", 15)) {
				if (!parse_len(buf + ls + 15, llen - 15, lim->max_frame, &p->clen))
					return fail(why, "Invalid content-length", VD_EPROTO);
				p->flags |= STOMP_PF_CLEN;
			}
			/* Checked on every line, recorded or not, so an error
			 * shows at the same byte however the input was split. */
			char *colon = memchr(buf + ls, ':', llen);
			if (!colon)
				return fail(why, "Header without ':'", VD_EPROTO);
			if (rec) {
				struct stomp_header *h = &f->hdr[p->lines - 1];
				h->name = buf + ls;
				h->nlen = (size_t)(colon - (buf + ls));
				h->value = colon + 1;
				h->vlen = (size_t)(buf + le - colon - 1);
			}
		}
	}
	p->scanned = i;
	/* One NUL check over everything this call scanned: a NUL before the
	 * blank line is a framing error (a frame missing its blank line). */
	if (memchr(buf + from, '\0', i - from))
		return fail(why, "NUL byte in frame headers", VD_EPROTO);
	if (ret == 0)
		return 0;
	/* Partial line: bound it now, before the caller buffers more of it
	 * (+1 for a '\r' that may precede the '\n'). */
	if (len - p->line_start > lim->max_header_line + 1)
		return fail(why, "Header line too long", VD_ETOOBIG);
	if (len >= lim->max_frame)  /* the rest needs at least one more byte */
		return fail(why, "Frame too large", VD_ETOOBIG);
	return VD_AGAIN;
}

/* The frame started in an earlier call: split its header lines now. */
static long split_headers(struct stomp_parser *p, char *buf, struct stomp_frame *f,
			  const char **why)
{
	char *s = (char *)memchr(buf, '\n', p->body_start) + 1;  /* after the command line */
	char *hend = buf + p->body_start;
	unsigned n = 0;
	if (p->lines > f->hdr_cap)
		return fail(why, "Too many headers", VD_ETOOBIG);
	while (s < hend) {
		char *nl = memchr(s, '\n', (size_t)(hend - s));
		char *le = nl;
		if (le > s && le[-1] == '\r')
			le--;
		if (le == s)
			break;  /* the blank line */
		char *colon = memchr(s, ':', (size_t)(le - s));
		if (!colon)
			return fail(why, "Header without ':'", VD_EPROTO);
		struct stomp_header *h = &f->hdr[n++];
		h->name = s;
		h->nlen = (size_t)(colon - s);
		h->value = colon + 1;
		h->vlen = (size_t)(le - colon - 1);
		s = nl + 1;
	}
	return 0;
}

/* Unescape (when the frame type escapes and a backslash occurs at all) and
 * NUL-terminate every header in place. */
static long finish_headers(struct stomp_parser *p, char *buf, struct stomp_frame *f,
			   const char **why)
{
	bool esc = stomp_cmd_escapes(p->cmd) && memchr(buf, '\\', p->body_start);
	for (unsigned i = 0; i < p->lines; i++) {
		struct stomp_header *h = &f->hdr[i];
		char *n = (char *)h->name, *v = (char *)h->value;
		if (esc) {
			long nl = unescape(n, h->nlen), vl = unescape(v, h->vlen);
			if (nl < 0 || vl < 0)
				return fail(why, "Invalid escape sequence in header", VD_EPROTO);
			h->nlen = (size_t)nl;
			h->vlen = (size_t)vl;
		}
		n[h->nlen] = '\0';
		v[h->vlen] = '\0';
	}
	f->nhdr = p->lines;
	return 0;
}

long stomp_parse(struct stomp_parser *p, const struct stomp_limits *lim,
		 char *buf, size_t len, struct stomp_frame *f, const char **why)
{
	size_t skip = 0;
	f->cmd = STOMP_NONE;
	f->nhdr = 0;
	f->body = NULL;
	f->body_len = 0;
	if (!(p->flags & STOMP_PF_CMD) && p->scanned == 0) {
		/* Heart-beats between frames: "\n" or "\r\n". */
		while (skip < len) {
			if (buf[skip] == '\n')
				skip++;
			else if (buf[skip] == '\r' && skip + 1 < len && buf[skip + 1] == '\n')
				skip += 2;
			else
				break;
		}
		if (skip == len || (skip + 1 == len && buf[skip] == '\r'))
			return skip ? (long)skip : VD_AGAIN;
	}
	char *fb = buf + skip;
	size_t flen = len - skip;
	bool fresh = !(p->flags & STOMP_PF_CMD) && p->scanned == 0;
	long r;
	if (!(p->flags & STOMP_PF_BODY)) {
		r = scan_headers(p, lim, fb, flen, f, fresh, why);
		if (r == VD_AGAIN)
			return skip ? (long)skip : VD_AGAIN;
		if (r < 0)
			return r;
		if ((p->flags & STOMP_PF_CLEN) &&
		    (p->clen > lim->max_frame || p->body_start + p->clen + 1 > lim->max_frame))
			return fail(why, "Frame too large", VD_ETOOBIG);
	}
	size_t total, blen;
	if (p->flags & STOMP_PF_CLEN) {
		total = p->body_start + p->clen + 1;
		if (flen < total) {
			p->scanned = flen;
			return skip ? (long)skip : VD_AGAIN;
		}
		if (fb[total - 1] != '\0')
			return fail(why, "Frame body not terminated by NUL", VD_EPROTO);
		blen = p->clen;
	} else {
		size_t from = VD_MAX(p->scanned, p->body_start);
		const char *z = from < flen ? memchr(fb + from, '\0', flen - from) : NULL;
		if (!z) {
			p->scanned = flen;
			if (flen >= lim->max_frame)  /* the NUL would not fit */
				return fail(why, "Frame too large", VD_ETOOBIG);
			return skip ? (long)skip : VD_AGAIN;
		}
		total = (size_t)(z - fb) + 1;
		if (total > lim->max_frame)
			return fail(why, "Frame too large", VD_ETOOBIG);
		blen = total - 1 - p->body_start;
	}
	if (!fresh) {
		r = split_headers(p, fb, f, why);
		if (r < 0)
			return r;
	}
	r = finish_headers(p, fb, f, why);
	if (r < 0)
		return r;
	f->cmd = p->cmd;
	f->body = fb + p->body_start;
	f->body_len = blen;
	stomp_parser_init(p);
	return (long)(skip + total);
}
