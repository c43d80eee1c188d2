/* codecs/registry.c - the codecs compiled in, found by name or content type.
 * The only file with #ifdef WITH_*, and the one table of codec names: the
 * config check, its help text, startup's messages and content-type
 * negotiation all read it. */
#include "codec.h"
#include "codecs.h"

#include <stdio.h>
#include <strings.h>

/* In the order --help names them.  auto comes first among the JSON codecs:
 * it answers the JSON content type (codec_find_content_type), so
 * application/json stays one content type with one codec behind it. */
static const struct vd_codec *const all_codecs[] = {
	&codec_auto,
	&codec_yajl,
	&codec_fallback,
#ifdef WITH_MSGPACK
	&codec_msgpack,
#endif
	NULL,
};

/* Codecs of the source this build left out (named, not found). */
static const char *const left_out[] = {
#ifndef WITH_MSGPACK
	"msgpack",
#endif
	NULL,
};

const struct vd_codec *const *codec_list(void)
{
	return all_codecs;
}

const struct vd_codec *codec_find(const char *name)
{
	for (size_t i = 0; all_codecs[i]; i++)
		if (strcmp(all_codecs[i]->name, name) == 0)
			return all_codecs[i];
	return NULL;
}

bool codec_known(const char *name)
{
	if (codec_find(name))
		return true;
	for (size_t i = 0; left_out[i]; i++)
		if (strcmp(left_out[i], name) == 0)
			return true;
	return false;
}

void codec_names(char *buf, size_t size)
{
	const char *names[VD_ARRAY_SIZE(all_codecs) + VD_ARRAY_SIZE(left_out)];
	size_t n = 0, len = 0;
	for (size_t i = 0; all_codecs[i]; i++)
		names[n++] = all_codecs[i]->name;
	for (size_t i = 0; left_out[i]; i++)
		names[n++] = left_out[i];
	buf[0] = 0;
	for (size_t i = 0; i < n && len < size; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
		int w = snprintf(buf + len, size - len, "%s%s", sep, names[i]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}

const struct vd_codec *codec_find_content_type(const char *ct, size_t len)
{
	if (!ct || len == 0)
		return NULL;
	size_t n = 0;
	while (n < len && ct[n] != ';' && ct[n] != ' ' && ct[n] != '\t')
		n++;
	for (size_t i = 0; all_codecs[i]; i++) {
		const char *t = all_codecs[i]->content_type;
		if (strlen(t) == n && strncasecmp(t, ct, n) == 0)
			return all_codecs[i];
	}
	return NULL;
}
