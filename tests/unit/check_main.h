/* tests/unit/check_main.h - the runner every Check unit test ends with:
 * run the suite (CK_NORMAL: Check's default fork mode, CK_FORK overrides),
 * free the runner, exit 0 when every test passed, 1 otherwise.  Header-only
 * so each test program keeps its own main(). */
#ifndef VD_TESTS_UNIT_CHECK_MAIN_H
#define VD_TESTS_UNIT_CHECK_MAIN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* A test that cannot run in this build (Check has no "skipped" outcome):
 * say so on stdout instead of registering it; tests/run-unit.sh counts
 * each "SKIP: " line as one skipped test. */
static inline void check_skip(const char *name, const char *why)
{
	printf("SKIP: %s: %s\n", name, why);
	fflush(stdout);
}

/* Runs s (the runner takes ownership of it) and returns main()'s exit code. */
static inline int check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
