/* tests/unit/test_host_readers.c - the host readers of getCapabilities,
 * getStats and getHardwareInfo on two fixture trees (tests/fixtures/host/):
 * "full" has FC HBAs, KSM, huge pages, two NUMA nodes, DMI, dpkg's
 * database, libvirt's CPU map and a stand-in qemu-system binary; "bare" has
 * none of them.  Plus the text parsers on crafted input, the MOM policy
 * store, and the capabilities and statistics written from the full tree. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "vdsmd/host/host_int.h"
#include "check_main.h"
#include "host_test.h"

#define FULL "tests/fixtures/host/full"
#define BARE "tests/fixtures/host/bare"
#define S(lit) (lit), (sizeof(lit) - 1)

static const struct vd_value *decode(struct vd_arena *a, const struct vd_buf *b)
{
	return decode_with(codec_find("yajl"), a, b);
}

static bool str_eq(const struct vd_value *v, const char *s)
{
	return v && v->type == VD_STRING && v->v.s.len == strlen(s) &&
	       memcmp(v->v.s.ptr, s, v->v.s.len) == 0;
}

static bool array_has(const struct vd_value *a, const char *s)
{
	for (size_t i = 0; i < a->v.arr.n; i++)
		if (str_eq(&a->v.arr.items[i], s))
			return true;
	return false;
}

/* ---- file readers on both trees ------------------------------------------ */

START_TEST(full_tree_readers)
{
	struct host_strv rng = { 0 };
	host_rng_sources(FULL, &rng);
	ck_assert_uint_eq(rng.n, 2);
	ck_assert_str_eq(rng.v[0], "random");
	ck_assert_str_eq(rng.v[1], "hwrng");
	host_strv_free(&rng);

	struct host_hba h;
	host_hba_read(FULL, &h);
	ck_assert_str_eq(h.iscsi_name, "iqn.1994-05.com.example:fixture01");
	/* host7 has no port_name: skipped; host3 before host10 (numeric) */
	ck_assert_uint_eq(h.nfc, 2);
	ck_assert_str_eq(h.fc[0].host, "host3");
	ck_assert_str_eq(h.fc[0].wwpn, "21000024ff3a2b1c");
	ck_assert_str_eq(h.fc[0].wwnn, "20000024ff3a2b1c");
	ck_assert_str_eq(h.fc[0].model, "QLE2562");
	ck_assert_str_eq(h.fc[0].model_desc, "QLogic 8Gb FC Dual-port HBA");
	ck_assert_str_eq(h.fc[1].host, "host10");
	ck_assert_str_eq(h.fc[1].model, "Unknown");

	ck_assert_int_eq(host_kdump_status(FULL), 1);
	ck_assert_int_eq(host_selinux_mode(FULL), 1);
	ck_assert(host_fips_enabled(FULL));
	ck_assert(host_nested_virt(FULL));
	/* dev/kvm is a regular file there: existing is not enough */
	ck_assert(!host_kvm_usable(FULL));

	struct host_dmi d;
	host_dmi_read(FULL, &d);
	ck_assert_str_eq(d.manufacturer, "Fixture Systems Inc.");
	ck_assert_str_eq(d.product, "FX-1000");
	ck_assert_str_eq(d.version, "Not Specified");
	ck_assert_str_eq(d.serial, "SN-0042");
	ck_assert_str_eq(d.uuid, "4C4C4544-0042-4A10-8056-B7C04F4A4E31");
	ck_assert_str_eq(d.family, "Fixture Family");

	struct host_ksm k;
	host_ksm_read(FULL, &k);
	ck_assert(k.present);
	ck_assert(k.run);
	ck_assert(!k.merge_across_nodes);
	ck_assert_uint_eq(k.pages_to_scan, 100);
	ck_assert_uint_eq(k.pages_sharing, 2560);
	ck_assert_uint_eq(k.pages_shared, 10);
	ck_assert_int_eq(host_ksmd_pid(FULL, 0), 42);
	ck_assert_int_eq(host_ksmd_pid(FULL, 1), 42);    /* stale cache: rescan */

	struct host_huge hp[HOST_HUGE_SIZES];
	size_t n = host_huge_read(FULL, "/sys/kernel/mm/hugepages", hp, HOST_HUGE_SIZES);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(hp[0].size_kb, 2048);
	ck_assert_uint_eq(hp[0].nr, 64);
	ck_assert_uint_eq(hp[0].free, 60);
	ck_assert_uint_eq(hp[0].resv, 2);
	ck_assert_uint_eq(hp[1].size_kb, 1048576);
	ck_assert_uint_eq(hp[1].nr, 2);
	n = host_huge_read(FULL, "/sys/devices/system/node/node1/hugepages", hp, HOST_HUGE_SIZES);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(hp[0].free, 29);

	for (size_t i = 0; i < HOST_DISK_PATHS; i++)
		ck_assert_int_ge(host_disk_free_mib(FULL, host_disk_paths[i]), 0);
}
END_TEST

START_TEST(bare_tree_readers)
{
	struct host_strv rng = { 0 };
	host_rng_sources(BARE, &rng);
	ck_assert_uint_eq(rng.n, 0);

	struct host_hba h;
	host_hba_read(BARE, &h);
	ck_assert_str_eq(h.iscsi_name, "");
	ck_assert_uint_eq(h.nfc, 0);
	ck_assert_int_eq(host_kdump_status(BARE), -1);
	ck_assert_int_eq(host_selinux_mode(BARE), -1);
	ck_assert(!host_fips_enabled(BARE));
	ck_assert(!host_nested_virt(BARE));
	ck_assert(!host_kvm_usable(BARE));

	struct host_dmi d;
	host_dmi_read(BARE, &d);
	ck_assert_str_eq(d.manufacturer, "");
	ck_assert_str_eq(d.uuid, "");

	struct host_ksm k;
	host_ksm_read(BARE, &k);
	ck_assert(!k.present);
	ck_assert_int_eq(host_ksmd_pid(BARE, 0), 0);

	struct host_huge hp[HOST_HUGE_SIZES];
	ck_assert_uint_eq(host_huge_read(BARE, "/sys/kernel/mm/hugepages", hp, HOST_HUGE_SIZES), 0);
	ck_assert_int_eq(host_disk_free_mib(BARE, "/var/log"), -1);

	struct host_pkg p[HOST_PKGS_MAX];
	ck_assert_uint_eq(host_pkgs_read(BARE, p, HOST_PKGS_MAX), 0);
	struct vd_buf b = VD_BUF_INIT;
	ck_assert_int_eq(host_run_qemu_help(BARE, "x86_64", "-machine", &b), VD_ENOENT);
	buf_free(&b);
	struct host_cpu_map map;
	host_cpu_map_read(BARE, "x86", &map);
	ck_assert_uint_eq(map.n, 0);
	host_cpu_map_free(&map);
}
END_TEST

/* ---- dpkg's database --------------------------------------------------------- */

static const struct host_pkg *find_pkg(const struct host_pkg *p, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(p[i].name, name) == 0)
			return &p[i];
	return NULL;
}

START_TEST(packages)
{
	struct host_pkg p[HOST_PKGS_MAX];
	size_t n = host_pkgs_read(FULL, p, HOST_PKGS_MAX);
	ck_assert_uint_eq(n, 4);        /* libvirt, qemu-kvm, qemu-img, nmstate */
	const struct host_pkg *lv = find_pkg(p, n, "libvirt");
	ck_assert_ptr_nonnull(lv);
	/* libvirt-daemon outranks libvirt0, whichever comes first */
	ck_assert_str_eq(lv->version, "10.10.0");
	ck_assert_str_eq(lv->release, "3+deb13u1");
	const struct host_pkg *q = find_pkg(p, n, "qemu-kvm");
	ck_assert_ptr_nonnull(q);
	ck_assert_str_eq(q->version, "9.1.2+ds");   /* epoch dropped */
	ck_assert_str_eq(q->release, "1");
	const struct host_pkg *nm = find_pkg(p, n, "nmstate");
	ck_assert_ptr_nonnull(nm);
	ck_assert_str_eq(nm->version, "2.2.0");     /* native package */
	ck_assert_str_eq(nm->release, "");
	ck_assert_ptr_null(find_pkg(p, n, "lvm2")); /* config-files only */

	/* crafted: no trailing newline, CRLF blank line, a field without value */
	n = host_pkgs_parse(S("Package: librbd1\nStatus: install ok installed\nVersion: 16.2.11+ds-2\r\n"
			      "\r\nPackage: mom\nStatus: install ok installed\nVersion:"), p, HOST_PKGS_MAX);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(p[0].name, "librbd1");
	ck_assert_str_eq(p[0].version, "16.2.11+ds");
	ck_assert_str_eq(p[0].release, "2");
	ck_assert_str_eq(p[1].version, "");
	/* the engine reads packages2.openvswitch (setOvsVersion) */
	n = host_pkgs_parse(S("Package: openvswitch-switch\nStatus: install ok installed\n"
			      "Version: 3.1.0-2+deb12u1\n"), p, HOST_PKGS_MAX);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(p[0].name, "openvswitch");
	ck_assert_str_eq(p[0].version, "3.1.0");
	ck_assert_str_eq(p[0].release, "2+deb12u1");
	ck_assert_uint_eq(host_pkgs_parse(S(""), p, HOST_PKGS_MAX), 0);
	ck_assert_uint_eq(host_pkgs_parse(S("\n\n\nPackage:\n"), p, HOST_PKGS_MAX), 0);
}
END_TEST

/* ---- QEMU and libvirt's CPU map --------------------------------------------- */

START_TEST(qemu_lists)
{
	struct host_strv m = { 0 }, c = { 0 };
	host_parse_qemu_machines(S("Supported machines are:\n"
				   "pc    Standard PC (alias of pc-i440fx-7.2)\n"
				   "pc-i440fx-7.2  Standard PC (default)\n"
				   "none  empty machine\n"
				   "bad/name  x\n"
				   "   indented\n"
				   "q35   Q35 (alias of pc-q35-7.2"), &m);
	ck_assert_uint_eq(m.n, 3);   /* unterminated alias target ignored */
	ck_assert_str_eq(m.v[0], "pc");
	ck_assert_str_eq(m.v[1], "pc-i440fx-7.2");
	ck_assert_str_eq(m.v[2], "q35");
	host_parse_qemu_cpus(S("Available CPUs:\nx86 Zeta  desc\nx86 host  h\nx86 Zeta  again\n"
			       "Recognized CPUID flags:\n  fpu\nx86 After flags\n"), &c);
	ck_assert_uint_eq(c.n, 1);
	ck_assert_str_eq(c.v[0], "Zeta");
	host_strv_free(&m);
	host_strv_free(&c);

	struct vd_buf b = VD_BUF_INIT;
	ck_assert_int_eq(host_run_qemu_help(FULL, "x86_64", "-machine", &b), 0);
	host_parse_qemu_machines(b.data, b.len, &m);
	ck_assert_uint_eq(m.n, 6);
	ck_assert(host_strv_has(&m, "pc-i440fx-9.1"));
	ck_assert(host_strv_has(&m, "pc-q35-9.1"));
	ck_assert(!host_strv_has(&m, "none"));
	/* the stand-in exits 1 on other arguments: an error, not a list */
	ck_assert_int_eq(host_run_qemu_help(FULL, "x86_64", "-device", &b), VD_EIO);
	ck_assert_int_eq(host_run_qemu_help(FULL, "s390x", "-machine", &b), VD_ENOENT);
	buf_free(&b);
	host_strv_free(&m);
}
END_TEST

START_TEST(cpu_map_models)
{
	struct host_cpu_map map;
	host_cpu_map_read(FULL, "x86", &map);
	ck_assert_uint_eq(map.n, 5);   /* the ppc64 file is not read */
	struct host_strv nf = { 0 };
	host_norm_flags("fpu vmx sse4_1 pclmulqdq tsc_deadline_timer lahf_lm", &nf);
	const char *usable[] = { "Alpha", "Gamma", "Epsilon" };
	const char *not_usable[] = { "Beta", "Delta" };
	for (size_t i = 0; i < map.n; i++) {
		bool u = host_cpu_model_usable(&map.m[i], &nf);
		bool want = false;
		for (size_t j = 0; j < VD_ARRAY_SIZE(usable); j++)
			want |= strcmp(map.m[i].name, usable[j]) == 0;
		for (size_t j = 0; j < VD_ARRAY_SIZE(not_usable); j++)
			ck_assert(!(strcmp(map.m[i].name, not_usable[j]) == 0 && u));
		if (u != want)
			ck_abort_msg("model %s usable=%d", map.m[i].name, u);
		if (strcmp(map.m[i].name, "Gamma") == 0) {
			/* Alpha's features inherited, the removed one dropped */
			ck_assert(host_strv_has(&map.m[i].features, "pclmuldq"));
			ck_assert(!host_strv_has(&map.m[i].features, "monitor"));
			ck_assert_str_eq(map.m[i].vendor, "Intel");
		}
	}
	/* without a host flag the model it needs is not usable */
	struct host_strv less = { 0 };
	host_norm_flags("fpu sse4_1", &less);
	for (size_t i = 0; i < map.n; i++)
		if (strcmp(map.m[i].name, "Alpha") == 0)
			ck_assert(!host_cpu_model_usable(&map.m[i], &less));
	host_strv_free(&less);
	host_strv_free(&nf);
	host_cpu_map_free(&map);

	/* a base cycle terminates and leaves the models unusable */
	host_cpu_map_parse(S("<model name='A'><model name='B'/><feature name='fpu'/></model>"
			     "<model name='B'><model name='A'/></model><feature name='x'/>"), &map);
	host_cpu_map_expand(&map);
	ck_assert_uint_eq(map.n, 2);
	struct host_strv f = { 0 };
	host_norm_flags("fpu", &f);
	ck_assert(!host_cpu_model_usable(&map.m[0], &f));
	host_strv_free(&f);
	host_cpu_map_free(&map);
}
END_TEST

START_TEST(libvirt_xml)
{
	struct host_strv m = { 0 }, models = { 0 }, feats = { 0 };
	host_parse_libvirt_machines(S("<capabilities><guest><arch name='i686'>"
				      "<machine>isapc</machine></arch></guest>"
				      "<guest><arch name='x86_64'><machine maxCpus='255'>pc-1</machine>"
				      "<domain type='qemu'/><domain type='kvm'>"
				      "<machine canonical='pc-q35-8.0' maxCpus='288'>q35</machine>"
				      "<machine>pc-i440fx-8.0</machine></domain></arch></guest>"
				      "</capabilities>"), "x86_64", &m);
	ck_assert_uint_eq(m.n, 3);
	ck_assert(host_strv_has(&m, "q35"));
	ck_assert(host_strv_has(&m, "pc-q35-8.0"));
	ck_assert(!host_strv_has(&m, "pc-1"));
	ck_assert(!host_strv_has(&m, "isapc"));
	host_strv_free(&m);
	/* no kvm domain: the arch's own list */
	host_parse_libvirt_machines(S("<guest><arch name='x86_64'><machine>pc-1</machine>"
				      "<domain type='qemu'/></arch></guest>"), "x86_64", &m);
	ck_assert_uint_eq(m.n, 1);
	host_strv_free(&m);

	host_parse_domcaps(S("<domainCapabilities><cpu>"
			     "<mode name='host-model' supported='yes'><model>EPYC</model>"
			     "<feature policy='require' name='x2apic'/>"
			     "<feature policy='disable' name='svm'/></mode>"
			     "<mode name='custom' supported='yes'>"
			     "<model usable='yes' vendor='AMD'>EPYC</model>"
			     "<model usable='no' vendor='Intel'>Haswell</model>"
			     "<model usable='yes'>qemu64</model></mode></cpu>"
			     "</domainCapabilities>"), &models, &feats);
	ck_assert_uint_eq(models.n, 2);
	ck_assert_str_eq(models.v[0], "model_EPYC");
	ck_assert_str_eq(models.v[1], "model_qemu64");
	ck_assert_uint_eq(feats.n, 1);
	ck_assert_str_eq(feats.v[0], "x2apic");
	host_strv_free(&models);
	host_strv_free(&feats);
}
END_TEST

START_TEST(hostdev_xml)
{
	static const char pci[] =
		"<device><name>pci_0000_00_1f_2</name><path>/sys/x</path>"
		"<parent>computer</parent><driver><name>ahci</name></driver>"
		"<capability type='pci'><class>0x010601</class><domain>0</domain><bus>0</bus>"
		"<slot>31</slot><function>2</function>"
		"<product id='0x2922'>82801IR/IO/IH SATA Controller</product>"
		"<vendor id='0x8086'>Intel Corporation</vendor>"
		"<iommuGroup number='7'><address domain='0x0000'/></iommuGroup>"
		"<numa node='1'/></capability></device>";
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	codec_find("yajl")->writer_init(&w, &b);
	vw_begin_object(&w);
	host_hostdev_write("pci_0000_00_1f_2", S(pci), &w);
	host_hostdev_write("computer", S("<device><name>computer</name>"
					 "<capability type='system'><product>x</product></capability></device>"), &w);
	vw_end_object(&w);
	ck_assert_int_eq(w.error, 0);
	struct vd_arena a;
	arena_init(&a, 4096);
	const struct vd_value *v = decode(&a, &b);
	const struct vd_value *p = get(get(v, "pci_0000_00_1f_2", VD_OBJECT), "params", VD_OBJECT);
	ck_assert(str_eq(get(p, "capability", VD_STRING), "pci"));
	ck_assert(str_eq(get(p, "parent", VD_STRING), "computer"));
	ck_assert(str_eq(get(p, "is_assignable", VD_STRING), "true"));
	ck_assert(str_eq(get(p, "driver", VD_STRING), "ahci"));
	ck_assert(str_eq(get(p, "vendor_id", VD_STRING), "0x8086"));
	ck_assert(str_eq(get(p, "vendor", VD_STRING), "Intel Corporation"));
	ck_assert(str_eq(get(p, "product_id", VD_STRING), "0x2922"));
	ck_assert(str_eq(get(p, "iommu_group", VD_STRING), "7"));
	ck_assert(str_eq(get(p, "numa_node", VD_STRING), "1"));
	const struct vd_value *ad = get(p, "address", VD_OBJECT);
	ck_assert(str_eq(get(ad, "slot", VD_STRING), "31"));
	ck_assert(str_eq(get(ad, "function", VD_STRING), "2"));
	const struct vd_value *c = get(get(v, "computer", VD_OBJECT), "params", VD_OBJECT);
	ck_assert(str_eq(get(c, "capability", VD_STRING), "system"));
	ck_assert_ptr_null(vd_obj_get(c, "parent"));
	arena_free(&a);
	buf_free(&b);

	/* the libvirt test driver's node devices */
	struct host_strv caps = { 0 };
	char why[256];
	b = (struct vd_buf)VD_BUF_INIT;
	codec_find("yajl")->writer_init(&w, &b);
	ck_assert_int_eq(host_hostdev_list("test:///default", &caps, &w, why, sizeof(why)), 0);
	arena_init(&a, 4096);
	v = decode(&a, &b);
	get(get(v, "computer", VD_OBJECT), "params", VD_OBJECT);
	p = get(get(v, "scsi_host1", VD_OBJECT), "params", VD_OBJECT);
	ck_assert(str_eq(get(p, "capability", VD_STRING), "scsi_host"));
	ck_assert(str_eq(get(p, "parent", VD_STRING), "computer"));
	arena_free(&a);
	buf_free(&b);
	/* a filter keeps only the named capabilities */
	host_strv_add(&caps, "system", 6);
	b = (struct vd_buf)VD_BUF_INIT;
	codec_find("yajl")->writer_init(&w, &b);
	ck_assert_int_eq(host_hostdev_list("test:///default", &caps, &w, why, sizeof(why)), 0);
	arena_init(&a, 4096);
	v = decode(&a, &b);
	ck_assert_uint_eq(v->v.obj.n, 1);
	arena_free(&a);
	buf_free(&b);
	host_strv_free(&caps);
}
END_TEST

/* ---- the MOM policy store ------------------------------------------------------ */

START_TEST(mom_policy)
{
	struct host_opts o = { .root = BARE, .first_ms = 1 };
	struct host_state *h = host_state_new(NULL, &o);
	struct vd_arena a;
	arena_init(&a, 4096);
	struct vd_buf in = VD_BUF_INIT;
	buf_puts(&in, "{\"balloonEnabled\": false, \"ksmEnabled\": true, \"x\": 3, \"s\": \"v\"}");
	const struct vd_value *kv = decode(&a, &in);
	char why[160];
	ck_assert_int_eq(host_mom_set(h, kv, why, sizeof(why)), 0);
	buf_reset(&in);
	buf_puts(&in, "{\"ksmEnabled\": false, \"nested\": {\"a\": 1}}");
	ck_assert_int_eq(host_mom_set(h, decode(&a, &in), why, sizeof(why)), VD_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "nested"));
	buf_reset(&in);
	buf_puts(&in, "[1]");
	ck_assert_int_eq(host_mom_set(h, decode(&a, &in), why, sizeof(why)), VD_EINVAL);
	buf_reset(&in);
	buf_puts(&in, "{\"ksmMergeAcrossNodes\": true, \"x\": 4}");
	ck_assert_int_eq(host_mom_set(h, decode(&a, &in), why, sizeof(why)), 0);

	struct vd_buf out = VD_BUF_INIT;
	struct vd_writer w;
	codec_find("yajl")->writer_init(&w, &out);
	vw_begin_object(&w);
	host_mom_write(h, &w);
	vw_end_object(&w);
	const struct vd_value *v = get(decode(&a, &out), "momPolicy", VD_OBJECT);
	ck_assert_uint_eq(v->v.obj.n, 5);
	ck_assert(!get(v, "balloonEnabled", VD_BOOL)->v.b);
	ck_assert(get(v, "ksmEnabled", VD_BOOL)->v.b);   /* the bad call changed nothing */
	ck_assert(get(v, "ksmMergeAcrossNodes", VD_BOOL)->v.b);
	ck_assert_int_eq(get(v, "x", VD_INT)->v.i, 4);
	ck_assert(str_eq(get(v, "s", VD_STRING), "v"));
	buf_free(&out);
	buf_free(&in);
	arena_free(&a);
	host_state_free(h);
}
END_TEST

/* ---- capabilities and statistics from the trees ------------------------------- */

static const struct vd_value *caps_of(const char *root, struct vd_arena *a, struct vd_buf *b)
{
	struct host_topo t;
	host_topo_read(root, &t);
	struct host_caps *c = host_caps_new(root, &t, NULL);
	struct vd_writer w;
	codec_find("yajl")->writer_init(&w, b);
	host_caps_encode(c, &w, NULL);
	ck_assert_int_eq(w.error, 0);
	host_caps_free(c);
	return decode(a, b);
}

static bool x86_64_host(void)
{
	struct utsname u;
	return uname(&u) == 0 && strcmp(u.machine, "x86_64") == 0;
}

START_TEST(caps_full_tree)
{
	struct vd_arena a;
	arena_init(&a, 1 << 16);
	struct vd_buf b = VD_BUF_INIT;
	const struct vd_value *v = caps_of(FULL, &a, &b);

	const struct vd_value *hba = get(v, "HBAInventory", VD_OBJECT);
	const struct vd_value *is = get(hba, "iSCSI", VD_ARRAY);
	ck_assert_uint_eq(is->v.arr.n, 1);
	ck_assert(str_eq(get(&is->v.arr.items[0], "InitiatorName", VD_STRING),
			 "iqn.1994-05.com.example:fixture01"));
	const struct vd_value *fc = get(hba, "FC", VD_ARRAY);
	ck_assert_uint_eq(fc->v.arr.n, 2);
	ck_assert(str_eq(get(&fc->v.arr.items[0], "wwpn", VD_STRING), "21000024ff3a2b1c"));
	ck_assert(str_eq(get(v, "ISCSIInitiatorName", VD_STRING), "iqn.1994-05.com.example:fixture01"));
	const struct vd_value *rng = get(v, "rngSources", VD_ARRAY);
	ck_assert(array_has(rng, "random") && array_has(rng, "hwrng"));
	ck_assert(str_eq(get(v, "kvmEnabled", VD_STRING), "false"));
	ck_assert_int_eq(get(v, "kdumpStatus", VD_INT)->v.i, 1);
	ck_assert(str_eq(get(get(v, "selinux", VD_OBJECT), "mode", VD_STRING), "1"));
	ck_assert(get(v, "fipsEnabled", VD_BOOL)->v.b);
	ck_assert(str_eq(get(v, "hostdevPassthrough", VD_STRING), "true"));
	ck_assert(get(v, "vncEncrypted", VD_BOOL)->v.b);
	ck_assert(str_eq(get(v, "bootTime", VD_STRING), "1700000000"));

	/* libvirt 10.10 and QEMU 9.1 in the tree's dpkg database: up to 4.8 */
	const struct vd_value *cl = get(v, "clusterLevels", VD_ARRAY);
	ck_assert_uint_eq(cl->v.arr.n, 7);
	ck_assert(array_has(cl, "4.7") && array_has(cl, "4.8"));
	const struct vd_value *p2 = get(v, "packages2", VD_OBJECT);
	const struct vd_value *vd = get(p2, "vdsm", VD_OBJECT);
	ck_assert(str_eq(get(vd, "version", VD_STRING), HOST_VDSM_API_VERSION));
	ck_assert(str_eq(get(vd, "release", VD_STRING), HOST_VDSM_RELEASE));
	ck_assert(str_eq(get(get(p2, "qemu-kvm", VD_OBJECT), "version", VD_STRING), "9.1.2+ds"));
	ck_assert(str_eq(get(get(p2, "libvirt", VD_OBJECT), "release", VD_STRING), "3+deb13u1"));
	get(get(p2, "kernel", VD_OBJECT), "version", VD_STRING);

	/* NUMA: two nodes with their huge pages */
	const struct vd_value *nn = get(v, "numaNodes", VD_OBJECT);
	ck_assert_uint_eq(nn->v.obj.n, 2);
	const struct vd_value *n1 = get(nn, "1", VD_OBJECT);
	ck_assert(str_eq(get(n1, "totalMemory", VD_STRING), "4096"));
	ck_assert(str_eq(get(get(get(n1, "hugepages", VD_OBJECT), "2048", VD_OBJECT),
			     "totalPages", VD_STRING), "32"));
	const struct vd_value *topo = get(v, "cpuTopology", VD_ARRAY);
	ck_assert_uint_eq(topo->v.arr.n, 4);
	ck_assert_int_eq(get(&topo->v.arr.items[3], "socket_id", VD_INT)->v.i, 1);
	ck_assert(str_eq(get(get(v, "kernelFeatures", VD_OBJECT), "SPECTRE_V2", VD_STRING),
			 "(Mitigation: Retpolines)"));
	/* no network provider: the sections exist, empty */
	ck_assert_uint_eq(get(v, "networks", VD_OBJECT)->v.obj.n, 0);
	ck_assert_uint_eq(get(v, "nics", VD_OBJECT)->v.obj.n, 0);

	const struct vd_value *em = get(v, "emulatedMachines", VD_ARRAY);
	const struct vd_value *flags = get(v, "cpuFlags", VD_STRING);
	char fl[512];
	snprintf(fl, sizeof(fl), ",%.*s,", (int)flags->v.s.len, flags->v.s.ptr);
	if (x86_64_host()) {
		/* the stand-in qemu-system-x86_64 and the fixture CPU map */
		ck_assert_uint_eq(em->v.arr.n, 6);
		ck_assert(array_has(em, "pc") && array_has(em, "pc-i440fx-9.1"));
		ck_assert_ptr_nonnull(strstr(fl, ",model_Alpha,"));
		ck_assert_ptr_nonnull(strstr(fl, ",model_Gamma,"));
		ck_assert_ptr_null(strstr(fl, ",model_Beta,"));
		ck_assert_ptr_null(strstr(fl, ",model_Delta,"));
		ck_assert_ptr_null(strstr(fl, ",model_Epsilon,"));   /* QEMU lacks it */
	} else {
		fprintf(stderr, "caps_full_tree: SKIPPED the QEMU part (the stand-in is "
			"qemu-system-x86_64, this host is not x86_64)\n");
	}
	ck_assert_ptr_nonnull(strstr(fl, ",vmx,"));
	buf_free(&b);
	arena_free(&a);
}
END_TEST

START_TEST(spec_ctrl_from_ibrs)
{
	struct host_topo t;
	host_topo_read(BARE, &t);
	struct host_caps *c = host_caps_new(BARE, &t, NULL);
	ck_assert_str_eq(c->cpu_flags_csv, "fpu");
	host_caps_spec_ctrl(c);                         /* no models: unchanged */
	ck_assert_str_eq(c->cpu_flags_csv, "fpu");
	host_strv_add(&c->ext.models, "model_Haswell-IBRS", 18);
	host_caps_spec_ctrl(c);
	ck_assert_str_eq(c->cpu_flags_csv, "fpu,spec_ctrl");
	host_caps_spec_ctrl(c);                         /* once */
	ck_assert_str_eq(c->cpu_flags_csv, "fpu,spec_ctrl");
	host_caps_free(c);
}
END_TEST

START_TEST(caps_bare_tree)
{
	struct vd_arena a;
	arena_init(&a, 1 << 16);
	struct vd_buf b = VD_BUF_INIT;
	const struct vd_value *v = caps_of(BARE, &a, &b);
	const struct vd_value *hba = get(v, "HBAInventory", VD_OBJECT);
	ck_assert_uint_eq(get(hba, "iSCSI", VD_ARRAY)->v.arr.n, 0);
	ck_assert_uint_eq(get(hba, "FC", VD_ARRAY)->v.arr.n, 0);
	ck_assert_uint_eq(get(v, "rngSources", VD_ARRAY)->v.arr.n, 0);
	ck_assert_uint_eq(get(v, "emulatedMachines", VD_ARRAY)->v.arr.n, 0);
	ck_assert(str_eq(get(v, "cpuFlags", VD_STRING), "fpu"));
	ck_assert_int_eq(get(v, "kdumpStatus", VD_INT)->v.i, -1);
	ck_assert(str_eq(get(get(v, "selinux", VD_OBJECT), "mode", VD_STRING), "-1"));
	/* no package versions: only the levels vdsmd serves on its own */
	const struct vd_value *cl = get(v, "clusterLevels", VD_ARRAY);
	ck_assert_uint_eq(cl->v.arr.n, 5);
	ck_assert(!array_has(cl, "4.7"));
	const struct vd_value *p2 = get(v, "packages2", VD_OBJECT);
	ck_assert_uint_eq(p2->v.obj.n, 2);   /* kernel (uname) and vdsm */
	ck_assert_uint_eq(get(v, "cpuTopology", VD_ARRAY)->v.arr.n, 0);
	ck_assert_uint_eq(get(get(v, "numaNodes", VD_OBJECT), "0", VD_OBJECT)->type, VD_OBJECT);
	buf_free(&b);
	arena_free(&a);
}
END_TEST

/* The network provider's sections replace the empty ones, on every call
 * (the cached encoding is bypassed while one is plugged in). */
struct fake_net {
	int calls;
};

static void fake_net_write(void *ctx, struct vd_writer *w)
{
	struct fake_net *f = ctx;
	f->calls++;
	static const char *const keys[] = { "nics", "bridges", "vlans", "bondings" };
	vw_keyz(w, "networks");
	vw_begin_object(w);
	vw_keyz(w, "ovirtmgmt");
	vw_begin_object(w);
	vw_kint(w, "call", f->calls);
	vw_end_object(w);
	vw_end_object(w);
	for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++) {
		vw_keyz(w, keys[i]);
		vw_begin_object(w);
		vw_end_object(w);
	}
	vw_keyz(w, "nameservers");
	vw_begin_array(w);
	vw_end_array(w);
}

START_TEST(net_peer)
{
	struct host_topo t;
	host_topo_read(BARE, &t);
	struct host_caps *c = host_caps_new(BARE, &t, NULL);
	struct fake_net f = { 0 };
	struct host_peers np = { .ctx = &f, .write_net_caps = fake_net_write };
	struct vd_arena a;
	arena_init(&a, 1 << 16);
	for (int round = 1; round <= 2; round++) {
		struct vd_buf b = VD_BUF_INIT;
		struct vd_writer w;
		codec_find("yajl")->writer_init(&w, &b);
		if (round == 2)
			atomic_store(&c->peers, &np);
		host_caps_write(c, &w, NULL);
		const struct vd_value *v = decode(&a, &b);
		const struct vd_value *n = get(v, "networks", VD_OBJECT);
		if (round == 1) {
			ck_assert_uint_eq(n->v.obj.n, 0);
		} else {
			ck_assert_int_eq(get(get(n, "ovirtmgmt", VD_OBJECT), "call", VD_INT)->v.i, 1);
			/* each key once: the empty defaults are not written too */
			size_t count = 0;
			for (size_t i = 0; i < v->v.obj.n; i++)
				count += v->v.obj.members[i].klen == 8 &&
					 memcmp(v->v.obj.members[i].key, "networks", 8) == 0;
			ck_assert_uint_eq(count, 1);
		}
		buf_free(&b);
	}
	/* a second call asks the provider again */
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	codec_find("yajl")->writer_init(&w, &b);
	host_caps_write(c, &w, NULL);
	ck_assert_int_eq(f.calls, 2);
	buf_free(&b);
	arena_free(&a);
	host_caps_free(c);
}
END_TEST

/* getStats' readings through the snapshot, as the handler writes them. */
static const struct vd_value *stats_of(const char *root, struct vd_arena *a, struct vd_buf *b,
				       struct host_state **hp)
{
	struct host_opts o = { .root = root, .first_ms = 1 };
	struct host_state *h = host_state_new(NULL, &o);
	*hp = h;
	struct vdsmd d;
	memset(&d, 0, sizeof(d));
	d.host = h;
	h->d = &d;
	rpc_handler fn = NULL;
	for (const struct rpc_binding *bd = host_bindings; bd->name; bd++)
		if (strcmp(bd->name, "Host.getStats") == 0)
			fn = bd->fn;
	ck_assert_ptr_nonnull(fn);
	struct vd_writer w;
	codec_find("yajl")->writer_init(&w, b);
	struct rpc_call c;
	memset(&c, 0, sizeof(c));
	c.w = &w;
	c.app = &d;
	ck_assert_int_eq(fn(&c), 0);
	h->d = NULL;
	return decode(a, b);
}

START_TEST(stats_full_tree)
{
	struct vd_arena a;
	arena_init(&a, 1 << 16);
	struct vd_buf b = VD_BUF_INIT;
	struct host_state *h;
	const struct vd_value *v = stats_of(FULL, &a, &b, &h);
	ck_assert(get(v, "ksmState", VD_BOOL)->v.b);
	ck_assert_int_eq(get(v, "ksmPages", VD_INT)->v.i, 100);
	ck_assert(!get(v, "ksmMergeAcrossNodes", VD_BOOL)->v.b);
	long page = sysconf(_SC_PAGESIZE);
	ck_assert_int_eq(get(v, "memShared", VD_INT)->v.i, 2560 * page / (1024 * 1024));
	/* ksmd's stat does not change between the two readings: 0 % */
	ck_assert_int_eq(get(v, "ksmCpu", VD_INT)->v.i, 0);
	const struct vd_value *hp = get(get(v, "hugepages", VD_OBJECT), "2048", VD_OBJECT);
	ck_assert_int_eq(get(hp, "nr_hugepages", VD_INT)->v.i, 64);
	ck_assert_int_eq(get(hp, "vm.free_hugepages", VD_INT)->v.i, 60);
	get(get(v, "hugepages", VD_OBJECT), "1048576", VD_OBJECT);
	const struct vd_value *nm = get(get(v, "numaNodeMemFree", VD_OBJECT), "1", VD_OBJECT);
	ck_assert_int_eq(get(get(get(nm, "hugepages", VD_OBJECT), "2048", VD_OBJECT),
			     "freePages", VD_INT)->v.i, 29);
	const struct vd_value *ds = get(v, "diskStats", VD_OBJECT);
	for (size_t i = 0; i < HOST_DISK_PATHS; i++) {
		const struct vd_value *f = get(get(ds, host_disk_paths[i], VD_OBJECT), "free", VD_STRING);
		ck_assert(f->v.s.len > 0 && f->v.s.ptr[0] != '-');
	}
	ck_assert(str_eq(get(v, "momStatus", VD_STRING), "disabled"));
	ck_assert(str_eq(get(v, "thpState", VD_STRING), "madvise"));
	get(v, "momPolicy", VD_OBJECT);
	host_state_free(h);
	buf_free(&b);
	arena_free(&a);
}
END_TEST

START_TEST(stats_bare_tree)
{
	struct vd_arena a;
	arena_init(&a, 1 << 16);
	struct vd_buf b = VD_BUF_INIT;
	struct host_state *h;
	const struct vd_value *v = stats_of(BARE, &a, &b, &h);
	/* no KSM in the kernel: the keys are left out, as VDSM without MOM */
	ck_assert_ptr_null(vd_obj_get(v, "ksmState"));
	ck_assert_ptr_null(vd_obj_get(v, "memShared"));
	ck_assert_uint_eq(get(v, "hugepages", VD_OBJECT)->v.obj.n, 0);
	const struct vd_value *ds = get(v, "diskStats", VD_OBJECT);
	ck_assert(str_eq(get(get(ds, "/var/log", VD_OBJECT), "free", VD_STRING), "-1"));
	host_state_free(h);
	buf_free(&b);
	arena_free(&a);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("host_readers");
	TCase *tc = tcase_create("readers");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, full_tree_readers);
	tcase_add_test(tc, bare_tree_readers);
	tcase_add_test(tc, packages);
	tcase_add_test(tc, qemu_lists);
	tcase_add_test(tc, cpu_map_models);
	tcase_add_test(tc, libvirt_xml);
	tcase_add_test(tc, hostdev_xml);
	tcase_add_test(tc, mom_policy);
	tcase_add_test(tc, caps_full_tree);
	tcase_add_test(tc, caps_bare_tree);
	tcase_add_test(tc, spec_ctrl_from_ibrs);
	tcase_add_test(tc, net_peer);
	tcase_add_test(tc, stats_full_tree);
	tcase_add_test(tc, stats_bare_tree);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
