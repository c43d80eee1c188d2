/* vdsmd/image/extents.c - the extent list every backend fills (see
 * backend.h); its own file so that the backends call down into it and
 * backend.c only calls them. */
#include "backend.h"

#include <stdlib.h>

void img_extents_free(struct img_extents *e)
{
	free(e->v);
	e->v = NULL;
	e->n = e->cap = 0;
}

int img_extents_add(struct img_extents *e, uint64_t start, uint64_t length, bool zero, bool hole,
		    bool dirty)
{
	if (length == 0)
		return 0;
	if (e->n) {
		struct img_extent *last = &e->v[e->n - 1];
		if (last->start + last->length == start && last->zero == zero && last->hole == hole &&
		    last->dirty == dirty) {
			last->length += length;
			return 0;
		}
	}
	if (e->n >= IMG_EXTENTS_MAX)
		return VD_ETOOBIG;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		if (cap > IMG_EXTENTS_MAX)
			cap = IMG_EXTENTS_MAX;
		e->v = xrealloc(e->v, cap * sizeof(*e->v));
		e->cap = cap;
	}
	e->v[e->n++] = (struct img_extent){ start, length, zero, hole, dirty };
	return 0;
}
