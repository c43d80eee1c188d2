/* bench/imgxfer.c - image-transfer client and baselines for the image
 * server benchmark (bench/image_wire.py drives it; `make bench`).
 *
 *   imgxfer mkfile PATH SIZE DATA          a file of SIZE bytes: DATA bytes of
 *                                          non-zero data in 16 extents spread
 *                                          evenly, holes between (DATA = SIZE:
 *                                          dense)
 *   imgxfer read FILE                      baseline: sequential read, 8 MiB
 *                                          reads (dd bs=8M of=/dev/null)
 *   imgxfer copy SRC DST                   baseline: SRC read and written to
 *                                          DST in 8 MiB blocks (dd bs=8M
 *                                          conv=notrunc), no fsync
 *   imgxfer get PORT TICKET [--sparse]     download: GET /images/TICKET into
 *                                          an 8 MiB buffer, discarded; with
 *                                          --sparse GET .../extents first and
 *                                          a Range GET per data extent only
 *   imgxfer put PORT TICKET SRC [--sparse] upload: one PUT with Content-Length
 *                                          (?flush=n); with --sparse the data
 *                                          extents of SRC (SEEK_DATA/SEEK_HOLE)
 *                                          each a PUT with Content-Range, the
 *                                          holes a PATCH zero, as imageio's
 *                                          client does
 *   imgxfer put-many PORT SRC TICKET...    one dense upload per ticket, all at
 *                                          once (a thread each)
 *
 * Every mode prints one machine-readable line:
 *   RESULT op=... bytes=LOGICAL wire=BYTES_ON_THE_SOCKET secs=S mibs=LOGICAL/S
 * wire counts every byte sent and received on the socket (heads too), so a
 * sparse transfer shows that holes never travel. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (8u << 20)
#define HEAD_MAX 8192u
#define EXTENTS_MAX (16u << 20)   /* bound on the /extents answer */
#define PIECES 16u

struct hc {                       /* one keep-alive HTTP/1.1 connection */
	int fd;
	uint64_t wire;
	char head[HEAD_MAX];
	size_t have;                  /* bytes in head[] past the last answer */
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "imgxfer: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(1);
}

static void result(const char *op, uint64_t bytes, uint64_t wire, double secs)
{
	printf("RESULT op=%s bytes=%" PRIu64 " wire=%" PRIu64 " secs=%.4f mibs=%.1f\n", op, bytes,
	       wire, secs, secs > 0 ? (double)bytes / 1048576.0 / secs : 0.0);
	fflush(stdout);
}

static char *block_alloc(void)
{
	char *b = malloc(BLOCK);
	if (!b)
		die("malloc");
	return b;
}

/* --- files ------------------------------------------------------------- */

static void write_full(int fd, const char *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("pwrite");
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
}

static int mode_mkfile(const char *path, uint64_t size, uint64_t data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
		die(path);
	char *b = block_alloc();
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < BLOCK / 8; i++) {  /* xorshift: never all zero */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(b + i * 8, &x, 8);
	}
	uint64_t stride = data >= size ? size : size / PIECES;
	uint64_t piece = data >= size ? size : data / PIECES;
	for (uint64_t base = 0; base < size; base += stride) {
		for (uint64_t d = 0; d < piece && base + d < size;) {
			size_t n = piece - d < BLOCK ? (size_t)(piece - d) : BLOCK;
			write_full(fd, b, n, base + d);
			d += n;
		}
	}
	free(b);
	if (close(fd) != 0)
		die("close");
	return 0;
}

static int mode_read(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	char *b = block_alloc();
	uint64_t total = 0;
	double t0 = now_s();
	for (;;) {
		ssize_t n = read(fd, b, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read");
		if (n == 0)
			break;
		total += (uint64_t)n;
	}
	result("read", total, 0, now_s() - t0);
	free(b);
	close(fd);
	return 0;
}

static int mode_copy(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT, 0644);
	if (in < 0 || out < 0)
		die("open");
	char *b = block_alloc();
	uint64_t total = 0;
	double t0 = now_s();
	for (;;) {
		ssize_t n = read(in, b, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read");
		if (n == 0)
			break;
		write_full(out, b, (size_t)n, total);
		total += (uint64_t)n;
	}
	result("copy", total, 0, now_s() - t0);
	free(b);
	close(in);
	close(out);
	return 0;
}

/* --- HTTP -------------------------------------------------------------- */

static void hc_open(struct hc *c, int port)
{
	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		die("connect");
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void hc_send(struct hc *c, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("send");
		c->wire += (uint64_t)w;
		p += w;
		n -= (size_t)w;
	}
}

static size_t hc_recv(struct hc *c, char *p, size_t n)
{
	for (;;) {
		ssize_t r = recv(c->fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			die("recv");
		}
		c->wire += (uint64_t)r;
		return (size_t)r;
	}
}

/* Read one answer's head: its status and Content-Length; the body's first
 * bytes stay in c->head (c->have of them, at the start). */
static int hc_head(struct hc *c, uint64_t *clen)
{
	char *end;
	while (!(end = memmem(c->head, c->have, "\r\n\r\n", 4))) {
		if (c->have == sizeof(c->head)) {
			errno = EMSGSIZE;
			die("response head");
		}
		c->have += hc_recv(c, c->head + c->have, sizeof(c->head) - c->have);
	}
	size_t hlen = (size_t)(end - c->head) + 4;
	int status = 0;
	if (sscanf(c->head, "HTTP/1.%*d %d", &status) != 1) {
		errno = EPROTO;
		die("status line");
	}
	*clen = 0;
	for (char *p = c->head; p < end; p++) {
		if ((p == c->head || p[-1] == '\n') && strncasecmp(p, "content-length:", 15) == 0)
			*clen = strtoull(p + 15, NULL, 10);
	}
	c->have -= hlen;
	memmove(c->head, c->head + hlen, c->have);
	return status;
}

/* Read a body of n bytes: into out (bounded by cap) or, with out NULL,
 * into buf and discarded. */
static void hc_body(struct hc *c, uint64_t n, char *buf, size_t bufsz, char *out, size_t cap)
{
	uint64_t got = 0;
	if (out && n > cap) {
		errno = EMSGSIZE;
		die("body");
	}
	size_t take = c->have < n ? c->have : (size_t)n;
	if (out)
		memcpy(out, c->head, take);
	c->have -= take;
	memmove(c->head, c->head + take, c->have);
	got = take;
	while (got < n) {
		size_t want = n - got < bufsz ? (size_t)(n - got) : bufsz;
		got += hc_recv(c, out ? out + got : buf, want);
	}
}

static void hc_expect(struct hc *c, int want, const char *what, char *buf)
{
	uint64_t clen;
	int st = hc_head(c, &clen);
	hc_body(c, clen, buf, BLOCK, NULL, 0);
	if (st != want) {
		fprintf(stderr, "imgxfer: %s: HTTP %d (wanted %d)\n", what, st, want);
		exit(1);
	}
}

/* GET with an optional Range; the body read and dropped: its length. */
static uint64_t hc_get(struct hc *c, const char *ticket, uint64_t off, uint64_t len, char *buf)
{
	char req[512];
	int n = len ? snprintf(req, sizeof(req),
			       "GET /images/%s HTTP/1.1\r\nHost: localhost\r\n"
			       "Range: bytes=%" PRIu64 "-%" PRIu64 "\r\n\r\n",
			       ticket, off, off + len - 1)
		    : snprintf(req, sizeof(req), "GET /images/%s HTTP/1.1\r\nHost: localhost\r\n\r\n",
			       ticket);
	hc_send(c, req, (size_t)n);
	uint64_t clen;
	int st = hc_head(c, &clen);
	if (st != (len ? 206 : 200)) {
		fprintf(stderr, "imgxfer: GET: HTTP %d\n", st);
		exit(1);
	}
	hc_body(c, clen, buf, BLOCK, NULL, 0);
	return clen;
}

struct extent {
	uint64_t start, length;
	bool zero;
};

/* GET .../extents (imageio's JSON list); a very small scanner: each object
 * has "start", "length" and "zero". */
static size_t hc_extents(struct hc *c, const char *ticket, struct extent **out, char *buf)
{
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "GET /images/%s/extents HTTP/1.1\r\nHost: localhost\r\n\r\n", ticket);
	hc_send(c, req, (size_t)n);
	uint64_t clen;
	if (hc_head(c, &clen) != 200 || clen >= EXTENTS_MAX) {
		fprintf(stderr, "imgxfer: extents: bad answer\n");
		exit(1);
	}
	char *js = malloc((size_t)clen + 1);
	if (!js)
		die("malloc");
	hc_body(c, clen, buf, BLOCK, js, (size_t)clen);
	js[clen] = '\0';
	size_t cnt = 0, cap = 16;
	struct extent *v = malloc(cap * sizeof(*v));
	if (!v)
		die("malloc");
	for (char *p = js; (p = strchr(p, '{')); p++) {
		char *s = strstr(p, "\"start\""), *l = strstr(p, "\"length\""),
		     *z = strstr(p, "\"zero\"");
		if (!s || !l || !z)
			break;
		if (cnt == cap) {
			struct extent *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv)
				die("realloc");
			v = nv;
		}
		v[cnt].start = strtoull(strchr(s + 7, ':') + 1, NULL, 10);
		v[cnt].length = strtoull(strchr(l + 8, ':') + 1, NULL, 10);
		char *zv = strchr(z + 6, ':') + 1;
		while (*zv == ' ')
			zv++;
		v[cnt].zero = strncmp(zv, "true", 4) == 0;
		cnt++;
	}
	free(js);
	*out = v;
	return cnt;
}

static int mode_get(int port, const char *ticket, bool sparse)
{
	struct hc c;
	char *buf = block_alloc();
	hc_open(&c, port);
	uint64_t total = 0;
	double t0 = now_s();
	if (!sparse) {
		total = hc_get(&c, ticket, 0, 0, buf);
	} else {
		struct extent *e = NULL;
		size_t n = hc_extents(&c, ticket, &e, buf);
		for (size_t i = 0; i < n; i++) {
			/* holes are left for the local writer to make: nothing read */
			if (!e[i].zero) {
				for (uint64_t d = 0; d < e[i].length;) {
					uint64_t want = e[i].length - d < 64u << 20 ? e[i].length - d
										  : 64u << 20;
					hc_get(&c, ticket, e[i].start + d, want, buf);
					d += want;
				}
			}
			total += e[i].length;
		}
		free(e);
	}
	result(sparse ? "get-sparse" : "get", total, c.wire, now_s() - t0);
	close(c.fd);
	free(buf);
	return 0;
}

/* PUT [off, off + len) of the file fd on c (Content-Range unless whole). */
static void hc_put(struct hc *c, const char *ticket, int fd, uint64_t off, uint64_t len,
		   bool whole, char *buf)
{
	char req[512];
	int n = whole ? snprintf(req, sizeof(req),
				 "PUT /images/%s?flush=n HTTP/1.1\r\nHost: localhost\r\n"
				 "Content-Length: %" PRIu64 "\r\n\r\n", ticket, len)
		      : snprintf(req, sizeof(req),
				 "PUT /images/%s?flush=n HTTP/1.1\r\nHost: localhost\r\n"
				 "Content-Length: %" PRIu64 "\r\n"
				 "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/*\r\n\r\n",
				 ticket, len, off, off + len - 1);
	hc_send(c, req, (size_t)n);
	for (uint64_t d = 0; d < len;) {
		size_t want = len - d < BLOCK ? (size_t)(len - d) : BLOCK;
		ssize_t r = pread(fd, buf, want, (off_t)(off + d));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("pread");
		hc_send(c, buf, (size_t)r);
		d += (uint64_t)r;
	}
	hc_expect(c, 200, "PUT", buf);
}

static void hc_zero(struct hc *c, const char *ticket, uint64_t off, uint64_t len, char *buf)
{
	char body[256], req[768];
	int bn = snprintf(body, sizeof(body),
			  "{\"op\": \"zero\", \"offset\": %" PRIu64 ", \"size\": %" PRIu64
			  ", \"flush\": false}", off, len);
	int n = snprintf(req, sizeof(req),
			 "PATCH /images/%s HTTP/1.1\r\nHost: localhost\r\n"
			 "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			 ticket, bn, body);
	hc_send(c, req, (size_t)n);
	hc_expect(c, 200, "PATCH zero", buf);
}

static uint64_t file_size(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		die("fstat");
	return (uint64_t)st.st_size;
}

static uint64_t upload(struct hc *c, const char *ticket, const char *src, bool sparse,
		       char *buf)
{
	int fd = open(src, O_RDONLY);
	if (fd < 0)
		die(src);
	uint64_t size = file_size(fd);
	if (!sparse) {
		hc_put(c, ticket, fd, 0, size, true, buf);
	} else {
		for (uint64_t off = 0; off < size;) {
			off_t d = lseek(fd, (off_t)off, SEEK_DATA);
			uint64_t data = d < 0 ? size : (uint64_t)d;
			if (data > off)
				hc_zero(c, ticket, off, data - off, buf);
			if (data >= size)
				break;
			off_t h = lseek(fd, (off_t)data, SEEK_HOLE);
			uint64_t hole = h < 0 ? size : (uint64_t)h;
			hc_put(c, ticket, fd, data, hole - data, false, buf);
			off = hole;
		}
	}
	close(fd);
	return size;
}

static int mode_put(int port, const char *ticket, const char *src, bool sparse)
{
	struct hc c;
	char *buf = block_alloc();
	hc_open(&c, port);
	double t0 = now_s();
	uint64_t size = upload(&c, ticket, src, sparse, buf);
	result(sparse ? "put-sparse" : "put", size, c.wire, now_s() - t0);
	close(c.fd);
	free(buf);
	return 0;
}

struct job {
	pthread_t t;
	int port;
	const char *ticket, *src;
	uint64_t bytes, wire;
	double secs;
};

static void *job_run(void *arg)
{
	struct job *j = arg;
	struct hc c;
	char *buf = block_alloc();
	hc_open(&c, j->port);
	double t0 = now_s();
	j->bytes = upload(&c, j->ticket, j->src, false, buf);
	j->secs = now_s() - t0;
	j->wire = c.wire;
	close(c.fd);
	free(buf);
	return NULL;
}

static int mode_put_many(int port, const char *src, int n, char **tickets)
{
	struct job *j = calloc((size_t)n, sizeof(*j));
	if (!j)
		die("calloc");
	double t0 = now_s();
	for (int i = 0; i < n; i++) {
		j[i] = (struct job){ .port = port, .ticket = tickets[i], .src = src };
		if (pthread_create(&j[i].t, NULL, job_run, &j[i]) != 0)
			die("pthread_create");
	}
	uint64_t bytes = 0, wire = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(j[i].t, NULL);
		bytes += j[i].bytes;
		wire += j[i].wire;
	}
	result("put-many", bytes, wire, now_s() - t0);
	free(j);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: imgxfer mkfile PATH SIZE DATA | read FILE | copy SRC DST |\n"
			"       get PORT TICKET [--sparse] | put PORT TICKET SRC [--sparse] |\n"
			"       put-many PORT SRC TICKET...\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	const char *m = argv[1];
	bool sparse = strcmp(argv[argc - 1], "--sparse") == 0;
	if (strcmp(m, "mkfile") == 0 && argc == 5)
		return mode_mkfile(argv[2], strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
	if (strcmp(m, "read") == 0 && argc == 3)
		return mode_read(argv[2]);
	if (strcmp(m, "copy") == 0 && argc == 4)
		return mode_copy(argv[2], argv[3]);
	if (strcmp(m, "get") == 0 && argc == 4 + sparse)
		return mode_get(atoi(argv[2]), argv[3], sparse);
	if (strcmp(m, "put") == 0 && argc == 5 + sparse)
		return mode_put(atoi(argv[2]), argv[3], argv[4], sparse);
	if (strcmp(m, "put-many") == 0 && argc >= 5)
		return mode_put_many(atoi(argv[2]), argv[3], argc - 4, argv + 4);
	return usage();
}
