/* errbuf.h - an error message for the caller, with errno kept.
 *
 * Functions that can fail report why in a buffer their caller passes
 * (char *err, size_t len) and the cause in errno.  errprintf writes the
 * message, leaves errno as it was when called and returns -1, so an error
 * path is one statement, and printing cannot clobber the errno it names:
 *
 *     if (fstat (fd, &st) < 0)
 *         return errprintf (err, len, "cannot stat %s: %s", path, strerror (errno));
 *
 * errnprintf sets errno to errnum (for failures no system call reported).
 * A NULL buf or a len of 0 writes nothing.
 */
#ifndef IBCR_COMMON_ERRBUF_H
#define IBCR_COMMON_ERRBUF_H

#include <stddef.h>

int errprintf (char *buf, size_t len, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
int errnprintf (char *buf, size_t len, int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

/* Make a message that may quote what a user chose (file names, what a
 * task wrote) safe to print on a terminal: control characters become
 * '?'.  Returns s. */
char *errbuf_printable (char *s);

#endif
