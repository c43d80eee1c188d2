/* vdsmd/storage/st_crash.c - the named crash points of test builds
 * (st_crash.h).  Nothing here exists in build/vdsmd. */
#include "st_crash.h"

#ifdef VD_TEST_HOOKS
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_CRASH_ENTRY(name, ops) { name, ops },
const struct st_crash_step st_crash_steps[] = { ST_CRASH_STEPS(ST_CRASH_ENTRY) };
const size_t st_crash_nsteps = sizeof(st_crash_steps) / sizeof(st_crash_steps[0]);

void st_crash_point(const char *step)
{
	bool known = false;
	for (size_t i = 0; i < st_crash_nsteps && !known; i++)
		known = strcmp(st_crash_steps[i].name, step) == 0;
	if (!known) {
		fprintf(stderr, "vdsmd: crash point \"%s\" is not in ST_CRASH_STEPS\n", step);
		abort();
	}
	const char *at = getenv("VDSMD_TEST_CRASH_AT");
	if (at && strcmp(at, step) == 0) {
		static const char msg[] = "vdsmd: VDSMD_TEST_CRASH_AT: SIGKILL\n";
		ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)w;
		raise(SIGKILL);
	}
}
#else
/* ISO C forbids an empty translation unit. */
typedef int st_crash_unused;
#endif
