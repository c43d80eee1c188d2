/* client/wait.c - the long-running modes: --wait (poll Task.getStatus until
 * the task ends, with a progress bar on a terminal) and --watch-events
 * (print every event as one JSON line until interrupted). */
#include "client.h"

#include <fnmatch.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BAR_WIDTH 30

static bool str_in(const struct vd_value *v, const char *const *set)
{
	for (; *set; set++)
		if (vd_str_eq(v, *set))
			return true;
	return false;
}

/* VDSM task states that end a task, and results that mean success. */
static const char *const end_states[] = { "finished", "failed", "aborted", "recovered", NULL };
static const char *const ok_results[] = { "success", "cleanSuccess", NULL };

/* The percentage when the status carries one ("progress" 0..100). */
static int status_progress(const struct vd_value *st)
{
	const struct vd_value *p = vd_obj_get(st, "progress");
	if (!p)
		return -1;
	double d = p->type == VD_INT ? (double)p->v.i : p->type == VD_DOUBLE ? p->v.d :
		   p->type == VD_UINT ? (double)p->v.u : -1;
	if (d < 0)
		return -1;
	return d > 100 ? 100 : (int)d;
}

static void draw_bar(int pct, const struct vd_value *state, unsigned tick, bool done)
{
	char bar[BAR_WIDTH + 1];
	if (pct >= 0 || done) {
		int fill = done ? BAR_WIDTH : pct * BAR_WIDTH / 100;
		for (int i = 0; i < BAR_WIDTH; i++)
			bar[i] = i < fill ? '#' : '-';
	} else {
		/* unknown progress: a block bouncing across the bar */
		unsigned span = BAR_WIDTH - 4, pos = tick % (2 * span);
		if (pos > span)
			pos = 2 * span - pos;
		for (unsigned i = 0; i < BAR_WIDTH; i++)
			bar[i] = i >= pos && i < pos + 4 ? '#' : '-';
	}
	bar[BAR_WIDTH] = 0;
	int sl = state && state->type == VD_STRING ? (int)VD_MIN(state->v.s.len, 20) : 0;
	if (done)
		pct = 100;
	if (pct >= 0)
		fprintf(stderr, "\r[%s] %3d%% %-20.*s", bar, pct, sl, sl ? state->v.s.ptr : "");
	else
		fprintf(stderr, "\r[%s]   ?%% %-20.*s", bar, sl, sl ? state->v.s.ptr : "");
	fflush(stderr);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

int client_wait_task(struct client_conn *c, struct vd_arena *a, const char *task_id, size_t len)
{
	const struct client_opts *o = c->o;
	/* the id points into the connection's input: keep a copy */
	char task[37];
	len = VD_MIN(len, sizeof(task) - 1);
	memcpy(task, task_id, len);
	task[len] = 0;
	bool tty = isatty(STDERR_FILENO);
	struct vd_value params = { .type = VD_OBJECT };
	struct vd_member m = { .key = "taskID", .klen = 6 };
	m.val.type = VD_STRING;
	m.val.v.s.ptr = task;
	m.val.v.s.len = len;
	params.v.obj.members = &m;
	params.v.obj.n = 1;
	uint64_t start = vd_now_ms();
	for (unsigned tick = 0;; tick++) {
		const struct vd_value *st = NULL;
		/* each poll gets the full --timeout; the wait itself is unbounded */
		int rc = client_call(c, a, "Task.getStatus", &params, vd_now_ms() + o->timeout_ms, &st);
		if (rc != CLIENT_OK) {
			if (tty)
				fputc('\n', stderr);
			return rc;
		}
		if (st->type != VD_OBJECT) {
			fprintf(stderr, CLIENT_PROG ": unexpected Task.getStatus reply from %s.\n",
				o->where);
			return CLIENT_FAIL;
		}
		const struct vd_value *state = vd_obj_get(st, "taskState");
		const struct vd_value *result = vd_obj_get(st, "taskResult");
		bool done = str_in(state, end_states);
		if (tty)
			draw_bar(status_progress(st), state, tick, done);
		if (done) {
			if (tty)
				fputc('\n', stderr);
			client_json_print(stdout, st, o->compact);
			const struct vd_value *code = vd_obj_get(st, "code");
			bool ok = str_in(result, ok_results) &&
				  !(code && code->type == VD_INT && code->v.i != 0);
			if (!ok) {
				const struct vd_value *msg = vd_obj_get(st, "message");
				int ml = msg && msg->type == VD_STRING ? (int)msg->v.s.len : 0;
				fprintf(stderr, CLIENT_PROG ": task %.*s failed%s%.*s\n", (int)len, task,
					ml ? ": " : "", ml, ml ? msg->v.s.ptr : "");
			}
			return ok ? CLIENT_OK : CLIENT_FAIL;
		}
		/* poll fast at first, then settle at 4 per second */
		sleep_ms(vd_now_ms() - start < 1000 ? 50 : 250);
		arena_reset(a);
	}
}

/* ---- --watch-events ----------------------------------------------------- */

static volatile sig_atomic_t watch_stop;

static void on_signal(int sig)
{
	(void)sig;
	watch_stop = 1;
}

static void announce(struct client_conn *c)
{
	fprintf(stderr, CLIENT_PROG ": watching events on %s (interrupt to stop)\n",
		c->o->where);
	fflush(stderr);
}

static bool event_matches(const char *pattern, const struct vd_value *method)
{
	if (!pattern)
		return true;
	if (!method || method->type != VD_STRING)
		return false;
	char name[512];
	snprintf(name, sizeof(name), "%.*s", (int)VD_MIN(method->v.s.len, sizeof(name) - 1),
		 method->v.s.ptr);
	if (strpbrk(pattern, "*?["))
		return fnmatch(pattern, name, 0) == 0;
	return strstr(name, pattern) != NULL;
}

int client_watch_events(const struct client_opts *o, struct vd_arena *a)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct client_conn c;
	int rc = client_conn_open(&c, o, vd_now_ms() + o->timeout_ms);
	if (rc != CLIENT_OK)
		goto out;
	c.stop = &watch_stop;
	c.on_receipt = announce;
	client_conn_subscribe(&c, CLIENT_EVENTS_DEST, true);
	for (;;) {
		bool timed_out;
		if (client_conn_next(&c, 0, &timed_out) != CLIENT_OK) {
			rc = watch_stop ? CLIENT_OK : CLIENT_FAIL;
			break;
		}
		size_t ctlen = 0;
		const char *ct = stomp_frame_get(&c.frame, "content-type", &ctlen);
		const struct vd_codec *codec = codec_find_content_type(ct, ctlen);
		if (!codec)
			codec = client_json_codec();
		struct vd_limits lim = VD_LIMITS_DEFAULT;
		struct vd_value *v = NULL;
		struct vd_codec_error err = { 0, NULL, 0 };
		if (codec->decode(a, c.frame.body ? c.frame.body : "", c.frame.body_len, &lim, &v,
				  &err) != 0 || !v) {
			fprintf(stderr, CLIENT_PROG ": undecodable event from %s (%s)\n", o->where,
				err.reason ? err.reason : "?");
		} else if (event_matches(o->pattern, vd_obj_get(v, "method"))) {
			client_json_print(stdout, v, true);
			if (fflush(stdout) != 0) {
				rc = CLIENT_FAIL;
				break;
			}
		}
		arena_reset(a);
	}
out:
	client_conn_close(&c);
	return rc;
}
