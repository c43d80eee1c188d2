/* vdsmd/virt/snapshot.c - the immutable, reference-counted VM snapshot.
 * The sampler builds one, virt_snapshot_publish() swaps the current pointer
 * under s->lock; readers take a reference with virt_snapshot_get() and drop
 * it with snapshot_put().  The per-codec encoded cache inside a snapshot is
 * filled lazily (encode.c) and freed with the snapshot. */
#include "virt_int.h"

#include <stdlib.h>
#include <string.h>

struct virt_snapshot *snapshot_new(void)
{
	struct virt_snapshot *s = xcalloc(1, sizeof *s);
	atomic_init(&s->ref, 1);
	pthread_mutex_init(&s->cache_lock, NULL);
	return s;
}

static void vm_free(struct virt_vm *vm)
{
	free(vm->name);
	free(vm->exit_message);
	for (unsigned i = 0; i < vm->ndisks; i++)
		free((char *)vm->disks[i].path);
	free(vm->disks);
	free(vm->nics);
	free(vm->bjobs);
}

void snapshot_put(struct virt_snapshot *s)
{
	if (!s)
		return;
	if (atomic_fetch_sub_explicit(&s->ref, 1, memory_order_acq_rel) != 1)
		return;
	for (unsigned i = 0; i < s->nvms; i++)
		vm_free(&s->vms[i]);
	free(s->vms);
	for (unsigned i = 0; i < VIRT_MAX_CODECS; i++)
		free(s->cache[i].bytes);
	pthread_mutex_destroy(&s->cache_lock);
	free(s);
}

static int vm_cmp(const void *a, const void *b)
{
	return strcmp(((const struct virt_vm *)a)->uuid, ((const struct virt_vm *)b)->uuid);
}

void snapshot_sort(struct virt_snapshot *s)
{
	if (s->nvms > 1)
		qsort(s->vms, s->nvms, sizeof *s->vms, vm_cmp);
	struct virt_counts *k = &s->counts;
	*k = (struct virt_counts){ .count = s->nvms };
	for (unsigned i = 0; i < s->nvms; i++) {
		if (s->vms[i].status == VS_UP)
			k->active++;
		else if (s->vms[i].status == VS_MIGRATION_DESTINATION)
			k->incoming++;
		else if (s->vms[i].status == VS_MIGRATION_SOURCE)
			k->outgoing++;
	}
	k->migrating = k->incoming + k->outgoing;
}

const struct virt_vm *snapshot_find(const struct virt_snapshot *s, const char *uuid)
{
	size_t lo = 0, hi = s->nvms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(uuid, s->vms[mid].uuid);
		if (c == 0)
			return &s->vms[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

struct virt_snapshot *virt_snapshot_get(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	struct virt_snapshot *snap = s->snap;
	if (snap)
		atomic_fetch_add_explicit(&snap->ref, 1, memory_order_relaxed);
	pthread_mutex_unlock(&s->lock);
	return snap;
}

void virt_snapshot_publish(struct virt_state *s, struct virt_snapshot *snap)
{
	pthread_mutex_lock(&s->lock);
	struct virt_snapshot *old = s->snap;
	snap->gen = ++s->next_gen;
	s->snap = snap;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	snapshot_put(old);
}

void virt_vm_counts(struct vdsmd *d, struct virt_counts *out)
{
	*out = (struct virt_counts){ 0 };
	if (!d || !d->virt)
		return;
	struct virt_snapshot *snap = virt_snapshot_get(d->virt);
	if (!snap)
		return;
	*out = snap->counts;
	snapshot_put(snap);
}

const char *virt_status_name(enum virt_status st)
{
	switch (st) {
	case VS_UP: return "Up";
	case VS_PAUSED: return "Paused";
	case VS_DOWN: return "Down";
	case VS_POWERING_UP: return "Powering up";
	case VS_POWERING_DOWN: return "Powering down";
	case VS_SAVING_STATE: return "Saving State";
	case VS_MIGRATION_SOURCE: return "Migration Source";
	case VS_MIGRATION_DESTINATION: return "Migration Destination";
	case VS_WAIT_FOR_LAUNCH: return "WaitForLaunch";
	case VS_RESTORING_STATE: return "Restoring state";
	case VS_UNKNOWN: break;
	}
	return "Unknown";
}

enum virt_status virt_status_from_libvirt(int state, int reason)
{
	switch (state) {
	case VIR_DOMAIN_RUNNING:
	case VIR_DOMAIN_BLOCKED:
		return VS_UP;
	case VIR_DOMAIN_PAUSED:
		if (reason == VIR_DOMAIN_PAUSED_SAVE)
			return VS_SAVING_STATE;
		if (reason == VIR_DOMAIN_PAUSED_STARTING_UP)
			return VS_POWERING_UP;
		return VS_PAUSED;
	case VIR_DOMAIN_SHUTDOWN:
		return VS_POWERING_DOWN;
	case VIR_DOMAIN_SHUTOFF:
	case VIR_DOMAIN_CRASHED:
		return VS_DOWN;
	case VIR_DOMAIN_PMSUSPENDED:
		return VS_PAUSED;
	default:
		return VS_UNKNOWN;
	}
}
