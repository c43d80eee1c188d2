/* tests/fuzz/fuzz_storage_meta.c - libFuzzer target for the storage
 * metadata parser (vdsmd/storage/st_meta.c).  Metadata files live on shared
 * storage (NFS, POSIX), so their bytes are untrusted: kv_parse must never
 * crash or read out of bounds, and whatever it accepts must survive
 * kv_format -> kv_parse unchanged (same keys, same values, same order). */
#include <stdlib.h>
#include <string.h>

#include "vdsmd/storage/st.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	if (size)
		memcpy(copy, data, size);
	struct st_kv kv;
	if (kv_parse(&kv, copy, size) == 0) {
		struct vd_buf b = VD_BUF_INIT;
		kv_format(&kv, &b);
		struct st_kv again;
		if (kv_parse(&again, b.data, b.len) != 0)
			abort();
		if (again.n != kv.n)
			abort();
		for (size_t i = 0; i < kv.n; i++)
			if (strcmp(kv.keys[i], again.keys[i]) != 0 ||
			    strcmp(kv.vals[i], again.vals[i]) != 0)
				abort();
		kv_free(&again);
		buf_free(&b);
		kv_free(&kv);
	}
	free(copy);
	return 0;
}
