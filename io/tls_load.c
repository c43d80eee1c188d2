/* io/tls_load.c - the OpenSSL table resolved from libssl loaded with
 * dlopen() (vdsm-client, see tls_lib.h).  The library is never closed:
 * OpenSSL registers atexit handlers. */
#include "io.h"
#include "tls_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int io_tls_lib_load(struct io_tls_lib *lib, char *why, size_t whylen)
{
	static const char *const names[] = { "libssl.so.3", "libssl.so" };
	void *h = NULL;
	for (size_t i = 0; i < VD_ARRAY_SIZE(names) && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, whylen, "cannot load OpenSSL: %s", e ? e : "libssl.so.3 not found");
		return VD_EUNSUPP;
	}
	memset(lib, 0, sizeof(*lib));
#define IO_TLS_RESOLVE(f)                                                             \
	do {                                                                          \
		void *p = dlsym(h, #f);                                               \
		if (!p) {                                                             \
			snprintf(why, whylen, "cannot load OpenSSL: no symbol %s", #f); \
			return VD_EUNSUPP;                                            \
		}                                                                     \
		memcpy(&lib->f, &p, sizeof(p));                                       \
	} while (0);
	IO_TLS_FUNCS(IO_TLS_RESOLVE)
#undef IO_TLS_RESOLVE
	return 0;
}
