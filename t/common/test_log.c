/* Unit test of lib/common/log.c: levels filter lines, format is stable. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "tap.h"

static int capture (int level, const char *msg, char *out, size_t len)
{
    int p[2], saved;
    ssize_t n;

    if (pipe (p) < 0)
        return -1;
    saved = dup (STDERR_FILENO);
    dup2 (p[1], STDERR_FILENO);
    log_msg (level, "%s", msg);
    dup2 (saved, STDERR_FILENO);
    close (saved);
    close (p[1]);
    n = read (p[0], out, len - 1);
    close (p[0]);
    out[n > 0 ? n : 0] = '\0';
    return n > 0 ? (int)n : 0;
}

int main (void)
{
    char buf[256];

    plan (NO_PLAN);
    log_open ("tlog", LOG_TO_STDERR, LOG_INFO);
    capture (LOG_ERR, "disk full", buf, sizeof (buf));
    ok (strcmp (buf, "tlog: error: disk full\n") == 0, "error line is prefixed: %s", buf);
    capture (LOG_DEBUG, "noise", buf, sizeof (buf));
    ok (buf[0] == '\0', "debug dropped at level info");
    log_set_level (LOG_DEBUG);
    capture (LOG_DEBUG, "noise", buf, sizeof (buf));
    ok (strcmp (buf, "tlog: debug: noise\n") == 0, "debug shown at level debug");
    errno = EAGAIN;
    capture (LOG_WARNING, "x", buf, sizeof (buf));
    ok (errno == EAGAIN, "logging preserves errno");
    done_testing ();
    return exit_status ();
}
