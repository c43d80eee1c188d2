/* codecs/registry.c - the codecs compiled in, found by name or content type.
 * The only file with #ifdef WITH_*. */
#include "codec.h"
#include "codecs.h"

#include <strings.h>

static const struct vd_codec *const all_codecs[] = {
	&codec_yajl,
	&codec_fallback,
#ifdef WITH_MSGPACK
	&codec_msgpack,
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
	return strcmp(name, "yajl") == 0 || strcmp(name, "fallback") == 0 ||
	       strcmp(name, "msgpack") == 0;
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
