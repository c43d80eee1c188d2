/* vdsmd/config.h - configuration: embedded defaults, INI file, command-line
 * flags (key foo_bar is flag --foo-bar; flags win over the file).
 *
 * config_load() fills cfg from defaults, then the file, then argv.  On an
 * unknown key or bad value it returns VD_EINVAL with "file:line: reason" (or
 * "--flag: reason") in why.  Strings are owned by cfg (config_free()). */
#ifndef VD_VDSMD_CONFIG_H
#define VD_VDSMD_CONFIG_H

#include <stdio.h>
#include "../common/vd.h"

struct vd_config {
	/* network */
	char *listen;               /* "::" (falls back to 0.0.0.0) */
	unsigned port;              /* 54321; 0 = ephemeral */
	bool tls;                   /* on by default, as VDSM */
	char *cert_file, *key_file, *ca_file;
	unsigned max_connections;   /* 10000 */
	size_t max_frame_size;      /* 16 MiB */
	unsigned max_headers;       /* 128 */
	size_t max_header_line;     /* 8 KiB */
	size_t max_output;          /* per-connection output bound, 64 MiB */
	bool stomp_batch_writes;    /* off: one frame per write (PROTOCOL.md 2) */
	size_t stomp_pad_frames;    /* plaintext: pad shorter MESSAGEs to this, 1024;
	                               0: no padding on either transport (wire.c) */
	unsigned detect_timeout;    /* seconds, 10 */
	unsigned handshake_timeout; /* seconds, 10 */
	/* issue 17: bounded under attack (vdsmd/guard.c) */
	size_t memory_budget;       /* bytes clients may hold (256M); 0 = a quarter of RAM */
	unsigned frame_timeout;     /* seconds a partial frame / request may take, 60 */
	unsigned connect_timeout;   /* seconds from STOMP detection to CONNECT, 30 */
	unsigned idle_timeout;      /* seconds of silence of a STOMP session without
	                               heart-beats, 120 */
	unsigned http_keepalive_timeout; /* seconds an idle keep-alive waits, 15 */
	unsigned max_connections_per_address; /* 64; 0 = no limit */
	unsigned max_incoming_migrations;     /* 2: pending VM.migrationCreate */
	unsigned incoming_migration_timeout;  /* 300 s until a migration arrives */
	char *migration_libvirt_uri;          /* "qemu+tls://%s/system" (%s: the host) */
	/* rpc */
	char *codec;                /* "auto" */
	unsigned workers;           /* 4 */
	unsigned worker_queue;      /* 80 */
	unsigned max_depth;         /* 64 */
	size_t max_elements;        /* values in one request body, 262144 */
	/* logging */
	char *log_level;            /* "info" */
	char *log_file;             /* "stderr" | "syslog" | path */
	/* host / virt / storage */
	unsigned host_sample_interval; /* seconds, 15 */
	char *libvirt_uri;          /* "qemu:///system" */
	unsigned vm_sample_interval;   /* seconds, 15 */
	char *storage_root;         /* "/var/lib/vdsmd/storage" */
	char *net_state_dir;        /* "/var/lib/vdsmd/netconf" */
	char *run_dir;              /* "/run/vdsmd": runtime sockets (nbd/<id>.sock,
	                               backup/<id>) */
	/* broker mode (vdsmd/broker.h); off while broker_uri is empty */
	char *broker_uri;           /* "" | stomp://HOST[:PORT] | stomps://HOST[:PORT] */
	char *broker_login;         /* "" = no login header */
	char *broker_passcode;
	char *broker_vhost;         /* "/" */
	char *host_id;              /* "" = the machine id */
	unsigned broker_prefetch;   /* 64 */
	/* security (issue 8) */
	char *user;                 /* "": keep the starting user; else drop to it */
	bool allow_plaintext;       /* tls off on a non-loopback address (warned) */
	/* image server (issue 28, vdsmd/image/) */
	unsigned image_port;        /* 54322; 0 = off */
	char *image_socket;         /* "" = no unix socket */
	unsigned image_max_connections; /* 64 */
	unsigned image_timeout;     /* seconds, 60 */
	/* where the file came from, for messages */
	char *config_file;
};

/* argv may contain --config FILE (else /etc/vdsmd/vdsmd.conf, used only when
 * it exists) and --help/--version are handled by the caller before. */
int config_load(struct vd_config *cfg, int argc, char **argv, char *why, size_t whylen);
void config_free(struct vd_config *cfg);
/* Prints every key with its flag, default and description. */
void config_usage(FILE *out);

#endif
