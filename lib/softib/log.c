/*
 * log.c - where softib's log lines go: SOFTIB_LOG=stderr (default),
 * quiet, or syslog.
 *
 * softib logs only what an operator needs (a QP moved to ERROR and why, a
 * peer refused or unreachable, bad input).  The mode is read from the
 * environment at each line, so nothing is kept between calls: softib must
 * leave no state, fd or socket behind after the last ibv_close_device.
 * That is also why syslog lines go by hand to /dev/log on a socket opened
 * and closed per line instead of through openlog(3)/syslog(3), whose
 * connection is the application's and would stay open.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>

#include "softib.h"

enum sib_log_mode { SIB_LOG_STDERR, SIB_LOG_QUIET, SIB_LOG_SYSLOG, SIB_LOG_BAD };

static enum sib_log_mode log_mode (void)
{
    const char *s = getenv ("SOFTIB_LOG");

    if (!s || !*s || strcmp (s, "stderr") == 0)
        return SIB_LOG_STDERR;
    if (strcmp (s, "quiet") == 0)
        return SIB_LOG_QUIET;
    if (strcmp (s, "syslog") == 0)
        return SIB_LOG_SYSLOG;
    return SIB_LOG_BAD;
}

/* one write(2) per line so concurrent processes do not interleave */
static void to_stderr (const char *line, int n)
{
    char buf[600];
    int m = snprintf (buf, sizeof (buf), "softib: %.*s", n, line);

    if (m > (int)sizeof (buf) - 1)
        m = (int)sizeof (buf) - 1;
    if (write (STDERR_FILENO, buf, (size_t)m) < 0)
        return;
}

static int to_syslog (const char *line, int n)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char buf[600];
    int fd, m, rc;

    fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    snprintf (sa.sun_path, sizeof (sa.sun_path), "%s", _PATH_LOG);
    /* no newline: syslog records are datagrams */
    m = snprintf (buf, sizeof (buf), "<%d>softib[%d]: %.*s", LOG_USER | LOG_WARNING, (int)getpid (),
                  n > 0 ? n - 1 : 0, line);
    if (m > (int)sizeof (buf) - 1)
        m = (int)sizeof (buf) - 1;
    rc = (int)sendto (fd, buf, (size_t)m, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sa,
                      sizeof (sa));
    close (fd);
    return rc < 0 ? -1 : 0;
}

void sib_log (const char *fmt, ...)
{
    enum sib_log_mode mode = log_mode ();
    int err = errno; /* callers often log, then return errno */
    char buf[512];
    va_list ap;
    int n;

    if (mode == SIB_LOG_QUIET)
        return;
    va_start (ap, fmt);
    n = vsnprintf (buf, sizeof (buf) - 1, fmt, ap);
    va_end (ap);
    if (n < 0)
        return;
    if (n > (int)sizeof (buf) - 2)
        n = sizeof (buf) - 2;
    buf[n++] = '\n';
    /* with no syslog daemon listening, stderr rather than nothing */
    if (mode != SIB_LOG_SYSLOG || to_syslog (buf, n) < 0)
        to_stderr (buf, n);
    errno = err;
}

int sib_log_check (void)
{
    char buf[300];
    int n;

    if (log_mode () != SIB_LOG_BAD)
        return 0;
    n = snprintf (buf, sizeof (buf),
                  "SOFTIB_LOG='%.200s' is not a log "
                  "mode: set quiet, stderr or syslog (unset = stderr)\n",
                  getenv ("SOFTIB_LOG"));
    to_stderr (buf, n < (int)sizeof (buf) ? n : (int)sizeof (buf) - 1);
    errno = EINVAL;
    return -1;
}
