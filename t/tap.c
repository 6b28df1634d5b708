/* tap.c - see tap.h.  Thread-safe: several threads may call ok(). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tap.h"

static pthread_mutex_t tap_lock = PTHREAD_MUTEX_INITIALIZER;
static int planned = -2;
static int count;
static int failed;

void plan (int n)
{
    pthread_mutex_lock (&tap_lock);
    planned = n;
    if (n >= 0)
        printf ("1..%d\n", n);
    fflush (stdout);
    pthread_mutex_unlock (&tap_lock);
}

int ok_at (int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock (&tap_lock);
    count++;
    printf ("%sok %d - ", cond ? "" : "not ", count);
    va_start (ap, fmt);
    vprintf (fmt, ap);
    va_end (ap);
    printf ("\n");
    if (!cond) {
        failed++;
        printf ("#   Failed test at %s line %d\n", file, line);
    }
    fflush (stdout);
    pthread_mutex_unlock (&tap_lock);
    return cond;
}

void skip (int n, const char *fmt, ...)
{
    char why[256];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (why, sizeof (why), fmt, ap);
    va_end (ap);
    pthread_mutex_lock (&tap_lock);
    while (n-- > 0)
        printf ("ok %d # SKIP %s\n", ++count, why);
    fflush (stdout);
    pthread_mutex_unlock (&tap_lock);
}

void diag (const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock (&tap_lock);
    printf ("# ");
    va_start (ap, fmt);
    vprintf (fmt, ap);
    va_end (ap);
    printf ("\n");
    fflush (stdout);
    pthread_mutex_unlock (&tap_lock);
}

void BAIL_OUT (const char *fmt, ...)
{
    va_list ap;

    printf ("Bail out! ");
    va_start (ap, fmt);
    vprintf (fmt, ap);
    va_end (ap);
    printf ("\n");
    fflush (stdout);
    exit (255);
}

void done_testing (void)
{
    pthread_mutex_lock (&tap_lock);
    if (planned < 0) {
        printf ("1..%d\n", count);
        planned = count;
    }
    fflush (stdout);
    pthread_mutex_unlock (&tap_lock);
}

int exit_status (void)
{
    if (failed)
        return 1;
    if (planned >= 0 && planned != count) {
        printf ("# planned %d tests but ran %d\n", planned, count);
        return 1;
    }
    return 0;
}
