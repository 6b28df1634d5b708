/* errbuf.c - see errbuf.h. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "errbuf.h"

static int put (char *buf, size_t len, int errnum, const char *fmt, va_list ap)
{
    if (buf && len)
        (void)vsnprintf (buf, len, fmt, ap);
    errno = errnum;
    return -1;
}

int errprintf (char *buf, size_t len, const char *fmt, ...)
{
    int errnum = errno, rc;
    va_list ap;

    va_start (ap, fmt);
    rc = put (buf, len, errnum, fmt, ap);
    va_end (ap);
    return rc;
}

int errnprintf (char *buf, size_t len, int errnum, const char *fmt, ...)
{
    int rc;
    va_list ap;

    va_start (ap, fmt);
    rc = put (buf, len, errnum, fmt, ap);
    va_end (ap);
    return rc;
}

char *errbuf_printable (char *s)
{
    for (unsigned char *c = (unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            *c = '?';
    return s;
}
