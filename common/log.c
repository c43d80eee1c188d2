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

static _Atomic int cur_level = VD_LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = 2;
static int use_syslog;
static char log_path[4096];

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
	atomic_store(&cur_level, (int)level);
}

enum vd_log_level log_get_level(void)
{
	return (enum vd_log_level)atomic_load(&cur_level);
}

static int open_path(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

int log_open(const char *target, enum vd_log_level level)
{
	int rc = 0;
	log_set_level(level);
	pthread_mutex_lock(&log_lock);
	if (!target || !*target || strcmp(target, "stderr") == 0) {
		log_fd = 2;
	} else if (strcmp(target, "syslog") == 0) {
		openlog("vdsmd", LOG_PID, LOG_DAEMON);
		use_syslog = 1;
	} else {
		int fd = open_path(target);
		if (fd < 0) {
			rc = VD_EIO;
		} else {
			snprintf(log_path, sizeof(log_path), "%s", target);
			log_fd = fd;
		}
	}
	pthread_mutex_unlock(&log_lock);
	return rc;
}

int log_reopen(void)
{
	int rc = 0;
	pthread_mutex_lock(&log_lock);
	if (log_path[0]) {
		int fd = open_path(log_path);
		if (fd < 0) {
			rc = VD_EIO;
		} else {
			if (log_fd > 2)
				close(log_fd);
			log_fd = fd;
		}
	}
	pthread_mutex_unlock(&log_lock);
	return rc;
}

void log_close(void)
{
	pthread_mutex_lock(&log_lock);
	if (use_syslog)
		closelog();
	if (log_fd > 2)
		close(log_fd);
	log_fd = 2;
	use_syslog = 0;
	log_path[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}

static void vlog(enum vd_log_level level, const char *flow, const char *fmt, va_list ap)
{
	if ((int)level > atomic_load(&cur_level))
		return;
	int saved = errno;
	char line[2048];
	size_t n = 0;
	if (!use_syslog) {
		struct timeval tv;
		struct tm tm;
		gettimeofday(&tv, NULL);
		gmtime_r(&tv.tv_sec, &tm);
		n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s ",
				      (long)(tv.tv_usec / 1000), level_names[level]);
	}
	if (flow && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n, "[flow_id=%s] ", flow);
	if (n < sizeof(line)) {
		int m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		if (m > 0)
			n += (size_t)m;
	}
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	/* one line per record: control characters from peers never split it */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20)
			line[i] = ' ';
	line[n++] = '\n';
	if (use_syslog) {
		static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
		syslog(prio[level], "%.*s", (int)(n - 1), line);
	} else {
		pthread_mutex_lock(&log_lock);
		ssize_t w VD_UNUSED = write(log_fd, line, n);
		pthread_mutex_unlock(&log_lock);
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
