/* tests/unit/test_codec_double.c - doubles as the JSON emitter writes them
 * (issue 25 moved the 15-17 digit case from printf to integer arithmetic,
 * codecs/fmt_double.c): for every double, the first of "%.15g", "%.16g",
 * "%.17g" that reads back with strtod, ".0" added when that looks like an
 * integer, null for NaN and the infinities - checked against printf itself
 * on random and boundary values.  And numbers as the fallback decoder reads
 * them (digits are taken 8 at a time since issue 25): every length of
 * integer and fraction against strtoull/strtod. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "check_main.h"

/* What the emitter must write for d, from printf and strtod. */
static void reference(double d, char *out, size_t cap)
{
	if (!isfinite(d)) {
		snprintf(out, cap, "null");
		return;
	}
	int n = 0;
	for (int prec = fabs(d) < 2.2250738585072014e-308 ? 1 : 15; prec <= 17; prec++) {
		n = snprintf(out, cap, "%.*g", prec, d);
		if (prec == 17 || strtod(out, NULL) == d)
			break;
	}
	if (!strpbrk(out, ".e"))
		snprintf(out + n, cap - (size_t)n, ".0");
}

static void check_one(double d)
{
	struct vd_buf b = VD_BUF_INIT;
	struct vd_writer w;
	codec_find("fallback")->writer_init(&w, &b);
	vw_double(&w, d);
	ck_assert_int_eq(w.error, 0);
	char want[64];
	reference(d, want, sizeof(want));
	ck_assert_msg(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0,
		      "%.17g: wrote %.*s, want %s", d, (int)b.len, b.data, want);
	/* and it reads back (NaN and the infinities excepted) */
	if (isfinite(d)) {
		char tmp[64];
		memcpy(tmp, b.data, b.len);
		tmp[b.len] = '\0';
		ck_assert(strtod(tmp, NULL) == d);
	}
	buf_free(&b);
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

START_TEST(test_random_in_range)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	const double lo = log(1e-5), hi = log(1e16);
	for (int i = 0; i < 200000; i++) {
		uint64_t r = rng_next(&s);
		double d = exp(lo + (hi - lo) * (double)(r >> 11) / 9007199254740992.0);
		check_one((r & 1) ? -d : d);
	}
	/* computed values as the stats have them (4295012.34 + i * 0.01) */
	for (int i = 0; i < 20000; i++)
		check_one(4295012.34 + i * 0.01);
}
END_TEST

START_TEST(test_random_bits)
{
	uint64_t s = 0x2545f4914f6cdd1dull;
	for (int i = 0; i < 100000; i++) {
		uint64_t bits = rng_next(&s);
		double d;
		memcpy(&d, &bits, sizeof(d));
		check_one(d);
	}
}
END_TEST

START_TEST(test_boundaries)
{
	const double v[] = { 1e-4, 1e15, 9.999999999999999e14, 999999999999999.9,
			     123456789012345.5, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 3e-4,
			     0.00010000000000000001, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
			     0.0, -0.0, NAN, INFINITY, -INFINITY };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		check_one(v[i]);
		check_one(-v[i]);
		if (isfinite(v[i])) {
			check_one(nextafter(v[i], 0));
			check_one(nextafter(v[i], INFINITY));
		}
	}
	/* powers of two, where the gap below is half the gap above */
	for (int e = -30; e < 60; e++) {
		double p = ldexp(1, e);
		check_one(p);
		check_one(nextafter(p, 0));
		check_one(nextafter(p, INFINITY));
	}
}
END_TEST

/* The value the fallback decoder gives the number text s. */
static struct vd_value decoded(const char *s)
{
	struct vd_arena a;
	arena_init(&a, 0);
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_value *v = NULL;
	struct vd_codec_error err = { 0, NULL, 0 };
	ck_assert_msg(codec_find("fallback")->decode(&a, s, strlen(s), &lim, &v, &err) == 0,
		      "%s: %s", s, err.reason);
	struct vd_value r = *v;
	arena_free(&a);
	return r;
}

START_TEST(test_digit_runs)
{
	uint64_t st = 0x853c49e6748fea9bull;
	char s[80];
	for (int len = 1; len <= 26; len++) {
		for (int rep = 0; rep < 300; rep++) {
			int n = 0;
			if (rep & 1)
				s[n++] = '-';
			for (int i = 0; i < len; i++) {
				unsigned dg = (unsigned)(rng_next(&st) % 10);
				s[n++] = (char)('0' + (i == 0 && dg == 0 && len > 1 ? 1 : dg));
			}
			s[n] = '\0';
			struct vd_value v = decoded(s);
			errno = 0;
			unsigned long long u = strtoull(s + (s[0] == '-'), NULL, 10);
			bool fits = errno == 0;
			if (s[0] != '-' && fits) {
				ck_assert_msg(v.type == (u <= INT64_MAX ? VD_INT : VD_UINT), "%s", s);
				ck_assert_msg(v.type == VD_INT ? (uint64_t)v.v.i == u : v.v.u == u, "%s", s);
			} else if (s[0] == '-' && fits && u <= (unsigned long long)INT64_MAX + 1) {
				ck_assert_msg(v.type == VD_INT && v.v.i == strtoll(s, NULL, 10), "%s", s);
			} else {
				ck_assert_msg(v.type == VD_DOUBLE && v.v.d == strtod(s, NULL), "%s", s);
			}
			/* the same digits with a fraction and an exponent */
			int f = (int)(rng_next(&st) % 20) + 1;
			s[n++] = '.';
			for (int i = 0; i < f; i++)
				s[n++] = (char)('0' + rng_next(&st) % 10);
			snprintf(s + n, sizeof(s) - (size_t)n, "e%d", (int)(rng_next(&st) % 40) - 20);
			v = decoded(s);
			ck_assert_msg(v.type == VD_DOUBLE && v.v.d == strtod(s, NULL), "%s: %.17g vs %.17g",
				      s, v.v.d, strtod(s, NULL));
		}
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codec_double");
	TCase *tc = tcase_create("double");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_random_in_range);
	tcase_add_test(tc, test_random_bits);
	tcase_add_test(tc, test_boundaries);
	tcase_add_test(tc, test_digit_runs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(suite());
}
