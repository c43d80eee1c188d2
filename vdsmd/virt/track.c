/* vdsmd/virt/track.c - the tracker: what the virt backend remembers per VM
 * between samples (status and exit info for Down VMs until VM.destroy,
 * previous counters for rates, the facts read from the domain XML, the
 * admin-shutdown flag of our own verbs).  A hash table by UUID; every
 * caller holds s->lock. */
#include "virt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned track_bucket(const char *uuid)
{
	uint32_t h = 2166136261u;
	for (; *uuid; uuid++)
		h = (h ^ (unsigned char)*uuid) * 16777619u;
	return h % VIRT_TRACK_BUCKETS;
}

struct virt_track *track_find(struct virt_state *s, const char *uuid)
{
	for (struct virt_track *t = s->tracks[track_bucket(uuid)]; t; t = t->next)
		if (strcmp(t->uuid, uuid) == 0)
			return t;
	return NULL;
}

struct virt_track *track_get(struct virt_state *s, const char *uuid, const char *name)
{
	struct virt_track *t = track_find(s, uuid);
	if (t) {
		if (name && (!t->name || strcmp(t->name, name) != 0)) {
			free(t->name);
			t->name = xstrdup(name);
		}
		return t;
	}
	t = xcalloc(1, sizeof *t);
	snprintf(t->uuid, sizeof t->uuid, "%s", uuid);
	t->name = xstrdup(name ? name : "");
	t->status = VS_UNKNOWN;
	t->xml_domid = -2;
	unsigned b = track_bucket(t->uuid);
	t->next = s->tracks[b];
	s->tracks[b] = t;
	return t;
}

static void track_free(struct virt_track *t)
{
	free(t->name);
	free(t->exit_message);
	free(t->prev_disks);
	free(t->prev_nics);
	domxml_free(&t->xml);
	free(t);
}

void track_remove(struct virt_state *s, const char *uuid)
{
	for (struct virt_track **pp = &s->tracks[track_bucket(uuid)]; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->uuid, uuid) == 0) {
			struct virt_track *t = *pp;
			*pp = t->next;
			track_free(t);
			return;
		}
	}
}

void track_free_all(struct virt_state *s)
{
	for (unsigned b = 0; b < VIRT_TRACK_BUCKETS; b++) {
		while (s->tracks[b]) {
			struct virt_track *t = s->tracks[b];
			s->tracks[b] = t->next;
			track_free(t);
		}
	}
}

void track_set_down(struct virt_track *t, int code, int reason, const char *msg)
{
	t->status = VS_DOWN;
	t->down_reported = true;
	t->powering_down = false;
	t->launching = false;
	t->migrating = false;
	t->incoming = false;
	t->saving = false;
	t->restoring = false;
	t->exit_code = code;
	t->exit_reason = reason;
	free(t->exit_message);
	t->exit_message = xstrdup(msg);
	t->have_prev = false;
}
