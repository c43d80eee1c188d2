/* common/log.h - leveled logging to stderr, a file, or syslog.
 *
 * The log's state is a struct vd_log owned by whoever runs the process (the
 * daemon keeps it in struct vdsmd; a test or bench keeps its own).
 * log_open() fills it and makes it the sink every vd_log() line of the
 * process goes through: log.c keeps one atomic pointer to it, so call sites
 * name no context.  Without a sink (before log_open, after log_close) lines
 * go to stderr at level info and log_set_level() does nothing.
 *
 * Thread-safe: one line is written with one write(2), under the sink's lock.
 * Not async-signal-safe (vsnprintf, a mutex): log from libev signal
 * watchers, never from a signal handler.  A request's flow id
 * (ovirtCorrelationId) is passed explicitly with vd_log_flow(). */
#ifndef VD_COMMON_LOG_H
#define VD_COMMON_LOG_H

#include <pthread.h>
#include <stdatomic.h>
#include "vd.h"

enum vd_log_level { VD_LOG_ERROR, VD_LOG_WARN, VD_LOG_INFO, VD_LOG_DEBUG };

struct vd_log {
	_Atomic int level;        /* enum vd_log_level; lines above it are dropped */
	atomic_bool syslog;       /* lines go to syslog(3), not fd */
	pthread_mutex_t lock;     /* fd and path; held for each write(2) */
	int fd;                   /* 2, or the file opened from path */
	char path[4096];          /* the file (log_reopen), "" for stderr/syslog */
};

/* Fill lg (its previous contents are ignored, unless lg is already the sink:
 * then it is reconfigured in place) and make it the process's sink.
 * target: NULL or "stderr" for stderr, "syslog" for syslog(3), else a path
 * opened for append.  lg must stay valid until log_close(lg).  Returns 0
 * or VD_EIO (errno set; lg is then the sink, writing to stderr). */
int log_open(struct vd_log *lg, const char *target, enum vd_log_level level);
/* Reopen lg's log file (SIGHUP); no-op for stderr/syslog. */
int log_reopen(struct vd_log *lg);
/* Stop using lg (the process falls back to stderr) and close its file.
 * Call it when no other thread logs any more. */
void log_close(struct vd_log *lg);
/* The sink's level (no sink: set does nothing, get says info). */
void log_set_level(enum vd_log_level level);
enum vd_log_level log_get_level(void);
/* Parses "error", "warn"/"warning", "info", "debug"; returns VD_EINVAL otherwise. */
int log_level_parse(const char *s, enum vd_log_level *out);

void vd_log(enum vd_log_level level, const char *fmt, ...) VD_PRINTF(2, 3);
/* Same, with "[flow_id=...]" in the line when flow is non-NULL. */
void vd_log_flow(enum vd_log_level level, const char *flow, const char *fmt, ...)
	VD_PRINTF(3, 4);

#define log_error(...) vd_log(VD_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) vd_log(VD_LOG_WARN, __VA_ARGS__)
#define log_info(...) vd_log(VD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { if (log_get_level() >= VD_LOG_DEBUG) vd_log(VD_LOG_DEBUG, __VA_ARGS__); } while (0)

/* Rate limit for a line that an attacker can repeat (failed handshakes,
 * refused connections, accept errors): at most burst lines per 10 s window;
 * the others are counted and the next line logged says how many were left
 * out.  One struct per kind of line, owned by the caller (zeroed, then
 * burst set).  Not thread-safe: one thread per limit. */
struct vd_log_limit {
	unsigned burst;            /* lines per window */
	unsigned in_window;
	uint64_t window_start_ms;
	uint64_t suppressed;       /* since the last line logged */
	uint64_t total_suppressed;
};

#define VD_LOG_LIMIT_WINDOW_MS 10000u

/* true: log now, *suppressed = lines left out before it (then reset to 0);
 * false: leave this one out (counted). */
bool log_limit(struct vd_log_limit *l, uint64_t now_ms, uint64_t *suppressed);

/* log at level through limit l; the format needs at least one argument. */
#define log_limited(l, level, fmt, ...) do { \
	uint64_t sup_; \
	if (log_limit((l), vd_now_ms(), &sup_)) { \
		if (sup_) \
			vd_log((level), fmt " (%llu similar lines left out)", __VA_ARGS__, \
			       (unsigned long long)sup_); \
		else \
			vd_log((level), fmt, __VA_ARGS__); \
	} \
} while (0)

#endif
