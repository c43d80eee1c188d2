/* rpc/rpc.h - JSON-RPC 2.0 engine: verb schema, bindings, dispatch, errors.
 *
 * rpc/ knows no sockets and no verb internals.  The daemon (vdsmd/) builds an
 * engine at startup, binds handler tables to the declared schema, seals it,
 * and calls rpc_dispatch() for every request body.  The response bytes, fully
 * encoded by the request's codec, come back through a callback together with
 * the request id (never re-decoded).
 *
 * Schema vs bindings: the declarations are pure data shared with vdsm-client,
 * generated at build time from the API schema in the api/ YAML files (api/gen.py, see
 * api/README.md); the handlers live in the daemon and are bound by name.
 * rpc_engine_seal() fails, naming the verb, when an implemented verb has no
 * handler, a verb declared unimplemented has one, or a handler has no
 * declaration. */
#ifndef VD_RPC_RPC_H
#define VD_RPC_RPC_H

#include <stdarg.h>
#include "../codecs/codec.h"

/* ---- parameter schema ------------------------------------------------- */

enum rpc_ptype {
	RPC_T_ANY,      /* any JSON value */
	RPC_T_STRING,
	RPC_T_UUID,     /* string, canonical 36-char UUID (vd_is_uuid) */
	RPC_T_INT,      /* JSON integer (int or uint) */
	RPC_T_INTSTR,   /* integer, or a string of decimal digits (VDSM sizes);
			 * bound as an integer */
	RPC_T_NUMBER,   /* integer or double */
	RPC_T_BOOL,
	RPC_T_OBJECT,
	RPC_T_ARRAY,
};

struct rpc_param {
	const char *name;
	enum rpc_ptype type;
	bool required;
	const char *def;     /* default as JSON text (e.g. "0", "\"\"", "{}"), or NULL */
	const char *desc;
};

enum rpc_verb_flags {
	RPC_F_BLOCKING = 1u << 0,  /* runs on the worker pool */
	RPC_F_ALWAYS = 1u << 1,    /* answered even while the agent initializes (code 99) */
	/* Declared by the API schema but not implemented by vdsmd: it must
	 * have no handler, and a call answers -32601 naming it. */
	RPC_F_UNIMPLEMENTED = 1u << 2,
};

#define RPC_MAX_PARAMS 16
/* Requests in one batch; a larger batch is answered with one -32600 (bounds
 * the work and the reply a single body can cause).  Additive. */
#define RPC_MAX_BATCH 4096

struct rpc_verb_decl {
	const char *name;                /* "Namespace.verb" */
	const struct rpc_param *params;  /* declared order = positional order */
	unsigned nparams;
	unsigned flags;
	const char *result;              /* result type: an api/ type expression
					  * ("VmStats", "list<uuid>", "boolean") */
	const char *desc;
	const int *errors;               /* VDSM error codes the verb may return */
	unsigned nerrors;
};

/* The compiled-in schema, generated from the api/ YAML files: a NULL-name-terminated
 * array per backend (rpc/schema.h) plus one of the declared-but-unimplemented
 * verbs, all listed in rpc_schema_families.  Used by the daemon and
 * vdsm-client. */
extern const struct rpc_verb_decl *const rpc_schema_families[];
const struct rpc_verb_decl *rpc_schema_find(const char *name);
const char *rpc_ptype_name(enum rpc_ptype t);

/* ---- internal error values (mapped to wire codes in rpc/errors.c only) -- */

enum rpc_err {
	RPC_OK = 0,
	RPC_E_PARSE,          /* -32700 */
	RPC_E_INVALID_REQ,    /* -32600 */
	RPC_E_NO_METHOD,      /* -32601 */
	RPC_E_PARAMS,         /* -32602 */
	RPC_E_INTERNAL,       /* -32603 */
	RPC_E_NO_VM,          /* 1 */
	RPC_E_VM_EXISTS,      /* 4 */
	RPC_E_CREATE_VM,      /* 9 CannotCreateVM */
	RPC_E_NO_PEER,        /* 10 noConPeer (migration destination unreachable) */
	RPC_E_MIGRATION,      /* 12 MigrationError */
	RPC_E_MIGRATE_LIMIT,  /* 82 MigrationLimitExceeded (incoming) */
	RPC_E_NO_IMAGE_FILE,  /* 13 ImageFileNotFound (a VM's drive) */
	RPC_E_SNAPSHOT,       /* 48 SnapshotFailed (VM.snapshot) */
	RPC_E_MERGE,          /* 52 MergeFailed (VM.merge) */
	RPC_E_REPLICA,        /* 55 ReplicaError (VM.diskReplicate*: replicaErr) */
	RPC_E_UNAVAIL,        /* 40 ResourceUnavailable (unavail: not caught up yet) */
	RPC_E_NO_REPLICATION, /* 88 ReplicationNotInProgress */
	RPC_E_EXTERNAL_DATA,  /* 89 ExternalDataFailed (VM.getExternalData) */
	RPC_E_RECOVERING,     /* 99 */
	RPC_E_GENERAL,        /* 100 */
	RPC_E_NO_VOLUME,      /* 201 */
	RPC_E_VOLUME_EXISTS,  /* 212 VolumeAlreadyExists */
	RPC_E_NO_IMAGE,       /* 268 */
	RPC_E_NO_POOL,        /* 309 StoragePoolUnknown */
	RPC_E_WRONG_MASTER,   /* 324 StoragePoolWrongMaster */
	RPC_E_POOL_CONNECTED, /* 325 StoragePoolConnected */
	RPC_E_NOT_IN_POOL,    /* 353 StorageDomainNotInPool */
	RPC_E_DOM_STATE,      /* 347 StorageDomainIllegalStateError */
	RPC_E_NOT_MEMBER,     /* 375 StorageDomainNotMemberOfPool */
	RPC_E_DOM_STATUS,     /* 376 StorageDomainStatusError */
	RPC_E_DETACH_MASTER,  /* 383 CannotDetachMasterStorageDomain */
	RPC_E_DOM_VERSION,    /* 394 UnsupportedDomainVersion */
	RPC_E_VERSION_ADVANCED, /* 395 CurrentVersionTooAdvancedError */
	RPC_E_SPM_ACQUIRE,    /* 651 AcquireLockFailure */
	RPC_E_SPM_TASKS,      /* 653 SpmStopError (unfinished tasks) */
	RPC_E_NOT_SPM,        /* 654 SpmStatusError */
	RPC_E_NO_DOMAIN,      /* 358 */
	RPC_E_DOMAIN_EXISTS,  /* 365 */
	RPC_E_NO_TASK,        /* 401 */
	RPC_E_TASK_STATE,     /* 410 TaskStateError (task not in a state for the operation) */
	RPC_E_TASK_ABORTED,   /* 411 TaskAborted (the code an aborted task's result carries) */
	RPC_E_TASK_NOT_DONE,  /* 403 TaskNotFinished (Task.revert of a task not done) */
	RPC_E_TASK_MOVE,      /* 441 TaskStateTransitionError (revert of a rolled-back task) */
	RPC_E_NO_RESOURCES,   /* 1100 */
	/* guest and block verbs of the VM (virt/guest.c, virt/blockops.c) */
	RPC_E_VM_DOWN,        /* 6 VMIsDown */
	RPC_E_AGENT_NONRESP,  /* 19 NonResponsiveGuestAgent */
	RPC_E_MISSING_PARAM,  /* 11 MissingParameter */
	RPC_E_NOT_IMPL,       /* 44 MethodNotImplemented */
	RPC_E_RESIZE,         /* 58 BadDiskResizeParameter */
	RPC_E_VM_POLICY,      /* 63 UpdateVMPolicyFailed */
	RPC_E_UNSUPPORTED,    /* 75 UnsupportedOperation */
	RPC_E_FREEZE,         /* 76 FreezeGuestFSFailed */
	RPC_E_THAW,           /* 77 ThawGuestFSFailed */
	/* host networking (VDSM lib/vdsm/network/errors.py) */
	RPC_E_NET_LOST_CONN,    /* 10 ERR_LOST_CONNECTION (connectivity check failed) */
	RPC_E_NET_BAD_PARAMS,   /* 21 ERR_BAD_PARAMS */
	RPC_E_NET_BAD_ADDR,     /* 22 ERR_BAD_ADDR */
	RPC_E_NET_BAD_NIC,      /* 23 ERR_BAD_NIC */
	RPC_E_NET_USED_NIC,     /* 24 ERR_USED_NIC */
	RPC_E_NET_BAD_BONDING,  /* 25 ERR_BAD_BONDING */
	RPC_E_NET_BAD_VLAN,     /* 26 ERR_BAD_VLAN */
	RPC_E_NET_BAD_BRIDGE,   /* 27 ERR_BAD_BRIDGE */
	RPC_E_NET_FAILED_IFUP,  /* 29 ERR_FAILED_IFUP */
	RPC_E_NET_USED_BOND,    /* 31 ERR_USED_BOND */
	/* live device changes of a VM (virt/devices.c, virt/memory.c) */
	RPC_E_TICKET,           /* 18 SpiceTicketError */
	RPC_E_CHANGE_DISK,      /* 41 ChangeDiskFailed */
	RPC_E_HOTPLUG_NIC,      /* 49 HotplugNicFailed */
	RPC_E_UPDATE_DEVICE,    /* 56 UpdateDeviceFailed */
	RPC_E_HOTPLUG_MEM,      /* 70 HotplugMemFailed */
	RPC_E_HOTUNPLUG_MEM,    /* 85 HotunplugMemFailed */
	RPC_E_MASTER_ERR,       /* 355 StorageDomainMasterError (lease unreadable) */
	RPC_E_HOTPLUG_DISK,     /* 45 HotplugDiskFailed */
	RPC_E_HOTUNPLUG_DISK,   /* 46 HotunplugDiskFailed */
	RPC_E_MIG_CANCEL,       /* 47 MigrationCancelationFailed (none in progress) */
	RPC_E_HOTUNPLUG_NIC,    /* 50 HotunplugNicFailed */
	RPC_E_UNEXPECTED,       /* 16 UnexpectedError (e.g. cont of a VM that cannot resume) */
	RPC_E_GEN_MISMATCH,     /* 911 GenerationMismatch (vol_info.generation) */
	RPC_E_NOT_IN_CHAIN,     /* 920 VolumeIsNotInChain (cold merge subchain) */
	RPC_E_WRONG_PARENT,     /* 921 WrongParentVolume (top's parent is not base) */
	RPC_E_SHARED_RO,        /* 219 SharedVolumeNonWritable (a template's volume) */
	RPC_E_MERGE_BITMAP,     /* 1621 MergeBitmapError (SDM.merge merge_bitmaps) */
	RPC_E_ADD_BITMAP,       /* 1620 AddBitmapError */
	RPC_E_REMOVE_BITMAP,    /* 1622 RemoveBitmapError */
	RPC_E_ST_UNSUPPORTED,   /* 2009 storage UnsupportedOperation (clear_bitmaps of raw) */
	/* image tickets (VDSM storage/exception.py; vdsmd/image/) */
	RPC_E_IMAGE_TICKETS,    /* 481 ImageTicketsError (the ticket table cannot take it) */
	RPC_E_IMAGE_DAEMON,     /* 482 ImageDaemonError (the image daemon refused the request) */
	RPC_E_IMAGE_UNSUPPORTED, /* 483 ImageDaemonUnsupported (no image backend) */
	RPC_E_POOL_NOT_CONN,    /* 313 StoragePoolNotConnected */
	RPC_E_BITMAP_CHAIN,     /* 946 InvalidBitmapChain (in use, disabled, a hole) */
	RPC_E_NO_BITMAP,        /* 947 BitmapDoesNotExist */
	RPC_E_BACKUP,           /* 1600 BackupError */
	RPC_E_NO_BACKUP,        /* 1601 NoSuchBackupError */
	RPC_E_CHECKPOINT,       /* 1610 CheckpointError */
	RPC_E_NO_CHECKPOINT,    /* 1611 NoSuchCheckpointError */
	RPC_E_CHECKPOINT_BAD,   /* 1612 InconsistentCheckpointError */
	RPC_E_VOL_UPDATE,       /* 235 InvalidVolumeUpdate (SDM.update_volume) */
	RPC_E_IMAGE_VERIFY,     /* 484 ImageVerificationError (Volume.verify_untrusted) */
	RPC_E_STORAGE,          /* 200 StorageException (a domain monitor's other failures) */
	RPC_E_DOM_ACTION,       /* 350 StorageDomainActionError (monitor: bad metadata) */
	RPC_E_CONN_ERROR,       /* 451 StorageServerConnectionError (a connection's status) */
	RPC_E_DISCONN_ERROR,    /* 452 StorageServerDisconnectionError */
	RPC_E_CONN_ACCESS,      /* 469 StorageServerAccessPermissionError */
	RPC_E_MOUNT_TYPE,       /* 470 MountTypeError */
	RPC_E_MOUNT,            /* 477 MountError */
	RPC_E__COUNT
};

/* Wire code and message prefix for an internal error. */
int rpc_err_code(enum rpc_err e);
const char *rpc_err_message(enum rpc_err e);

/* ---- handlers ---------------------------------------------------------- */

struct rpc_call {
	const struct rpc_verb_decl *verb;
	/* Arguments by declared position, after validation and defaults; NULL
	 * for an absent optional parameter without a default. */
	const struct vd_value *args[RPC_MAX_PARAMS];
	struct vd_writer *w;      /* write exactly one result value, or nothing → true */
	struct vd_arena *arena;   /* request lifetime scratch */
	void *app;                /* the pointer given to rpc_engine_bind() */
	const char *flow_id;      /* ovirtCorrelationId or NULL */
	/* The server-side address of the connection the request came on
	 * (numeric, no port; IPv4-mapped IPv6 given as IPv4), or NULL when the
	 * transport has none (broker mode, tests).  Host.getCapabilities'
	 * lastClientIface is the device holding it. */
	const char *local_addr;
	/* set by rpc_fail() */
	enum rpc_err err;
	char err_detail[256];
	/* rpc_result_borrow(): where a borrowed result is recorded, NULL when
	 * the request cannot take one (batch member, worker job) */
	struct rpc_borrow *borrow;
};

/* A result held elsewhere (rpc_result_borrow). */
struct rpc_borrow {
	const char *bytes;
	size_t len;
	size_t at;                 /* where it goes in the response bytes */
	void (*release)(void *hold);
	void *hold;
};

/* The handler's whole result is bytes[0..len), already encoded with the
 * request's codec (one value), valid until release(hold) is called.  A
 * transport that writes pieces (rpc_dispatch_pieces) sends it from where
 * it is, so a large cached result is not copied into the response; otherwise
 * (and in a batch, a worker job or a msgpack request) it is copied now.  release is always
 * called exactly once, at the latest after the reply callback returned. */
void rpc_result_borrow(struct rpc_call *c, const char *bytes, size_t len,
		       void (*release)(void *hold), void *hold);

/* Returns 0 on success, or the (negative) value of rpc_fail(). */
typedef int (*rpc_handler)(struct rpc_call *c);

struct rpc_binding {
	const char *name;
	rpc_handler fn;
};

/* The result of a verb that VDSM's Bridge answers with the call's status
 * ('ret': 'status': Host.setupNetworks, VM.setIoTune, VM.setBalloonTarget,
 * VM.updateVmPolicy, VM.stop_backup): {"code": 0, "message": "Done"}, the
 * api/ type CallStatus.  The engine reads setupNetworks' as a Map
 * (JsonRpcVdsServer withResponseKey("status"), StatusOnlyReturn). */
void rpc_write_done(struct rpc_call *c);

/* Record an error for the response; returns -1 for `return rpc_fail(...)`.
 * The wire message is rpc_err_message(e) followed by ": " and the detail. */
int rpc_fail(struct rpc_call *c, enum rpc_err e, const char *fmt, ...) VD_PRINTF(3, 4);

/* Argument accessors by parameter name (a name not declared by the verb is a
 * programmer error and aborts). */
const struct vd_value *rpc_arg(const struct rpc_call *c, const char *name);
/* String argument (NULL if absent); *len receives the length when non-NULL.
 * The string is NUL-terminated (the engine copies it when needed). */
const char *rpc_arg_str(const struct rpc_call *c, const char *name, size_t *len);
/* Integer argument (RPC_T_INT/INTSTR, bound as an int), or dflt when absent. */
int64_t rpc_arg_int(const struct rpc_call *c, const char *name, int64_t dflt);
/* Member key of the object argument param (VM.create's vmParams), read as
 * an RPC_T_INTSTR param is: a JSON integer, or a string of decimal digits
 * within int64 ("1024"), and within lo..hi.  Returns 0 with *out set (dflt
 * when the member is absent or null, or obj is not an object), or fails the
 * call as the schema fails a mistyped param (-32602, "param 'vmParams.smp'
 * of VM.create must be int-or-string, got ...") and returns -1.  The one
 * coercion a handler uses for members the schema does not describe. */
int rpc_member_int(struct rpc_call *c, const char *param, const struct vd_value *obj,
		   const char *key, int64_t lo, int64_t hi, int64_t dflt, int64_t *out);
bool rpc_arg_bool(const struct rpc_call *c, const char *name, bool dflt);

/* ---- engine ------------------------------------------------------------ */

struct rpc_engine;

/* Hook for RPC_F_BLOCKING verbs: run job(arg) on another thread and later call
 * done(arg) on the dispatching thread.  Returns 0, or VD_EBUSY when the queue
 * is full (the engine then answers code 1100 at once).  When no hook is set,
 * blocking verbs run inline. */
typedef int (*rpc_submit_fn)(void *pool, void (*job)(void *arg),
			     void (*done)(void *arg), void *arg);

struct rpc_engine *rpc_engine_new(const struct vd_limits *lim);
/* No blocking job may be outstanding: free the pool (which runs the
 * remaining completions) before the engine. */
void rpc_engine_free(struct rpc_engine *e);
/* Declare every family of rpc_schema_families (or extra tables, for tests). */
int rpc_engine_declare(struct rpc_engine *e, const struct rpc_verb_decl *decls);
/* Declare every table of rpc_schema_families (additive convenience). */
int rpc_engine_declare_schema(struct rpc_engine *e);
/* The declaration of a verb in a sealed engine, or NULL (O(1)). */
const struct rpc_verb_decl *rpc_engine_find(const struct rpc_engine *e, const char *name);
/* Bind a NULL-name-terminated handler table; app is passed to each handler. */
int rpc_engine_bind(struct rpc_engine *e, const struct rpc_binding *b, void *app);
/* Check that declarations and bindings match one to one and build the lookup
 * table.  On failure returns VD_EINVAL and writes a reason naming the verb. */
int rpc_engine_seal(struct rpc_engine *e, char *why, size_t whylen);
void rpc_engine_set_submit(struct rpc_engine *e, rpc_submit_fn fn, void *pool);
/* While overloaded (the daemon is near its memory budget), every verb but
 * RPC_F_ALWAYS ones answers 1100 without running.  Dispatching thread only. */
void rpc_engine_set_overloaded(struct rpc_engine *e, bool overloaded);
/* Until set ready, every verb but RPC_F_ALWAYS ones answers code 99. */
void rpc_engine_set_ready(struct rpc_engine *e, bool ready);
bool rpc_engine_ready(const struct rpc_engine *e);

/* A finished response.  bytes is NULL/len 0 when nothing is to be sent (all
 * notifications).  id is the request id value (NULL for a batch or when
 * unreadable); it and bytes are valid only during the callback. */
struct rpc_response {
	const char *bytes;
	size_t len;
	const struct vd_codec *codec;
	const struct vd_value *id;
	/* Only from rpc_dispatch_pieces(): the response is bytes[0..at),
	 * then ext[0..ext_len), then bytes[at..len) (ext NULL: bytes alone). */
	const char *ext;
	size_t ext_len, at;
};

typedef void (*rpc_reply_fn)(void *ctx, const struct rpc_response *r);

struct rpc_request_info {
	const struct vd_codec *codec;  /* decodes the body and encodes the reply */
	const char *flow_id;           /* may be NULL; copied by the engine */
	const char *transport;         /* "stomp", "http", "broker": for logs/metrics */
	const char *local_addr;        /* may be NULL; copied (rpc_call.local_addr) */
};

/* Dispatch one request body.  The engine copies what it keeps; body may be
 * freed when this returns.  reply is called exactly once, either before
 * rpc_dispatch returns or later on the dispatching thread (after the worker
 * pool's done callback).
 *
 * Behaviour details (PROTOCOL.md section 3; tests/unit/test_rpc_*.c):
 *  - ids: strings and numbers are echoed; null/absent make a notification;
 *    a bool, array or object id is -32600 answered with id null.
 *  - named params not declared by the verb are ignored; an explicit null
 *    for a param (other than RPC_T_ANY) counts as absent (default applies).
 *  - top-level string args are NUL-terminated copies (rpc_arg_str).
 *  - order: envelope → verb lookup (-32601) → code 99 → params (-32602) →
 *    handler (or 1100 when the pool refuses a BLOCKING verb).
 *  - a batch of more than RPC_MAX_BATCH members is one -32600. */
void rpc_dispatch(struct rpc_engine *e, const struct rpc_request_info *info,
		  const char *body, size_t len, rpc_reply_fn reply, void *ctx);
/* rpc_dispatch for a transport that writes a reply in pieces: the response
 * may carry a borrowed result (rpc_response.ext) instead of a copy. */
void rpc_dispatch_pieces(struct rpc_engine *e, const struct rpc_request_info *info,
			 const char *body, size_t len, rpc_reply_fn reply, void *ctx);

/* Prometheus text for requests by verb and result and the latency histogram. */
void rpc_metrics_format(const struct rpc_engine *e, struct vd_buf *out);

#endif
