/* clock_read.c - what one read of each clock UCX may use costs here.
 *
 * UCX 1.13 on x86_64 reads the CPU's time-stamp counter (rdtsc) unless
 * told otherwise; in a process protected by ibcr, libibcr makes it read
 * gettimeofday (through the vDSO when the kernel's clocksource allows).
 * The difference of the two is the most the change can add to each of
 * UCX's clock reads.  CLOCK_MONOTONIC is printed for reference.
 *
 * Usage: clock_read [READS [ROUNDS]]   (default 10000000 and 5)
 * Prints one line per clock: "NAME BEST_NS MEDIAN_NS" per read, the
 * clocks' rounds interleaved so that a busy machine hits them alike.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#if defined(__x86_64__)
static inline uint64_t rdtsc (void)
{
    uint32_t lo, hi;

    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
#endif

static double now_ns (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static volatile uint64_t sink;

/* ns per read of clock K over N reads */
static double measure (int k, long n)
{
    uint64_t acc = 0;
    double t0 = now_ns ();

    for (long i = 0; i < n; i++) {
        switch (k) {
#if defined(__x86_64__)
        case 0:
            acc += rdtsc ();
            break;
#endif
        case 1: {
            struct timeval tv;
            gettimeofday (&tv, NULL);
            acc += (uint64_t)tv.tv_sec * 1000000 + tv.tv_usec;
            break;
        }
        default: {
            struct timespec ts;
            clock_gettime (CLOCK_MONOTONIC, &ts);
            acc += (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
            break;
        }
        }
    }
    sink = acc;
    return (now_ns () - t0) / n;
}

static int cmp (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main (int argc, char **argv)
{
    long n = argc > 1 ? atol (argv[1]) : 10000000;
    int rounds = argc > 2 ? atoi (argv[2]) : 5;
    static const char *name[] = { "rdtsc", "gettimeofday", "clock_gettime(MONOTONIC)" };
    double t[3][64];

    if (n < 1 || rounds < 1 || rounds > 64) {
        fprintf (stderr, "usage: clock_read [READS [ROUNDS (1-64)]]\n");
        return 2;
    }
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 3; k++) {
#if !defined(__x86_64__)
            if (k == 0)
                continue;
#endif
            t[k][r] = measure (k, n);
        }
    for (int k = 0; k < 3; k++) {
#if !defined(__x86_64__)
        if (k == 0)
            continue;
#endif
        qsort (t[k], rounds, sizeof (double), cmp);
        printf ("%s %.2f %.2f\n", name[k], t[k][0], t[k][rounds / 2]);
    }
    return 0;
}
