/* common/log.h - leveled logging to stderr, a file, or syslog.
 *
 * Thread-safe: one line is written with one write(2).  log_open() is called
 * once by main; before that, messages go to stderr at level info.  A request's
 * flow id (ovirtCorrelationId) is passed explicitly with vd_log_flow(). */
#ifndef VD_COMMON_LOG_H
#define VD_COMMON_LOG_H

#include "vd.h"

enum vd_log_level { VD_LOG_ERROR, VD_LOG_WARN, VD_LOG_INFO, VD_LOG_DEBUG };

/* target: NULL or "stderr" for stderr, "syslog" for syslog(3), else a path
 * opened for append.  Returns 0 or VD_EIO (errno set). */
int log_open(const char *target, enum vd_log_level level);
/* Reopen the log file (SIGHUP); no-op for stderr/syslog. */
int log_reopen(void);
void log_close(void);
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

#endif
