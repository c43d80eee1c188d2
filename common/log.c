/* common/log.c - leveled logging. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The process's sink: a struct vd_log its owner made with log_open() (the
 * daemon's lives in struct vdsmd), NULL when there is none.  The only
 * mutable state of this file; it holds no log state of its own. */
static struct vd_log *_Atomic log_sink;

static const char *const level_names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

int log_level_parse(const char *s, enum vd_log_level *out)
{
	static const struct { const char *n; enum vd_log_level l; } map[] = {
		{ "error", VD_LOG_ERROR }, { "warn", VD_LOG_WARN },
		{ "warning", VD_LOG_WARN }, { "info", VD_LOG_INFO },
		{ "debug", VD_LOG_DEBUG },
	};
	for (size_t i = 0; i < VD_ARRAY_SIZE(map); i++) {
		if (strcasecmp(s, map[i].n) == 0) {
			*out = map[i].l;
			return 0;
		}
	}
	return VD_EINVAL;
}

void log_set_level(enum vd_log_level level)
{
	struct vd_log *lg = atomic_load(&log_sink);
	if (lg)
		atomic_store(&lg->level, (int)level);
}

enum vd_log_level log_get_level(void)
{
	struct vd_log *lg = atomic_load(&log_sink);
	return lg ? (enum vd_log_level)atomic_load(&lg->level) : VD_LOG_INFO;
}

static int open_path(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

int log_open(struct vd_log *lg, const char *target, enum vd_log_level level)
{
	int rc = 0;
	if (atomic_load(&log_sink) != lg) {
		atomic_init(&lg->level, (int)level);
		atomic_init(&lg->syslog, false);
		pthread_mutex_init(&lg->lock, NULL);
		lg->fd = 2;
		lg->path[0] = '\0';
	}
	atomic_store(&lg->level, (int)level);
	pthread_mutex_lock(&lg->lock);
	if (!target || !*target || strcmp(target, "stderr") == 0) {
		lg->fd = 2;
	} else if (strcmp(target, "syslog") == 0) {
		openlog("vdsmd", LOG_PID, LOG_DAEMON);
		atomic_store(&lg->syslog, true);
	} else {
		int fd = open_path(target);
		if (fd < 0) {
			rc = VD_EIO;
		} else {
			snprintf(lg->path, sizeof(lg->path), "%s", target);
			lg->fd = fd;
		}
	}
	pthread_mutex_unlock(&lg->lock);
	atomic_store(&log_sink, lg);
	return rc;
}

int log_reopen(struct vd_log *lg)
{
	int rc = 0;
	pthread_mutex_lock(&lg->lock);
	if (lg->path[0]) {
		int fd = open_path(lg->path);
		if (fd < 0) {
			rc = VD_EIO;
		} else {
			if (lg->fd > 2)
				close(lg->fd);
			lg->fd = fd;
		}
	}
	pthread_mutex_unlock(&lg->lock);
	return rc;
}

void log_close(struct vd_log *lg)
{
	struct vd_log *want = lg;
	atomic_compare_exchange_strong(&log_sink, &want, NULL);
	/* a line that found lg just before still writes, to stderr */
	pthread_mutex_lock(&lg->lock);
	if (atomic_exchange(&lg->syslog, false))
		closelog();
	if (lg->fd > 2)
		close(lg->fd);
	lg->fd = 2;
	lg->path[0] = '\0';
	pthread_mutex_unlock(&lg->lock);
}

/* One record: "<time> <LEVEL> [flow_id=...] message\n" in line, control
 * characters blanked; returns its length (with the '\n'). */
static size_t format_line(char *line, size_t cap, bool stamp, enum vd_log_level level,
			  const char *flow, const char *fmt, va_list ap)
{
	size_t n = 0;
	if (stamp) {
		struct timeval tv;
		struct tm tm;
		gettimeofday(&tv, NULL);
		gmtime_r(&tv.tv_sec, &tm);
		n = strftime(line, cap, "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, cap - n, ".%03ldZ %s ",
				      (long)(tv.tv_usec / 1000), level_names[level]);
	}
	if (flow && n < cap)
		n += (size_t)snprintf(line + n, cap - n, "[flow_id=%s] ", flow);
	if (n < cap) {
		int m = vsnprintf(line + n, cap - n, fmt, ap);
		if (m > 0)
			n += (size_t)m;
	}
	if (n >= cap - 1)
		n = cap - 2;
	/* one line per record: control characters from peers never split it */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20)
			line[i] = ' ';
	line[n++] = '\n';
	return n;
}

static void vlog(enum vd_log_level level, const char *flow, const char *fmt, va_list ap)
{
	struct vd_log *lg = atomic_load(&log_sink);
	int max = lg ? atomic_load(&lg->level) : VD_LOG_INFO;
	if ((int)level > max)
		return;
	int saved = errno;
	bool use_syslog = lg && atomic_load(&lg->syslog);
	char line[2048];
	size_t n = format_line(line, sizeof(line), !use_syslog, level, flow, fmt, ap);
	if (use_syslog) {
		static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
		syslog(prio[level], "%.*s", (int)(n - 1), line);
	} else if (lg) {
		pthread_mutex_lock(&lg->lock);
		ssize_t w VD_UNUSED = write(lg->fd, line, n);
		pthread_mutex_unlock(&lg->lock);
	} else {
		ssize_t w VD_UNUSED = write(2, line, n);
	}
	errno = saved;
}

void vd_log(enum vd_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, NULL, fmt, ap);
	va_end(ap);
}

void vd_log_flow(enum vd_log_level level, const char *flow, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, flow, fmt, ap);
	va_end(ap);
}

bool log_limit(struct vd_log_limit *l, uint64_t now_ms, uint64_t *suppressed)
{
	if (now_ms - l->window_start_ms >= VD_LOG_LIMIT_WINDOW_MS || !l->window_start_ms) {
		l->window_start_ms = now_ms ? now_ms : 1;
		l->in_window = 0;
	}
	if (l->in_window >= (l->burst ? l->burst : 1)) {
		l->suppressed++;
		l->total_suppressed++;
		return false;
	}
	l->in_window++;
	*suppressed = l->suppressed;
	l->suppressed = 0;
	return true;
}
