/* tests/unit/daemon_test.h - an in-process daemon for the unit tests that
 * start the whole of vdsmd (test_daemon.c, test_broker.c): a fresh storage
 * root under /tmp, the common command line (loopback, port 0, no TLS,
 * libvirt test:///default), a private ev loop.  Header only (static inline),
 * so unit tests that do not include it are unaffected. */
#ifndef VD_TESTS_DAEMON_TEST_H
#define VD_TESTS_DAEMON_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../vdsmd/config.h"
#include "../../vdsmd/daemon.h"

#define DAEMON_TEST_MAX_EXTRA 24

/* The log sink of an in-process daemon (quiet: errors only). */
static struct vd_log daemon_test_log VD_UNUSED;

/* Makes the storage root /tmp/vdsmd-test-<tag>-XXXXXX in storage (64 bytes),
 * loads the common arguments followed by extra[0..nextra) and runs
 * daemon_init(): its result is returned (why says what failed).  Call
 * daemon_test_stop() afterwards in either case. */
static inline int daemon_test_start(struct vdsmd *d, char *storage, const char *tag,
				    const char *const *extra, size_t nextra, char *why,
				    size_t whylen)
{
	snprintf(storage, 64, "/tmp/vdsmd-test-%s-XXXXXX", tag);
	ck_assert_ptr_nonnull(mkdtemp(storage));
	/* --image-port 0: the image server's fixed default port (54322) is
	 * not ephemeral; the image tests start it themselves */
	const char *argv[17 + DAEMON_TEST_MAX_EXTRA] = {
		"vdsmd", "--config", "/dev/null", "--listen", "127.0.0.1",
		"--port", "0", "--tls", "off", "--log-level", "error",
		"--libvirt-uri", "test:///default", "--storage-root", storage,
		"--image-port", "0",
	};
	ck_assert_uint_le(nextra, DAEMON_TEST_MAX_EXTRA);
	for (size_t i = 0; i < nextra; i++)
		argv[17 + i] = extra[i];
	memset(d, 0, sizeof(*d));
	ck_assert_int_eq(config_load(&d->cfg, (int)(17 + nextra), (char **)argv, why, whylen), 0);
	log_open(&daemon_test_log, NULL, VD_LOG_ERROR);
	d->loop = ev_loop_new(0);
	return daemon_init(d, why, whylen);
}

/* daemon_fini(), the loop destroyed, the storage root removed. */
static inline void daemon_test_stop(struct vdsmd *d, const char *storage)
{
	struct ev_loop *loop = d->loop;
	daemon_fini(d);
	ev_loop_destroy(loop);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", storage);
	ck_assert_int_eq(system(cmd), 0);
}

#endif
