/* rpc/schema.c - lookups over the compiled-in schema (shared by the daemon
 * and vdsm-client).  The tables themselves are generated from the api/ YAML files
 * (rpc/schema.h). */
#include "schema.h"

#include <string.h>

const struct rpc_verb_decl *rpc_schema_find(const char *name)
{
	for (size_t f = 0; rpc_schema_families[f]; f++)
		for (const struct rpc_verb_decl *d = rpc_schema_families[f]; d->name; d++)
			if (strcmp(d->name, name) == 0)
				return d;
	return NULL;
}

const char *rpc_ptype_name(enum rpc_ptype t)
{
	switch (t) {
	case RPC_T_ANY: return "any";
	case RPC_T_STRING: return "string";
	case RPC_T_UUID: return "uuid";
	case RPC_T_INT: return "int";
	case RPC_T_INTSTR: return "int-or-string";
	case RPC_T_NUMBER: return "number";
	case RPC_T_BOOL: return "bool";
	case RPC_T_OBJECT: return "object";
	case RPC_T_ARRAY: return "array";
	}
	return "?";
}
