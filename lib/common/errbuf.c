/* errbuf.c - see errbuf.h. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "errbuf.h"

static void vput (char *buf, size_t len, const char *fmt, va_list ap)
{
    if (buf && len)
        (void)vsnprintf (buf, len, fmt, ap);
}

int errprintf (char *buf, size_t len, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;

    va_start (ap, fmt);
    vput (buf, len, fmt, ap);
    va_end (ap);
    errno = saved;
    return -1;
}

int errnprintf (char *buf, size_t len, int errnum, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    vput (buf, len, fmt, ap);
    va_end (ap);
    errno = errnum;
    return -1;
}
