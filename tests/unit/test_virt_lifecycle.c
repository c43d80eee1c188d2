/* tests/unit/test_virt_lifecycle.c - VM lifecycle verbs and VM_status events
 * against libvirt's test driver: every verb's success and error paths,
 * VM.create (duplicates: code 4), a VM that stops by itself stays Down with
 * its exit info until VM.destroy, and the events reach the bus in order
 * with increasing notify_time. */
#include "virt_test.h"
#include "check_main.h"

#define FLEET "examples/fleet.xml"
#define VM0 "6d5f0000-0000-4000-8000-000000000000"    /* running */
#define VM6 "6d5f0006-0006-4006-802a-000000000006"    /* shut off */
#define NEWVM "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
#define NO_SUCH_VM "00000000-0000-4000-8000-00000000dead"

static struct vfx F;

static void fleet_setup(void)
{
	char uri[PATH_MAX + 16];
	vfx_file_uri(uri, sizeof uri, FLEET);
	vfx_start(&F, uri, true);
}

static void fleet_teardown(void)
{
	vfx_stop(&F);
}

/* ---- events collected from the bus ---- */

#define MAX_EV 32
struct evlog {
	unsigned n;
	char method[MAX_EV][128];
	char status[MAX_EV][32];
	int64_t notify_time[MAX_EV];
	int64_t exit_reason[MAX_EV];
	int64_t exit_code[MAX_EV];
};

static void ev_deliver(void *ctx, const char *bytes, size_t len, const struct vd_codec *codec)
{
	struct evlog *l = ctx;
	if (l->n >= MAX_EV)
		return;
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err = { 0, NULL, 0 };
	ck_assert_int_eq(codec->decode(&a, bytes, len, &lim, &v, &err), 0);
	ck_assert(vd_str_eq(vd_obj_get(v, "jsonrpc"), "2.0"));
	ck_assert_ptr_null(vd_obj_get(v, "id"));
	const struct vd_value *m = vd_obj_get(v, "method");
	const struct vd_value *p = vd_obj_get(v, "params");
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(p);
	unsigned i = l->n++;
	snprintf(l->method[i], sizeof l->method[i], "%.*s", (int)m->v.s.len, m->v.s.ptr);
	const struct vd_value *nt = vd_obj_get(p, "notify_time");
	ck_assert_ptr_nonnull(nt);
	ck_assert_int_eq(nt->type, VD_INT);
	l->notify_time[i] = nt->v.i;
	/* params: {"<vmId>": {...}, "notify_time": N}; the id is the method's tail */
	const char *id = strrchr(l->method[i], '|') + 1;
	const struct vd_value *body = vd_obj_get(p, id);
	ck_assert_msg(body != NULL, "event %s without its vmId member", l->method[i]);
	const struct vd_value *st = vd_obj_get(body, "status");
	snprintf(l->status[i], sizeof l->status[i], "%.*s", (int)st->v.s.len, st->v.s.ptr);
	const struct vd_value *er = vd_obj_get(body, "exitReason");
	const struct vd_value *ec = vd_obj_get(body, "exitCode");
	l->exit_reason[i] = er ? er->v.i : -1;
	l->exit_code[i] = ec ? ec->v.i : -1;
	arena_free(&a);
}

/* Drain until at least want events arrived (or 5 s). */
static void ev_wait(struct evlog *l, unsigned want)
{
	for (int i = 0; i < 500 && l->n < want; i++) {
		event_bus_drain(F.d.bus, ev_deliver, l);
		if (l->n < want)
			vfx_sleep_ms(10);
	}
	event_bus_drain(F.d.bus, ev_deliver, l);
	char got[512] = "";
	for (unsigned i = 0; i < l->n; i++)
		snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? ", " : "",
			 l->status[i]);
	ck_assert_msg(l->n >= want, "%u events (%s), wanted %u", l->n, got, want);
}

static const char *status_of(const char *id)
{
	char params[96];
	snprintf(params, sizeof params, "{\"vmID\":\"%s\"}", id);
	const struct vd_value *r = vfx_ok(&F, "VM.getStats", params);
	return vfx_str(&F, &r->v.arr.items[0], "status");
}

START_TEST(pause_cont_shutdown_destroy)
{
	struct evlog l;
	memset(&l, 0, sizeof l);
	const char *p = "{\"vmID\":\"" VM0 "\"}";
	ck_assert_str_eq(status_of(VM0), "Up");
	/* {"vmList": {}} as VDSM: the engine casts the result to a map */
	const struct vd_value *pr = vfx_ok(&F, "VM.pause", p);
	ck_assert_int_eq(pr->type, VD_OBJECT);
	ck_assert_int_eq(vd_obj_get(pr, "vmList")->type, VD_OBJECT);
	ck_assert_str_eq(status_of(VM0), "Paused");
	ck_assert_int_eq(vfx_ok(&F, "VM.cont", p)->type, VD_OBJECT);
	ck_assert_str_eq(status_of(VM0), "Up");
	vfx_ok(&F, "VM.shutdown", "{\"vmID\":\"" VM0 "\",\"message\":\"bye\",\"delay\":\"30\"}");
	ck_assert_str_eq(status_of(VM0), "Down");
	const struct vd_value *r = vfx_ok(&F, "VM.getStats", p);
	const struct vd_value *vm = &r->v.arr.items[0];
	ck_assert_int_eq(vd_obj_get(vm, "exitCode")->v.i, 0);
	ck_assert_int_eq(vd_obj_get(vm, "exitReason")->v.i, VIRT_REASON_ADMIN_SHUTDOWN);
	vfx_str(&F, vm, "exitMessage");
	/* the fleet: 16 running (VM0 one of them), 2 paused, 2 shut off;
	 * vmActive counts the Up ones only, as VDSM does */
	struct virt_counts k;
	virt_vm_counts(&F.d, &k);
	ck_assert_uint_eq(k.count, 20);
	ck_assert_uint_eq(k.active, 15);
	ck_assert_uint_eq(k.migrating, 0);
	vfx_ok(&F, "VM.destroy", p);
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", p), 1);
	ck_assert_ptr_null(vfx_find_vm(vfx_ok(&F, "Host.getVMList", "{}"), VM0));
	virt_vm_counts(&F.d, &k);
	ck_assert_uint_eq(k.count, 19);
	/* destroyed means gone: a second destroy is code 1 */
	ck_assert_int_eq(vfx_err(&F, "VM.destroy", p), 1);

	ev_wait(&l, 4);
	vfx_sleep_ms(200);
	event_bus_drain(F.d.bus, ev_deliver, &l);
	ck_assert_uint_eq(l.n, 4);
	/* VM.shutdown: "Powering down" first, then libvirt's Down */
	static const char *const want[] = { "Paused", "Up", "Powering down", "Down" };
	for (unsigned i = 0; i < 4; i++) {
		ck_assert_str_eq(l.method[i], "|virt|VM_status|" VM0);
		ck_assert_str_eq(l.status[i], want[i]);
		if (i)
			ck_assert_int_gt(l.notify_time[i], l.notify_time[i - 1]);
	}
	ck_assert_int_eq(l.exit_code[3], 0);
	ck_assert_int_eq(l.exit_reason[3], VIRT_REASON_ADMIN_SHUTDOWN);
}
END_TEST

START_TEST(destroy_running)
{
	struct evlog l;
	memset(&l, 0, sizeof l);
	vfx_ok(&F, "VM.destroy", "{\"vmID\":\"" VM0 "\"}");
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"" VM0 "\"}"), 1);
	ev_wait(&l, 1);
	ck_assert_str_eq(l.status[0], "Down");
	ck_assert_int_eq(l.exit_reason[0], VIRT_REASON_ADMIN_SHUTDOWN);
	/* a shut-off domain is destroyed (undefined) too */
	vfx_ok(&F, "VM.destroy", "{\"vmID\":\"" VM6 "\"}");
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"" VM6 "\"}"), 1);
	virConnectPtr c = virConnectOpen(F.uri);   /* a fresh instance of the file */
	ck_assert_ptr_nonnull(c);
	virConnectClose(c);
}
END_TEST

START_TEST(verb_errors)
{
	static const char *const verbs[] = { "VM.pause", "VM.cont", "VM.shutdown", "VM.destroy" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(verbs); i++) {
		ck_assert_int_eq(vfx_err(&F, verbs[i], "{\"vmID\":\"" NO_SUCH_VM "\"}"), 1);
		ck_assert_int_eq(vfx_err(&F, verbs[i], "{\"vmID\":\"nope\"}"), -32602);
		ck_assert_int_eq(vfx_err(&F, verbs[i], "{}"), -32602);
	}
	/* libvirt refuses: pausing a shut-off VM, continuing a running one */
	ck_assert_int_eq(vfx_err(&F, "VM.pause", "{\"vmID\":\"" VM6 "\"}"), 100);
	ck_assert_int_eq(vfx_err(&F, "VM.cont", "{\"vmID\":\"" VM0 "\"}"), 100);
	ck_assert_int_eq(vfx_err(&F, "VM.shutdown", "{\"vmID\":\"" VM6 "\"}"), 100);
	/* wrong types for optional params */
	ck_assert_int_eq(vfx_err(&F, "VM.shutdown", "{\"vmID\":\"" VM0 "\",\"reboot\":\"yes\"}"), -32602);
	/* nothing changed */
	ck_assert_str_eq(status_of(VM0), "Up");
	ck_assert_str_eq(status_of(VM6), "Down");
}
END_TEST

START_TEST(create_and_duplicates)
{
	struct evlog l;
	memset(&l, 0, sizeof l);
	const char *params =
		"{\"vmID\":\"" NEWVM "\",\"vmParams\":{\"vmId\":\"" NEWVM "\",\"vmName\":\"new<&>vm\","
		"\"memSize\":\"512\",\"smp\":2,\"devices\":["
		"{\"type\":\"disk\",\"path\":\"/var/tmp/new.img\",\"imageID\":\"img-42\"},"
		"{\"type\":\"interface\",\"macAddr\":\"52:54:00:12:34:56\",\"network\":\"default\"},"
		"{\"type\":\"video\"}],"
		"\"disks\":[{\"path\":\"/var/tmp/second.img\",\"format\":\"cow\"}]}}";
	const struct vd_value *r = vfx_ok(&F, "VM.create", params);
	ck_assert_str_eq(vfx_str(&F, r, "vmId"), NEWVM);
	ck_assert_str_eq(vfx_str(&F, r, "status"), "WaitForLaunch");
	ck_assert_int_eq(vd_obj_get(r, "memSize")->v.i, 512);

	r = vfx_ok(&F, "VM.getStats", "{\"vmID\":\"" NEWVM "\"}");
	const struct vd_value *vm = &r->v.arr.items[0];
	ck_assert_str_eq(vfx_str(&F, vm, "status"), "Up");
	ck_assert_str_eq(vfx_str(&F, vm, "vmName"), "new<&>vm");
	ck_assert_str_eq(vfx_str(&F, vm, "vcpuCount"), "2");
	ck_assert_str_eq(vfx_str(&F, vd_obj_get(vm, "balloonInfo"), "balloon_max"), "524288");
	const struct vd_value *disks = vd_obj_get(vm, "disks");
	ck_assert_uint_eq(disks->v.obj.n, 2);
	ck_assert_str_eq(vfx_str(&F, vd_obj_get(disks, "vda"), "imageID"), "img-42");
	ck_assert_ptr_nonnull(vd_obj_get(disks, "vdb"));
	const struct vd_value *net = vd_obj_get(vm, "network");
	ck_assert_uint_eq(net->v.obj.n, 1);
	ck_assert_str_eq(vfx_str(&F, &net->v.obj.members[0].val, "macAddr"), "52:54:00:12:34:56");
	struct virt_counts k;
	virt_vm_counts(&F.d, &k);
	ck_assert_uint_eq(k.count, 21);

	/* duplicates: the new VM, a fleet VM, a shut-off fleet VM */
	const char *dup = "{\"vmID\":\"" NEWVM "\",\"vmParams\":{\"vmName\":\"other\"}}";
	ck_assert_int_eq(vfx_err(&F, "VM.create", dup), 4);
	ck_assert_int_eq(vfx_err(&F, "VM.create", "{\"vmID\":\"" VM0 "\",\"vmParams\":{\"vmName\":\"x\"}}"), 4);
	ck_assert_int_eq(vfx_err(&F, "VM.create", "{\"vmID\":\"" VM6 "\",\"vmParams\":{\"vmName\":\"y\"}}"), 4);
	/* bad parameters */
	static const char *const bad[] = {
		"{\"vmID\":\"" NO_SUCH_VM "\"}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":[]}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"\"}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a/b\"}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a\",\"memSize\":\"lots\"}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a\",\"memSize\":0}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a\",\"smp\":-1}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a\",\"devices\":{}}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a\",\"devices\":[{\"type\":\"disk\"}]}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a\",\"nics\":[{\"macAddr\":\"zz\"}]}}",
		"{\"vmID\":\"" NO_SUCH_VM "\",\"vmParams\":{\"vmName\":\"a\",\"vmId\":\"" VM0 "\"}}",
		"{\"vmID\":\"not-a-uuid\",\"vmParams\":{\"vmName\":\"a\"}}",
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(bad); i++)
		ck_assert_int_eq(vfx_err(&F, "VM.create", bad[i]), -32602);
	/* vmParams' numbers are read through rpc/ (rpc_member_int): a mistyped
	 * or out-of-range one answers as a mistyped param does */
	ck_assert_int_eq(vfx_err(&F, "VM.create", bad[5]), -32602);
	ck_assert_msg(strstr(F.reply, "param 'vmParams.memSize' of VM.create must be "
			     "int-or-string, got string 'lots': not a string of decimal digits"),
		      "%s", F.reply);
	ck_assert_int_eq(vfx_err(&F, "VM.create", bad[7]), -32602);
	ck_assert_msg(strstr(F.reply, "param 'vmParams.smp' of VM.create must be "
			     "int-or-string, got int -1: not within 1..4096"), "%s", F.reply);
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"" NO_SUCH_VM "\"}"), 1);

	/* the transient VM shut down: libvirt forgets it, we report it Down
	 * until VM.destroy; then its id can be used again */
	vfx_ok(&F, "VM.shutdown", "{\"vmID\":\"" NEWVM "\"}");
	ck_assert_str_eq(status_of(NEWVM), "Down");
	vfx_resample(&F);
	ck_assert_str_eq(status_of(NEWVM), "Down");
	ck_assert_int_eq(vfx_err(&F, "VM.create", dup), 4);
	ck_assert_int_eq(vfx_err(&F, "VM.pause", "{\"vmID\":\"" NEWVM "\"}"), 100);
	vfx_ok(&F, "VM.destroy", "{\"vmID\":\"" NEWVM "\"}");
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"" NEWVM "\"}"), 1);
	r = vfx_ok(&F, "VM.create", dup);
	ck_assert_str_eq(status_of(NEWVM), "Up");

	/* VDSM's launch sequence each time it is created, Down between */
	ev_wait(&l, 8);
	static const char *const want[] = { "WaitForLaunch", "Powering up", "Up",
					    "Powering down", "Down",
					    "WaitForLaunch", "Powering up", "Up" };
	for (unsigned i = 0; i < VD_ARRAY_SIZE(want); i++)
		ck_assert_str_eq(l.status[i], want[i]);
	for (unsigned i = 1; i < VD_ARRAY_SIZE(want); i++)
		ck_assert_int_gt(l.notify_time[i], l.notify_time[i - 1]);
}
END_TEST

/* A VM that stops without any verb of ours: the shared test:///default
 * instance lets a second connection act as "the guest". */
START_TEST(stops_by_itself)
{
	vfx_stop(&F);
	vfx_start(&F, "test:///default", true);
	struct evlog l;
	memset(&l, 0, sizeof l);
	virConnectPtr c = virConnectOpen("test:///default");
	ck_assert_ptr_nonnull(c);
	virDomainPtr dom = virDomainLookupByName(c, "test");
	ck_assert_ptr_nonnull(dom);
	char id[VIR_UUID_STRING_BUFLEN], p[96];
	virDomainGetUUIDString(dom, id);
	snprintf(p, sizeof p, "{\"vmID\":\"%s\"}", id);
	ck_assert_str_eq(status_of(id), "Up");

	ck_assert_int_eq(virDomainSuspend(dom), 0);      /* not through us */
	ev_wait(&l, 1);
	ck_assert_str_eq(l.status[0], "Paused");
	for (int i = 0; i < 200 && strcmp(status_of(id), "Paused") != 0; i++)
		vfx_sleep_ms(10);
	ck_assert_str_eq(status_of(id), "Paused");
	ck_assert_int_eq(virDomainResume(dom), 0);
	ck_assert_int_eq(virDomainShutdown(dom), 0);     /* "the guest powered off" */
	ev_wait(&l, 3);
	ck_assert_str_eq(l.status[1], "Up");
	ck_assert_str_eq(l.status[2], "Down");
	ck_assert_int_eq(l.exit_code[2], 0);
	ck_assert_int_eq(l.exit_reason[2], VIRT_REASON_USER_SHUTDOWN);
	for (int i = 0; i < 200 && strcmp(status_of(id), "Down") != 0; i++)
		vfx_sleep_ms(10);
	const struct vd_value *r = vfx_ok(&F, "VM.getStats", p);
	ck_assert_str_eq(vfx_str(&F, &r->v.arr.items[0], "status"), "Down");
	ck_assert_int_eq(vd_obj_get(&r->v.arr.items[0], "exitReason")->v.i, VIRT_REASON_USER_SHUTDOWN);
	vfx_resample(&F);
	ck_assert_str_eq(status_of(id), "Down");
	vfx_ok(&F, "VM.destroy", p);
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", p), 1);
	virDomainFree(dom);
	virConnectClose(c);
}
END_TEST

#ifdef VD_TEST_HOOKS
/* The race of VM.shutdown with the sampler, interleaved deterministically:
 * the sampler reads the domain "running", then VM.shutdown marks it as
 * ours (the hook runs between read and merge), then the stale sample is
 * merged, then libvirt's STOPPED event comes: it is an admin shutdown (6),
 * not a user one (7). */
struct mark_hook {
	char id[VIR_UUID_STRING_BUFLEN];
	int fired;
};

static void mark_between_read_and_merge(struct virt_state *s, void *arg)
{
	struct mark_hook *h = arg;
	if (h->fired++)
		return;
	virt_mark_admin(s, h->id, "test", true);
}

START_TEST(admin_mark_survives_stale_sample)
{
	vfx_stop(&F);
	vfx_start(&F, "test:///default", true);
	struct evlog l;
	memset(&l, 0, sizeof l);
	virConnectPtr c = virConnectOpen("test:///default");
	ck_assert_ptr_nonnull(c);
	virDomainPtr dom = virDomainLookupByName(c, "test");
	ck_assert_ptr_nonnull(dom);
	struct mark_hook h;
	memset(&h, 0, sizeof h);
	virDomainGetUUIDString(dom, h.id);
	ck_assert_str_eq(status_of(h.id), "Up");

	struct virt_state *s = vfx_state(&F);
	pthread_mutex_lock(&s->lock);
	s->sample_read_hook_arg = &h;
	s->sample_read_hook = mark_between_read_and_merge;
	pthread_mutex_unlock(&s->lock);
	vfx_resample(&F);     /* read "running" → mark → merge "running" */
	pthread_mutex_lock(&s->lock);
	s->sample_read_hook = NULL;
	s->sample_read_hook_arg = NULL;
	pthread_mutex_unlock(&s->lock);
	ck_assert_int_ge(h.fired, 1);

	ck_assert_int_eq(virDomainShutdown(dom), 0);   /* the STOPPED event comes now */
	ev_wait(&l, 1);
	ck_assert_str_eq(l.status[l.n - 1], "Down");
	ck_assert_int_eq(l.exit_code[l.n - 1], 0);
	ck_assert_int_eq(l.exit_reason[l.n - 1], VIRT_REASON_ADMIN_SHUTDOWN);
	virDomainFree(dom);
	virConnectClose(c);
}
END_TEST
#endif

static Suite *suite(void)
{
	Suite *s = suite_create("virt_lifecycle");
	TCase *tc = tcase_create("fleet");
	tcase_add_checked_fixture(tc, fleet_setup, fleet_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, pause_cont_shutdown_destroy);
	tcase_add_test(tc, destroy_running);
	tcase_add_test(tc, verb_errors);
	tcase_add_test(tc, create_and_duplicates);
	tcase_add_test(tc, stops_by_itself);
#ifdef VD_TEST_HOOKS
	tcase_add_test(tc, admin_mark_survives_stale_sample);
#else
	check_skip("admin_mark_survives_stale_sample",
		   "needs the sampler hook of a VD_TEST_HOOKS build (runs in make asan-unit / tsan)");
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
