/* log.h - logging shared by every part of ibcr.
 *
 * One line per message, prefixed by the program name; to stderr in the
 * foreground, to syslog when log_open() was asked to.  Never allocates on
 * the error path, so it is safe to call when memory ran out.
 */
#ifndef IBCR_COMMON_LOG_H
#define IBCR_COMMON_LOG_H

#include <stdarg.h>

enum log_dest { LOG_TO_STDERR = 0, LOG_TO_SYSLOG = 1 };

/* Set the program name and destination.  'level' is a syslog level: lines
 * above it are dropped. */
void log_open (const char *prog, enum log_dest dest, int level);
void log_close (void);
void log_set_level (int level);
int log_get_level (void);

/* Log at a syslog level.  log_err also appends ": strerror(errnum)".
 * All of them leave errno as it was, so an error path may log and then
 * return with the errno it is reporting. */
void log_msg (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
void log_vmsg (int level, const char *fmt, va_list ap);
void log_err (int errnum, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif
