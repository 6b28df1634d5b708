/*
 * tcp_bw.c - raw TCP baseline for softib's benchmark (bench/softib-bench.sh).
 *
 * The same shape of traffic perftest makes, over a plain socket:
 *   tcp_bw -s SIZE -n ITERS [-p PORT]            server
 *   tcp_bw -s SIZE -n ITERS [-p PORT] -m MODE HOST   client
 * MODE bw:  client writes ITERS messages of SIZE, server acknowledges the
 *           total at the end; prints MB/sec (2^20 bytes) and Mpps.
 * MODE lat: ITERS ping-pongs of SIZE bytes; prints the median one-way
 *           latency in usec (half the round trip), as ib_send_lat does.
 * TCP_NODELAY on both ends, like softib's own sockets.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int full (int fd, void *buf, size_t n, int wr)
{
    char *p = buf;

    while (n) {
        ssize_t k = wr ? write (fd, p, n) : read (fd, p, n);

        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int cmp_d (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main (int argc, char **argv)
{
    size_t size = 65536;
    long iters = 1000, i;
    int port = 18600, opt, fd, one = 1;
    const char *mode = "bw";
    char *buf;

    while ((opt = getopt (argc, argv, "s:n:p:m:")) != -1) {
        switch (opt) {
        case 's':
            size = strtoul (optarg, NULL, 0);
            break;
        case 'n':
            iters = strtol (optarg, NULL, 0);
            break;
        case 'p':
            port = atoi (optarg);
            break;
        case 'm':
            mode = optarg;
            break;
        default:
            fprintf (stderr,
                     "usage: tcp_bw [-s size] [-n iters] "
                     "[-p port] [-m bw|lat] [host]\n");
            return 2;
        }
    }
    buf = calloc (1, size ? size : 1);
    if (!buf || iters < 1 || size < 1) {
        fprintf (stderr, "tcp_bw: need -s >= 1 and -n >= 1\n");
        return 2;
    }
    if (optind == argc) { /* server */
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons ((uint16_t)port) };
        int ls = socket (AF_INET, SOCK_STREAM, 0);
        char m[8];

        setsockopt (ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
        if (bind (ls, (struct sockaddr *)&sin, sizeof (sin)) < 0 || listen (ls, 1) < 0) {
            perror ("tcp_bw: bind/listen");
            return 1;
        }
        fd = accept (ls, NULL, NULL);
        setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
        if (full (fd, m, sizeof (m), 0) < 0)
            return 1;
        for (i = 0; i < iters; i++) {
            if (full (fd, buf, size, 0) < 0)
                return 1;
            if (m[0] == 'l' && full (fd, buf, size, 1) < 0)
                return 1;
        }
        if (m[0] == 'b' && full (fd, buf, 1, 1) < 0)
            return 1;
        return 0;
    } else {
        struct addrinfo *ai, hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
        char ps[16], m[8] = { 0 };
        double t0, t, *lat = NULL;

        snprintf (ps, sizeof (ps), "%d", port);
        if (getaddrinfo (argv[optind], ps, &hints, &ai) != 0) {
            fprintf (stderr, "tcp_bw: cannot resolve %s\n", argv[optind]);
            return 1;
        }
        fd = socket (AF_INET, SOCK_STREAM, 0);
        if (connect (fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            perror ("tcp_bw: connect");
            return 1;
        }
        setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
        strncpy (m, mode, sizeof (m) - 1);
        if (full (fd, m, sizeof (m), 1) < 0)
            return 1;
        if (m[0] == 'l')
            lat = calloc ((size_t)iters, sizeof (*lat));
        t0 = now_s ();
        for (i = 0; i < iters; i++) {
            t = now_s ();
            if (full (fd, buf, size, 1) < 0)
                return 1;
            if (lat) {
                if (full (fd, buf, size, 0) < 0)
                    return 1;
                lat[i] = (now_s () - t) * 1e6 / 2;
            }
        }
        if (!lat) {
            if (full (fd, buf, 1, 0) < 0)
                return 1;
            t = now_s () - t0;
            printf ("%zu %ld %.2f MB/sec %.6f Mpps\n", size, iters,
                    (double)size * (double)iters / t / 1048576.0, (double)iters / t / 1e6);
        } else {
            qsort (lat, (size_t)iters, sizeof (*lat), cmp_d);
            printf ("%zu %ld %.2f usec\n", size, iters, lat[iters / 2]);
        }
    }
    return 0;
}
