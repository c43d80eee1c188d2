/* vdsmd/negotiate.c - the codec a request speaks, from its content-type:
 * shared by the protocol handlers (STOMP glue in server.c, http.c, broker
 * mode), below them and the daemon (it reads only d->codec and the codec
 * registry). */
#include "vdsmd.h"

#include <string.h>

const struct vd_codec *daemon_codec_for(const struct vdsmd *d, const char *ct, size_t ctlen)
{
	if (!ct || ctlen == 0)
		return d->codec;
	/* The common case without the registry walk. */
	if (ctlen == 16 && memcmp(ct, "application/json", 16) == 0 && d->codec->is_json)
		return d->codec;
	const struct vd_codec *k = codec_find_content_type(ct, ctlen);
	if (!k)
		return NULL;
	if (k->is_json)
		return d->codec->is_json ? d->codec : k;
	return k;
}
