/* tests/unit/test_virt.c - the virt sampler and read verbs against libvirt's
 * test driver (examples/fleet.xml: 20 domains, running/paused/shut off):
 * counts, names, states and memory agree with what libvirt itself reports
 * for the same URI; VDSM field names and types; rates from two samples;
 * the per-codec encoded cache; bad vmID strings; libvirt unreachable. */
#include "virt_test.h"
#include "check_main.h"

#include <unistd.h>

#define FLEET "examples/fleet.xml"
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

static const char *expected_status(int state)
{
	switch (state) {
	case VIR_DOMAIN_RUNNING: return "Up";
	case VIR_DOMAIN_PAUSED: return "Paused";
	case VIR_DOMAIN_SHUTOFF: return "Down";
	default: return "?";
	}
}

START_TEST(agrees_with_libvirt)
{
	/* a second, independent connection to the same URI (the test driver
	 * loads the same file for it) */
	virConnectPtr c = virConnectOpen(F.uri);
	ck_assert_ptr_nonnull(c);
	virDomainPtr *doms = NULL;
	int n = virConnectListAllDomains(c, &doms, 0);
	ck_assert_int_eq(n, 20);
	struct virt_counts k;
	virt_vm_counts(&F.d, &k);
	ck_assert_uint_eq(k.count, (unsigned)n);

	const struct vd_value *all = vfx_ok(&F, "Host.getAllVmStats", "{}");
	const struct vd_value *list = vfx_ok(&F, "Host.getVMList", "{}");
	ck_assert_int_eq(all->type, VD_ARRAY);
	ck_assert_uint_eq(all->v.arr.n, (size_t)n);
	ck_assert_uint_eq(list->v.arr.n, (size_t)n);
	unsigned want_active = 0;
	for (int i = 0; i < n; i++) {
		char uuid[VIR_UUID_STRING_BUFLEN];
		virDomainGetUUIDString(doms[i], uuid);
		virDomainInfo info;
		ck_assert_int_eq(virDomainGetInfo(doms[i], &info), 0);
		const struct vd_value *vm = vfx_find_vm(all, uuid);
		ck_assert_msg(vm != NULL, "%s missing from getAllVmStats", uuid);
		ck_assert_str_eq(vfx_str(&F, vm, "vmName"), virDomainGetName(doms[i]));
		ck_assert_str_eq(vfx_str(&F, vm, "status"), expected_status(info.state));
		const struct vd_value *lv = vfx_find_vm(list, uuid);
		ck_assert_ptr_nonnull(lv);
		ck_assert_str_eq(vfx_str(&F, lv, "status"), expected_status(info.state));
		vfx_str(&F, lv, "statusTime");
		if (info.state == VIR_DOMAIN_SHUTOFF) {
			ck_assert_ptr_nonnull(vd_obj_get(vm, "exitCode"));
			ck_assert_ptr_nonnull(vd_obj_get(vm, "exitReason"));
			vfx_str(&F, vm, "exitMessage");
			virDomainFree(doms[i]);
			continue;
		}
		if (info.state == VIR_DOMAIN_RUNNING)
			want_active++;   /* vmActive: the Up ones, as VDSM counts */
		const struct vd_value *b = vd_obj_get(vm, "balloonInfo");
		ck_assert_ptr_nonnull(b);
		char want[32];
		snprintf(want, sizeof want, "%lu", info.maxMem);
		ck_assert_str_eq(vfx_str(&F, b, "balloon_max"), want);
		snprintf(want, sizeof want, "%lu", info.memory);
		ck_assert_str_eq(vfx_str(&F, b, "balloon_target"), want);
		snprintf(want, sizeof want, "%u", info.nrVirtCpu);
		ck_assert_str_eq(vfx_str(&F, vm, "vcpuCount"), want);
		virDomainFree(doms[i]);
	}
	free(doms);
	ck_assert_uint_eq(k.active, want_active);
	ck_assert_uint_eq(want_active, 16);
	virConnectClose(c);
}
END_TEST

/* Every field VDSM sends, with VDSM's types. */
START_TEST(vdsm_fields_and_types)
{
	/* vm-0000: running, one disk, two NICs, VNC */
	const char *id = "6d5f0000-0000-4000-8000-000000000000";
	char params[128];
	snprintf(params, sizeof params, "{\"vmID\":\"%s\"}", id);
	const struct vd_value *r = vfx_ok(&F, "VM.getStats", params);
	ck_assert_int_eq(r->type, VD_ARRAY);
	ck_assert_uint_eq(r->v.arr.n, 1);
	const struct vd_value *vm = &r->v.arr.items[0];
	static const char *const strs[] = {
		"vmId", "vmName", "status", "statusTime", "elapsedTime", "pid", "vcpuCount",
		"cpuUser", "cpuSys", "cpuUsage", "memUsage", "guestIPs", "hash", "vmType",
		"kvmEnable", "acpiEnable", "monitorResponse", "timeOffset", "clientIp",
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(strs); i++)
		vfx_str(&F, vm, strs[i]);
	ck_assert_str_eq(vfx_str(&F, vm, "vmId"), id);
	ck_assert_str_eq(vfx_str(&F, vm, "vmName"), "vm-0000");
	ck_assert_str_eq(vfx_str(&F, vm, "status"), "Up");
	const struct vd_value *b = vd_obj_get(vm, "balloonInfo");
	ck_assert_int_eq(b->type, VD_OBJECT);
	vfx_str(&F, b, "balloon_cur");
	vfx_str(&F, b, "balloon_min");
	const struct vd_value *ms = vd_obj_get(vm, "memoryStats");
	ck_assert_int_eq(ms->type, VD_OBJECT);
	vfx_str(&F, ms, "mem_total");
	vfx_str(&F, ms, "mem_unused");
	/* counters are JSON ints as VDSM sends them, sizes strings */
	ck_assert_int_eq(vd_obj_get(ms, "swap_in")->type, VD_INT);
	ck_assert_int_eq(vd_obj_get(ms, "majflt")->type, VD_INT);
	ck_assert_int_eq(vd_obj_get(ms, "pageflt")->type, VD_INT);
	/* the test driver reports unused = available / 2 */
	ck_assert_str_eq(vfx_str(&F, vm, "memUsage"), "50");

	const struct vd_value *disks = vd_obj_get(vm, "disks");
	ck_assert_int_eq(disks->type, VD_OBJECT);
	ck_assert_uint_eq(disks->v.obj.n, 1);
	const struct vd_value *vda = vd_obj_get(disks, "vda");
	ck_assert_ptr_nonnull(vda);
	static const char *const dstrs[] = {
		"readRate", "writeRate", "readBytes", "writtenBytes", "readOps", "writeOps",
		"readLatency", "writeLatency", "flushLatency", "apparentsize", "truesize", "imageID",
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(dstrs); i++)
		vfx_str(&F, vda, dstrs[i]);
	ck_assert_str_eq(vfx_str(&F, vda, "imageID"), "1a000000-0000-4000-8000-000000000000");
	ck_assert_str_ne(vfx_str(&F, vda, "apparentsize"), "0");

	const struct vd_value *net = vd_obj_get(vm, "network");
	ck_assert_int_eq(net->type, VD_OBJECT);
	ck_assert_uint_eq(net->v.obj.n, 2);
	const struct vd_value *nic = &net->v.obj.members[0].val;
	static const char *const nstrs[] = {
		"name", "rxRate", "txRate", "rxErrors", "txErrors", "rxDropped", "txDropped",
		"macAddr", "state", "speed",
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(nstrs); i++)
		vfx_str(&F, nic, nstrs[i]);
	ck_assert_str_eq(vfx_str(&F, nic, "macAddr"), "52:54:00:00:00:00");
	ck_assert_int_eq(vd_obj_get(nic, "sampleTime")->type, VD_DOUBLE);

	const struct vd_value *disp = vd_obj_get(vm, "displayInfo");
	ck_assert_int_eq(disp->type, VD_ARRAY);
	ck_assert_uint_eq(disp->v.arr.n, 1);
	ck_assert_str_eq(vfx_str(&F, &disp->v.arr.items[0], "type"), "vnc");
	ck_assert_str_eq(vfx_str(&F, &disp->v.arr.items[0], "port"), "5900");

	/* Paused VMs carry pauseCode */
	r = vfx_ok(&F, "VM.getStats", "{\"vmID\":\"6d5f0002-0002-4002-800e-000000000002\"}");
	ck_assert_str_eq(vfx_str(&F, &r->v.arr.items[0], "status"), "Paused");
	vfx_str(&F, &r->v.arr.items[0], "pauseCode");
}
END_TEST

/* A string holding a number the engine parses (Double.parseDouble /
 * Long.parseLong): the whole string is the number. */
static bool numeric_str(const struct vd_value *v, bool integral)
{
	if (!v || v->type != VD_STRING || v->v.s.len == 0 || v->v.s.len > 40)
		return false;
	char buf[48];
	memcpy(buf, v->v.s.ptr, v->v.s.len);
	buf[v->v.s.len] = '\0';
	char *end = NULL;
	if (integral)
		(void)strtoll(buf, &end, 10);
	else
		(void)strtod(buf, &end);
	return end && *end == '\0';
}

/* The engine's reading rules (engine-flows.json, Host.getAllVmStats
 * "reads") for every VM of the fleet: Float fields as strings, never JSON
 * ints; time values on VDSM's clock (2^31-1 + monotonic ms). */
START_TEST(engine_read_rules)
{
	uint64_t before = vd_now_ms() + INT32_MAX;
	vfx_resample(&F);
	const struct vd_value *list = vfx_ok(&F, "Host.getAllVmStats", "{}");
	ck_assert_int_eq(list->type, VD_ARRAY);
	ck_assert_uint_gt(list->v.arr.n, 2);
	unsigned up = 0;
	for (size_t i = 0; i < list->v.arr.n; i++) {
		const struct vd_value *vm = &list->v.arr.items[i];
		const struct vd_value *st = vd_obj_get(vm, "statusTime");
		ck_assert(numeric_str(st, true));
		uint64_t t = strtoull(vfx_str(&F, vm, "statusTime"), NULL, 10);
		ck_assert_uint_gt(t, (uint64_t)INT32_MAX);
		ck_assert_uint_ge(t, before);
		ck_assert_uint_le(t, vd_now_ms() + INT32_MAX);
		if (strcmp(vfx_str(&F, vm, "status"), "Down") == 0) {
			ck_assert_int_eq(vd_obj_get(vm, "exitCode")->type, VD_INT);
			ck_assert_int_eq(vd_obj_get(vm, "exitReason")->type, VD_INT);
			vfx_str(&F, vm, "exitMessage");
			continue;
		}
		up++;
		static const char *const floats[] = { "elapsedTime", "cpuSys", "cpuUser" };
		for (size_t k = 0; k < VD_ARRAY_SIZE(floats); k++)
			ck_assert_msg(numeric_str(vd_obj_get(vm, floats[k]), false), "%s", floats[k]);
		ck_assert_int_eq(vd_obj_get(vm, "cpuActual")->type, VD_BOOL);
		const struct vd_value *gc = vd_obj_get(vm, "guestCPUCount");
		ck_assert(gc && (gc->type == VD_INT || numeric_str(gc, true)));
		ck_assert(numeric_str(vd_obj_get(vm, "memUsage"), true));
		ck_assert(numeric_str(vd_obj_get(vm, "monitorResponse"), true));
		ck_assert(numeric_str(vd_obj_get(vm, "hash"), true));
		static const char *const strs[] = {
			"username", "guestFQDN", "guestIPs", "clientIp", "session", "acpiEnable",
			"timeOffset",
		};
		for (size_t k = 0; k < VD_ARRAY_SIZE(strs); k++)
			vfx_str(&F, vm, strs[k]);
		ck_assert_str_eq(vfx_str(&F, vm, "username"), "Unknown");
		static const char *const arrays[] = { "appsList", "netIfaces", "disksUsage",
						      "displayInfo" };
		for (size_t k = 0; k < VD_ARRAY_SIZE(arrays); k++)
			ck_assert_int_eq(vd_obj_get(vm, arrays[k])->type, VD_ARRAY);
		ck_assert_int_eq(vd_obj_get(vm, "vmJobs")->type, VD_OBJECT);
		const struct vd_value *disp = vd_obj_get(vm, "displayInfo");
		if (disp->v.arr.n > 0) {
			const struct vd_value *d0 = &disp->v.arr.items[0];
			ck_assert(numeric_str(vd_obj_get(d0, "port"), true));
			ck_assert(numeric_str(vd_obj_get(d0, "tlsPort"), true));
			/* the legacy keys say the same as the first display */
			ck_assert(numeric_str(vd_obj_get(vm, "displayPort"), true));
			ck_assert_str_eq(vfx_str(&F, vm, "displayPort"), vfx_str(&F, d0, "port"));
			ck_assert(numeric_str(vd_obj_get(vm, "displaySecurePort"), true));
			vfx_str(&F, vm, "displayType");
			vfx_str(&F, vm, "displayIp");
		}
		const struct vd_value *b = vd_obj_get(vm, "balloonInfo");
		static const char *const bk[] = { "balloon_cur", "balloon_max", "balloon_min",
						  "balloon_target" };
		for (size_t k = 0; k < VD_ARRAY_SIZE(bk); k++)
			ck_assert(numeric_str(vd_obj_get(b, bk[k]), true));
		const struct vd_value *net = vd_obj_get(vm, "network");
		for (size_t k = 0; k < net->v.obj.n; k++) {
			const struct vd_value *n = &net->v.obj.members[k].val;
			ck_assert_int_eq(vd_obj_get(n, "sampleTime")->type, VD_DOUBLE);
			ck_assert(numeric_str(vd_obj_get(n, "rx"), true));
			ck_assert(numeric_str(vd_obj_get(n, "speed"), true));
		}
	}
	ck_assert_uint_gt(up, 0);
	/* two samples taken: the rates are real */
	vfx_resample(&F);
	list = vfx_ok(&F, "Host.getAllVmStats", "{}");
	bool actual = false;
	for (size_t i = 0; i < list->v.arr.n; i++) {
		const struct vd_value *ca = vd_obj_get(&list->v.arr.items[i], "cpuActual");
		if (ca && ca->type == VD_BOOL && ca->v.b)
			actual = true;
	}
	ck_assert(actual);
}
END_TEST

START_TEST(full_list_and_filters)
{
	const struct vd_value *r = vfx_ok(&F, "Host.getVMFullList", "{}");
	ck_assert_uint_eq(r->v.arr.n, 20);
	const struct vd_value *vm = vfx_find_vm(r, "6d5f0001-0001-4001-8007-000000000001");
	ck_assert_ptr_nonnull(vm);
	ck_assert_str_eq(vfx_str(&F, vm, "vmName"), "vm-0001");
	ck_assert_int_eq(vd_obj_get(vm, "memSize")->type, VD_INT);
	vfx_str(&F, vm, "smp");
	r = vfx_ok(&F, "Host.getVMFullList",
		   "{\"vmList\":[\"6d5f0001-0001-4001-8007-000000000001\",\"" NO_SUCH_VM "\"]}");
	ck_assert_uint_eq(r->v.arr.n, 1);
	r = vfx_ok(&F, "Host.getVMList", "{\"vmList\":[\"6d5f0003-0003-4003-8015-000000000003\"]}");
	ck_assert_uint_eq(r->v.arr.n, 1);
	ck_assert_uint_eq(vd_obj_get(&r->v.arr.items[0], "vmId")->v.s.len, 36);
	/* fullStatus=true returns the full form */
	r = vfx_ok(&F, "Host.getVMList", "[true]");
	ck_assert_uint_eq(r->v.arr.n, 20);
	ck_assert_ptr_nonnull(vd_obj_get(&r->v.arr.items[0], "vmName"));
}
END_TEST

START_TEST(bad_vm_ids)
{
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"" NO_SUCH_VM "\"}"), 1);
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"not-a-uuid\"}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":42}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{}"), -32602);
	size_t n = 10 * 1024;
	char *p = malloc(n + 32);
	strcpy(p, "{\"vmID\":\"");
	memset(p + 9, 'a', n);
	strcpy(p + 9 + n, "\"}");
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", p), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.pause", p), -32602);
	free(p);
	/* upper-case hex of an existing VM is not the canonical id */
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"6D5F0000-0000-4000-8000-000000000000\"}"),
			 vd_is_uuid("6D5F0000-0000-4000-8000-000000000000", 36) ? 1 : -32602);
}
END_TEST

START_TEST(rates_from_two_samples)
{
	struct virt_snapshot *s1 = virt_snapshot_get(vfx_state(&F));
	const struct virt_vm *v1 = snapshot_find(s1, "6d5f0000-0000-4000-8000-000000000000");
	ck_assert_ptr_nonnull(v1);
	/* one sample so far: no rates yet */
	ck_assert(!v1->have_rates);
	ck_assert(v1->disks[0].rd_rate == 0.0);
	vfx_sleep_ms(700);
	vfx_resample(&F);
	struct virt_snapshot *s2 = virt_snapshot_get(vfx_state(&F));
	ck_assert_uint_gt(s2->gen, s1->gen);
	unsigned with_io = 0;
	for (unsigned i = 0; i < s2->nvms; i++) {
		const struct virt_vm *v = &s2->vms[i];
		if (v->status != VS_UP)
			continue;
		ck_assert(v->have_rates);
		ck_assert(v->cpu_user >= 0.0 && v->cpu_sys >= 0.0);
		for (unsigned j = 0; j < v->ndisks; j++) {
			ck_assert(v->disks[j].rd_rate >= 0.0 && v->disks[j].wr_rate >= 0.0);
			const struct virt_vm *p = snapshot_find(s1, v->uuid);
			/* the test driver's counters grow with time */
			if (v->disks[j].rd_rate > 0.0) {
				with_io++;
				double dt = (double)(s2->taken_ms - s1->taken_ms) / 1000.0;
				double want = (double)(v->disks[j].rd_bytes - p->disks[j].rd_bytes) / dt;
				ck_assert(v->disks[j].rd_rate > want * 0.9 && v->disks[j].rd_rate < want * 1.1);
			}
		}
		for (unsigned j = 0; j < v->nnics; j++)
			ck_assert(v->nics[j].rx_rate >= 0.0 && v->nics[j].tx_rate >= 0.0);
	}
	ck_assert_uint_gt(with_io, 0);
	/* the wire form says the same */
	const struct vd_value *r = vfx_ok(&F, "VM.getStats", "{\"vmID\":\"6d5f0000-0000-4000-8000-000000000000\"}");
	const struct vd_value *vda = vd_obj_get(vd_obj_get(&r->v.arr.items[0], "disks"), "vda");
	ck_assert(strtod(vfx_str(&F, vda, "readRate"), NULL) > 0.0);
	/* a sample right after (a lifecycle kick) keeps the previous rates */
	vfx_resample(&F);
	struct virt_snapshot *s3 = virt_snapshot_get(vfx_state(&F));
	const struct virt_vm *a = snapshot_find(s2, "6d5f0000-0000-4000-8000-000000000000");
	const struct virt_vm *b = snapshot_find(s3, "6d5f0000-0000-4000-8000-000000000000");
	ck_assert(b->have_rates);
	ck_assert(a->cpu_user == b->cpu_user);
	snapshot_put(s1);
	snapshot_put(s2);
	snapshot_put(s3);
}
END_TEST

/* Without virConnectGetAllDomainStats (older libvirt, other drivers) the
 * per-domain path builds the same inventory. */
START_TEST(per_domain_path_agrees)
{
	struct virt_snapshot *a = virt_snapshot_get(vfx_state(&F));
	pthread_mutex_lock(&vfx_state(&F)->lock);
	vfx_state(&F)->bulk_unsupported = true;
	pthread_mutex_unlock(&vfx_state(&F)->lock);
	vfx_resample(&F);
	struct virt_snapshot *b = virt_snapshot_get(vfx_state(&F));
	ck_assert_uint_gt(b->gen, a->gen);
	ck_assert_uint_eq(a->nvms, b->nvms);
	ck_assert_uint_eq(a->counts.active, b->counts.active);
	for (unsigned i = 0; i < a->nvms; i++) {
		const struct virt_vm *x = &a->vms[i], *y = &b->vms[i];
		ck_assert_str_eq(x->uuid, y->uuid);
		ck_assert_str_eq(x->name, y->name);
		ck_assert_int_eq(x->status, y->status);
		ck_assert_uint_eq(x->max_mem_kib, y->max_mem_kib);
		ck_assert_uint_eq(x->mem_kib, y->mem_kib);
		ck_assert_uint_eq(x->vcpus, y->vcpus);
		ck_assert_uint_eq(x->ndisks, y->ndisks);
		ck_assert_uint_eq(x->nnics, y->nnics);
	}
	snapshot_put(a);
	snapshot_put(b);
}
END_TEST

/* Repeated polls are answered from the snapshot's cache, with the keys
 * added since the cache came in (issue 25): a mark put into the cached
 * bytes after the first poll shows up in the second reply. */
START_TEST(repeat_polls_hit_cache)
{
	const struct vd_codec *cd = codec_find("yajl");
	vfx_call_codec(&F, cd, "Host.getAllVmStats", "{}");
	static const char *const added[] = { "\"cpuActual\":", "\"vmJobs\":{", "\"displayType\":",
					     "\"guestCPUCount\":-1", "\"appsList\":[]" };
	for (size_t k = 0; k < VD_ARRAY_SIZE(added); k++)
		ck_assert_msg(strstr(F.reply, added[k]), "%s missing from the reply", added[k]);
	struct virt_snapshot *s = virt_snapshot_get(vfx_state(&F));
	struct vd_buf tb = VD_BUF_INIT;
	struct vd_writer w;
	cd->writer_init(&w, &tb);
	buf_free(&tb);
	struct virt_enc_cache *slot = NULL;
	for (unsigned i = 0; i < VIRT_MAX_CODECS; i++)
		if (s->cache[i].ops == w.ops)
			slot = &s->cache[i];
	ck_assert_ptr_nonnull(slot);
	char *at = memmem(slot->bytes, slot->len, "\"vmType\":\"kvm\"", 14);
	ck_assert_ptr_nonnull(at);
	memcpy(at + 10, "KVM", 3);
	vfx_call_codec(&F, cd, "Host.getAllVmStats", "{}");
	ck_assert_ptr_nonnull(strstr(F.reply, "\"vmType\":\"KVM\""));
	memcpy(at + 10, "kvm", 3);
	vfx_call_codec(&F, cd, "Host.getAllVmStats", "{}");
	ck_assert_ptr_null(strstr(F.reply, "\"vmType\":\"KVM\""));
	snapshot_put(s);
}
END_TEST

START_TEST(encoded_cache)
{
	const struct vd_codec *codecs[] = { codec_find("yajl"), codec_find("fallback") };
	for (size_t k = 0; k < VD_ARRAY_SIZE(codecs); k++) {
		ck_assert_ptr_nonnull(codecs[k]);
		vfx_call_codec(&F, codecs[k], "Host.getAllVmStats", "{}");
		char *first = strdup(F.reply);
		vfx_call_codec(&F, codecs[k], "Host.getAllVmStats", "{}");
		ck_assert_str_eq(F.reply, first);
		free(first);
	}
	struct virt_snapshot *s = virt_snapshot_get(vfx_state(&F));
	unsigned filled = 0;
	for (unsigned i = 0; i < VIRT_MAX_CODECS; i++)
		filled += s->cache[i].ops != NULL;
	/* one slot per distinct writer (yajl and fallback may share theirs) */
	struct vd_buf tb = VD_BUF_INIT;
	struct vd_writer w0, w1;
	codecs[0]->writer_init(&w0, &tb);
	codecs[1]->writer_init(&w1, &tb);
	buf_free(&tb);
	ck_assert_uint_eq(filled, w0.ops == w1.ops ? 1 : 2);
	/* the cached bytes are exactly a fresh encode, for every codec built in */
	const struct vd_codec *const *list = codec_list();
	for (size_t k = 0; list[k]; k++) {
		struct vd_buf a = VD_BUF_INIT, b = VD_BUF_INIT;
		struct vd_writer wa, wb;
		memset(&wa, 0, sizeof wa);
		memset(&wb, 0, sizeof wb);
		list[k]->writer_init(&wa, &a);
		list[k]->writer_init(&wb, &b);
		virt_write_all_stats_cached(vfx_state(&F), &wa, s);
		virt_encode_all_stats(&wb, s);
		ck_assert_int_eq(wa.error, 0);
		ck_assert_uint_eq(a.len, b.len);
		ck_assert(memcmp(a.data, b.data, a.len) == 0);
		/* and it decodes to 20 VMs */
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		struct vd_value *v = NULL;
		struct vd_codec_error err = { 0, NULL, 0 };
		ck_assert_int_eq(list[k]->decode(&F.arena, a.data, a.len, &lim, &v, &err), 0);
		ck_assert_uint_eq(v->v.arr.n, 20);
		buf_free(&a);
		buf_free(&b);
	}
	/* a new snapshot starts with an empty cache */
	vfx_resample(&F);
	struct virt_snapshot *s2 = virt_snapshot_get(vfx_state(&F));
	ck_assert_ptr_ne(s, s2);
	ck_assert_ptr_null(s2->cache[0].ops);
	snapshot_put(s);
	snapshot_put(s2);
}
END_TEST

START_TEST(domxml_facts)
{
	const char *xml =
		"<domain type='kvm' id='3'><name>a</name><devices>"
		"<disk type='file' device='cdrom'><source file='/iso'/><target dev='hdc' bus='ide'/></disk>"
		"<disk type='block' device='disk'><driver name='qemu'/><source dev='/dev/sdb'/>"
		"<target dev='sda' bus='scsi'/><serial>img-1</serial></disk>"
		"<interface type='bridge'><mac address='52:54:00:aa:bb:cc'/><source bridge='ovirtmgmt'/>"
		"<target dev='vnet7'/></interface>"
		"<interface type='network'><mac address='52:54:00:aa:bb:cd'/></interface>"
		"<graphics type='spice' port='5901' tlsPort='5902' autoport='yes' listen='10.0.0.1'>"
		"<listen type='address' address='10.0.0.1'/></graphics>"
		"</devices></domain>";
	struct virt_domxml x;
	ck_assert_int_eq(domxml_parse(xml, &x), 0);
	ck_assert_uint_eq(x.ndisks, 1);
	ck_assert_str_eq(x.disks[0].dev, "sda");
	ck_assert_str_eq(x.disks[0].path, "/dev/sdb");
	ck_assert_str_eq(x.disks[0].image_id, "img-1");
	ck_assert_uint_eq(x.nnics, 1);   /* the second one has no host device yet */
	ck_assert_str_eq(x.nics[0].ifname, "vnet7");
	ck_assert_str_eq(x.nics[0].mac, "52:54:00:aa:bb:cc");
	ck_assert_str_eq(x.nics[0].network, "ovirtmgmt");
	ck_assert_uint_eq(x.ndisplays, 1);
	ck_assert_str_eq(x.displays[0].type, "spice");
	ck_assert_str_eq(x.displays[0].tls_port, "5902");
	ck_assert_str_eq(x.displays[0].listen, "10.0.0.1");
	domxml_free(&x);
	ck_assert_int_eq(domxml_parse("<domain><devices><disk type='file' device='disk'>", &x),
			 VD_EPROTO);
	domxml_free(&x);
}
END_TEST

/* Number formatting of the encoder (no printf on the hot path) matches
 * printf's "%.2f" / "%.1f" / "%llu". */
START_TEST(encode_formats)
{
	struct virt_snapshot *snap = snapshot_new();
	snap->status_time = 123456789;
	snap->nvms = 1;
	snap->vms = xcalloc(1, sizeof *snap->vms);
	struct virt_vm *vm = &snap->vms[0];
	strcpy(vm->uuid, "6d5f0000-0000-4000-8000-000000000000");
	vm->name = xstrdup("fmt\"vm");
	vm->status = VS_UP;
	vm->vcpus = 4;
	vm->cpu_user = 12.345;
	vm->cpu_sys = 0.004;
	vm->cpu_time_ns = UINT64_MAX;
	vm->pid = 4242;
	vm->ndisks = 1;
	vm->disks = xcalloc(1, sizeof *vm->disks);
	strcpy(vm->disks[0].dev, "vda");
	vm->disks[0].path = xstrdup("/x");
	vm->disks[0].rd_rate = 1e20;           /* beyond the fast path */
	vm->disks[0].wr_rate = 99.995;
	vm->nnics = 1;
	vm->nics = xcalloc(1, sizeof *vm->nics);
	strcpy(vm->nics[0].ifname, "vnet0");
	vm->nics[0].rx_rate = 0.05;
	vm->nics[0].tx_rate = 100.0;
	struct vd_buf out = VD_BUF_INIT;
	struct vd_writer w;
	memset(&w, 0, sizeof w);
	codec_find("yajl")->writer_init(&w, &out);
	virt_encode_all_stats(&w, snap);
	ck_assert_int_eq(w.error, 0);
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err = { 0, NULL, 0 };
	ck_assert_int_eq(codec_find("yajl")->decode(&a, out.data, out.len, &lim, &v, &err), 0);
	const struct vd_value *o = &v->v.arr.items[0];
	char want[64];
	snprintf(want, sizeof want, "%.2f", 12.345);
	ck_assert(vd_str_eq(vd_obj_get(o, "cpuUser"), want));
	ck_assert(vd_str_eq(vd_obj_get(o, "cpuSys"), "0.00"));
	ck_assert(vd_str_eq(vd_obj_get(o, "cpuUsage"), "18446744073709551615"));
	ck_assert(vd_str_eq(vd_obj_get(o, "pid"), "4242"));
	ck_assert(vd_str_eq(vd_obj_get(o, "vcpuCount"), "4"));
	ck_assert(vd_str_eq(vd_obj_get(o, "statusTime"), "123456789"));
	ck_assert(vd_str_eq(vd_obj_get(o, "vmName"), "fmt\"vm"));
	const struct vd_value *d = vd_obj_get(vd_obj_get(o, "disks"), "vda");
	snprintf(want, sizeof want, "%.2f", 1e20);
	ck_assert(vd_str_eq(vd_obj_get(d, "readRate"), want));
	snprintf(want, sizeof want, "%.2f", 99.995);
	ck_assert_msg(vd_str_eq(vd_obj_get(d, "writeRate"), want) ||
		      vd_str_eq(vd_obj_get(d, "writeRate"), "100.00"), "writeRate");
	const struct vd_value *n = vd_obj_get(vd_obj_get(o, "network"), "vnet0");
	ck_assert(vd_str_eq(vd_obj_get(n, "rxRate"), "0.1") || vd_str_eq(vd_obj_get(n, "rxRate"), "0.0"));
	ck_assert(vd_str_eq(vd_obj_get(n, "txRate"), "100.0"));
	arena_free(&a);
	buf_free(&out);
	snapshot_put(snap);
}
END_TEST

/* libvirt unreachable: the backend still reports ready after its first
 * attempt, VM verbs answer 99, and it keeps retrying. */
/* written by the sampler thread: reported_ready under s->lock, backoff_s
 * atomically */
static bool locked_ready(struct virt_state *s)
{
	pthread_mutex_lock(&s->lock);
	bool r = s->reported_ready;
	pthread_mutex_unlock(&s->lock);
	return r;
}

static unsigned read_backoff(struct virt_state *s)
{
	return __atomic_load_n(&s->backoff_s, __ATOMIC_RELAXED);
}

START_TEST(unreachable_libvirt)
{
	struct vfx f;
	vfx_start(&f, "test:///nonexistent/vdsmd-no-such-fleet.xml", false);
	struct virt_state *s = vfx_state(&f);
	for (int i = 0; i < 500 && !locked_ready(s); i++)
		vfx_sleep_ms(10);
	ck_assert(locked_ready(s));
	ck_assert_ptr_null(virt_snapshot_get(s));
	ck_assert_int_eq(vfx_err(&f, "Host.getAllVmStats", "{}"), 99);
	ck_assert_int_eq(vfx_err(&f, "Host.getVMList", "{}"), 99);
	ck_assert_int_eq(vfx_err(&f, "VM.getStats", "{\"vmID\":\"" NO_SUCH_VM "\"}"), 99);
	ck_assert_int_eq(vfx_err(&f, "VM.pause", "{\"vmID\":\"" NO_SUCH_VM "\"}"), 99);
	struct virt_counts k = { .count = 1, .active = 1 };
	virt_vm_counts(&f.d, &k);
	ck_assert_uint_eq(k.count, 0);
	ck_assert_uint_eq(k.active, 0);
	/* backoff grows: after ~1.5 s there were at least two attempts */
	vfx_sleep_ms(1500);
	ck_assert_uint_ge(read_backoff(s), 2);
	vfx_stop(&f);
}
END_TEST

/* libvirt appears after startup: the retry connects and the VM verbs work
 * without a restart. */
START_TEST(connects_on_retry)
{
	char dir[] = "/tmp/vdsmd-virt-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[PATH_MAX], uri[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/fleet.xml", dir);
	snprintf(uri, sizeof uri, "test://%s", path);
	struct vfx f;
	vfx_start(&f, uri, false);
	struct virt_state *s = vfx_state(&f);
	for (int i = 0; i < 500 && !locked_ready(s); i++)
		vfx_sleep_ms(10);
	ck_assert(locked_ready(s));
	ck_assert_int_eq(vfx_err(&f, "Host.getVMList", "{}"), 99);
	/* now "libvirt" is there */
	FILE *in = fopen(FLEET, "r"), *out = fopen(path, "w");
	ck_assert(in && out);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	fclose(out);
	struct virt_snapshot *snap = NULL;
	for (int i = 0; i < 800 && !(snap = virt_snapshot_get(s)); i++)
		vfx_sleep_ms(10);
	ck_assert_ptr_nonnull(snap);
	ck_assert_uint_eq(snap->nvms, 20);
	snapshot_put(snap);
	ck_assert_uint_eq(vfx_ok(&f, "Host.getVMList", "{}")->v.arr.n, 20);
	ck_assert_uint_eq(read_backoff(s), 0);
	vfx_stop(&f);
	unlink(path);
	rmdir(dir);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("virt");
	TCase *tc = tcase_create("fleet");
	tcase_add_checked_fixture(tc, fleet_setup, fleet_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, agrees_with_libvirt);
	tcase_add_test(tc, vdsm_fields_and_types);
	tcase_add_test(tc, engine_read_rules);
	tcase_add_test(tc, full_list_and_filters);
	tcase_add_test(tc, bad_vm_ids);
	tcase_add_test(tc, rates_from_two_samples);
	tcase_add_test(tc, encoded_cache);
	tcase_add_test(tc, repeat_polls_hit_cache);
	tcase_add_test(tc, per_domain_path_agrees);
	suite_add_tcase(s, tc);
	TCase *t2 = tcase_create("misc");
	tcase_set_timeout(t2, 30);
	tcase_add_test(t2, domxml_facts);
	tcase_add_test(t2, encode_formats);
	tcase_add_test(t2, unreachable_libvirt);
	tcase_add_test(t2, connects_on_retry);
	suite_add_tcase(s, t2);
	return s;
}

int main(void)
{
	return check_run(suite());
}
