/* tests/unit/crash_harness.h - the kill -9 harness of the storage crash
 * tests (test_storage_crash*.c): a child forked to run an operation with
 * VDSMD_TEST_CRASH_AT=<step> must die by SIGKILL at that crash point
 * (vdsmd/storage/st_crash.h); what it left running (its qemu-img) is killed
 * and reaped, as systemd kills the service's cgroup; every step of an
 * operation is run so.  Header-only (static inline), for VD_TEST_HOOKS
 * builds, where the crash points exist. */
#ifndef VD_TESTS_UNIT_CRASH_HARNESS_H
#define VD_TESTS_UNIT_CRASH_HARNESS_H

#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/vd.h"
#include "vdsmd/storage/st.h"

/* qemu-img / qemu-io children left running by crashed children, killed */
static unsigned crash_orphans_killed;

/* system() of a formatted command line: its exit status, -1 if it died. */
static inline int crash_sh(const char *fmt, ...) VD_PRINTF(1, 2);
static inline int crash_sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	ck_assert_msg(n >= 0 && (size_t)n < sizeof(cmd), "command line too long: %s", cmd);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Kill and reap what the crashed child left running: this process is the
 * subreaper of its children's children (crash_each_step). */
static inline void crash_kill_orphans(void)
{
	DIR *dh = opendir("/proc");
	struct dirent *de;
	pid_t me = getpid();
	while (dh && (de = readdir(dh))) {
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid <= 0)
			continue;
		char p[64], buf[512];
		snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		char *rp = strrchr(buf, ')');
		int ppid = 0;
		char stc;
		if (rp && sscanf(rp + 1, " %c %d", &stc, &ppid) == 2 && ppid == me) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			crash_orphans_killed++;
		}
	}
	if (dh)
		closedir(dh);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Fork a child that runs child(op) with VDSMD_TEST_CRASH_AT=step; it must
 * die there by SIGKILL (child returning or exiting fails the test: the step
 * was not reached).  meanwhile (NULL: none) runs once it died, while what
 * it left running still runs; its orphans are killed before this returns. */
static inline void crash_fork_at_then(const char *step, unsigned op, void (*child)(unsigned op),
				      const char *ctx, void (*meanwhile)(const char *ctx))
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("VDSMD_TEST_CRASH_AT", step, 1);
		child(op);
		_exit(2);
	}
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (meanwhile && WIFSIGNALED(status))
		meanwhile(ctx);
	crash_kill_orphans();
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "%s: the child was not killed at the step (%s %d)", ctx,
		      WIFSIGNALED(status) ? "signal" : "exit status",
		      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static inline void crash_fork_at(const char *step, unsigned op, void (*child)(unsigned op),
				 const char *ctx)
{
	crash_fork_at_then(step, op, child, ctx, NULL);
}

/* run(step, arg) for every step of st_crash_steps whose operations include
 * one of mask, in the list's order; returns how many (at least one). */
static inline unsigned crash_each_step(unsigned mask, void (*run)(const char *step, void *arg),
				       void *arg)
{
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	unsigned n = 0;
	for (size_t i = 0; i < st_crash_nsteps; i++) {
		if (!(st_crash_steps[i].ops & mask))
			continue;
		run(st_crash_steps[i].name, arg);
		n++;
	}
	ck_assert_uint_gt(n, 0);
	return n;
}

#endif
