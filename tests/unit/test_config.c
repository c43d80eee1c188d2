/* tests/unit/test_config.c - vdsmd/config.c: defaults, INI file, flags,
 * precedence and the error messages (file:line: reason). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vdsmd/config.h"
#include "check_main.h"

static char tmpl[64];

static const char *write_conf(const char *text)
{
	snprintf(tmpl, sizeof(tmpl), "/tmp/vdsmd-test-conf-XXXXXX");
	int fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return tmpl;
}

static int load(struct vd_config *c, char *why, size_t n, int argc, const char **argv)
{
	return config_load(c, argc, (char **)argv, why, n);
}

START_TEST(defaults)
{
	struct vd_config c;
	char why[256] = "";
	const char *argv[] = { "vdsmd", "--config", "/dev/null" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 3, argv), 0);
	ck_assert_str_eq(c.listen, "::");
	ck_assert_uint_eq(c.port, 54321);
	ck_assert(c.tls);
	ck_assert_uint_eq(c.max_connections, 10000);
	ck_assert_uint_eq(c.max_frame_size, 16u << 20);
	ck_assert_uint_eq(c.max_headers, 128);
	ck_assert_uint_eq(c.max_header_line, 8192);
	ck_assert_uint_eq(c.detect_timeout, 10);
	ck_assert_uint_eq(c.handshake_timeout, 10);
	ck_assert_str_eq(c.codec, "auto");
	ck_assert_uint_eq(c.workers, 4);
	ck_assert_str_eq(c.log_level, "info");
	ck_assert_str_eq(c.libvirt_uri, "qemu:///system");
	ck_assert_str_eq(c.migration_libvirt_uri, "qemu+tls://%s/system");   /* VDSM's */
	ck_assert_str_eq(c.config_file, "/dev/null");
	config_free(&c);
}
END_TEST

START_TEST(file_and_flags)
{
	const char *p = write_conf("# comment\n; other comment\n[vdsmd]\n"
				   "listen = 127.0.0.1\nport=1234\n tls = off \n"
				   "codec = fallback\nmax_frame_size = 1M\n"
				   "libvirt_uri = \"test:///default\"\nlog_level=debug\n");
	struct vd_config c;
	char why[256] = "";
	const char *argv[] = { "vdsmd", "--port", "0", "--config", p, "--codec=yajl",
			       "--max-header-line", "4K", "--tls", "on" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 10, argv), 0);
	ck_assert_str_eq(c.listen, "127.0.0.1");
	ck_assert_uint_eq(c.port, 0);         /* flag wins */
	ck_assert(c.tls);                     /* flag wins */
	ck_assert_str_eq(c.codec, "yajl");    /* flag wins */
	ck_assert_uint_eq(c.max_frame_size, 1u << 20);
	ck_assert_uint_eq(c.max_header_line, 4096);
	ck_assert_str_eq(c.libvirt_uri, "test:///default");
	ck_assert_str_eq(c.log_level, "debug");
	config_free(&c);
	unlink(p);
}
END_TEST

START_TEST(unknown_key_names_line)
{
	const char *p = write_conf("port = 1\n\nbogus_key = 3\n");
	struct vd_config c;
	char why[512] = "";
	const char *argv[] = { "vdsmd", "--config", p };
	ck_assert_int_eq(load(&c, why, sizeof(why), 3, argv), VD_EINVAL);
	char want[128];
	snprintf(want, sizeof(want), "%s:3: unknown key \"bogus_key\"", p);
	ck_assert_str_eq(why, want);
	config_free(&c);
	unlink(p);
}
END_TEST

START_TEST(bad_values)
{
	static const char *const bad[] = {
		"port = 70000\n", "port = -1\n", "port = 12x\n", "tls = maybe\n",
		"max_frame_size = 3Q\n", "log_level = loud\n", "codec = xml\n",
		"workers = 0\n", "no equals sign\n", "[broken\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *p = write_conf(bad[i]);
		struct vd_config c;
		char why[512] = "";
		const char *argv[] = { "vdsmd", "--config", p };
		ck_assert_msg(load(&c, why, sizeof(why), 3, argv) == VD_EINVAL, "%s", bad[i]);
		char want[128];
		snprintf(want, sizeof(want), "%s:1: ", p);
		ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "%s -> %s", bad[i], why);
		config_free(&c);
		unlink(p);
	}
}
END_TEST

START_TEST(bad_flags)
{
	struct vd_config c;
	char why[256] = "";
	const char *a1[] = { "vdsmd", "--config", "/dev/null", "--nope", "1" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 5, a1), VD_EINVAL);
	ck_assert_str_eq(why, "--nope: unknown option (see --help)");
	config_free(&c);
	/* every codec name is accepted, an unknown one named with the list */
	static const char *const codecs[] = { "auto", "yajl", "fallback", "msgpack" };
	for (size_t i = 0; i < VD_ARRAY_SIZE(codecs); i++) {
		const char *ac[] = { "vdsmd", "--config", "/dev/null", "--codec", codecs[i] };
		ck_assert_int_eq(load(&c, why, sizeof(why), 5, ac), 0);
		ck_assert_str_eq(c.codec, codecs[i]);
		config_free(&c);
	}
	const char *ax[] = { "vdsmd", "--config", "/dev/null", "--codec", "xml" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 5, ax), VD_EINVAL);
	ck_assert_str_eq(why, "--codec: codec: unknown codec \"xml\" "
			 "(expected auto, yajl, fallback or msgpack)");
	config_free(&c);
	const char *a2[] = { "vdsmd", "--config", "/dev/null", "--port" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 4, a2), VD_EINVAL);
	ck_assert_str_eq(why, "--port: missing value");
	config_free(&c);
	const char *a3[] = { "vdsmd", "--config", "/dev/null", "--detect-timeout=0" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 4, a3), VD_EINVAL);
	ck_assert_msg(strstr(why, "--detect-timeout: detect_timeout: bad value") == why, "%s", why);
	config_free(&c);
	const char *a4[] = { "vdsmd", "--config", "/nonexistent/vdsmd.conf" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 3, a4), VD_EINVAL);
	ck_assert_msg(strstr(why, "/nonexistent/vdsmd.conf: cannot open") == why, "%s", why);
	config_free(&c);
	const char *a5[] = { "vdsmd", "--config", "/dev/null", "stray" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 4, a5), VD_EINVAL);
	config_free(&c);
}
END_TEST

/* migration_libvirt_uri is a printf template: one %s (the host) at most */
START_TEST(migration_uri_template)
{
	struct vd_config c;
	char why[256] = "";
	const char *ok1[] = { "vdsmd", "--config", "/dev/null", "--migration-libvirt-uri",
			      "qemu+tcp://%s/system" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 5, ok1), 0);
	ck_assert_str_eq(c.migration_libvirt_uri, "qemu+tcp://%s/system");
	config_free(&c);
	const char *ok2[] = { "vdsmd", "--config", "/dev/null",
			      "--migration-libvirt-uri=qemu+unix:///system?socket=/run/x.sock" };
	ck_assert_int_eq(load(&c, why, sizeof(why), 4, ok2), 0);
	config_free(&c);
	static const char *const bad[] = { "qemu+tcp://%d/system", "qemu://%s/%s", "x%", "%n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *a[] = { "vdsmd", "--config", "/dev/null", "--migration-libvirt-uri",
				    bad[i] };
		ck_assert_msg(load(&c, why, sizeof(why), 5, a) == VD_EINVAL, "%s", bad[i]);
		ck_assert_msg(strstr(why, "migration_libvirt_uri: ") == why, "%s", why);
		config_free(&c);
	}
}
END_TEST

START_TEST(usage_lists_every_key)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	config_usage(f);
	fclose(f);
	static const char *const want[] = {
		"--listen", "--port", "--tls", "--cert-file", "--key-file", "--ca-file",
		"--codec", "--log-level", "--log-file", "--max-connections",
		"--max-frame-size", "--libvirt-uri", "--vm-sample-interval",
		"--storage-root", "--workers", "--detect-timeout", "max_output",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(strstr(text, want[i]), "%s missing", want[i]);
	/* the codec's names from the registry, and auto's threshold */
	ck_assert(strstr(text, "JSON codec: auto, yajl, fallback or msgpack"));
	ck_assert(strstr(text, "under 4 KiB"));
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, file_and_flags);
	tcase_add_test(tc, unknown_key_names_line);
	tcase_add_test(tc, bad_values);
	tcase_add_test(tc, bad_flags);
	tcase_add_test(tc, migration_uri_template);
	tcase_add_test(tc, usage_lists_every_key);
	suite_add_tcase(s, tc);
	return check_run(s);
}
