/* tests/unit/test_codec_golden.c - the golden corpus (tests/golden, see its
 * README.md) against every codec: expected accept/reject and value, exact
 * canonical re-encoding, round trips (decode -> encode -> decode in every
 * codec; JSON -> msgpack -> JSON), inputs in exactly-sized buffers (ASan sees
 * any read past len) and every truncation of the valid documents. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "check_main.h"

#define MAX_CASES 512

static char *case_names[MAX_CASES];
static int ncases;
static const char *golden_dir;

static const char *const json_codecs[] = { "yajl", "fallback", "auto" };

struct blob {
	char *data;
	size_t len;
};

static struct blob slurp(const char *name, const char *ext)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s%s", golden_dir, name, ext);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	struct blob b = { NULL, 0 };
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	/* exactly sized: a read past len is a heap overflow under ASan */
	b.data = xmalloc(n > 0 ? (size_t)n : 1);
	b.len = fread(b.data, 1, (size_t)n, f);
	fclose(f);
	return b;
}

static void encode(const struct vd_codec *c, const struct vd_value *v, struct vd_buf *b)
{
	struct vd_writer w;
	buf_reset(b);
	c->writer_init(&w, b);
	vw_value(&w, v);
	ck_assert_int_eq(w.error, 0);
	ck_assert_int_eq(w.depth, 0);
}

static void check_valid(const char *name, struct blob in, struct vd_arena *a)
{
	struct blob exp = slurp(name, ".expect");
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error e;
	struct vd_value *ref = NULL, *v, *back;
	struct vd_buf b = VD_BUF_INIT;
	for (size_t k = 0; k < VD_ARRAY_SIZE(json_codecs); k++) {
		const struct vd_codec *c = codec_find(json_codecs[k]);
		int rc = c->decode(a, in.data, in.len, &lim, &v, &e);
		ck_assert_msg(rc == 0, "%s rejected %s at %zu: %s", c->name, name, e.offset,
			      e.reason);
		if (!ref)
			ref = v;
		/* the same tree in every codec */
		ck_assert_msg(vd_value_equal(ref, v), "%s: %s decodes differently", c->name, name);
		/* canonical text */
		encode(c, v, &b);
		ck_assert_msg(b.len == exp.len && memcmp(b.data, exp.data, b.len) == 0,
			      "%s: %s encodes as '%.*s', expected '%.*s'", c->name, name,
			      (int)b.len, b.data, (int)exp.len, exp.data);
		/* decode -> encode -> decode, in each JSON codec */
		for (size_t j = 0; j < VD_ARRAY_SIZE(json_codecs); j++) {
			const struct vd_codec *d = codec_find(json_codecs[j]);
			ck_assert_int_eq(d->decode(a, b.data, b.len, &lim, &back, &e), 0);
			ck_assert_msg(vd_value_equal(ref, back), "%s->%s: %s round trip differs",
				      c->name, d->name, name);
		}
	}
	const struct vd_codec *mp = codec_find("msgpack");
	if (mp) {
		/* JSON -> msgpack -> JSON keeps every value */
		encode(mp, ref, &b);
		ck_assert_msg(mp->decode(a, b.data, b.len, &lim, &back, &e) == 0,
			      "msgpack rejected its own encoding of %s: %s", name, e.reason);
		ck_assert_msg(vd_value_equal(ref, back), "msgpack: %s round trip differs", name);
		/* back points into b: encode into another buffer */
		struct vd_buf j = VD_BUF_INIT;
		encode(codec_find("fallback"), back, &j);
		ck_assert_msg(j.len == exp.len && memcmp(j.data, exp.data, j.len) == 0,
			      "msgpack: %s comes back as '%.*s'", name, (int)j.len, j.data);
		buf_free(&j);
	}
	/* every truncation: a clean answer, never a crash or an over-read */
	for (size_t k = 0; k < VD_ARRAY_SIZE(json_codecs); k++) {
		const struct vd_codec *c = codec_find(json_codecs[k]);
		for (size_t n = 0; n < in.len && n < 300; n++) {
			char *cut = xmalloc(n ? n : 1);
			memcpy(cut, in.data, n);
			int rc = c->decode(a, cut, n, &lim, &v, &e);
			ck_assert(rc == 0 || rc == VD_EPROTO || rc == VD_EDEPTH);
			if (rc)
				ck_assert_uint_le(e.offset, n);
			free(cut);
		}
	}
	buf_free(&b);
	free(exp.data);
}

static void check_invalid(const char *name, struct blob in, struct vd_arena *a, int want)
{
	struct vd_limits lim = VD_LIMITS_DEFAULT;
	struct vd_codec_error e;
	struct vd_value *v;
	for (size_t k = 0; k < VD_ARRAY_SIZE(json_codecs); k++) {
		const struct vd_codec *c = codec_find(json_codecs[k]);
		memset(&e, 0, sizeof(e));
		int rc = c->decode(a, in.data, in.len, &lim, &v, &e);
		ck_assert_msg(rc == want, "%s: %s gave %d, expected %d", c->name, name, rc, want);
		ck_assert_int_eq(e.code, want);
		ck_assert_msg(e.reason && *e.reason, "%s: %s without a reason", c->name, name);
		ck_assert_uint_le(e.offset, in.len);
	}
	/* auto refuses with yajl's very error, whatever the body's size */
	struct vd_codec_error ey;
	ck_assert_int_eq(codec_find("yajl")->decode(a, in.data, in.len, &lim, &v, &ey), want);
	ck_assert_int_eq(codec_find("auto")->decode(a, in.data, in.len, &lim, &v, &e), want);
	ck_assert_msg(e.offset == ey.offset && strcmp(e.reason, ey.reason) == 0,
		      "auto: %s refused with '%s' at %zu, yajl with '%s' at %zu", name, e.reason,
		      e.offset, ey.reason, ey.offset);
}

START_TEST(test_golden_case)
{
	const char *name = case_names[_i];
	struct vd_arena a;
	arena_init(&a, 0);
	struct blob in = slurp(name, ".json");
	if (name[0] == 'y')
		check_valid(name, in, &a);
	else
		check_invalid(name, in, &a, name[0] == 'd' ? VD_EDEPTH : VD_EPROTO);
	free(in.data);
	arena_free(&a);
}
END_TEST

START_TEST(test_corpus_size)
{
	int y = 0, n = 0;
	for (int i = 0; i < ncases; i++)
		if (case_names[i][0] == 'y')
			y++;
		else
			n++;
	ck_assert_int_ge(y, 40);
	ck_assert_int_ge(n, 40);
}
END_TEST

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_cases(void)
{
	golden_dir = getenv("VD_GOLDEN_DIR");
	if (!golden_dir)
		golden_dir = "tests/golden";
	DIR *d = opendir(golden_dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) && ncases < MAX_CASES) {
		size_t l = strlen(de->d_name);
		if (l > 7 && strchr("ynd", de->d_name[0]) && de->d_name[1] == '_' &&
		    strcmp(de->d_name + l - 5, ".json") == 0)
			case_names[ncases++] = xstrndup(de->d_name, l - 5);
	}
	closedir(d);
	qsort(case_names, (size_t)ncases, sizeof(case_names[0]), cmp_names);
}

int main(void)
{
	load_cases();
	Suite *s = suite_create("codec_golden");
	TCase *tc = tcase_create("golden");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_corpus_size);
	tcase_add_loop_test(tc, test_golden_case, 0, ncases);
	suite_add_tcase(s, tc);
	int rc = check_run(s);
	for (int i = 0; i < ncases; i++)
		free(case_names[i]);
	return rc;
}
