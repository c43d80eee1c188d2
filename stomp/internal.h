/* stomp/internal.h - helpers shared by the files of stomp/ only (not part
 * of the module's API; other modules include stomp.h). */
#ifndef VD_STOMP_INTERNAL_H
#define VD_STOMP_INTERNAL_H

#include "stomp.h"

/* Command for the name s[0..n), or STOMP_NONE. */
enum stomp_cmd stomp_cmd_lookup(const char *s, size_t n);
/* Whether header names/values of this frame type are escaped (all but
 * CONNECT, STOMP and CONNECTED). */
bool stomp_cmd_escapes(enum stomp_cmd c);

/* Worst-case bytes of s[0..n) once escaped. */
static inline size_t stomp_escaped_max(size_t n)
{
	return 2 * n;
}

/* Writes s[0..n) at w (escaped when esc) and returns the end.  The caller
 * reserved stomp_escaped_max(n) bytes. */
char *stomp_put_escaped(char *w, const char *s, size_t n, bool esc);

static inline char *stomp_put(char *w, const char *s, size_t n)
{
	memcpy(w, s, n);
	return w + n;
}

#define STOMP_PUT_LIT(w, lit) stomp_put((w), (lit), sizeof(lit) - 1)

#endif
