/* vdsmd/config.c - configuration: embedded defaults, INI file, flags.
 *
 * One static table describes every key (name, type, offset, default, help);
 * the file parser, the flag parser and config_usage() all walk it, so a key
 * added here is automatically a flag and appears in --help. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../codecs/codec.h"
#include "../common/log.h"

#define DEFAULT_CONFIG_FILE "/etc/vdsmd/vdsmd.conf"

enum ktype { K_STR, K_UINT, K_SIZE, K_BOOL, K_LEVEL, K_CODEC };

struct key {
	const char *name;
	enum ktype type;
	size_t off;
	const char *def;
	unsigned long long min, max; /* K_UINT / K_SIZE */
	const char *help;
};

#define OFF(f) offsetof(struct vd_config, f)

static const struct key keys[] = {
	{ "listen", K_STR, OFF(listen), "::", 0, 0,
	  "address to listen on (\"::\" falls back to 0.0.0.0)" },
	{ "port", K_UINT, OFF(port), "54321", 0, 65535,
	  "TCP port; 0 binds an ephemeral port (logged at startup)" },
	{ "tls", K_BOOL, OFF(tls), "on", 0, 0,
	  "TLS with client certificates (on|off)" },
	{ "cert_file", K_STR, OFF(cert_file), "/etc/pki/vdsm/certs/vdsmcert.pem", 0, 0,
	  "server certificate (PEM)" },
	{ "key_file", K_STR, OFF(key_file), "/etc/pki/vdsm/keys/vdsmkey.pem", 0, 0,
	  "server private key (PEM)" },
	{ "ca_file", K_STR, OFF(ca_file), "/etc/pki/vdsm/certs/cacert.pem", 0, 0,
	  "CA that client certificates must chain to (PEM)" },
	{ "max_connections", K_UINT, OFF(max_connections), "10000", 1, 1000000,
	  "concurrent connections; past it new ones are accepted and closed" },
	{ "max_frame_size", K_SIZE, OFF(max_frame_size), "16M", 1024, 1ull << 31,
	  "largest STOMP frame / HTTP body (suffix K, M, G allowed)" },
	{ "max_headers", K_UINT, OFF(max_headers), "128", 1, 4096,
	  "most headers in one STOMP frame" },
	{ "max_header_line", K_SIZE, OFF(max_header_line), "8K", 64, 1u << 20,
	  "longest STOMP header line / HTTP header section" },
	{ "max_output", K_SIZE, OFF(max_output), "64M", 4096, 1ull << 32,
	  "output a slow reader may have pending before it is closed" },
	{ "stomp_batch_writes", K_BOOL, OFF(stomp_batch_writes), "off", 0, 0,
	  "every client gets its queued STOMP frames packed into one write and unpadded, as a "
	  "vdsmd-framing:packed client does (fewer syscalls, but the oVirt engine's client "
	  "library then stalls: for benchmarks and other clients only)" },
	{ "stomp_pad_frames", K_SIZE, OFF(stomp_pad_frames), "1024", 0, 65536,
	  "plaintext: a MESSAGE frame shorter than this is padded to it (spaces after the JSON "
	  "body) for the oVirt engine's client library (1024-byte reads); over TLS its records "
	  "carry 8448 bytes or more; 0: no padding on either transport" },
	{ "detect_timeout", K_UINT, OFF(detect_timeout), "10", 1, 3600,
	  "seconds for a new connection to show its protocol" },
	{ "handshake_timeout", K_UINT, OFF(handshake_timeout), "10", 1, 3600,
	  "seconds for the TLS handshake" },
	{ "memory_budget", K_SIZE, OFF(memory_budget), "256M", 0, 1ull << 44,
	  "memory all clients together may hold in input, partial frames, pending output, "
	  "subscriptions and fan-out; near it the biggest holders are closed and requests get "
	  "code 1100 (a host's RAM is for its VMs: a fixed figure; 0: a quarter of RAM)" },
	{ "frame_timeout", K_UINT, OFF(frame_timeout), "60", 1, 86400,
	  "seconds a STOMP frame or HTTP request may stay incomplete before the connection is closed" },
	{ "connect_timeout", K_UINT, OFF(connect_timeout), "30", 1, 86400,
	  "seconds a STOMP connection may go without CONNECT" },
	{ "idle_timeout", K_UINT, OFF(idle_timeout), "120", 1, 86400,
	  "seconds a STOMP session without heart-beats may send nothing (with no request pending)" },
	{ "http_keepalive_timeout", K_UINT, OFF(http_keepalive_timeout), "15", 1, 86400,
	  "seconds an HTTP keep-alive connection may wait for its next request" },
	{ "max_connections_per_address", K_UINT, OFF(max_connections_per_address), "64", 0, 1000000,
	  "concurrent connections from one source address, so one client cannot take every "
	  "slot (0: no limit)" },
	{ "max_incoming_migrations", K_UINT, OFF(max_incoming_migrations), "2", 1, 64,
	  "VMs VM.migrationCreate may expect at once (VDSM's default); more get code 82" },
	{ "incoming_migration_timeout", K_UINT, OFF(incoming_migration_timeout), "300", 1, 86400,
	  "seconds a VM.migrationCreate waits for the migration to arrive before it is dropped" },
	{ "migration_libvirt_uri", K_STR, OFF(migration_libvirt_uri), "qemu+tls://%s/system", 0, 0,
	  "libvirt URI of a migration's destination host, %s the host of VM.migrate's dst "
	  "(VDSM's qemu+tls://%s/system; qemu+tcp://%s/system where libvirt listens on TCP)" },
	{ "codec", K_CODEC, OFF(codec), VD_CODEC_DEFAULT, 0, 0,
	  "(msgpack when built in); auto decodes request bodies under 4 KiB with fallback, "
	  "faster on small bodies, and larger ones with yajl" },
	{ "workers", K_UINT, OFF(workers), "4", 1, 256,
	  "worker threads for blocking verbs" },
	{ "worker_queue", K_UINT, OFF(worker_queue), "80", 1, 1000000,
	  "queued blocking requests before code 1100" },
	{ "max_depth", K_UINT, OFF(max_depth), "64", 1, 1000,
	  "deepest nesting accepted in a request body" },
	{ "max_elements", K_SIZE, OFF(max_elements), "262144", 16, 1ull << 32,
	  "most values (numbers, strings, arrays, objects, members) in one request body; more is "
	  "answered -32600 before decoding (a body of millions of values took seconds of the loop)" },
	{ "log_level", K_LEVEL, OFF(log_level), "info", 0, 0,
	  "error, warn, info or debug" },
	{ "log_file", K_STR, OFF(log_file), "stderr", 0, 0,
	  "stderr, syslog, or a file path (reopened on SIGHUP)" },
	{ "host_sample_interval", K_UINT, OFF(host_sample_interval), "15", 1, 86400,
	  "seconds between host statistics samples" },
	{ "libvirt_uri", K_STR, OFF(libvirt_uri), "qemu:///system", 0, 0,
	  "libvirt connection URI (test:///default for tests)" },
	{ "vm_sample_interval", K_UINT, OFF(vm_sample_interval), "15", 1, 86400,
	  "seconds between VM statistics samples" },
	{ "storage_root", K_STR, OFF(storage_root), "/var/lib/vdsmd/storage", 0, 0,
	  "directory holding the file storage domains" },
	{ "net_state_dir", K_STR, OFF(net_state_dir), "/var/lib/vdsmd/netconf", 0, 0,
	  "directory of the persisted network configuration (running.json, safe.json); "
	  "restored at startup when it exists" },
	{ "run_dir", K_STR, OFF(run_dir), "/run/vdsmd", 0, 0,
	  "runtime directory: NBD.start_server's unix sockets are nbd/<id>.sock in it; a live "
	  "backup's NBD socket is backup/<backup_id> (QEMU creates it: backup/ must be writable "
	  "by the QEMU user)" },
	{ "broker_uri", K_STR, OFF(broker_uri), "", 0, 0,
	  "broker mode: stomp://HOST[:PORT] or stomps://HOST[:PORT] (TLS with cert_file, "
	  "key_file, ca_file) of a STOMP broker (RabbitMQ); empty: off" },
	{ "broker_login", K_STR, OFF(broker_login), "", 0, 0,
	  "broker mode: login (empty: none sent)" },
	{ "broker_passcode", K_STR, OFF(broker_passcode), "", 0, 0,
	  "broker mode: passcode" },
	{ "broker_vhost", K_STR, OFF(broker_vhost), "/", 0, 0,
	  "broker mode: virtual host (the CONNECT host header)" },
	{ "host_id", K_STR, OFF(host_id), "", 0, 0,
	  "broker mode: this host's id in /queue/vdsm.<host_id>.requests (empty: the machine id)" },
	{ "broker_prefetch", K_UINT, OFF(broker_prefetch), "64", 1, 65535,
	  "broker mode: unacknowledged requests the broker may hand us at once" },
	{ "user", K_STR, OFF(user), "", 0, 0,
	  "run as this user: root privileges are dropped once the port is bound and the log and TLS files are open (empty: keep the starting user)" },
	{ "allow_plaintext", K_BOOL, OFF(allow_plaintext), "no", 0, 0,
	  "allow tls = off on a non-loopback listen address (logged as a warning)" },
	{ "image_port", K_UINT, OFF(image_port), "54322", 0, 65535,
	  "image server (ovirt-imageio's HTTP API for disk upload and download) on the listen "
	  "address: TLS with cert_file and key_file when tls is on, no client certificate asked "
	  "(the ticket id is the credential); 0: off" },
	{ "image_socket", K_STR, OFF(image_socket), "", 0, 0,
	  "image server: also listen on this unix socket, plain HTTP, for clients on the host "
	  "(empty: none)" },
	{ "image_max_connections", K_UINT, OFF(image_max_connections), "64", 1, 4096,
	  "image server: connections open at once (one thread each); past it new ones are closed" },
	{ "image_timeout", K_UINT, OFF(image_timeout), "60", 1, 86400,
	  "image server: seconds a connection may wait for a request or for the next bytes of "
	  "one before it is closed" },
};

static void *field(struct vd_config *cfg, const struct key *k)
{
	return (char *)cfg + k->off;
}

static const struct key *key_find(const char *name, size_t n, bool dashes)
{
	for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++) {
		const char *kn = keys[i].name;
		if (strlen(kn) != n)
			continue;
		size_t j = 0;
		for (; j < n; j++) {
			char c = name[j];
			if (dashes && c == '-')
				c = '_';
			else if (dashes && c == '_')
				break; /* flags use '-' only */
			if (c != kn[j])
				break;
		}
		if (j == n)
			return &keys[i];
	}
	return NULL;
}

static int parse_ull(const char *v, bool size, unsigned long long *out)
{
	if (!*v || !isdigit((unsigned char)*v))
		return -1;
	errno = 0;
	char *end;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno)
		return -1;
	if (size && *end) {
		unsigned shift = 0;
		switch (toupper((unsigned char)*end)) {
		case 'K': shift = 10; break;
		case 'M': shift = 20; break;
		case 'G': shift = 30; break;
		default: return -1;
		}
		end++;
		if (toupper((unsigned char)*end) == 'I')
			end++;
		if (toupper((unsigned char)*end) == 'B')
			end++;
		if (x > (ULLONG_MAX >> shift))
			return -1;
		x <<= shift;
	}
	if (*end)
		return -1;
	*out = x;
	return 0;
}

/* Set one key from text; on error writes the reason (without location). */
static int key_set(struct vd_config *cfg, const struct key *k, const char *v,
		   char *why, size_t whylen)
{
	void *p = field(cfg, k);
	unsigned long long x;
	switch (k->type) {
	case K_STR:
		free(*(char **)p);
		*(char **)p = xstrdup(v);
		return 0;
	case K_LEVEL: {
		enum vd_log_level l;
		if (log_level_parse(v, &l) < 0) {
			snprintf(why, whylen, "%s: bad value \"%s\" (expected error, warn, info or debug)",
				 k->name, v);
			return VD_EINVAL;
		}
		free(*(char **)p);
		*(char **)p = xstrdup(v);
		return 0;
	}
	case K_CODEC:
		/* Any name of the codec registry; whether one is built in is
		 * checked at startup, where a clear message names it. */
		if (!codec_known(v)) {
			char names[128];
			codec_names(names, sizeof(names));
			snprintf(why, whylen, "%s: unknown codec \"%s\" (expected %s)", k->name, v,
				 names);
			return VD_EINVAL;
		}
		free(*(char **)p);
		*(char **)p = xstrdup(v);
		return 0;
	case K_BOOL:
		if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
		    !strcmp(v, "1")) {
			*(bool *)p = true;
		} else if (!strcasecmp(v, "off") || !strcasecmp(v, "false") ||
			   !strcasecmp(v, "no") || !strcmp(v, "0")) {
			*(bool *)p = false;
		} else {
			snprintf(why, whylen, "%s: bad value \"%s\" (expected on or off)", k->name, v);
			return VD_EINVAL;
		}
		return 0;
	case K_UINT:
	case K_SIZE:
		if (parse_ull(v, k->type == K_SIZE, &x) < 0 || x < k->min || x > k->max) {
			snprintf(why, whylen, "%s: bad value \"%s\" (expected %s %llu..%llu)",
				 k->name, v, k->type == K_SIZE ? "a size" : "an integer",
				 k->min, k->max);
			return VD_EINVAL;
		}
		if (k->type == K_UINT)
			*(unsigned *)p = (unsigned)x;
		else
			*(size_t *)p = (size_t)x;
		return 0;
	}
	return VD_EINVAL;
}

static void set_defaults(struct vd_config *cfg)
{
	char why[256];
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++)
		if (key_set(cfg, &keys[i], keys[i].def, why, sizeof(why)) < 0)
			abort(); /* a bad embedded default is a programmer error */
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

static int load_file(struct vd_config *cfg, const char *path, char *why, size_t whylen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(why, whylen, "%s: cannot open: %s", path, strerror(errno));
		return VD_EIO;
	}
	char line[4096];
	unsigned lineno = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t n = strlen(line);
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			snprintf(why, whylen, "%s:%u: line too long", path, lineno);
			rc = VD_EINVAL;
			break;
		}
		char *s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			/* Sections are allowed for readability ([vdsmd]); keys are global. */
			if (s[strlen(s) - 1] != ']') {
				snprintf(why, whylen, "%s:%u: malformed section header", path, lineno);
				rc = VD_EINVAL;
				break;
			}
			continue;
		}
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(why, whylen, "%s:%u: expected key = value", path, lineno);
			rc = VD_EINVAL;
			break;
		}
		*eq = 0;
		char *k = trim(s), *v = trim(eq + 1);
		size_t vl = strlen(v);
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
			v[vl - 1] = 0;
			v++;
		}
		const struct key *key = key_find(k, strlen(k), false);
		if (!key) {
			snprintf(why, whylen, "%s:%u: unknown key \"%s\"", path, lineno, k);
			rc = VD_EINVAL;
			break;
		}
		char r[256];
		if (key_set(cfg, key, v, r, sizeof(r)) < 0) {
			snprintf(why, whylen, "%s:%u: %s", path, lineno, r);
			rc = VD_EINVAL;
			break;
		}
	}
	if (!rc && ferror(f)) {
		snprintf(why, whylen, "%s: read error", path);
		rc = VD_EIO;
	}
	fclose(f);
	return rc;
}

/* Find --config FILE / --config=FILE. */
static const char *find_config_arg(int argc, char **argv, char *why, size_t whylen, int *err)
{
	const char *path = NULL;
	*err = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--config") == 0) {
			if (i + 1 >= argc) {
				snprintf(why, whylen, "--config: missing value");
				*err = VD_EINVAL;
				return NULL;
			}
			path = argv[++i];
		} else if (strncmp(argv[i], "--config=", 9) == 0) {
			path = argv[i] + 9;
		}
	}
	return path;
}

static int load_flags(struct vd_config *cfg, int argc, char **argv, char *why, size_t whylen)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		/* argv[i] is non-NULL for i < argc */
		if (strncmp(a, "--", 2) != 0) {  // NOLINT(clang-analyzer-core.NonNullParamChecker)
			snprintf(why, whylen, "%s: unexpected argument (see --help)", a);
			return VD_EINVAL;
		}
		const char *name = a + 2;
		const char *eq = strchr(name, '=');
		size_t n = eq ? (size_t)(eq - name) : strlen(name);
		if (n == 6 && strncmp(name, "config", 6) == 0) {
			if (!eq)
				i++;
			continue;
		}
		const struct key *k = key_find(name, n, true);
		if (!k) {
			snprintf(why, whylen, "--%.*s: unknown option (see --help)", (int)n, name);
			return VD_EINVAL;
		}
		const char *v;
		if (eq) {
			v = eq + 1;
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			snprintf(why, whylen, "--%.*s: missing value", (int)n, name);
			return VD_EINVAL;
		}
		char r[256];
		if (key_set(cfg, k, v, r, sizeof(r)) < 0) {
			snprintf(why, whylen, "--%.*s: %s", (int)n, name, r);
			return VD_EINVAL;
		}
	}
	return 0;
}

int config_load(struct vd_config *cfg, int argc, char **argv, char *why, size_t whylen)
{
	set_defaults(cfg);
	int rc;
	const char *path = find_config_arg(argc, argv, why, whylen, &rc);
	if (rc)
		return rc;
	if (!path && access(DEFAULT_CONFIG_FILE, F_OK) == 0)
		path = DEFAULT_CONFIG_FILE;
	if (path) {
		cfg->config_file = xstrdup(path);
		rc = load_file(cfg, path, why, whylen);
		if (rc)
			return rc == VD_EIO ? VD_EINVAL : rc;
	}
	rc = load_flags(cfg, argc, argv, why, whylen);
	if (rc)
		return rc;
	/* a printf template with at most one %s and no other conversion */
	const char *pct = strchr(cfg->migration_libvirt_uri, '%');
	if (pct && (pct[1] != 's' || strchr(pct + 2, '%'))) {
		snprintf(why, whylen, "migration_libvirt_uri: \"%s\": only one %%s (the host) may "
			 "appear", cfg->migration_libvirt_uri);
		return VD_EINVAL;
	}
	return 0;
}

void config_free(struct vd_config *cfg)
{
	for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++) {
		const struct key *k = &keys[i];
		if (k->type == K_STR || k->type == K_LEVEL || k->type == K_CODEC) {
			char **p = field(cfg, k);
			free(*p);
			*p = NULL;
		}
	}
	free(cfg->config_file);
	cfg->config_file = NULL;
}

void config_usage(FILE *out)
{
	fprintf(out,
		"Usage: vdsmd [--config FILE] [--KEY VALUE | --KEY=VALUE]...\n"
		"       vdsmd --help | --version\n\n"
		"Runs in the foreground.  Settings come from the embedded defaults, then the\n"
		"INI file (--config FILE, else %s when it exists), then the flags\n"
		"below; flags win.  In the file a key is written with '_', as a flag with '-'.\n\n"
		"Keys:\n", DEFAULT_CONFIG_FILE);
	for (size_t i = 0; i < VD_ARRAY_SIZE(keys); i++) {
		char flag[64];
		snprintf(flag, sizeof(flag), "--%s", keys[i].name);
		for (char *c = flag + 2; *c; c++)
			if (*c == '_')
				*c = '-';
		/* the codec's names come from the codec registry, its one table */
		char names[128] = "";
		if (keys[i].type == K_CODEC) {
			char list[96];
			codec_names(list, sizeof(list));
			snprintf(names, sizeof(names), "JSON codec: %s ", list);
		}
		fprintf(out, "  %-24s %-22s %s%s (default: %s)\n", keys[i].name, flag, names,
			keys[i].help, keys[i].def);
	}
}
