/* tests/unit/test_virt_create.c - VM.create from the oVirt engine's domain
 * XML (engine-flows.json step 43) on libvirt's shared test:///default
 * driver: disks resolved through the storage interface (or, without one, a
 * path that exists), NIC networks mapped to bridges, the ovirt-vm metadata
 * kept in the domain, VDSM's reply and launch events, and every error. */
#include <unistd.h>
#include <sys/stat.h>

#include "virt_test.h"
#include "check_main.h"

#define VMID "a7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d"
#define POOL "5849b030-626e-47cb-ad90-3ce782d831b3"
#define SD "4b0a2c3d-2c2e-4b8a-9b1f-2a1f6b9d7c11"
#define IMG "c1a2b3c4-d5e6-4f70-8a91-b2c3d4e5f607"
#define VOL "d2b3c4d5-e6f7-4081-9a2b-c3d4e5f60718"
#define MAC "00:1a:4a:16:01:51"

static struct vfx F;
static char tmpdir[64];
static char volpath[256];     /* the file "storage" prepares */

static void setup(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/vdsmd-create-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(volpath, sizeof volpath, "%s/" VOL, tmpdir);
	FILE *f = fopen(volpath, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(ftruncate(fileno(f), 1 << 20), 0);
	fclose(f);
	vfx_start(&F, "test:///default", true);
}

static void teardown(void)
{
	vfx_stop(&F);
	unlink(volpath);
	rmdir(tmpdir);
}

/* The engine's XML (as in engine-flows.json) with the disk source src and
 * one bridged NIC on network net (NULL: no NIC). */
static char *engine_xml(const char *id, const char *src, const char *net, const char *vol)
{
	char nic[512] = "", nicmd[256] = "";
	if (net) {
		snprintf(nic, sizeof nic,
			 "<interface type=\"bridge\"><model type=\"virtio\"/><link state=\"up\"/>"
			 "<source bridge=\"%s\"/><mac address=\"" MAC "\"/>"
			 "<alias name=\"ua-0f1e\"/></interface>", net);
		snprintf(nicmd, sizeof nicmd,
			 "<ovirt-vm:device mac_address=\"" MAC "\"><ovirt-vm:network>%s"
			 "</ovirt-vm:network></ovirt-vm:device>", net);
	}
	char *x = NULL;
	int n = asprintf(&x,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?><domain type=\"kvm\" "
		"xmlns:ovirt-tune=\"http://ovirt.org/vm/tune/1.0\" "
		"xmlns:ovirt-vm=\"http://ovirt.org/vm/1.0\"><name>vm1</name><uuid>%s</uuid>"
		"<memory>1048576</memory><currentMemory>1048576</currentMemory>"
		"<vcpu current=\"1\">16</vcpu><os><type arch=\"x86_64\">hvm</type></os>"
		"<devices><disk type=\"file\" device=\"disk\" snapshot=\"no\">"
		"<target dev=\"vda\" bus=\"virtio\"/><source file=\"%s\"/>"
		"<driver name=\"qemu\" io=\"threads\" type=\"raw\" error_policy=\"stop\" cache=\"none\"/>"
		"<alias name=\"ua-" IMG "\"/><serial>" IMG "</serial></disk>%s</devices>"
		"<metadata><ovirt-tune:qos/><ovirt-vm:vm><ovirt-vm:minGuaranteedMemoryMb type=\"int\">"
		"1024</ovirt-vm:minGuaranteedMemoryMb><ovirt-vm:clusterVersion>4.8"
		"</ovirt-vm:clusterVersion><ovirt-vm:custom/>"
		"<ovirt-vm:device devtype=\"disk\" name=\"vda\"><ovirt-vm:poolID>" POOL
		"</ovirt-vm:poolID><ovirt-vm:volumeID>%s</ovirt-vm:volumeID><ovirt-vm:imageID>" IMG
		"</ovirt-vm:imageID><ovirt-vm:domainID>" SD "</ovirt-vm:domainID></ovirt-vm:device>"
		"%s<ovirt-vm:launchPaused>false</ovirt-vm:launchPaused></ovirt-vm:vm></metadata>"
		"</domain>", id, src, nic, vol, nicmd);
	ck_assert_int_gt(n, 0);
	return x;
}

/* {"vmID": id, "vmParams": {"vmId": id, "xml": <xml as a JSON string>}} */
static char *create_params(const char *id, const char *xml)
{
	struct vd_buf b = VD_BUF_INIT;
	buf_printf(&b, "{\"vmID\":\"%s\",\"vmParams\":{\"vmId\":\"%s\",\"xml\":\"", id, id);
	for (const char *p = xml; *p; p++) {
		if (*p == '"' || *p == '\\')
			buf_putc(&b, '\\');
		buf_putc(&b, *p);
	}
	buf_puts(&b, "\"}}");
	buf_putc(&b, '\0');
	return b.data;
}

/* ---- the interfaces the daemon hands virt (storage, net) ---- */

static int prepare_calls;
static int test_prepare(void *ctx, const char *pool, const char *domain, const char *image,
			const char *volume, char *path, size_t pathlen, char *why, size_t whylen)
{
	(void)ctx;
	prepare_calls++;
	if (strcmp(pool, POOL) || strcmp(domain, SD) || strcmp(image, IMG) || strcmp(volume, VOL)) {
		snprintf(why, whylen, "no such volume");
		return VD_ENOENT;
	}
	snprintf(path, pathlen, "%s", volpath);
	return 0;
}

static int test_bridge(void *ctx, const char *network, char *bridge, size_t len)
{
	(void)ctx;
	if (strcmp(network, "bridgeless") == 0)
		return VD_EINVAL;
	if (strcmp(network, "ovirtmgmt") != 0)
		return VD_ENOENT;
	snprintf(bridge, len, "br-mgmt");
	return 0;
}

static void wire_deps(void)
{
	struct virt_deps deps = { .prepare_image = test_prepare, .network_bridge = test_bridge };
	virt_set_deps(&F.d, &deps);
}

/* The live domain XML of id, from libvirt itself (another connection to
 * the same shared test driver). */
static char *live_xml(const char *id)
{
	virConnectPtr c = virConnectOpen("test:///default");
	ck_assert_ptr_nonnull(c);
	virDomainPtr d = virDomainLookupByUUIDString(c, id);
	char *x = d ? virDomainGetXMLDesc(d, 0) : NULL;
	if (d)
		virDomainFree(d);
	virConnectClose(c);
	return x;
}

struct evs {
	unsigned n;
	char status[16][32];
	int64_t t[16];
};

static void evs_deliver(void *ctx, const char *bytes, size_t len, const struct vd_codec *codec)
{
	struct evs *e = ctx;
	if (e->n >= 16 || !memmem(bytes, len, VMID, strlen(VMID)))
		return;
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err = { 0, NULL, 0 };
	ck_assert_int_eq(codec->decode(&a, bytes, len, &lim, &v, &err), 0);
	const struct vd_value *p = vd_obj_get(v, "params");
	const struct vd_value *st = vd_obj_get(vd_obj_get(p, VMID), "status");
	ck_assert_ptr_nonnull(st);
	snprintf(e->status[e->n], sizeof e->status[0], "%.*s", (int)st->v.s.len, st->v.s.ptr);
	const struct vd_value *nt = vd_obj_get(p, "notify_time");
	ck_assert_int_eq(nt->type, VD_INT);
	ck_assert_int_gt(nt->v.i, INT32_MAX);
	e->t[e->n++] = nt->v.i;
	arena_free(&a);
}

START_TEST(engine_xml_through_interfaces)
{
	wire_deps();
	struct evs e;
	memset(&e, 0, sizeof e);
	event_bus_drain(F.d.bus, evs_deliver, &e);
	e.n = 0;
	/* the engine's placeholder path, resolved by "storage" */
	char *xml = engine_xml(VMID, "/rhev/data-center/" POOL "/" SD "/images/" IMG "/" VOL,
			       "ovirtmgmt", VOL);
	char *params = create_params(VMID, xml);
	const struct vd_value *r = vfx_ok(&F, "VM.create", params);
	ck_assert_int_eq(r->type, VD_OBJECT);
	ck_assert_str_eq(vfx_str(&F, r, "vmId"), VMID);
	ck_assert_str_eq(vfx_str(&F, r, "status"), "WaitForLaunch");
	ck_assert_uint_gt(strtoull(vfx_str(&F, r, "statusTime"), NULL, 10), INT32_MAX);
	ck_assert_int_eq(prepare_calls, 1);

	/* the domain runs on the prepared volume and the network's bridge; the
	 * engine's metadata is in it */
	char *live = live_xml(VMID);
	ck_assert_ptr_nonnull(live);
	char want[512];
	snprintf(want, sizeof want, "<source file='%s'", volpath);
	ck_assert_msg(strstr(live, want), "%s", live);
	ck_assert_msg(strstr(live, "<source bridge='br-mgmt'"), "%s", live);
	ck_assert_msg(strstr(live, VOL "</ovirt-vm:volumeID>"), "%s", live);
	ck_assert_msg(strstr(live, "ovirt-vm:network>ovirtmgmt<"), "%s", live);
	/* what engxml reads back from libvirt's form of it (recovery) */
	struct virt_engxml *ex = malloc(sizeof *ex);
	char why[256];
	ck_assert_int_eq(engxml_parse(live, ex, why, sizeof why), 0);
	ck_assert(ex->has_metadata);
	ck_assert_uint_eq(ex->ndisks, 1);
	ck_assert(ex->disks[0].has_volume);
	ck_assert_str_eq(ex->disks[0].volume, VOL);
	ck_assert_str_eq(ex->disks[0].domain, SD);
	ck_assert_str_eq(ex->disks[0].pool, POOL);
	ck_assert_str_eq(ex->disks[0].path, volpath);
	ck_assert_uint_eq(ex->nnics, 1);
	ck_assert_str_eq(ex->nics[0].network, "ovirtmgmt");
	free(ex);
	free(live);

	/* Up, through VDSM's launch events in order */
	for (int i = 0; i < 300 && e.n < 3; i++) {
		event_bus_drain(F.d.bus, evs_deliver, &e);
		vfx_sleep_ms(10);
	}
	ck_assert_uint_ge(e.n, 3);
	ck_assert_str_eq(e.status[0], "WaitForLaunch");
	ck_assert_str_eq(e.status[1], "Powering up");
	ck_assert_str_eq(e.status[2], "Up");
	ck_assert_int_gt(e.t[1], e.t[0]);
	ck_assert_int_gt(e.t[2], e.t[1]);
	r = vfx_ok(&F, "VM.getStats", "{\"vmID\":\"" VMID "\"}");
	const struct vd_value *vm = &r->v.arr.items[0];
	ck_assert_str_eq(vfx_str(&F, vm, "status"), "Up");
	ck_assert_str_eq(vfx_str(&F, vm, "vmName"), "vm1");
	const struct vd_value *vda = vd_obj_get(vd_obj_get(vm, "disks"), "vda");
	ck_assert_ptr_nonnull(vda);
	ck_assert_str_eq(vfx_str(&F, vda, "imageID"), IMG);

	/* the same id again: code 4, nothing prepared */
	ck_assert_int_eq(vfx_err(&F, "VM.create", params), 4);
	ck_assert_int_eq(prepare_calls, 1);
	free(params);
	free(xml);
}
END_TEST

START_TEST(engine_xml_errors)
{
	wire_deps();
	struct { const char *vol, *net; int64_t code; } cases[] = {
		{ "e0000000-0000-4000-8000-000000000001", "ovirtmgmt", 13 },  /* unknown volume */
		{ VOL, "nosuchnet", 9 },                                       /* unknown network */
		{ VOL, "bridgeless", 9 },                                      /* not a VM network */
		{ "not-a-uuid", "ovirtmgmt", -32602 },
		{ VOL, "bad name!", -32602 },
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(cases); i++) {
		char *xml = engine_xml(VMID, "/rhev/x", cases[i].net, cases[i].vol);
		char *p = create_params(VMID, xml);
		ck_assert_int_eq(vfx_err(&F, "VM.create", p), cases[i].code);
		free(p);
		free(xml);
	}
	/* the XML's uuid must be the vmID; the XML must have one */
	char *xml = engine_xml("b7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d", volpath, NULL, VOL);
	char *p = create_params(VMID, xml);
	ck_assert_int_eq(vfx_err(&F, "VM.create", p), -32602);
	free(p);
	free(xml);
	p = create_params(VMID, "<domain type='kvm'><name>x</name></domain>");
	ck_assert_int_eq(vfx_err(&F, "VM.create", p), -32602);
	free(p);
	ck_assert_int_eq(vfx_err(&F, "VM.create", "{\"vmID\":\"" VMID "\",\"vmParams\":{\"xml\":5}}"),
			 -32602);
	/* nothing was created */
	ck_assert_int_eq(vfx_err(&F, "VM.getStats", "{\"vmID\":\"" VMID "\"}"), 1);
	ck_assert_ptr_null(live_xml(VMID));
}
END_TEST

/* Without a storage interface (before the daemon wires one): the XML's
 * path is used when it exists, code 13 when not; a network needs a bridge
 * of its name on the host. */
START_TEST(engine_xml_without_interfaces)
{
	char *xml = engine_xml(VMID, "/nonexistent/vdsmd/" VOL, NULL, VOL);
	char *p = create_params(VMID, xml);
	ck_assert_int_eq(vfx_err(&F, "VM.create", p), 13);
	free(p);
	free(xml);
	xml = engine_xml(VMID, volpath, "vdsmdnonet0", VOL);
	p = create_params(VMID, xml);
	ck_assert_int_eq(vfx_err(&F, "VM.create", p), 9);
	free(p);
	free(xml);
	xml = engine_xml(VMID, volpath, NULL, VOL);
	p = create_params(VMID, xml);
	const struct vd_value *r = vfx_ok(&F, "VM.create", p);
	ck_assert_str_eq(vfx_str(&F, r, "status"), "WaitForLaunch");
	char *live = live_xml(VMID);
	char want[512];
	snprintf(want, sizeof want, "<source file='%s'", volpath);
	ck_assert_msg(live && strstr(live, want), "%s", live ? live : "(none)");
	free(live);
	free(p);
	free(xml);
}
END_TEST

/* engxml on its own: libvirt's serialization (single quotes, the namespace
 * declared on the metadata element), an element-less attribute order. */
START_TEST(engxml_forms)
{
	const char *x =
		"<domain type='test' id='3'>\n  <name>vm1</name>\n  <uuid>" VMID "</uuid>\n"
		"  <metadata>\n    <ovirt-vm:vm xmlns:ovirt-vm=\"http://ovirt.org/vm/1.0\">\n"
		"    <ovirt-vm:device name=\"vdb\" devtype=\"disk\">\n"
		"      <ovirt-vm:domainID>" SD "</ovirt-vm:domainID>\n"
		"      <ovirt-vm:imageID>" IMG "</ovirt-vm:imageID>\n"
		"      <ovirt-vm:volumeID>" VOL "</ovirt-vm:volumeID>\n"
		"    </ovirt-vm:device>\n  </ovirt-vm:vm>\n  </metadata>\n"
		"  <devices>\n    <disk type='file' device='cdrom'>\n      <target dev='hdc' bus='ide'/>\n"
		"    </disk>\n    <disk type='block' device='disk'>\n      <source dev='/dev/x'/>\n"
		"      <target dev='vdb' bus='virtio'/>\n    </disk>\n  </devices>\n</domain>\n";
	struct virt_engxml *ex = malloc(sizeof *ex);
	char why[256];
	ck_assert_int_eq(engxml_parse(x, ex, why, sizeof why), 0);
	ck_assert_str_eq(ex->uuid, VMID);
	ck_assert_uint_eq(ex->ndisks, 2);
	ck_assert(!ex->disks[0].has_volume);
	ck_assert_str_eq(ex->disks[0].device, "cdrom");
	ck_assert(ex->disks[1].has_volume);
	ck_assert_str_eq(ex->disks[1].path, "/dev/x");
	ck_assert_str_eq(ex->disks[1].pool, "");
	/* rewrite: the resolved path and the type go in, escaped */
	snprintf(ex->disks[1].resolved, sizeof ex->disks[1].resolved, "/srv/a&b");
	struct vd_buf out = VD_BUF_INIT;
	engxml_rewrite(x, ex, "qemu", &out);
	ck_assert_msg(strstr(out.data, "<domain type='qemu' id='3'>"), "%s", out.data);
	ck_assert_msg(strstr(out.data, "<source dev='/srv/a&amp;b'/>"), "%s", out.data);
	ck_assert_uint_eq(strlen(out.data), strlen(x) - strlen("/dev/x") + strlen("/srv/a&amp;b") +
			  strlen("qemu") - strlen("test"));
	buf_free(&out);
	/* too many devices is refused, not overflowed */
	struct vd_buf big = VD_BUF_INIT;
	buf_puts(&big, "<domain><name>n</name><uuid>" VMID "</uuid><devices>");
	for (int i = 0; i < VIRT_ENG_MAX_DEV + 1; i++)
		buf_printf(&big, "<disk type='file'><target dev='vd%d'/></disk>", i);
	buf_puts(&big, "</devices></domain>");
	buf_putc(&big, '\0');
	ck_assert_int_eq(engxml_parse(big.data, ex, why, sizeof why), VD_ETOOBIG);
	buf_free(&big);
	free(ex);
}
END_TEST

/* Create the engine's VM (interfaces wired) and wait until it is Up. */
static void create_engine_vm(void)
{
	wire_deps();
	char *xml = engine_xml(VMID, "/rhev/data-center/" POOL "/" SD "/images/" IMG "/" VOL,
			       "ovirtmgmt", VOL);
	char *params = create_params(VMID, xml);
	vfx_ok(&F, "VM.create", params);
	free(params);
	free(xml);
}

static const char *hash_of(const char *id)
{
	char p[96];
	snprintf(p, sizeof p, "{\"vmID\":\"%s\"}", id);
	const struct vd_value *r = vfx_ok(&F, "VM.getStats", p);
	return vfx_str(&F, &r->v.arr.items[0], "hash");
}

/* Host.dumpxmls, VM.getInfo, VM.getExternalData, VM.setDestroyOnReboot,
 * VM.reset; the hash changes when a device is added. */
START_TEST(dumpxmls_info_and_hash)
{
	create_engine_vm();
	const struct vd_value *r = vfx_ok(&F, "Host.dumpxmls", "{\"vmList\":[\"" VMID "\"]}");
	ck_assert_int_eq(r->type, VD_OBJECT);
	ck_assert_uint_eq(r->v.obj.n, 1);
	const char *x = vfx_str(&F, r, VMID);
	ck_assert_msg(strstr(x, "<uuid>" VMID "</uuid>"), "%s", x);
	ck_assert_msg(strstr(x, "ovirt-vm:volumeID>" VOL "<"), "%s", x);
	ck_assert_msg(strstr(x, volpath), "%s", x);
	ck_assert_msg(strstr(x, "ua-" IMG), "device alias kept: %s", x);
	r = vfx_ok(&F, "Host.dumpxmls", "{\"vmList\":[]}");
	ck_assert_uint_eq(r->v.obj.n, 0);
	ck_assert_int_eq(vfx_err(&F, "Host.dumpxmls",
				 "{\"vmList\":[\"" VMID "\",\"00000000-0000-4000-8000-00000000dead\"]}"), 1);
	ck_assert_int_eq(vfx_err(&F, "Host.dumpxmls", "{\"vmList\":[\"x\"]}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "Host.dumpxmls", "{\"vmList\":[7]}"), -32602);

	r = vfx_ok(&F, "VM.getInfo", "{\"vmID\":\"" VMID "\"}");
	ck_assert_str_eq(vfx_str(&F, r, "vmId"), VMID);
	ck_assert_str_eq(vfx_str(&F, r, "vmName"), "vm1");
	ck_assert_int_eq(vd_obj_get(r, "memSize")->v.i, 1024);
	ck_assert_int_eq(vfx_err(&F, "VM.getInfo", "{\"vmID\":\"00000000-0000-4000-8000-00000000dead\"}"), 1);

	ck_assert_int_eq(vfx_err(&F, "VM.getExternalData", "{\"vmID\":\"" VMID "\",\"kind\":\"tpm\"}"), 89);
	ck_assert_int_eq(vfx_err(&F, "VM.getExternalData", "{\"vmID\":\"" VMID "\",\"kind\":\"x\"}"), 89);
	ck_assert_int_eq(vfx_err(&F, "VM.getExternalData",
				 "{\"vmID\":\"00000000-0000-4000-8000-00000000dead\",\"kind\":\"tpm\"}"), 1);

	/* VDSM's Bridge answers setBalloonTarget / setIoTune with the call's
	 * status, {code: 0, message: Done}, not true */
	r = vfx_ok(&F, "VM.setBalloonTarget", "{\"vmID\":\"" VMID "\",\"target\":524288}");
	ck_assert_int_eq(r->type, VD_OBJECT);
	ck_assert_int_eq(vd_obj_get(r, "code")->v.i, 0);
	ck_assert_str_eq(vfx_str(&F, r, "message"), "Done");

	ck_assert_int_eq(vfx_ok(&F, "VM.setDestroyOnReboot", "{\"vmID\":\"" VMID "\"}")->type, VD_BOOL);
	pthread_mutex_lock(&vfx_state(&F)->lock);
	ck_assert(track_find(vfx_state(&F), VMID)->destroy_on_reboot);
	pthread_mutex_unlock(&vfx_state(&F)->lock);
	ck_assert_int_eq(vfx_err(&F, "VM.setDestroyOnReboot",
				 "{\"vmID\":\"00000000-0000-4000-8000-00000000dead\"}"), 1);
	/* the test driver has no reset: libvirt's refusal is reported, the VM
	 * is untouched (real QEMU resets) */
	const struct vd_value *v = vfx_call(&F, "VM.reset", "{\"vmID\":\"" VMID "\"}");
	if (vd_obj_get(v, "error"))
		ck_assert_int_eq(vd_obj_get(vd_obj_get(v, "error"), "code")->v.i, 100);
	ck_assert_int_eq(vfx_err(&F, "VM.reset", "{\"vmID\":\"00000000-0000-4000-8000-00000000dead\"}"), 1);

	/* a device added behind our back: the hash changes once the XML is
	 * re-read (device event, or our own mark) */
	vfx_resample(&F);
	char h0[32];
	snprintf(h0, sizeof h0, "%s", hash_of(VMID));
	virConnectPtr c = virConnectOpen("test:///default");
	virDomainPtr d = virDomainLookupByUUIDString(c, VMID);
	char dx[512];
	snprintf(dx, sizeof dx, "<disk type='file' device='disk'><source file='%s'/>"
		 "<target dev='vdb' bus='virtio'/></disk>", volpath);
	int attached = virDomainAttachDeviceFlags(d, dx, VIR_DOMAIN_AFFECT_LIVE);
	virDomainFree(d);
	virConnectClose(c);
	if (attached < 0) {
		/* the test driver cannot hotplug: mark it ourselves, the hash of
		 * the unchanged devices stays */
		virt_mark_xml_stale(vfx_state(&F), VMID);
		vfx_resample(&F);
		ck_assert_str_eq(hash_of(VMID), h0);
	} else {
		virt_mark_xml_stale(vfx_state(&F), VMID);
		vfx_resample(&F);
		ck_assert_str_ne(hash_of(VMID), h0);
	}
}
END_TEST

/* Recovery: the backend restarts (as vdsmd does) while the VM runs; it is
 * found again with its id, metadata and stats, reported Up (no launch
 * events again), untouched, and its later changes are still events. */
START_TEST(recovery_after_restart)
{
	create_engine_vm();
	/* keep the shared test driver instance alive across the restart */
	virConnectPtr keep = virConnectOpen("test:///default");
	virDomainPtr d = virDomainLookupByUUIDString(keep, VMID);
	unsigned id0 = virDomainGetID(d);
	vfx_resample(&F);
	const char *h = hash_of(VMID);
	char hash0[32];
	snprintf(hash0, sizeof hash0, "%s", h);
	vfx_stop(&F);
	vfx_start(&F, "test:///default", true);
	struct evs e;
	memset(&e, 0, sizeof e);
	event_bus_drain(F.d.bus, evs_deliver, &e);
	ck_assert_uint_eq(e.n, 0);   /* no launch sequence for a recovered VM */
	const struct vd_value *r = vfx_ok(&F, "VM.getStats", "{\"vmID\":\"" VMID "\"}");
	const struct vd_value *vm = &r->v.arr.items[0];
	ck_assert_str_eq(vfx_str(&F, vm, "status"), "Up");
	ck_assert_str_eq(vfx_str(&F, vm, "hash"), hash0);
	ck_assert_str_eq(vfx_str(&F, vd_obj_get(vd_obj_get(vm, "disks"), "vda"), "imageID"), IMG);
	ck_assert_uint_eq(virDomainGetID(d), id0);   /* the same running domain */
	r = vfx_ok(&F, "Host.dumpxmls", "{\"vmList\":[\"" VMID "\"]}");
	struct virt_engxml *ex = malloc(sizeof *ex);
	char why[128];
	ck_assert_int_eq(engxml_parse(vfx_str(&F, r, VMID), ex, why, sizeof why), 0);
	ck_assert_str_eq(ex->disks[0].volume, VOL);
	ck_assert_str_eq(ex->nics[0].network, "ovirtmgmt");
	free(ex);
	/* events still flow */
	ck_assert_int_eq(virDomainSuspend(d), 0);
	for (int i = 0; i < 300 && e.n < 1; i++) {
		event_bus_drain(F.d.bus, evs_deliver, &e);
		vfx_sleep_ms(10);
	}
	ck_assert_uint_ge(e.n, 1);
	ck_assert_str_eq(e.status[0], "Paused");
	virDomainFree(d);
	virConnectClose(keep);
}
END_TEST

/* The device and migration verbs' checks on the test driver (real QEMU
 * runs them in tests/integration/test_virt_qemu.py and test_virt_migrate.py):
 * bad params are -32602 before libvirt is asked, an unknown VM is 1, what the
 * test driver cannot do is libvirt's refusal (VDSM's code for the verb, else
 * 100), never a fake success. */
START_TEST(device_and_migration_verb_checks)
{
	create_engine_vm();
	static const char *const nov = "00000000-0000-4000-8000-00000000dead";
	static const char *const verbs[] = {
		"VM.hotplugDisk", "VM.hotunplugDisk", "VM.hotplugNic", "VM.hotunplugNic",
	};
	char p[1024];
	for (size_t i = 0; i < VD_ARRAY_SIZE(verbs); i++) {
		snprintf(p, sizeof p, "{\"vmID\":\"%s\",\"params\":{\"xml\":\"<hotplug/>\"}}", nov);
		ck_assert_int_eq(vfx_err(&F, verbs[i], p), 1);
		snprintf(p, sizeof p, "{\"vmID\":\"" VMID "\",\"params\":{}}");
		ck_assert_int_eq(vfx_err(&F, verbs[i], p), -32602);
		snprintf(p, sizeof p, "{\"vmID\":\"" VMID "\",\"params\":{\"xml\":\"<hotplug></hotplug>\"}}");
		ck_assert_int_eq(vfx_err(&F, verbs[i], p), -32602);
	}
	/* a hotplugged disk's volume goes through the storage interface */
	snprintf(p, sizeof p, "{\"vmID\":\"" VMID "\",\"params\":{\"xml\":\"<hotplug><devices>"
		 "<disk type='file' device='disk'><source file='/x'/><target dev='vdb'/></disk>"
		 "</devices><metadata><ovirt-vm:vm xmlns:ovirt-vm='http://ovirt.org/vm/1.0'>"
		 "<ovirt-vm:device devtype='disk' name='vdb'><ovirt-vm:domainID>" SD
		 "</ovirt-vm:domainID><ovirt-vm:imageID>" IMG "</ovirt-vm:imageID>"
		 "<ovirt-vm:volumeID>e0000000-0000-4000-8000-000000000001</ovirt-vm:volumeID>"
		 "</ovirt-vm:device></ovirt-vm:vm></metadata></hotplug>\"}}");
	int calls = prepare_calls;
	ck_assert_int_eq(vfx_err(&F, "VM.hotplugDisk", p), 13);
	ck_assert_int_eq(prepare_calls, calls + 1);
	/* a NIC on an unknown network */
	snprintf(p, sizeof p, "{\"vmID\":\"" VMID "\",\"params\":{\"xml\":\"<hotplug><devices>"
		 "<interface type='bridge'><source bridge='nosuchnet'/><mac address='" MAC "'/>"
		 "</interface></devices></hotplug>\"}}");
	ck_assert_int_eq(vfx_err(&F, "VM.hotplugNic", p), 49);
	/* one net/ runs without a bridge */
	snprintf(p, sizeof p, "{\"vmID\":\"" VMID "\",\"params\":{\"xml\":\"<hotplug><devices>"
		 "<interface type='bridge'><source bridge='bridgeless'/><mac address='" MAC "'/>"
		 "</interface></devices></hotplug>\"}}");
	ck_assert_int_eq(vfx_err(&F, "VM.hotplugNic", p), 49);

	ck_assert_int_eq(vfx_err(&F, "VM.setTicket", "{\"vmID\":\"" VMID "\",\"password\":\"a'b\","
				 "\"ttl\":10}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.setTicket", "{\"vmID\":\"" VMID "\",\"password\":\"ab\","
				 "\"ttl\":-1}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.setBalloonTarget", "{\"vmID\":\"" VMID "\",\"target\":0}"),
			 -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.setNumberOfCpus", "{\"vmID\":\"" VMID "\",\"numberOfCpus\":0}"),
			 -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.setIoTune", "{\"vmID\":\"" VMID "\",\"tunables\":[{}]}"),
			 -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.setIoTune", "{\"vmID\":\"" VMID "\",\"tunables\":[{\"name\":"
				 "\"vda\",\"ioTune\":{\"total_bytes_sec\":-5}}]}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.changeCD", "{\"vmID\":\"" VMID "\",\"driveSpec\":{\"path\":"
				 "\"relative.iso\"}}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.updateDevice", "{\"vmID\":\"" VMID "\",\"params\":{}}"),
			 -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.updateDevice", "{\"vmID\":\"" VMID "\",\"params\":{"
				 "\"deviceType\":\"interface\",\"alias\":\"ua-none\"}}"), 56);
	/* the engine's form: the NIC's hotplug XML (VDSM vm.py updateDevice);
	 * a NIC this VM has not is VDSM's UpdateDeviceFailed 56 */
	ck_assert_int_eq(vfx_err(&F, "VM.updateDevice", "{\"vmID\":\"" VMID "\",\"params\":{"
				 "\"deviceType\":\"interface\",\"xml\":\"<hotplug><devices/></hotplug>\"}}"),
			 -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.updateDevice", "{\"vmID\":\"" VMID "\",\"params\":{"
				 "\"deviceType\":\"interface\",\"xml\":\"<hotplug><devices><interface "
				 "type='user'><mac address='00:1a:4a:16:01:99'/><alias name='ua-none'/>"
				 "</interface></devices></hotplug>\"}}"), 56);
	ck_assert_int_eq(vfx_err(&F, "VM.updateDevice", "{\"vmID\":\"" VMID "\",\"params\":{"
				 "\"deviceType\":\"interface\",\"xml\":\"<hotplug><devices><interface "
				 "type='user'><mac address='" MAC "'/><link state='sideways'/>"
				 "</interface></devices></hotplug>\"}}"), -32602);
	/* this VM has no console, no floppy drive: VDSM's 18, 56, 41 */
	ck_assert_int_eq(vfx_err(&F, "VM.setTicket", "{\"vmID\":\"" VMID "\",\"password\":\"ab\","
				 "\"ttl\":10}"), 18);
	ck_assert_int_eq(vfx_err(&F, "VM.updateDevice", "{\"vmID\":\"" VMID "\",\"params\":{"
				 "\"deviceType\":\"graphics\",\"graphicsType\":\"spice\","
				 "\"password\":\"ab\",\"ttl\":10}}"), 56);
	ck_assert_int_eq(vfx_err(&F, "VM.updateDevice", "{\"vmID\":\"" VMID "\",\"params\":{"
				 "\"deviceType\":\"graphics\",\"graphicsType\":\"rdp\","
				 "\"password\":\"ab\",\"ttl\":10}}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.changeFloppy", "{\"vmID\":\"" VMID "\",\"driveSpec\":"
				 "\"/tmp/fd.img\"}"), 41);
	ck_assert_int_eq(vfx_err(&F, "VM.changeFloppy", "{\"vmID\":\"" VMID "\",\"driveSpec\":"
				 "{\"path\":\"fd.img\"}}"), -32602);
	/* memory: params checked before libvirt; an unknown VM is code 1 */
	ck_assert_int_eq(vfx_err(&F, "VM.hotplugMemory", "{\"vmID\":\"" VMID "\",\"params\":{}}"),
			 -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.hotplugMemory", "{\"vmID\":\"" VMID "\",\"params\":"
				 "{\"xml\":\"<devices><disk/></devices>\"}}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.hotplugMemory", "{\"vmID\":\"" VMID "\",\"params\":"
				 "{\"memory\":{\"size\":0,\"node\":0}}}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.hotunplugMemory", "{\"vmID\":\"" VMID "\",\"params\":"
				 "{\"memory\":{\"size\":128,\"node\":0,\"alias\":\"a'b\"}}}"), -32602);
	ck_assert_int_eq(vfx_err(&F, "VM.hotplugMemory", "{\"vmID\":\"00000000-0000-4000-8000-"
				 "00000000dead\",\"params\":{\"memory\":{\"size\":128,\"node\":0}}}"), 1);

	/* migration: no destination; an unreachable one (a closed loopback
	 * port) is accepted at once (VDSM) and fails in getMigrationStatus
	 * (migrateErr 12); then not migrating */
	ck_assert_int_eq(vfx_err(&F, "VM.migrate", "{\"vmID\":\"" VMID "\",\"params\":{}}"), -32602);
	vfx_ok(&F, "VM.migrate", "{\"vmID\":\"" VMID "\",\"params\":{\"dst\":\"127.0.0.1:1\"}}");
	const struct vd_value *r = NULL;
	int64_t mcode = 0;
	for (int i = 0; i < 400 && mcode == 0; i++) {
		r = vfx_ok(&F, "VM.getMigrationStatus", "{\"vmID\":\"" VMID "\"}");
		mcode = vd_obj_get(vd_obj_get(r, "status"), "code")->v.i;
		if (mcode == 0)
			usleep(25000);
	}
	ck_assert_int_eq(mcode, 12);
	ck_assert_int_eq(vd_obj_get(r, "progress")->v.i, 0);
	/* VDSM's migCancelErr 47 (vm.py migrateCancel) */
	ck_assert_int_eq(vfx_err(&F, "VM.migrateCancel", "{\"vmID\":\"" VMID "\"}"), 47);
	ck_assert_int_eq(vfx_err(&F, "VM.getMigrationStatus", "{\"vmID\":\"00000000-0000-4000-8000-00000000dead\"}"), 1);
	/* the VM is Up again after all of it (getStats reads the sampled
	 * snapshot, which the failed migration's kick refreshes: poll) */
	const char *st = "";
	for (int i = 0; i < 400; i++) {
		r = vfx_ok(&F, "VM.getStats", "{\"vmID\":\"" VMID "\"}");
		st = vfx_str(&F, &r->v.arr.items[0], "status");
		if (strcmp(st, "Up") == 0)
			break;
		usleep(25000);
	}
	ck_assert_str_eq(st, "Up");

	/* migrationCreate: a destination expects the VM, then forgets it */
	const char *mc = "{\"params\":{\"vmId\":\"b7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d\"}}";
	r = vfx_ok(&F, "VM.migrationCreate", mc);
	ck_assert_str_eq(vfx_str(&F, vd_obj_get(r, "params"), "status"), "Migration Destination");
	ck_assert_int_eq(vfx_err(&F, "VM.migrationCreate", mc), 4);
	r = vfx_ok(&F, "Host.getVMList", "{}");
	const struct vd_value *mv = vfx_find_vm(r, "b7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d");
	ck_assert_ptr_nonnull(mv);
	ck_assert_str_eq(vfx_str(&F, mv, "status"), "Migration Destination");
	/* Host.getStats counts it as an incoming migration (VDSM's _countVms) */
	struct virt_counts k;
	virt_vm_counts(&F.d, &k);
	ck_assert_uint_eq(k.incoming, 1);
	ck_assert_uint_eq(k.outgoing, 0);
	ck_assert_uint_eq(k.migrating, 1);
	vfx_ok(&F, "VM.destroy", "{\"vmID\":\"b7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d\"}");
	ck_assert_int_eq(vfx_err(&F, "VM.migrationCreate", "{\"params\":{\"vmId\":\"x\"}}"), -32602);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virt_create");
	TCase *tc = tcase_create("create");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, engine_xml_through_interfaces);
	tcase_add_test(tc, engine_xml_errors);
	tcase_add_test(tc, engine_xml_without_interfaces);
	tcase_add_test(tc, engxml_forms);
	tcase_add_test(tc, dumpxmls_info_and_hash);
	tcase_add_test(tc, recovery_after_restart);
	tcase_add_test(tc, device_and_migration_verb_checks);
	suite_add_tcase(s, tc);
	return check_run(s);
}
