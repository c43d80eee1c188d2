/* tests/unit/test_host_keys.c - the getCapabilities / getStats keys of
 * vdsmd/host/caps_keys.c and their wiring: domain_versions and
 * supported_block_size in VDSM's forms, boot_uuid from a tree's
 * /dev/disk/by-uuid (a real block device node), lastClientIface from the
 * machine's own addresses (getifaddrs), and netConfigDirty through the
 * host_peers hook. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "vdsmd/host/host_int.h"
#include "check_main.h"
#include "host_test.h"

#define BARE "tests/fixtures/host/bare"

static bool str_eq(const struct vd_value *v, const char *s)
{
	return v && v->type == VD_STRING && v->v.s.len == strlen(s) &&
	       memcmp(v->v.s.ptr, s, v->v.s.len) == 0;
}

static void encode_keys(const struct host_caps *c, struct vd_buf *b)
{
	struct vd_writer w;
	codec_find("yajl")->writer_init(&w, b);
	vw_begin_object(&w);
	host_caps_keys_encode(c, &w);
	vw_end_object(&w);
	ck_assert_int_eq(w.error, 0);
	buf_putc(b, '\0');
}

START_TEST(storage_keys_in_vdsm_form)
{
	static struct host_caps c;
	struct vd_buf b = VD_BUF_INIT;
	encode_keys(&c, &b);
	/* VDSM's DOMAIN_VERSIONS, and its six storage types with the sizes
	 * vdsmd's StorageDomain.create takes; no boot_uuid without /boot */
	ck_assert_str_eq(b.data, "{\"domain_versions\":[0,2,3,4,5],\"supported_block_size\":"
			 "{\"FCP\":[512],\"GLUSTERFS\":[0,512],\"ISCSI\":[512],\"LOCALFS\":[0,512],"
			 "\"NFS\":[512],\"POSIXFS\":[512]}}");
	buf_free(&b);
}
END_TEST

static void mkdirs(const char *root, const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (char *s = p + strlen(root) + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	ck_assert(mkdir(p, 0755) == 0 || errno == EEXIST);
}

START_TEST(boot_uuid_from_by_uuid)
{
	char root[] = "/tmp/vdkeys-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(root));
	static struct host_caps c;
	/* no /boot: left out (VDSM's findmnt fails) */
	host_caps_keys_gather(&c, root);
	ck_assert(!c.has_boot_uuid);
	/* /boot but no link naming its device: "" */
	mkdirs(root, "boot");
	mkdirs(root, "dev/disk/by-uuid");
	host_caps_keys_gather(&c, root);
	ck_assert(c.has_boot_uuid);
	ck_assert_str_eq(c.boot_uuid, "");
	char boot[600], decoy[600], link[600];
	struct stat st;
	snprintf(boot, sizeof(boot), "%s/boot", root);
	ck_assert_int_eq(stat(boot, &st), 0);
	snprintf(decoy, sizeof(decoy), "%s/dev/disk/by-uuid/0000-DECOY", root);
	snprintf(link, sizeof(link), "%s/dev/disk/by-uuid/1234-ABCD", root);
	dev_t other = makedev(major(st.st_dev) + 1, minor(st.st_dev));
	if (mknod(decoy, S_IFBLK | 0600, other) != 0 ||
	    mknod(link, S_IFBLK | 0600, st.st_dev) != 0) {
		check_skip("boot_uuid_from_by_uuid (matching part)", "mknod needs CAP_MKNOD");
	} else {
		host_caps_keys_gather(&c, root);
		ck_assert(c.has_boot_uuid);
		ck_assert_str_eq(c.boot_uuid, "1234-ABCD");
		struct vd_buf b = VD_BUF_INIT;
		encode_keys(&c, &b);
		ck_assert_ptr_nonnull(strstr(b.data, ",\"boot_uuid\":\"1234-ABCD\"}"));
		buf_free(&b);
		unlink(decoy);
		unlink(link);
	}
	char p[600];
	snprintf(p, sizeof(p), "%s/dev/disk/by-uuid", root);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/dev/disk", root);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/dev", root);
	rmdir(p);
	rmdir(boot);
	ck_assert_int_eq(rmdir(root), 0);
}
END_TEST

START_TEST(device_by_ip)
{
	char dev[64];
	host_device_by_ip("127.0.0.1", dev, sizeof(dev));
	ck_assert_str_eq(dev, "lo");
	host_device_by_ip("198.51.100.254", dev, sizeof(dev));   /* nobody's */
	ck_assert_str_eq(dev, "");
	host_device_by_ip(NULL, dev, sizeof(dev));
	ck_assert_str_eq(dev, "");
	host_device_by_ip("", dev, sizeof(dev));
	ck_assert_str_eq(dev, "");
}
END_TEST

static bool dirty_yes(void *ctx)
{
	(void)ctx;
	return true;
}

static rpc_handler handler(const char *name)
{
	for (const struct rpc_binding *bd = host_bindings; bd->name; bd++)
		if (strcmp(bd->name, name) == 0)
			return bd->fn;
	ck_abort_msg("no handler %s", name);
	return NULL;
}

/* One call of a Host verb through its handler, as the engine makes it. */
static const struct vd_value *call(struct vdsmd *d, const char *verb, const char *local,
				   struct vd_arena *a, struct vd_buf *b)
{
	struct vd_writer w;
	codec_find("yajl")->writer_init(&w, b);
	struct rpc_call c;
	memset(&c, 0, sizeof(c));
	c.w = &w;
	c.app = d;
	c.local_addr = local;
	ck_assert_int_eq(handler(verb)(&c), 0);
	return decode_with(codec_find("yajl"), a, b);
}

START_TEST(dirty_and_last_client_iface_through_the_handlers)
{
	struct host_opts o = { .root = BARE, .first_ms = 1 };
	struct host_state *h = host_state_new(NULL, &o);   /* gathers h->caps */
	ck_assert_ptr_nonnull(h->caps);
	struct vdsmd d;
	memset(&d, 0, sizeof(d));
	d.host = h;
	h->d = &d;
	struct vd_arena a;
	arena_init(&a, 1 << 16);
	struct vd_buf b1 = VD_BUF_INIT, b2 = VD_BUF_INIT, b3 = VD_BUF_INIT, b4 = VD_BUF_INIT;
	/* no network backend: "False", and the keys VDSM always has */
	const struct vd_value *v = call(&d, "Host.getCapabilities", "127.0.0.1", &a, &b1);
	ck_assert(str_eq(get(v, "lastClientIface", VD_STRING), "lo"));
	ck_assert(str_eq(get(v, "netConfigDirty", VD_STRING), "False"));
	get(v, "supportsIPv6", VD_BOOL);
	ck_assert_uint_eq(get(v, "domain_versions", VD_ARRAY)->v.arr.n, 5);
	v = call(&d, "Host.getStats", NULL, &a, &b2);
	ck_assert(str_eq(get(v, "netConfigDirty", VD_STRING), "False"));
	ck_assert_uint_eq(get(v, "v2vJobs", VD_OBJECT)->v.obj.n, 0);
	/* the network backend says dirty: getStats says "True" */
	struct host_peers p = { .net_config_dirty = dirty_yes };
	host_set_peers(&d, &p);
	v = call(&d, "Host.getStats", NULL, &a, &b3);
	ck_assert(str_eq(get(v, "netConfigDirty", VD_STRING), "True"));
	/* no local address known: "" */
	v = call(&d, "Host.getCapabilities", NULL, &a, &b4);
	ck_assert(str_eq(get(v, "lastClientIface", VD_STRING), ""));
	host_set_peers(&d, NULL);
	buf_free(&b1);
	buf_free(&b2);
	buf_free(&b3);
	buf_free(&b4);
	arena_free(&a);
	h->d = NULL;
	host_state_free(h);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("host_keys");
	TCase *tc = tcase_create("keys");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, storage_keys_in_vdsm_form);
	tcase_add_test(tc, boot_uuid_from_by_uuid);
	tcase_add_test(tc, device_by_ip);
	tcase_add_test(tc, dirty_and_last_client_iface_through_the_handlers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
