/* pattern.c - a process whose state a checkpoint/restore must keep intact.
 *
 *   pattern [--mib N] [--threads T] [--tick-ms MS]
 *
 * Fills N MiB (default 64) with a pattern derived from a random run id,
 * then runs T threads (default 3), each counting ticks of MS ms (default
 * 10) in its own counter.  Each SIGUSR1 makes it verify the whole buffer
 * and print one line on stdout:
 *
 *   report SEQ run=RUNID pid=PID pattern=ok bad=0 counters=C0,C1,C2
 *
 * SIGTERM, SIGINT or SIGHUP print a last report ("final" instead of
 * "report") and exit 0 if the pattern was intact, 1 if not.
 *
 * A test proves a restore brought back this very process, not a new one,
 * by the run id (a fresh start picks a new one and so a new pattern), the
 * report sequence (it resumes after the last report before the dump) and
 * the counters (never below their values before the dump, rising after).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define PATTERN_MAX_THREADS 64

struct pattern {
    uint64_t run;
    uint64_t *buf;
    size_t words;
    int nthreads;
    long tick_ms;
    uint64_t counters[PATTERN_MAX_THREADS];
    pthread_t threads[PATTERN_MAX_THREADS];
    unsigned long seq;
};

/* splitmix64: every word depends on the run id and its index, so a lost,
 * zeroed, shifted or stale page shows up as a bad word. */
static uint64_t mix (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void fill (struct pattern *p)
{
    for (size_t i = 0; i < p->words; i++)
        p->buf[i] = mix (p->run ^ i);
}

static size_t verify (const struct pattern *p)
{
    size_t bad = 0;

    for (size_t i = 0; i < p->words; i++)
        if (p->buf[i] != mix (p->run ^ i))
            bad++;
    return bad;
}

struct counter_arg {
    struct pattern *p;
    int idx;
};

static void *count (void *arg)
{
    struct counter_arg *a = arg;
    struct timespec ts = {
        .tv_sec = a->p->tick_ms / 1000,
        .tv_nsec = (a->p->tick_ms % 1000) * 1000000L,
    };

    for (;;) {
        /* EINTR (a dump's seize) just makes this tick shorter. */
        (void)nanosleep (&ts, NULL);
        __atomic_fetch_add (&a->p->counters[a->idx], 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* One write(2) per line, so a reader never sees half a report. */
static size_t report (struct pattern *p, const char *what)
{
    char line[64 + 24 * PATTERN_MAX_THREADS];
    size_t bad = verify (p);
    int n;

    p->seq++;
    n = snprintf (line, sizeof (line),
                  "%s %lu run=%016" PRIx64 " pid=%d pattern=%s bad=%zu counters=", what, p->seq,
                  p->run, (int)getpid (), bad ? "BAD" : "ok", bad);
    for (int i = 0; i < p->nthreads; i++)
        n += snprintf (line + n, sizeof (line) - n, "%s%" PRIu64, i ? "," : "",
                       __atomic_load_n (&p->counters[i], __ATOMIC_RELAXED));
    n += snprintf (line + n, sizeof (line) - n, "\n");
    if (write (STDOUT_FILENO, line, n) != n) {
        /* Nothing to report to; end so the test sees it. */
        exit (2);
    }
    return bad;
}

static long parse_num (const char *opt, const char *val, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol (val, &end, 10);
    if (errno || end == val || *end || v < min || v > max) {
        fprintf (stderr, "pattern: %s wants a number from %ld to %ld, not '%s'\n", opt, min, max,
                 val);
        exit (2);
    }
    return v;
}

int main (int argc, char **argv)
{
    static struct pattern p = { .nthreads = 3, .tick_ms = 10 };
    static struct counter_arg args[PATTERN_MAX_THREADS];
    long mib = 64;
    sigset_t set;
    int sig, err;

    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp (argv[i], "--mib"))
            mib = parse_num (argv[i], argv[i + 1], 1, 65536), i++;
        else if (i + 1 < argc && !strcmp (argv[i], "--threads"))
            p.nthreads = (int)parse_num (argv[i], argv[i + 1], 1, PATTERN_MAX_THREADS), i++;
        else if (i + 1 < argc && !strcmp (argv[i], "--tick-ms"))
            p.tick_ms = parse_num (argv[i], argv[i + 1], 1, 10000), i++;
        else {
            fprintf (stderr,
                     "pattern: unknown or incomplete option '%s'; usage: "
                     "pattern [--mib N] [--threads T] [--tick-ms MS]\n",
                     argv[i]);
            return 2;
        }
    }
    if (getrandom (&p.run, sizeof (p.run), 0) != sizeof (p.run)) {
        perror ("pattern: getrandom");
        return 2;
    }
    p.words = (size_t)mib * 1024 * 1024 / sizeof (uint64_t);
    p.buf = mmap (NULL, p.words * sizeof (uint64_t), PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p.buf == MAP_FAILED) {
        perror ("pattern: mmap");
        return 2;
    }
    fill (&p);

    /* Signals go to the main thread only, taken synchronously. */
    sigemptyset (&set);
    sigaddset (&set, SIGUSR1);
    sigaddset (&set, SIGTERM);
    sigaddset (&set, SIGINT);
    sigaddset (&set, SIGHUP);
    if ((err = pthread_sigmask (SIG_BLOCK, &set, NULL))) {
        fprintf (stderr, "pattern: pthread_sigmask: %s\n", strerror (err));
        return 2;
    }
    for (int i = 0; i < p.nthreads; i++) {
        args[i] = (struct counter_arg){ .p = &p, .idx = i };
        if ((err = pthread_create (&p.threads[i], NULL, count, &args[i]))) {
            fprintf (stderr, "pattern: pthread_create: %s\n", strerror (err));
            return 2;
        }
    }
    printf ("start run=%016" PRIx64 " pid=%d mib=%ld threads=%d\n", p.run, (int)getpid (), mib,
            p.nthreads);
    fflush (stdout);

    for (;;) {
        sig = sigwaitinfo (&set, NULL);
        if (sig < 0) {
            if (errno == EINTR)
                continue;
            perror ("pattern: sigwaitinfo");
            return 2;
        }
        if (sig == SIGUSR1)
            (void)report (&p, "report");
        else
            return report (&p, "final") ? 1 : 0;
    }
}
