/* mpi_pingpong.c - MPI latency, bandwidth and 8-byte message rate
 * between ranks 0 and 1, for bench/mpi-bench.sh.
 *
 * latency    half the round trip of a blocking 8-byte ping-pong (us)
 * bandwidth  rank 0 sends a window of W nonblocking 1 MiB messages,
 *            rank 1 acknowledges each window with 8 bytes (MB/s, 10^6)
 * rate       the same with 8-byte messages (million messages/s)
 *
 * Each is timed after a warm-up, over a fixed count of iterations.
 * The data is checked: every message carries its sequence number in
 * its first word (and the bandwidth's last word too), so a transport
 * that drops or reorders fails the run.  Prints one line,
 *   "lat_us L bw_MBps B rate_Mmps R"
 * on rank 0.  Built with each MPI's own compiler wrapper.
 *
 * Usage: mpi_pingpong [-l LAT_ITERS] [-b BW_ITERS] [-r RATE_ITERS]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW 64
#define BIG (1 << 20)

static int rank;

static void check (uint64_t got, uint64_t want, const char *what)
{
    if (got == want)
        return;
    fprintf (stderr, "mpi_pingpong: rank %d: %s: message %llu arrived as %llu\n", rank, what,
             (unsigned long long)want, (unsigned long long)got);
    MPI_Abort (MPI_COMM_WORLD, 1);
}

static double latency (int iters)
{
    uint64_t v = 0;
    double t0 = 0;

    for (int i = -iters / 10; i < iters; i++) {
        if (i == 0)
            t0 = MPI_Wtime ();
        uint64_t seq = (uint64_t)(i + iters);
        if (rank == 0) {
            v = seq;
            MPI_Send (&v, 1, MPI_UINT64_T, 1, 1, MPI_COMM_WORLD);
            MPI_Recv (&v, 1, MPI_UINT64_T, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv (&v, 1, MPI_UINT64_T, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send (&v, 1, MPI_UINT64_T, 0, 1, MPI_COMM_WORLD);
        }
        check (v, seq, "latency");
    }
    return (MPI_Wtime () - t0) / iters / 2 * 1e6;
}

/* Windows of WINDOW messages of size bytes, each window acknowledged:
 * messages per second. */
static double stream (int iters, size_t size, char *buf)
{
    MPI_Request req[WINDOW];
    MPI_Status st[WINDOW];
    uint64_t ack = 0, seq = 0;
    double t0 = 0;
    size_t words = size / sizeof (uint64_t);

    for (int i = -iters / 10 - 1; i < iters; i++) {
        if (i == 0)
            t0 = MPI_Wtime ();
        for (int w = 0; w < WINDOW; w++) {
            uint64_t *m = (uint64_t *)(buf + (size_t)w * size);
            if (rank == 0) {
                m[0] = m[words - 1] = seq + (uint64_t)w;
                MPI_Isend (m, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[w]);
            } else
                MPI_Irecv (m, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall (WINDOW, req, st);
        if (rank == 1)
            for (int w = 0; w < WINDOW; w++) {
                uint64_t *m = (uint64_t *)(buf + (size_t)w * size);
                check (m[0], seq + (uint64_t)w, "stream");
                check (m[words - 1], seq + (uint64_t)w, "stream (last word)");
            }
        seq += WINDOW;
        if (rank == 0)
            MPI_Recv (&ack, 1, MPI_UINT64_T, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else {
            ack = seq;
            MPI_Send (&ack, 1, MPI_UINT64_T, 0, 3, MPI_COMM_WORLD);
        }
        check (ack, seq, "acknowledgement");
    }
    return (double)iters * WINDOW / (MPI_Wtime () - t0);
}

int main (int argc, char **argv)
{
    int lat_iters = 20000, bw_iters = 40, rate_iters = 2000, size, opt;
    char *buf;

    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    while ((opt = getopt (argc, argv, "l:b:r:")) != -1)
        switch (opt) {
        case 'l':
            lat_iters = atoi (optarg);
            break;
        case 'b':
            bw_iters = atoi (optarg);
            break;
        case 'r':
            rate_iters = atoi (optarg);
            break;
        default:
            if (rank == 0)
                fprintf (stderr, "usage: mpi_pingpong [-l LAT] [-b BW] [-r RATE]\n");
            MPI_Abort (MPI_COMM_WORLD, 2);
        }
    if (size != 2 || lat_iters < 10 || bw_iters < 10 || rate_iters < 10) {
        if (rank == 0)
            fprintf (stderr, "mpi_pingpong: needs 2 ranks and at least 10 iterations each\n");
        MPI_Abort (MPI_COMM_WORLD, 2);
    }
    if (!(buf = calloc (WINDOW, BIG))) {
        fprintf (stderr, "mpi_pingpong: out of memory\n");
        MPI_Abort (MPI_COMM_WORLD, 1);
    }
    double lat = latency (lat_iters);
    double bw = stream (bw_iters, BIG, buf) * BIG / 1e6;
    double rate = stream (rate_iters, 8, buf) / 1e6;
    if (rank == 0)
        printf ("lat_us %.2f bw_MBps %.1f rate_Mmps %.4f\n", lat, bw, rate);
    free (buf);
    MPI_Finalize ();
    return 0;
}
