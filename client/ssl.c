/* client/ssl.c - resolve the OpenSSL functions vdsm-client uses (see ssl.h). */
#include "ssl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int client_ssl_load(struct client_ssl *s, char *why, size_t whylen)
{
	static const char *const names[] = { "libssl.so.3", "libssl.so" };
	void *h = NULL;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, whylen, "cannot load OpenSSL: %s", e ? e : "libssl.so.3 not found");
		return -1;
	}
	memset(s, 0, sizeof(*s));
#define CLIENT_SSL_RESOLVE(f)                                                         \
	do {                                                                          \
		void *p = dlsym(h, #f);                                               \
		if (!p) {                                                             \
			snprintf(why, whylen, "cannot load OpenSSL: no symbol %s", #f); \
			return -1;                                                    \
		}                                                                     \
		memcpy(&s->f, &p, sizeof(p));                                         \
	} while (0);
	CLIENT_SSL_FUNCS(CLIENT_SSL_RESOLVE)
#undef CLIENT_SSL_RESOLVE
	return 0;
}
