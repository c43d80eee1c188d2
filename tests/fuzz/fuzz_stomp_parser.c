/* tests/fuzz/fuzz_stomp_parser.c - differential check of the resumable
 * STOMP frame parser: the same bytes parsed whole and fed in chunks (sizes
 * from the input) must give the same frames, then both fail or both end
 * with the same bytes left over.
 *
 * Input: byte 0 = chunk size (0 means 1), byte 1 = limits selector, rest =
 * the stream. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "stomp/stomp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render(struct vd_buf *r, const struct stomp_frame *f)
{
	buf_printf(r, "%s %u\n", stomp_cmd_name(f->cmd), f->nhdr);
	for (unsigned i = 0; i < f->nhdr; i++) {
		if (f->hdr[i].name[f->hdr[i].nlen] || f->hdr[i].value[f->hdr[i].vlen])
			abort();  /* promised NUL termination */
		buf_printf(r, "%zu:", f->hdr[i].nlen);
		buf_append(r, f->hdr[i].name, f->hdr[i].nlen);
		buf_printf(r, "=%zu:", f->hdr[i].vlen);
		buf_append(r, f->hdr[i].value, f->hdr[i].vlen);
		buf_putc(r, '\n');
	}
	if (f->body[f->body_len])
		abort();
	buf_printf(r, "body %zu:", f->body_len);
	buf_append(r, f->body, f->body_len);
	buf_putc(r, '\n');
}

/* Whole input from an exact-size copy (reads past the end are caught). */
static void run_exact(const struct stomp_limits *lim, const uint8_t *data, size_t size,
		      struct vd_buf *r)
{
	static struct stomp_header hdr[64];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 64 };
	struct stomp_parser p;
	char *copy = malloc(size ? size : 1);
	memcpy(copy, data, size);
	stomp_parser_init(&p);
	size_t pos = 0;
	while (pos < size) {
		const char *why = NULL;
		long k = stomp_parse(&p, lim, copy + pos, size - pos, &f, &why);
		if (k == VD_AGAIN)
			break;
		if (k < 0) {
			if (k != VD_EPROTO && k != VD_ETOOBIG)
				abort();
			buf_puts(r, "ERR\n");
			free(copy);
			return;
		}
		if (f.cmd != STOMP_NONE)
			render(r, &f);
		pos += (size_t)k;
	}
	buf_printf(r, "LEFT %zu\n", size - pos);
	free(copy);
}

static void run(const struct stomp_limits *lim, const uint8_t *data, size_t size, size_t chunk,
		struct vd_buf *r)
{
	struct vd_buf in = VD_BUF_INIT;
	struct stomp_parser p;
	static struct stomp_header hdr[64];
	struct stomp_frame f = { .hdr = hdr, .hdr_cap = 64 };
	stomp_parser_init(&p);
	size_t off = 0;
	while (off < size) {
		size_t n = VD_MIN(chunk, size - off);
		buf_append(&in, data + off, n);
		off += n;
		while (in.len) {
			const char *why = NULL;
			long k = stomp_parse(&p, lim, in.data, in.len, &f, &why);
			if (k == VD_AGAIN)
				break;
			if (k < 0) {
				if (!why)
					abort();
				/* Which limit or rule trips first may depend on how
				 * the bytes were split; that it fails may not. */
				if (k != VD_EPROTO && k != VD_ETOOBIG)
					abort();
				buf_puts(r, "ERR\n");
				buf_free(&in);
				return;
			}
			if (k == 0 || (size_t)k > in.len)
				abort();
			if (f.cmd != STOMP_NONE)
				render(r, &f);
			buf_consume(&in, (size_t)k);
		}
	}
	buf_printf(r, "LEFT %zu\n", in.len);
	buf_free(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t chunk = data[0] ? data[0] : 1;
	struct stomp_limits lim = STOMP_LIMITS_DEFAULT;
	if (data[1] & 1) {
		lim.max_frame = 200;
		lim.max_headers = 4;
		lim.max_header_line = 40;
	}
	data += 2;
	size -= 2;
	struct vd_buf whole = VD_BUF_INIT, chunked = VD_BUF_INIT;
	run_exact(&lim, data, size, &whole);
	run(&lim, data, size, chunk, &chunked);
	if (whole.len != chunked.len || memcmp(whole.data, chunked.data, whole.len)) {
		fprintf(stderr, "whole:\n%.*s\nchunked(%zu):\n%.*s\n", (int)whole.len, whole.data,
			chunk, (int)chunked.len, chunked.data);
		abort();
	}
	buf_free(&whole);
	buf_free(&chunked);
	return 0;
}
