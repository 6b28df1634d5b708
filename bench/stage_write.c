/* stage_write.c - what writing memory into a staging folder costs, the
 * way dd does and the way CRIU does (doc/ckpt-stall.md).
 *
 *   cc -O2 -o stage_write bench/stage_write.c
 *   stage_write DIR MIB MODE [PIPE_BYTES]
 *
 * Allocates MIB MiB of private anonymous memory and writes every page
 * (as the checkpointed probe does), then times writing it to a new file
 * in DIR, which is removed after:
 *   write   write(2) from that memory, 4 MiB per call
 *   zero    write(2) of a 4 MiB buffer cleared before each call (what dd
 *           from /dev/zero does: its source stays in the cache)
 *   splice  vmsplice(2) of the memory into a pipe of PIPE_BYTES (asked
 *           with F_SETPIPE_SZ; the pipe's real size is printed), then
 *           splice(2) from the pipe into the file, as CRIU's parasite and
 *           CRIU's image write do, in one process
 * Prints wall and CPU (user + system) time in ms.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (4 << 20)

static double wall_ms (void)
{
    struct timespec t;
    clock_gettime (CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms (void)
{
    struct rusage r;
    getrusage (RUSAGE_SELF, &r);
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3
        + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

static void die (const char *what)
{
    perror (what);
    exit (1);
}

int main (int argc, char **argv)
{
    if (argc < 4) {
        fprintf (stderr, "usage: stage_write DIR MIB write|zero|splice [PIPE_BYTES]\n");
        return 2;
    }
    size_t len = (size_t)atol (argv[2]) << 20;
    const char *mode = argv[3];
    long psz = argc > 4 ? atol (argv[4]) : 1 << 20;
    char path[4096];
    snprintf (path, sizeof (path), "%s/stage_write.%ld", argv[1], (long)getpid ());
    char *m = mmap (NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die ("mmap");
    for (size_t i = 0; i < len; i += 4096)
        m[i] = (char)(i >> 12);
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        die (path);
    long pipe_size = 0;
    double w0 = wall_ms (), c0 = cpu_ms ();
    if (!strcmp (mode, "write")) {
        for (size_t o = 0; o < len; o += CHUNK)
            if (write (fd, m + o, CHUNK) != CHUNK)
                die ("write");
    } else if (!strcmp (mode, "zero")) {
        char *b = malloc (CHUNK);
        for (size_t o = 0; b && o < len; o += CHUNK) {
            memset (b, 0, CHUNK);
            if (write (fd, b, CHUNK) != CHUNK)
                die ("write");
        }
    } else if (!strcmp (mode, "splice")) {
        int p[2];
        if (pipe (p) < 0)
            die ("pipe");
        (void)fcntl (p[1], F_SETPIPE_SZ, psz); /* may be refused: print what we got */
        pipe_size = fcntl (p[1], F_GETPIPE_SZ);
        for (size_t o = 0; o < len; o += (size_t)pipe_size) {
            struct iovec iov = { m + o, len - o < (size_t)pipe_size ? len - o : (size_t)pipe_size };
            ssize_t v = vmsplice (p[1], &iov, 1, SPLICE_F_GIFT);
            if (v <= 0)
                die ("vmsplice");
            while (v > 0) {
                ssize_t s = splice (p[0], NULL, fd, NULL, (size_t)v, SPLICE_F_MOVE);
                if (s <= 0)
                    die ("splice");
                v -= s;
            }
        }
    } else {
        fprintf (stderr, "stage_write: unknown mode %s\n", mode);
        return 2;
    }
    double w1 = wall_ms (), c1 = cpu_ms ();
    printf ("%s %s MiB=%zu pipe=%ld wall_ms=%.0f cpu_ms=%.0f\n", mode, argv[1], len >> 20,
            pipe_size, w1 - w0, c1 - c0);
    close (fd);
    unlink (path);
    return 0;
}
