/* codecs/codecs.h - the codec instances (use codec_find() rather than these
 * directly outside codecs/). */
#ifndef VD_CODECS_CODECS_H
#define VD_CODECS_CODECS_H

#include "codec.h"

extern const struct vd_codec codec_yajl;
extern const struct vd_codec codec_fallback;
#ifdef WITH_MSGPACK
extern const struct vd_codec codec_msgpack;
#endif

#endif
