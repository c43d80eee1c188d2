/* rpc/schema.h - the declaration tables generated from the api/ YAML files by
 * api/gen.py into $(BUILD)/gen/api_schema.c: one table per backend (the
 * verbs it implements, bound to its handler table) and one of the verbs
 * declared but not implemented.  All are listed in rpc_schema_families. */
#ifndef VD_RPC_SCHEMA_H
#define VD_RPC_SCHEMA_H

#include "rpc.h"

extern const struct rpc_verb_decl rpc_schema_host[];     /* backend: host */
extern const struct rpc_verb_decl rpc_schema_vm[];       /* backend: virt */
extern const struct rpc_verb_decl rpc_schema_storage[];  /* backend: storage */
extern const struct rpc_verb_decl rpc_schema_net[];      /* backend: net */
extern const struct rpc_verb_decl rpc_schema_image[];    /* backend: image */
extern const struct rpc_verb_decl rpc_schema_unimplemented[];  /* implemented: false */

#endif
