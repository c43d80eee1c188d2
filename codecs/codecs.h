/* codecs/codecs.h - the codec instances (use codec_find() rather than these
 * directly outside codecs/). */
#ifndef VD_CODECS_CODECS_H
#define VD_CODECS_CODECS_H

#include "codec.h"

extern const struct vd_codec codec_auto;
extern const struct vd_codec codec_yajl;
extern const struct vd_codec codec_fallback;
/* Defined only when the build has msgpack (WITH_MSGPACK): registry.c, the
 * one file that tests WITH_*, is the one that refers to it. */
extern const struct vd_codec codec_msgpack;

#endif
