/* rpc/schema_vm.c - declarations of the vm verb family (placeholder until
 * the family lands). */
#include "schema.h"

const struct rpc_verb_decl rpc_schema_vm[] = {
	{ .name = NULL },
};
