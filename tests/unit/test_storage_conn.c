/* tests/unit/test_storage_conn.c - connectStorageServer's core against real
 * mounts (a tmpfs as POSIXFS, made and removed by the test; skipped with a
 * SKIP line when this process cannot mount) and real directories (LOCALFS). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "vdsmd/storage/st.h"
#include "check_main.h"

#define SD1 "11111111-1111-1111-1111-111111111111"
#define IMG1 "aaaaaaaa-0000-0000-0000-000000000001"
#define VOL1 "bbbbbbbb-0000-0000-0000-000000000001"

static char root[256];
static struct storage_state *S;

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/vdsmd-stc-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	char why[256];
	char *r = st_path(root, "state");
	S = st_open(r, why, sizeof(why));
	free(r);
	ck_assert_msg(S != NULL, "%s", why);
	ck_assert_int_eq(st_start_workers(S, 1), 0);
}

static void teardown(void)
{
	char *mp = st_conn_mountpoint(S, "vdsm_test:tmpfs");
	if (st_is_mounted(mp))
		umount2(mp, MNT_DETACH);
	free(mp);
	st_close(S);
	S = NULL;
	st_rmtree(root);
}

START_TEST(mountpoint_is_vdsm_layout)
{
	char *mp = st_conn_mountpoint(S, "nfs.example.com:/exports/my_data");
	char *want = st_pathf("%s/state/mnt/nfs.example.com:_exports_my__data", root);
	ck_assert_str_eq(mp, want);
	free(mp);
	free(want);
}
END_TEST

START_TEST(localfs_checks_the_directory)
{
	char msg[256];
	char *dir = st_pathf("%s/local", root);
	struct st_conn_req r = { .id = SD1, .connection = dir };
	ck_assert_int_eq(st_conn_connect(S, ST_DT_LOCALFS, &r, msg, sizeof(msg)), 469);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	ck_assert_int_eq(st_conn_connect(S, ST_DT_LOCALFS, &r, msg, sizeof(msg)), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);   /* world-writable: refused */
	ck_assert_int_eq(st_conn_connect(S, ST_DT_LOCALFS, &r, msg, sizeof(msg)), 469);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	char *link = st_pathf("%s/link", root);
	ck_assert_int_eq(symlink(dir, link), 0);
	r.connection = link;
	ck_assert_int_eq(st_conn_connect(S, ST_DT_LOCALFS, &r, msg, sizeof(msg)), 469);
	/* and StorageDomain.create applies the same rule */
	struct st_err e = {0};
	ck_assert_int_eq(st_domain_create(S, SD1, ST_DT_LOCALFS, link, "d", ST_DC_DATA, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	ck_assert_int_eq(st_domain_create(S, SD1, ST_DT_LOCALFS, dir, "d", ST_DC_DATA, 5, &e), -1);
	ck_assert_int_eq(e.code, RPC_E_PARAMS);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(st_domain_create(S, SD1, ST_DT_LOCALFS, dir, "d", ST_DC_DATA, 5, &e), 0);
	free(dir);
	free(link);
}
END_TEST

START_TEST(bad_parameters_refused_before_mount)
{
	char msg[256];
	struct st_conn_req r = { .id = SD1, .connection = "srv:/exp", .protocol_version = "9" };
	ck_assert_int_eq(st_conn_connect(S, ST_DT_NFS, &r, msg, sizeof(msg)), 451);
	r.protocol_version = "auto";
	r.connection = "-oremount";   /* never an option to mount(8) */
	ck_assert_int_eq(st_conn_connect(S, ST_DT_NFS, &r, msg, sizeof(msg)), 451);
	r.connection = "srv:/exp";
	r.mnt_options = "x\ny";
	ck_assert_int_eq(st_conn_connect(S, ST_DT_NFS, &r, msg, sizeof(msg)), 451);
	r.mnt_options = NULL;
	ck_assert_int_eq(st_conn_connect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg)), 451);  /* no vfs_type */
	ck_assert_int_eq(st_conn_connect(S, 3 /* iSCSI */, &r, msg, sizeof(msg)), 470);
}
END_TEST

/* Issue 27: specs whose mount point would not be strictly under <root>/mnt/
 * are refused by connect and disconnect (451); system directories are
 * never storage. */
START_TEST(dot_specs_and_system_dirs_refused)
{
	char msg[256];
	const char *bad[] = { ".", "..", "a/..", "./.", "../x", "srv:..", "srv:../exp", "srv:.",
			      "srv:/.." };
	for (size_t i = 0; i < VD_ARRAY_SIZE(bad); i++) {
		struct st_conn_req r = { .id = SD1, .connection = bad[i], .vfs_type = "tmpfs" };
		ck_assert_msg(st_conn_connect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg)) == 451, "%s",
			      bad[i]);
		ck_assert_msg(st_conn_disconnect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg)) == 451,
			      "%s", bad[i]);
		ck_assert_msg(st_conn_connect(S, ST_DT_NFS, &r, msg, sizeof(msg)) == 451, "%s",
			      bad[i]);
	}
	const char *good[] = { "tmpfs", "/dev/x/../y", "srv:/exp/./a", "srv:/x/../y", "a..b", ".hidden" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(good); i++) {
		char *n = st_conn_normalize(good[i]);
		ck_assert_msg(n && st_conn_spec_canonical(n), "%s", good[i]);
		free(n);
	}
	ck_assert_str_eq(st_system_dir("/"), "/");
	ck_assert_str_eq(st_system_dir("/etc"), "/etc");
	ck_assert_str_eq(st_system_dir("/etc/ssh"), "/etc");
	ck_assert_str_eq(st_system_dir("/tmp/../usr/lib"), "/usr");
	ck_assert_str_eq(st_system_dir("//proc/"), "/proc");
	ck_assert_str_eq(st_system_dir("/var"), "/var");
	ck_assert_ptr_null(st_system_dir("/var/lib/vdsmd/storage"));
	ck_assert_ptr_null(st_system_dir("/tmp/x"));
	ck_assert_ptr_null(st_system_dir("/rhev/data-center"));
	/* a symlink to /etc is /etc */
	char *ln = st_pathf("%s/etc-link", S->root);
	ck_assert_int_eq(symlink("/etc", ln), 0);
	ck_assert_str_eq(st_system_dir(ln), "/etc");
	unlink(ln);
	free(ln);
	struct st_conn_req r = { .id = SD1, .connection = "/etc" };
	ck_assert_int_eq(st_conn_connect(S, ST_DT_LOCALFS, &r, msg, sizeof(msg)), 469);
	ck_assert(strstr(msg, "system directory"));
	r.connection = "/";
	ck_assert_int_eq(st_conn_connect(S, ST_DT_LOCALFS, &r, msg, sizeof(msg)), 469);
	struct st_err e = { 0 };
	ck_assert_int_eq(st_domain_create(S, SD1, ST_DT_LOCALFS, "/etc", "x", ST_DC_DATA, 5, &e), -1);
	ck_assert(strstr(e.msg, "system directory"));
	char why[256];
	ck_assert_ptr_null(st_open("/usr", why, sizeof why));
	ck_assert(strstr(why, "system directory"));
}
END_TEST

/* POSIXFS on a tmpfs: mounted under the mount root, a domain and a volume
 * live on it, connecting again is success, disconnect unmounts. */
START_TEST(posixfs_tmpfs_connect_create_disconnect)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP posixfs_tmpfs_connect_create_disconnect: not root\n");
		return;
	}
	char msg[512];
	struct st_conn_req r = { .id = SD1, .connection = "vdsm_test:tmpfs", .vfs_type = "tmpfs",
				 .mnt_options = "size=16m,mode=0755" };
	int st = st_conn_connect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg));
	if (st == 477 && strstr(msg, "ermission")) {
		fprintf(stderr, "SKIP posixfs_tmpfs_connect_create_disconnect: %s\n", msg);
		return;
	}
	ck_assert_msg(st == 0, "%d %s", st, msg);
	char *mp = st_conn_mountpoint(S, r.connection);
	ck_assert(st_is_mounted(mp));
	ck_assert_int_eq(st_conn_connect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg)), 0);
	struct st_err e = {0};
	ck_assert_msg(st_domain_create(S, SD1, ST_DT_POSIXFS, r.connection, "p", ST_DC_DATA, 5, &e) == 0,
		      "%s", e.msg);
	char *md = st_pathf("%s/%s/dom_md/metadata", mp, SD1);
	struct stat sb;
	ck_assert_int_eq(stat(md, &sb), 0);
	struct st_volreq vr = { SD1, IMG1, VOL1, 1024 * 1024, ST_FMT_COW, ST_SPARSE, "DATA", "", NULL,
				NULL, false, false, 0, 0 };
	char tid[37];
	ck_assert_int_eq(st_volume_create(S, &vr, tid, &e), 0);
	struct st_task_status ts;
	ck_assert_int_eq(st_task_wait(S, tid, 20000, &ts), 0);
	ck_assert_int_eq(ts.result, ST_TR_SUCCESS);
	/* the domain must go before its filesystem can */
	ck_assert_int_eq(st_domain_format(S, SD1, &e), 0);
	ck_assert_int_eq(st_conn_disconnect(S, ST_DT_POSIXFS, &r, msg, sizeof(msg)), 0);
	ck_assert(!st_is_mounted(mp));
	ck_assert_int_eq(stat(mp, &sb), -1);
	free(md);
	free(mp);
}
END_TEST

/* VDSM's fileUtils.normalize_path + transformPath (the mount point name). */
START_TEST(normalize_and_mountpoint_like_vdsm)
{
	static const struct { const char *in, *norm, *mp; } cases[] = {
		{ "nfs.example.com:/exports/data", "nfs.example.com:/exports/data",
		  "nfs.example.com:_exports_data" },
		{ "nfs.example.com:/exports//data/", "nfs.example.com:/exports/data",
		  "nfs.example.com:_exports_data" },
		{ "srv:/a/./b/../c", "srv:/a/c", "srv:_a_c" },
		{ "srv://exp", "srv:/exp", "srv:_exp" },
		{ "srv:2049:/exp/", "srv:2049:/exp", "srv:2049:_exp" },
		{ "srv:0123:/exp", "srv:0123:/exp", "srv:0123:_exp" },   /* not a port */
		{ "[2001:db8::1]:/exp/x_y", "[2001:db8::1]:/exp/x_y", "[2001:db8::1]:_exp_x__y" },
		{ "/dev/vdb1/", "/dev/vdb1", "_dev_vdb1" },
		{ "//dev//sdb", "/dev/sdb", "_dev_sdb" },
		{ "my_server:/my_export", "my_server:/my_export", "my__server:_my__export" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *n = st_conn_normalize(cases[i].in);
		ck_assert_msg(n && strcmp(n, cases[i].norm) == 0, "%s -> %s", cases[i].in,
			      n ? n : "(null)");
		char *mp = st_conn_mountpoint_at("/rhev/data-center", cases[i].in);
		char *want = st_pathf("/rhev/data-center/mnt/%s", cases[i].mp);
		ck_assert_str_eq(mp, want);
		free(n);
		free(mp);
		free(want);
	}
	ck_assert_ptr_null(st_conn_normalize("srv:"));       /* empty tail */
	ck_assert_ptr_null(st_conn_normalize(":/exp"));      /* empty host */
	ck_assert_ptr_null(st_conn_normalize("[::1/exp"));   /* no "]:" */
}
END_TEST

static void check_cmd(int type, const struct st_conn_req *r, const char *const want[])
{
	struct st_mount_cmd m;
	char msg[256];
	ck_assert_msg(st_conn_mount_cmd("/r", type, r, &m, msg, sizeof(msg)) == 0, "%s", msg);
	size_t i = 0;
	for (; want[i]; i++)
		ck_assert_msg(m.argv[i] && strcmp(m.argv[i], want[i]) == 0, "argv[%zu] %s, want %s", i,
			      m.argv[i] ? m.argv[i] : "(null)", want[i]);
	ck_assert_ptr_null(m.argv[i]);
	st_mount_cmd_free(&m);
}

/* The mount(8) argv VDSM's NFSConnection / MountConnection build. */
START_TEST(mount_argv_like_vdsm)
{
	/* what the engine sends: protocol_version auto, no timeout/retrans */
	struct st_conn_req r = { .id = SD1, .connection = "nfs.example.com:/exports/data/",
				 .protocol_version = "auto" };
	check_cmd(ST_DT_NFS, &r, (const char *const[]){ "mount", "-t", "nfs", "-o",
		"soft,nosharecache,timeo=100,retrans=3,nolock", "nfs.example.com:/exports/data",
		"/r/mnt/nfs.example.com:_exports_data", NULL });
	/* no protocol_version: VDSM's default is NFSv3 */
	r.protocol_version = NULL;
	r.timeo = 600;
	r.retrans = 6;
	check_cmd(ST_DT_NFS, &r, (const char *const[]){ "mount", "-t", "nfs", "-o",
		"soft,nosharecache,timeo=600,retrans=6,nfsvers=3,nolock",
		"nfs.example.com:/exports/data", "/r/mnt/nfs.example.com:_exports_data", NULL });
	/* 4.1: nfsvers + minorversion, no nolock; extra options after ours */
	r.protocol_version = "4.1";
	r.timeo = r.retrans = 0;
	r.mnt_options = "rsize=65536,,sec=sys";
	check_cmd(ST_DT_NFS, &r, (const char *const[]){ "mount", "-t", "nfs", "-o",
		"soft,nosharecache,timeo=100,retrans=3,nfsvers=4,minorversion=1,rsize=65536,sec=sys",
		"nfs.example.com:/exports/data", "/r/mnt/nfs.example.com:_exports_data", NULL });
	/* v3 with "lock": remote locks kept, as the engine asked */
	r.protocol_version = "3";
	r.mnt_options = "lock";
	check_cmd(ST_DT_NFS, &r, (const char *const[]){ "mount", "-t", "nfs", "-o",
		"soft,nosharecache,timeo=100,retrans=3,nfsvers=3,lock",
		"nfs.example.com:/exports/data", "/r/mnt/nfs.example.com:_exports_data", NULL });
	r.mnt_options = "nolocking";   /* not "lock": nolock still added */
	check_cmd(ST_DT_NFS, &r, (const char *const[]){ "mount", "-t", "nfs", "-o",
		"soft,nosharecache,timeo=100,retrans=3,nfsvers=3,nolocking,nolock",
		"nfs.example.com:/exports/data", "/r/mnt/nfs.example.com:_exports_data", NULL });
	/* POSIXFS: -t vfs_type, the options as given, no -o without them */
	struct st_conn_req p = { .id = SD1, .connection = "/dev/vdb1/", .vfs_type = "ext4" };
	check_cmd(ST_DT_POSIXFS, &p, (const char *const[]){ "mount", "-t", "ext4", "/dev/vdb1",
		"/r/mnt/_dev_vdb1", NULL });
	p.mnt_options = "noatime";
	check_cmd(ST_DT_POSIXFS, &p, (const char *const[]){ "mount", "-t", "ext4", "-o", "noatime",
		"/dev/vdb1", "/r/mnt/_dev_vdb1", NULL });
	/* refused before anything runs */
	struct st_mount_cmd m;
	char msg[256];
	r.mnt_options = NULL;
	static const char *const bad_versions[] = { "9", "4.1.1", "x", "4.", "", "-3" };
	for (size_t i = 0; i < sizeof(bad_versions) / sizeof(bad_versions[0]); i++) {
		r.protocol_version = bad_versions[i];
		int want = bad_versions[i][0] ? 451 : 0;   /* "" is absent: v3 */
		ck_assert_msg(st_conn_mount_cmd("/r", ST_DT_NFS, &r, &m, msg, sizeof(msg)) == want,
			      "version %s", bad_versions[i]);
		if (want == 0)
			st_mount_cmd_free(&m);
	}
	r.protocol_version = "auto";
	r.connection = "srv:";
	ck_assert_int_eq(st_conn_mount_cmd("/r", ST_DT_NFS, &r, &m, msg, sizeof(msg)), 451);
	r.connection = "srv:/x";
	ck_assert_int_eq(st_conn_mount_cmd("/r", ST_DT_LOCALFS, &r, &m, msg, sizeof(msg)), 470);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_conn");
	TCase *tc = tcase_create("conn");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, mountpoint_is_vdsm_layout);
	tcase_add_test(tc, normalize_and_mountpoint_like_vdsm);
	tcase_add_test(tc, mount_argv_like_vdsm);
	tcase_add_test(tc, localfs_checks_the_directory);
	tcase_add_test(tc, bad_parameters_refused_before_mount);
	tcase_add_test(tc, dot_specs_and_system_dirs_refused);
	tcase_add_test(tc, posixfs_tmpfs_connect_create_disconnect);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static struct vd_log test_log;
	log_open(&test_log, NULL, VD_LOG_ERROR);
	return check_run(suite());
}
