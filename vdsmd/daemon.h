/* vdsmd/daemon.h - building, running and tearing down the daemon.
 *
 * daemon_main() is all of main() after --help/--version.  The pieces are
 * separate so unit tests can build a daemon from a config in-process:
 *
 *     struct vdsmd d = {0};
 *     config_load(&d.cfg, ...);           // or fill d.cfg by hand
 *     d.loop = ev_loop_new(0);            // daemon_init makes one with ev_loop_new when NULL
 *                                         // (never ev_default_loop: it reaps every child)
 *     if (daemon_init(&d, why, sizeof why) == 0) { ...; ev_run(d.loop, 0); }
 *     daemon_fini(&d);                    // frees everything, incl. d.cfg
 *
 * Wiring order: codec → plaintext check → listener bound (its info line is
 * the first) → privileges dropped (`user`) →
 * engine (declare, bind, seal) → event bus → pool → host/virt/storage →
 * broker and accept. */
#ifndef VD_VDSMD_DAEMON_H
#define VD_VDSMD_DAEMON_H

#include "vdsmd.h"

/* 0, or a vd_err with a message naming what stopped startup in why. */
int daemon_init(struct vdsmd *d, char *why, size_t whylen);
/* What d->report_ready points at after daemon_init: the engine becomes
 * ready (code 99 ends, events flow) once "host" and "virt" have both
 * reported; other names are ignored. */
void daemon_subsystem_ready(struct vdsmd *d, const char *which);
/* Stops accepting, closes connections, stops subsystems, frees everything. */
void daemon_fini(struct vdsmd *d);
/* The whole daemon: config, logging, init, loop until SIGTERM/SIGINT.
 * Returns the process exit status. */
int daemon_main(int argc, char **argv);

/* Security (privs.c).  True when every address `addr` resolves to is a
 * loopback one (127/8, ::1). */
bool daemon_addr_is_loopback(const char *addr);
/* tls off on a non-loopback listen address: VD_EINVAL with why unless
 * allow_plaintext is set, then a loud warning is logged and 0 returned. */
int daemon_check_plaintext(const struct vd_config *cfg, char *why, size_t whylen);
/* Switch to `user` (supplementary groups, gid, uid) for good; "" or NULL:
 * nothing.  Unknown user, or not root and not that user already: error. */
int daemon_drop_privileges(const char *user, char *why, size_t whylen);

#endif
