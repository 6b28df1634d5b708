/* ibcr.c - libibcr's global state, logging and lazy start.
 *
 * Nothing runs at load time: a process that never calls a verb pays only
 * the symbol lookups.  The first verbs call loads the backend and, when
 * IBCR_SOCKET is set, connects the control channel (ctl.c).
 */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ibcr.h"
#include "backend.h"
#include "ctl.h"
#include "ckpt.h"

pthread_mutex_t ibcr_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_uint ibcr_mr_gen = 1;
struct ibcr_link ibcr_ctxs = { &ibcr_ctxs, &ibcr_ctxs };
volatile int ibcr_xlate;
int ibcr_rank = -1;
int ibcr_base_maps;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_errno;
static int debug = -1;

static void vlog (const char *fmt, va_list ap)
{
    char buf[512];
    int n = snprintf (buf, sizeof (buf), "libibcr[%d]: ", (int)getpid ());
    vsnprintf (buf + n, sizeof (buf) - n - 1, fmt, ap);
    size_t l = strlen (buf);
    buf[l++] = '\n';
    /* One write so lines of several processes do not interleave. */
    if (write (STDERR_FILENO, buf, l) < 0)
        return;
}

void ibcr_log (const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start (ap, fmt);
    vlog (fmt, ap);
    va_end (ap);
    errno = saved;
}

void ibcr_debug (const char *fmt, ...)
{
    int saved = errno;
    if (debug < 0) {
        const char *d = getenv ("IBCR_DEBUG");
        debug = d && *d && strcmp (d, "0") != 0;
    }
    if (debug) {
        va_list ap;
        va_start (ap, fmt);
        vlog (fmt, ap);
        va_end (ap);
    }
    errno = saved;
}

int ibcr_refuse (const char *feature, const char *why)
{
    ibcr_log ("%s refused (EOPNOTSUPP): %s", feature, why);
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}

static void init_once_fn (void)
{
    const char *r = getenv ("IBCR_RANK");
    if (!r)
        r = getenv ("SLURM_PROCID");
    if (r)
        ibcr_rank = atoi (r);
    /* The process may map its own libibverbs (it was linked against one):
     * those mappings are not the backend's and stay after release. */
    ibcr_base_maps = ckpt_count_maps ("libibverbs");
    if (backend_load (NULL) < 0) {
        init_errno = errno;
        return;
    }
    if (ctl_start () < 0) {
        init_errno = errno;
        return;
    }
}

int ibcr_init (void)
{
    pthread_once (&init_once, init_once_fn);
    if (init_errno) {
        errno = init_errno;
        return -1;
    }
    return 0;
}
