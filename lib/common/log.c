/* log.c - see log.h.  Must stay async-signal-unsafe-free of allocation. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "ibcr";
static enum log_dest log_dest = LOG_TO_STDERR;
static int log_level = LOG_INFO;

void log_open (const char *prog, enum log_dest dest, int level)
{
    if (prog)
        log_prog = prog;
    log_dest = dest;
    log_level = level;
    if (dest == LOG_TO_SYSLOG)
        openlog (log_prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void log_close (void)
{
    if (log_dest == LOG_TO_SYSLOG)
        closelog ();
}

void log_set_level (int level)
{
    log_level = level;
}

int log_get_level (void)
{
    return log_level;
}

static const char *level_name (int level)
{
    switch (level) {
    case LOG_EMERG:
    case LOG_ALERT:
    case LOG_CRIT:
    case LOG_ERR:
        return "error: ";
    case LOG_WARNING:
        return "warning: ";
    case LOG_DEBUG:
        return "debug: ";
    default:
        return "";
    }
}

void log_vmsg (int level, const char *fmt, va_list ap)
{
    char buf[1024];
    int saved = errno;

    if (level > log_level)
        return;
    vsnprintf (buf, sizeof (buf), fmt, ap);
    if (log_dest == LOG_TO_SYSLOG)
        syslog (level, "%s", buf);
    else
        dprintf (STDERR_FILENO, "%s: %s%s\n", log_prog, level_name (level), buf);
    errno = saved;
}

void log_msg (int level, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    log_vmsg (level, fmt, ap);
    va_end (ap);
}

void log_err (int errnum, const char *fmt, ...)
{
    char buf[900];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (buf, sizeof (buf), fmt, ap);
    va_end (ap);
    log_msg (LOG_ERR, "%s: %s", buf, strerror (errnum));
}
