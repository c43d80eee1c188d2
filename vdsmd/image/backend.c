/* vdsmd/image/backend.c - backend selection by url scheme (see
 * backend.h). */
#include "backend.h"

#include <string.h>

int img_backend_open(const char *url, const struct img_backend_opts *opts, struct img_backend **out)
{
	*out = NULL;
	if (strncmp(url, "file:", 5) == 0)
		return img_backend_file_open(url, opts, out);
	if (strncmp(url, "nbd:", 4) == 0)
		return img_backend_nbd_open(url, opts, out);
	return VD_EINVAL;
}
