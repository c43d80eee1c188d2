/* tests/fuzz/fuzz_msgpack.c - libFuzzer target: the msgpack decoder on arbitrary
 * bytes; accepted documents must round-trip through every codec. */
#include "fuzz_codec_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_decode_and_round_trip("msgpack", data, size);
}
