/* rpc/schema.h - the per-family declaration tables listed in rpc/schema.c. */
#ifndef VD_RPC_SCHEMA_H
#define VD_RPC_SCHEMA_H

#include "rpc.h"

extern const struct rpc_verb_decl rpc_schema_host[];     /* rpc/schema_host.c */
extern const struct rpc_verb_decl rpc_schema_vm[];       /* rpc/schema_vm.c */
extern const struct rpc_verb_decl rpc_schema_storage[];  /* rpc/schema_storage.c */

#endif
