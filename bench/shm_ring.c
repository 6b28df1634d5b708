/*
 * shm_ring.c - raw shared-memory baseline for softib's same-host path
 * (bench/softib-shm-bench.sh).
 *
 *   shm_ring -s SIZE -n ITERS [-b TX:RX]
 *
 * Two processes (fork) share one memfd mapping holding a single-producer
 * single-consumer byte ring of 1 MiB, the size of each of softib's
 * same-host rings.  The parent sends ITERS messages of SIZE bytes: an
 * 8-byte header (sequence number) and the payload, copied from a source
 * buffer into the ring, the head published after each message.  The child
 * copies each payload out into a destination buffer, checks the sequence
 * number, and publishes the tail.  With -b, the sender copies from TX
 * source buffers in turn and the receiver into RX destination buffers in
 * turn (default one each), as shm_verbs cycles through its send and
 * receive buffers: the same bytes touched, so the same caches missed.
 * Both sides busy-poll, yielding the
 * CPU on every empty look (see relax).  That is what one message costs between two processes
 * with no protocol at all: one copy in, one copy out, the cache lines of
 * the indices moving between cores.  Prints
 *   SIZE ITERS MB/s Mmsg/s
 * (MB = 2^20 bytes, as perftest), timed by the receiver from its first
 * to its last message, then
 *   cpu NS
 * the CPU time (user and system, both processes) per message in ns,
 * which a busy machine changes less than the rate: a process waiting for
 * a CPU uses none.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING (1u << 20)

struct ctl {
    uint64_t head __attribute__ ((aligned (64)));
    uint64_t tail __attribute__ ((aligned (64)));
    double secs __attribute__ ((aligned (64)));
    int bad;
};

/* CPU time (user + system) of this process and its waited-for children,
 * every thread, in seconds. */
static double cpu_s (void)
{
    struct rusage a, b;

    getrusage (RUSAGE_SELF, &a);
    getrusage (RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec)
        + (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec
                   + b.ru_stime.tv_usec)
        / 1e6;
}

static double now_s (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An empty look gives the CPU away, as softib's ibv_poll_cq does on an
 * empty CQ: on a machine with more runnable threads than cores, both
 * then get the other side's turn sooner (measured on the 2-core project
 * machine: yielding every look beat yielding every 64th or 4096th). */
static inline void relax (void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause ();
#endif
    sched_yield ();
}

static void ring_put (uint8_t *d, uint64_t pos, const void *src, size_t n)
{
    uint32_t off = (uint32_t)(pos & (RING - 1));
    size_t k = RING - off < n ? RING - off : n;

    memcpy (d + off, src, k);
    if (n > k)
        memcpy (d, (const uint8_t *)src + k, n - k);
}

static void ring_get (const uint8_t *d, uint64_t pos, void *dst, size_t n)
{
    uint32_t off = (uint32_t)(pos & (RING - 1));
    size_t k = RING - off < n ? RING - off : n;

    memcpy (dst, d + off, k);
    if (n > k)
        memcpy ((uint8_t *)dst + k, d, n - k);
}

int main (int argc, char **argv)
{
    size_t size = 8;
    long iters = 100000;
    int opt, fd;
    struct ctl *c;
    uint8_t *d, *buf;
    long ntx = 1, nrx = 1;
    pid_t pid;
    int st;

    while ((opt = getopt (argc, argv, "s:n:b:")) != -1) {
        if (opt == 's')
            size = (size_t)atol (optarg);
        else if (opt == 'n')
            iters = atol (optarg);
        else if (opt == 'b') {
            char *colon;
            ntx = strtol (optarg, &colon, 10);
            nrx = *colon == ':' ? atol (colon + 1) : 0;
        } else
            return 2;
    }
    if (size + 8 > RING / 2 || iters < 1 || ntx < 1 || nrx < 1 || ntx > 4096 || nrx > 4096) {
        fprintf (stderr, "shm_ring: -s at most %u, -n at least 1, -b TX:RX from 1 to 4096 each\n",
                 RING / 2 - 8);
        return 2;
    }
    fd = memfd_create ("shm_ring", MFD_CLOEXEC);
    if (fd < 0 || ftruncate (fd, 4096 + RING) < 0) {
        perror ("shm_ring: memfd");
        return 1;
    }
    c = mmap (NULL, 4096 + RING, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c == MAP_FAILED) {
        perror ("shm_ring: mmap");
        return 1;
    }
    d = (uint8_t *)c + 4096;
    /* the sender's ntx buffers, or (after fork) the receiver's nrx */
    buf = malloc ((size ? size : 1) * (size_t)(ntx > nrx ? ntx : nrx));
    if (!buf)
        return 1;
    memset (buf, 0x5a, size * (size_t)(ntx > nrx ? ntx : nrx));
    pid = fork ();
    if (pid < 0) {
        perror ("shm_ring: fork");
        return 1;
    }
    if (pid == 0) { /* receiver */
        uint64_t tail = 0;
        double t0 = 0;
        long rb = 0;

        for (long i = 0; i < iters; i++) {
            uint64_t seq;

            while (__atomic_load_n (&c->head, __ATOMIC_ACQUIRE) - tail < 8 + size)
                relax ();
            if (i == 0)
                t0 = now_s ();
            ring_get (d, tail, &seq, 8);
            ring_get (d, tail + 8, buf + (size_t)rb * size, size);
            if (++rb == nrx) /* no division per message */
                rb = 0;
            if (seq != (uint64_t)i)
                c->bad = 1;
            tail += 8 + size;
            __atomic_store_n (&c->tail, tail, __ATOMIC_RELEASE);
        }
        c->secs = now_s () - t0;
        _exit (0);
    }
    {
        uint64_t head = 0, tail = 0;
        long tb = 0;

        for (long i = 0; i < iters; i++) {
            uint64_t seq = (uint64_t)i;

            while (head + 8 + size - tail > RING) {
                tail = __atomic_load_n (&c->tail, __ATOMIC_ACQUIRE);
                relax ();
            }
            ring_put (d, head, &seq, 8);
            ring_put (d, head + 8, buf + (size_t)tb * size, size);
            if (++tb == ntx)
                tb = 0;
            head += 8 + size;
            __atomic_store_n (&c->head, head, __ATOMIC_RELEASE);
        }
    }
    if (waitpid (pid, &st, 0) < 0 || !WIFEXITED (st) || WEXITSTATUS (st)) {
        fprintf (stderr, "shm_ring: receiver failed\n");
        return 1;
    }
    if (c->bad) {
        fprintf (stderr, "shm_ring: sequence mismatch\n");
        return 1;
    }
    /* the first message is the start mark: iters - 1 intervals */
    {
        double s = c->secs > 0 ? c->secs : 1e-9;
        double n = iters > 1 ? (double)(iters - 1) : 1;

        printf ("%zu %ld %.2f %.6f\n", size, iters, n * (double)size / s / 1048576.0, n / s / 1e6);
        printf ("cpu %.1f\n", cpu_s () / (double)iters * 1e9);
    }
    return 0;
}
