/* vdsmd/host/cpumodel.c - what QEMU can emulate on this host when libvirt
 * cannot say (no domain capabilities, e.g. the test driver): the machine
 * types and CPU models of the installed qemu-system binary, and libvirt's
 * CPU map (usr/share/libvirt/cpu_map) to decide which models the host CPU
 * can run: a model is usable when the host has every feature it needs.
 * Nothing here invents a value: no binary or no map gives empty lists. */
#include "host_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_HELP (1u << 20)
#define MAX_MAP_FILE (1u << 20)
#define QEMU_TIMEOUT_MS 10000

/* ---- qemu help output --------------------------------------------------- */

static bool next_line(const char **p, const char *end, const char **ls, const char **le)
{
	if (*p >= end)
		return false;
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	*ls = *p;
	*le = nl ? nl : end;
	*p = nl ? nl + 1 : end;
	return true;
}

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static const char *word_end(const char *p, const char *end)
{
	while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
		p++;
	return p;
}

static bool sane_name(const char *p, size_t n)
{
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == '+'))
			return false;
	}
	return true;
}

void host_parse_qemu_machines(const char *text, size_t len, struct host_strv *out)
{
	const char *p = text, *end = text + len, *ls, *le;
	while (next_line(&p, end, &ls, &le)) {
		if (ls < le && (*ls == ' ' || *ls == '\t'))
			continue;
		const char *we = word_end(ls, le);
		size_t n = (size_t)(we - ls);
		/* the heading ("Supported machines are:") has a blank after one
		 * word and ends with ':'; machine lines start with the name */
		if (le > ls && le[-1] == ':')
			continue;
		if (!sane_name(ls, n) || (n == 4 && memcmp(ls, "none", 4) == 0))
			continue;
		host_strv_add(out, ls, n);
		/* "(alias of pc-i440fx-7.2)": the canonical name too, as libvirt
		 * lists it (VDSM reports both) */
		static const char alias[] = "(alias of ";
		const char *a = we;
		for (; a + sizeof(alias) - 1 <= le; a++)
			if (memcmp(a, alias, sizeof(alias) - 1) == 0)
				break;
		if (a + sizeof(alias) - 1 <= le) {
			const char *t = a + sizeof(alias) - 1;
			const char *te = t;
			while (te < le && *te != ')')
				te++;
			if (te < le && sane_name(t, (size_t)(te - t)))
				host_strv_add(out, t, (size_t)(te - t));
		}
	}
	host_strv_sort(out);
}

void host_parse_qemu_cpus(const char *text, size_t len, struct host_strv *out)
{
	const char *p = text, *end = text + len, *ls, *le;
	while (next_line(&p, end, &ls, &le)) {
		/* "x86 Broadwell-v1  Intel Core ..." (arch, name, description);
		 * the flag list after "Recognized CPUID flags:" is indented */
		if (ls >= le || *ls == ' ' || *ls == '\t')
			continue;
		if (le[-1] == ':') {
			if (memmem(ls, (size_t)(le - ls), "flags", 5))
				break;
			continue;
		}
		const char *we = word_end(ls, le);
		const char *nm = skip_blank(we, le);
		const char *ne = word_end(nm, le);
		size_t n = (size_t)(ne - nm);
		if (!sane_name(nm, n))
			continue;
		if ((n == 4 && memcmp(nm, "host", 4) == 0) || (n == 3 && memcmp(nm, "max", 3) == 0) ||
		    (n == 4 && memcmp(nm, "base", 4) == 0))
			continue;
		host_strv_add(out, nm, n);
	}
	host_strv_sort(out);
}

/* ---- libvirt's CPU map ---------------------------------------------------- */

/* The value of attribute name in the tag [p, e) (quoted ' or "), or false. */
static bool attr(const char *p, const char *e, const char *name, const char **v, size_t *vn)
{
	size_t nl = strlen(name);
	for (const char *q = p; q + nl + 2 < e; q++) {
		if ((q == p || q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\n') &&
		    memcmp(q, name, nl) == 0 && q[nl] == '=' && (q[nl + 1] == '\'' || q[nl + 1] == '"')) {
			char quote = q[nl + 1];
			const char *s = q + nl + 2, *t = s;
			while (t < e && *t != quote)
				t++;
			if (t >= e)
				return false;
			*v = s;
			*vn = (size_t)(t - s);
			return true;
		}
	}
	return false;
}

static struct host_cpu_model *add_model(struct host_cpu_map *map, const char *n, size_t nl)
{
	map->m = xrealloc(map->m, (map->n + 1) * sizeof(map->m[0]));
	struct host_cpu_model *m = &map->m[map->n++];
	memset(m, 0, sizeof(*m));
	m->name = xstrndup(n, nl);
	return m;
}

/* Base model references are kept as features named "@base" until
 * host_cpu_map_expand() replaces them. */
void host_cpu_map_parse(const char *text, size_t len, struct host_cpu_map *map)
{
	const char *p = text, *end = text + len;
	struct host_cpu_model *cur = NULL;
	while (p < end) {
		const char *lt = memchr(p, '<', (size_t)(end - p));
		if (!lt)
			break;
		const char *gt = memchr(lt, '>', (size_t)(end - lt));
		if (!gt)
			break;
		p = gt + 1;
		const char *v;
		size_t vn;
		bool selfclose = gt > lt && gt[-1] == '/';
		if (gt - lt > 7 && memcmp(lt, "<model ", 7) == 0) {
			if (!attr(lt, gt, "name", &v, &vn) || !sane_name(v, vn))
				continue;
			if (cur && selfclose) {
				char b[72];
				snprintf(b, sizeof(b), "@%.*s", (int)vn, v);
				host_strv_add(&cur->features, b, strlen(b));
			} else if (!selfclose) {
				cur = add_model(map, v, vn);
			}
		} else if (gt - lt >= 8 && memcmp(lt, "</model>", 8) == 0) {
			cur = NULL;
		} else if (cur && gt - lt > 9 && memcmp(lt, "<feature ", 9) == 0) {
			const char *r;
			size_t rn;
			if (attr(lt, gt, "removed", &r, &rn) && rn == 3 && memcmp(r, "yes", 3) == 0)
				continue;
			if (attr(lt, gt, "name", &v, &vn) && sane_name(v, vn))
				host_strv_add(&cur->features, v, vn);
		} else if (cur && gt - lt > 8 && memcmp(lt, "<vendor ", 8) == 0) {
			if (attr(lt, gt, "name", &v, &vn) && sane_name(v, vn) && !cur->vendor)
				cur->vendor = xstrndup(v, vn);
		}
	}
}

static struct host_cpu_model *find_model(struct host_cpu_map *map, const char *name)
{
	for (size_t i = 0; i < map->n; i++)
		if (strcmp(map->m[i].name, name) == 0)
			return &map->m[i];
	return NULL;
}

/* The features of m with its base models' ("@name" entries) expanded,
 * into out; false when a base is missing, a cycle or more than 8 levels. */
static bool collect(struct host_cpu_map *map, const struct host_cpu_model *m,
		    struct host_strv *seen, struct host_strv *out, int depth)
{
	if (depth > 8 || host_strv_has(seen, m->name))
		return false;
	host_strv_add(seen, m->name, strlen(m->name));
	bool ok = true;
	for (size_t i = 0; i < m->features.n; i++) {
		const char *f = m->features.v[i];
		if (f[0] != '@') {
			host_strv_add(out, f, strlen(f));
			continue;
		}
		const struct host_cpu_model *b = find_model(map, f + 1);
		if (!b || !collect(map, b, seen, out, depth + 1))
			ok = false;
	}
	return ok;
}

/* Replace every model's "@base" entries by the bases' features.  A model
 * whose bases cannot be resolved keeps one "@" entry, which no host flag
 * matches: it is never reported usable. */
void host_cpu_map_expand(struct host_cpu_map *map)
{
	struct host_strv *lists = xcalloc(map->n ? map->n : 1, sizeof(*lists));
	for (size_t i = 0; i < map->n; i++) {
		struct host_strv seen = { 0 };
		if (!collect(map, &map->m[i], &seen, &lists[i], 0))
			host_strv_add(&lists[i], "@", 1);
		host_strv_free(&seen);
	}
	for (size_t i = 0; i < map->n; i++) {
		struct host_cpu_model *m = &map->m[i];
		/* the vendor of the nearest base that names one */
		for (size_t j = 0; !m->vendor && j < m->features.n; j++)
			if (m->features.v[j][0] == '@') {
				const struct host_cpu_model *b = find_model(map, m->features.v[j] + 1);
				if (b && b->vendor)
					m->vendor = xstrdup(b->vendor);
			}
		host_strv_free(&m->features);
		m->features = lists[i];
		host_strv_sort(&m->features);
	}
	free(lists);
}

void host_cpu_map_read(const char *root, const char *prefix, struct host_cpu_map *map)
{
	memset(map, 0, sizeof(*map));
	char dirp[HOST_ROOT_MAX + 64];
	snprintf(dirp, sizeof(dirp), "%s/usr/share/libvirt/cpu_map", root);
	DIR *dir = opendir(dirp);
	if (!dir)
		return;
	struct host_strv files = { 0 };
	struct dirent *de;
	size_t pl = strlen(prefix);
	while ((de = readdir(dir)) != NULL) {
		const char *n = de->d_name;
		size_t nl = strlen(n);
		if (nl <= pl + 5 || strncmp(n, prefix, pl) != 0 || n[pl] != '_' ||
		    strcmp(n + nl - 4, ".xml") != 0 || strchr(n, '/'))
			continue;
		host_strv_add(&files, n, nl);
	}
	closedir(dir);
	host_strv_sort(&files);
	struct vd_buf b = VD_BUF_INIT;
	for (size_t i = 0; i < files.n; i++) {
		char rel[320];
		snprintf(rel, sizeof(rel), "/usr/share/libvirt/cpu_map/%s", files.v[i]);
		if (host_read_rel(root, rel, MAX_MAP_FILE, &b) == 0)
			host_cpu_map_parse(b.data, b.len, map);
	}
	buf_free(&b);
	host_strv_free(&files);
	host_cpu_map_expand(map);
}

void host_cpu_map_free(struct host_cpu_map *map)
{
	for (size_t i = 0; i < map->n; i++) {
		free(map->m[i].name);
		free(map->m[i].vendor);
		host_strv_free(&map->m[i].features);
	}
	free(map->m);
	memset(map, 0, sizeof(*map));
}

/* libvirt feature name → the /proc/cpuinfo name where they differ beyond
 * punctuation. */
static const char *const renames[][2] = {
	{ "pclmuldq", "pclmulqdq" },
	{ "tscdeadline", "tscdeadlinetimer" },
	{ "cmt", "cqm" },
	{ "spectrl", "specctrl" },
	{ "ospke", "pku" },
};

/* lowercase, without '-', '_', '.' */
static void norm(const char *s, size_t n, char *out, size_t outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < outlen; i++) {
		char c = s[i];
		if (c == '-' || c == '_' || c == '.')
			continue;
		out[o++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	out[o] = '\0';
}

void host_norm_flags(const char *flags, struct host_strv *out)
{
	const char *p = flags ? flags : "";
	while (*p) {
		size_t n = strcspn(p, " \t,");
		if (n) {
			char b[80];
			norm(p, n, b, sizeof(b));
			host_strv_add(out, b, strlen(b));
		}
		p += n;
		p += strspn(p, " \t,");
	}
	host_strv_sort(out);
}

static bool has_sorted(const struct host_strv *s, const char *k)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(s->v[mid], k);
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool host_cpu_model_usable(const struct host_cpu_model *m, const struct host_strv *nf)
{
	for (size_t i = 0; i < m->features.n; i++) {
		const char *f = m->features.v[i];
		if (f[0] == '@')
			return false;       /* unresolved base model */
		char b[80];
		norm(f, strlen(f), b, sizeof(b));
		for (size_t r = 0; r < VD_ARRAY_SIZE(renames); r++)
			if (strcmp(b, renames[r][0]) == 0) {
				snprintf(b, sizeof(b), "%s", renames[r][1]);
				break;
			}
		if (!has_sorted(nf, b))
			return false;
	}
	return true;
}

/* ---- running qemu -------------------------------------------------------- */

int host_run_qemu_help(const char *root, const char *arch, const char *what,
		       struct vd_buf *out)
{
	buf_reset(out);
	char bin[HOST_ROOT_MAX + 64];
	snprintf(bin, sizeof(bin), "%s/usr/bin/qemu-system-%s", root, arch);
	if (access(bin, X_OK) != 0)
		return VD_ENOENT;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return VD_EIO;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	char *argv[] = { bin, (char *)what, (char *)"help", NULL };
	char *envp[] = { (char *)"LC_ALL=C", (char *)"PATH=/usr/bin:/bin", NULL };
	pid_t pid;
	int rc = posix_spawn(&pid, bin, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rc != 0) {
		close(pfd[0]);
		return VD_EIO;
	}
	uint64_t deadline = vd_now_ms() + QEMU_TIMEOUT_MS;
	int ret = 0;
	for (;;) {
		uint64_t now = vd_now_ms();
		if (now >= deadline) {
			ret = VD_ETIMEDOUT;
			kill(pid, SIGKILL);
			break;
		}
		struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
		int pr = poll(&pf, 1, (int)(deadline - now));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		buf_reserve(out, 65537);
		ssize_t n = read(pfd[0], out->data + out->len, 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (out->len + (size_t)n > MAX_HELP) {
			ret = VD_ETOOBIG;
			kill(pid, SIGKILL);
			break;
		}
		out->len += (size_t)n;
	}
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	buf_reserve(out, 1);
	out->data[out->len] = '\0';
	if (ret == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		ret = VD_EIO;
	return ret;
}
