/* bench/events.c - helpers for the event-overhead benchmark (bench/run.sh,
 * "# --- rpc ---" block): Host.ping2 req/s over STOMP (measured by
 * bench/load) while the daemon publishes events.
 *
 *   events serve MODE RATE [vdsmd flags...]
 *       Runs a vdsmd in-process (daemon_init) with the given flags, prints
 *       "port N", waits until the agent is ready, prints "ready", then
 *       publishes RATE events/s from a separate thread through the real
 *       event bus.  MODE: none (no events, no publisher thread), tick (the
 *       publisher thread wakes RATE times/s but publishes nothing: same
 *       wake-up pattern as bus, no events), bus (published and fanned out),
 *       drop (the bus is disabled after ready: every event is dropped at
 *       the bus, no fan-out).  On SIGTERM prints
 *       "stats published=.. bus_dropped=.. delivered=.. sub_dropped=.."
 *       and exits.
 *
 *   events subscribe PORT COUNT STALLED
 *       Opens COUNT STOMP connections subscribed to jms.queue.events; the
 *       first STALLED of them never read (tiny receive buffer).  The others
 *       read and count MESSAGE frames.  On SIGTERM prints
 *       "subscribers read=.. frames".
 */
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "../common/log.h"
#include "../rpc/event.h"
#include "../rpc/rpc.h"
#include "../vdsmd/daemon.h"
#include "../vdsmd/server.h"

/* ---- serve ------------------------------------------------------------- */

struct serve {
	struct vdsmd d;
	const char *mode;
	unsigned rate;
	ev_timer poll;
	pthread_t th;
	bool started;
	volatile bool stop;
	uint64_t attempted;
};

static void *publisher(void *arg)
{
	struct serve *s = arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	uint64_t period = 1000000000ull / (s->rate ? s->rate : 1);
	static const char vm[] = "5ba6c0f4-2b05-4e5d-9d0b-6f5e0d4c1a11";
	bool tick_only = strcmp(s->mode, "tick") == 0;
	while (!s->stop) {
		if (tick_only)
			goto sleep;
		struct rpc_event ev;
		struct vd_writer *w = rpc_event_begin(&ev, s->d.bus, "|virt|VM_status|%s", vm);
		vw_keyz(w, vm);
		vw_begin_object(w);
		vw_kstr(w, "status", (s->attempted & 1) ? "Up" : "Paused");
		vw_kstr(w, "hash", "1234567890");
		/* a VM stats-sized payload (~1.5 KB), as VDSM's status events
		 * often carry */
		for (int i = 0; i < 64; i++) {
			char key[16];
			snprintf(key, sizeof(key), "stat%02d", i);
			vw_kstrf(w, key, "%d.%02d", i * 37, i);
		}
		vw_end_object(w);
		rpc_event_publish(s->d.bus, &ev);
		s->attempted++;
sleep:
		next.tv_nsec += (long)period;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	return NULL;
}

static void poll_ready(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct serve *s = w->data;
	if (!rpc_engine_ready(s->d.rpc))
		return;
	ev_timer_stop(loop, w);
	if (strcmp(s->mode, "drop") == 0)
		event_bus_set_enabled(s->d.bus, false);
	if (strcmp(s->mode, "none") != 0 && s->rate) {
		pthread_create(&s->th, NULL, publisher, s);
		s->started = true;
	}
	printf("ready\n");
	fflush(stdout);
}

static int serve(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: events serve none|bus|drop RATE [vdsmd flags]\n");
		return 2;
	}
	static struct serve s;
	s.mode = argv[2];
	s.rate = (unsigned)strtoul(argv[3], NULL, 10);
	/* argv for config_load: program name then the vdsmd flags */
	char **cargv = calloc((size_t)argc, sizeof(char *));
	int cargc = 0;
	cargv[cargc++] = argv[0];
	for (int i = 4; i < argc; i++)
		cargv[cargc++] = argv[i];
	char why[512] = "";
	if (config_load(&s.d.cfg, cargc, cargv, why, sizeof(why)) < 0) {
		fprintf(stderr, "events: %s\n", why);
		return 2;
	}
	enum vd_log_level level = VD_LOG_WARN;
	log_level_parse(s.d.cfg.log_level, &level);
	log_open(&s.d.log, NULL, level);
	signal(SIGPIPE, SIG_IGN);
	if (daemon_init(&s.d, why, sizeof(why)) < 0) {
		fprintf(stderr, "events: cannot start: %s\n", why);
		daemon_fini(&s.d);
		return 1;
	}
	printf("port %u\n", s.d.srv->bound_port);
	fflush(stdout);
	ev_timer_init(&s.poll, poll_ready, 0.02, 0.02);
	s.poll.data = &s;
	ev_timer_start(s.d.loop, &s.poll);
	ev_run(s.d.loop, 0);  /* until SIGTERM (handled by the server) */
	s.stop = true;
	if (s.started)
		pthread_join(s.th, NULL);
	struct event_bus_stats es;
	event_bus_stats(s.d.bus, &es);
	struct stomp_broker_stats bs;
	stomp_broker_stats(s.d.srv->broker, &bs);
	printf("stats attempted=%llu published=%llu bus_dropped=%llu delivered=%llu sub_dropped=%llu\n",
	       (unsigned long long)s.attempted, (unsigned long long)es.published,
	       (unsigned long long)es.dropped, (unsigned long long)s.d.srv->n.events_delivered,
	       (unsigned long long)bs.messages_dropped);
	fflush(stdout);
	daemon_fini(&s.d);
	free(cargv);
	return 0;
}

/* ---- subscribe --------------------------------------------------------- */

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static int dial(int port, bool stalled)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (stalled) {
		int small = 4096;
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int subscribe(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: events subscribe PORT COUNT STALLED\n");
		return 2;
	}
	int port = atoi(argv[2]), count = atoi(argv[3]), stalled = atoi(argv[4]);
	if (count <= 0 || count > 256)
		return 2;
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGPIPE, SIG_IGN);
	struct pollfd pfd[256];
	uint64_t frames = 0;
	for (int i = 0; i < count; i++) {
		int fd = dial(port, i < stalled);
		if (fd < 0) {
			fprintf(stderr, "events: connect: %s\n", strerror(errno));
			return 1;
		}
		char req[256];
		int n = snprintf(req, sizeof(req),
				 "CONNECT\naccept-version:1.2\nhost:localhost\nvdsmd-framing:packed\n\n%c"
				 "SUBSCRIBE\ndestination:jms.queue.events\nid:events-%d\nack:auto\n\n%c",
				 0, i, 0);
		if (write(fd, req, (size_t)n) != n) {
			fprintf(stderr, "events: write failed\n");
			return 1;
		}
		pfd[i].fd = fd;
		pfd[i].events = i < stalled ? 0 : POLLIN;
	}
	printf("subscribed %d (%d stalled)\n", count, stalled);
	fflush(stdout);
	char buf[65536];
	while (!got_term) {
		int r = poll(pfd, (nfds_t)count, 200);
		if (r <= 0)
			continue;
		for (int i = stalled; i < count; i++) {
			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n = read(pfd[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				pfd[i].events = 0;
				continue;
			}
			for (ssize_t k = 0; k < n; k++)
				frames += buf[k] == '\0';
		}
	}
	printf("subscribers read=%llu frames\n", (unsigned long long)frames);
	fflush(stdout);
	for (int i = 0; i < count; i++)
		close(pfd[i].fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "serve") == 0)
		return serve(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "subscribe") == 0)
		return subscribe(argc, argv);
	fprintf(stderr, "usage: events serve|subscribe ...\n");
	return 2;
}
