/* io/tls_linked.c - the OpenSSL table of the binary's own libssl (vdsmd).
 * A file of its own: linking it is what makes a binary depend on libssl. */
#include "io.h"
#include "tls_lib.h"

static const struct io_tls_lib linked = {
#define IO_TLS_LINK(f) .f = (f),
	IO_TLS_FUNCS(IO_TLS_LINK)
#undef IO_TLS_LINK
};

const struct io_tls_lib *io_tls_lib_linked(void)
{
	return &linked;
}
