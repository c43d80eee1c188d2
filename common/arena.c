/* common/arena.c - per-request bump allocator. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

struct vd_arena_block {
	struct vd_arena_block *next;  /* older block */
	size_t size;
	max_align_t data[];
};

static void add_block(struct vd_arena *a, size_t size)
{
	struct vd_arena_block *b = xmalloc(sizeof(*b) + size);
	b->next = a->head;
	b->size = size;
	a->head = b;
	a->ptr = (char *)b->data;
	a->end = a->ptr + size;
}

void arena_init(struct vd_arena *a, size_t first_block)
{
	a->head = NULL;
	a->ptr = NULL;
	a->end = NULL;
	a->first_size = first_block ? first_block : 4096;
	a->total = 0;
}

void arena_free(struct vd_arena *a)
{
	struct vd_arena_block *b = a->head;
	while (b) {
		struct vd_arena_block *next = b->next;
		free(b);
		b = next;
	}
	a->head = NULL;
	a->ptr = a->end = NULL;
	a->total = 0;
}

void arena_reset(struct vd_arena *a)
{
	if (!a->head)
		return;
	while (a->head->next) {
		struct vd_arena_block *next = a->head->next;
		free(a->head);
		a->head = next;
	}
	a->ptr = (char *)a->head->data;
	a->end = a->ptr + a->head->size;
	a->total = 0;
}

void *arena_alloc_slow(struct vd_arena *a, size_t n)
{
	size_t size = a->head ? a->head->size * 2 : a->first_size;
	if (size < n)
		size = n;
	if (size > ((size_t)1 << 30) && n < size)
		size = n > ((size_t)1 << 20) ? n : ((size_t)1 << 20);
	add_block(a, size);
	void *p = a->ptr;
	a->ptr += n;
	a->total += n;
	return p;
}

char *arena_strndup(struct vd_arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}
