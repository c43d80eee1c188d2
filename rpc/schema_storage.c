/* rpc/schema_storage.c - declarations of the storage verb family (placeholder until
 * the family lands). */
#include "schema.h"

const struct rpc_verb_decl rpc_schema_storage[] = {
	{ .name = NULL },
};
