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

struct virt_track *track_claim(struct virt_state *s, const char *uuid, const char *name)
{
	struct virt_track *t = track_find(s, uuid);
	if (t && !tomb_has(s, uuid))
		return NULL;
	tomb_del(s, uuid);
	return track_get(s, uuid, name);
}

void track_stopped(struct virt_track *t, int detail)
{
	switch (detail) {
	case VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN:
		if (t->admin_shutdown)
			track_set_down(t, VIRT_EXIT_NORMAL, VIRT_REASON_ADMIN_SHUTDOWN,
				       "Admin shut down from the engine");
		else
			track_set_down(t, VIRT_EXIT_NORMAL, VIRT_REASON_USER_SHUTDOWN,
				       "User shut down from within the guest");
		break;
	case VIR_DOMAIN_EVENT_STOPPED_DESTROYED:
		if (t->admin_shutdown)
			track_set_down(t, VIRT_EXIT_NORMAL, VIRT_REASON_ADMIN_SHUTDOWN,
				       "Admin shut down from the engine");
		else
			track_set_down(t, VIRT_EXIT_ERROR, VIRT_REASON_LOST_QEMU_CONNECTION,
				       "Lost connection with qemu process");
		break;
	case VIR_DOMAIN_EVENT_STOPPED_MIGRATED:
		track_set_down(t, VIRT_EXIT_NORMAL, VIRT_REASON_MIGRATION_SUCCEEDED,
			       "Migration succeeded");
		break;
	case VIR_DOMAIN_EVENT_STOPPED_SAVED:
		track_set_down(t, VIRT_EXIT_NORMAL, VIRT_REASON_SAVE_STATE_SUCCEEDED,
			       "SaveState succeeded");
		break;
	case VIR_DOMAIN_EVENT_STOPPED_CRASHED:
		track_set_down(t, VIRT_EXIT_ERROR, VIRT_REASON_GENERIC_ERROR, "VM crashed");
		break;
	default:
		track_set_down(t, VIRT_EXIT_ERROR, VIRT_REASON_GENERIC_ERROR, "VM failed");
		break;
	}
}

/* ---- tombstones: VMs VM.destroy removed (s->tombs) ----------------------- */

void tomb_add(struct virt_state *s, const char *uuid)
{
	uint64_t now = vd_now_ms();
	unsigned j = 0;
	for (unsigned i = 0; i < s->ntombs; i++)   /* drop expired ones */
		if (now - s->tombs[i].ms < VIRT_TOMB_MS && strcmp(s->tombs[i].uuid, uuid) != 0)
			s->tombs[j++] = s->tombs[i];
	s->ntombs = j;
	if (s->ntombs == VD_ARRAY_SIZE(s->tombs)) {
		memmove(&s->tombs[0], &s->tombs[1], (s->ntombs - 1) * sizeof s->tombs[0]);
		s->ntombs--;
	}
	snprintf(s->tombs[s->ntombs].uuid, sizeof s->tombs[0].uuid, "%s", uuid);
	s->tombs[s->ntombs].ms = now;
	s->ntombs++;
}

bool tomb_has(struct virt_state *s, const char *uuid)
{
	uint64_t now = vd_now_ms();
	for (unsigned i = 0; i < s->ntombs; i++)
		if (strcmp(s->tombs[i].uuid, uuid) == 0)
			return now - s->tombs[i].ms < VIRT_TOMB_MS;
	return false;
}

void tomb_del(struct virt_state *s, const char *uuid)
{
	for (unsigned i = 0; i < s->ntombs; i++)
		if (strcmp(s->tombs[i].uuid, uuid) == 0) {
			s->tombs[i] = s->tombs[--s->ntombs];
			return;
		}
}
