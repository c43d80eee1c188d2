/* rpc/schema_host.c - declarations of the host verb family (placeholder until
 * the family lands). */
#include "schema.h"

const struct rpc_verb_decl rpc_schema_host[] = {
	{ .name = NULL },
};
