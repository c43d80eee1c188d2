/* common/arena.h - per-request bump allocator.
 *
 * Every allocation lives until arena_reset() or arena_free().  Blocks grow
 * geometrically; arena_reset() keeps the first block so a steady request
 * stream does not touch malloc.  Allocation failure aborts (see vd.h). */
#ifndef VD_COMMON_ARENA_H
#define VD_COMMON_ARENA_H

#include "vd.h"

struct vd_arena_block;

struct vd_arena {
	struct vd_arena_block *head;  /* current block (newest) */
	char *ptr;                    /* next free byte in head */
	char *end;                    /* end of head's space */
	size_t first_size;            /* size of the first block */
	size_t total;                 /* bytes handed out since reset */
};

void arena_init(struct vd_arena *a, size_t first_block);
void arena_free(struct vd_arena *a);
/* Free every block but the first; all pointers from the arena become invalid. */
void arena_reset(struct vd_arena *a);
void *arena_alloc_slow(struct vd_arena *a, size_t n);
char *arena_strndup(struct vd_arena *a, const char *s, size_t n);

/* 8-byte aligned allocation of n bytes. */
static inline void *arena_alloc(struct vd_arena *a, size_t n)
{
	n = (n + 7u) & ~(size_t)7u;
	if (VD_LIKELY((size_t)(a->end - a->ptr) >= n && a->ptr)) {
		void *p = a->ptr;
		a->ptr += n;
		a->total += n;
		return p;
	}
	return arena_alloc_slow(a, n);
}

#endif
