/*
 * mpi_verify.c - an MPI job whose every message is checked.
 *
 * Built once per MPI of Debian (mpicc.openmpi, mpicc.mpich) by t/mpi.mk
 * and run by the t11NN MPI tests on softib.  Each iteration:
 *   - point-to-point, all pairs: every rank sends every other rank one
 *     message of each size (8 B ... 4 MiB by default, so both UCX's eager
 *     protocols and its rendezvous, i.e. RDMA reads of the sender's
 *     buffer, carry data), nonblocking, all in flight at once;
 *   - a ring of blocking MPI_Sendrecv;
 *   - collectives: MPI_Bcast from a rotating root, MPI_Allreduce (sum),
 *     MPI_Alltoall, each checked against the value computed locally;
 *   - one-sided, in fence epochs on a window of one slot per rank: every
 *     rank MPI_Puts a message into its slot at every other rank and
 *     MPI_Accumulates (sum) a vector into every other rank's counters;
 *     each rank checks what arrived in its window, then MPI_Gets back
 *     from every other rank what it put there and checks that too.
 * A message carries a header (magic, source, destination, iteration,
 * size, sequence number, checksum of the payload) and a payload that is
 * a function of (source, destination, iteration, size); the receiver
 * regenerates it and compares every byte, and the per-pair sequence
 * numbers must arrive in order.  Any difference prints what, where and
 * from whom, then MPI_Abort()s: the job can only exit 0 when every byte
 * was right.
 *
 * Output (stdout): one line per rank,
 *   rank R of N on HOST: I iterations, M messages, B bytes verified
 * and on rank 0, after all ranks agree,
 *   mpi_verify: OK N ranks, I iterations, M messages, B bytes, R one-sided (LIBRARY)
 * where M, B and R (puts, gets and accumulates) are the sums over all ranks.
 *
 * Options: -n ITERS (default 10)  -s SIZE,SIZE,...  (bytes, at least
 * the 40-byte header; default 48,1000,8000,65536,1048576,4194304)
 * -q (no per-rank line)  -u FILE (go on after ITERS iterations until
 * FILE exists: rank 0 looks and tells the others, so all stop together
 * and report the same count)  -R (no one-sided part; R is then 0)
 * -w SIZE (bytes of a one-sided slot, default the largest size up to
 * 1 MiB)  -S (say on stderr when MPI_Init has returned)  -c (say on
 * stderr which clock UCX reads, after MPI_Init and before MPI_Finalize:
 * "UCX clock after MPI_Init: gettimeofday, 1000000 ticks/s", or rdtsc
 * and the counter's rate)  -p MS (in each iteration every rank sleeps
 * MS milliseconds with its point-to-point messages posted and not yet
 * waited for: a job that lasts without keeping the CPUs busy, for tests
 * that checkpoint it while it runs, and finds messages in flight; the
 * result is the same)
 * -x (self-test of the checker: rank 1 flips the last byte of its last,
 * largest message to rank 0, which must abort).
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERIFY_MAGIC 0x6962637276657269ull /* "ibcrveri" */
#define MAX_SIZES 16
#define HDR_BYTES ((int)sizeof (struct msg_hdr))

struct msg_hdr {
    uint64_t magic;
    uint32_t src, dst;
    uint32_t iter, size;
    uint64_t seq;
    uint64_t csum;
};

static int rank, nranks;
static char host[256];

static void die (const char *fmt, ...) __attribute__ ((format (printf, 1, 2), noreturn));

static void die (const char *fmt, ...)
{
    va_list ap;

    fprintf (stderr, "mpi_verify: rank %d on %s: ", rank, host);
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    fputc ('\n', stderr);
    fflush (stderr);
    MPI_Abort (MPI_COMM_WORLD, 2);
    exit (2);
}

/* Sleep ms milliseconds.  Relative, resumed with what is left when a
 * signal (or a checkpoint's freeze) cuts it short: a deadline on the
 * monotonic clock would mean nothing on the node a rank is restored on. */
static void pause_ms (int ms)
{
    struct timespec left = { ms / 1000, (long)(ms % 1000) * 1000000 };

    while (nanosleep (&left, &left) != 0 && errno == EINTR)
        ;
}

static void check_mpi (int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (rc == MPI_SUCCESS)
        return;
    MPI_Error_string (rc, msg, &len);
    die ("%s failed: %s", what, msg);
}

/* Which clock UCX reads, as libucs says: its choice (the exported
 * ucs_arch_x86_enable_rdtsc of x86_64: 0 gettimeofday, 1 rdtsc, 2 not
 * made yet) and the rate of its time units.  MPICH links UCX: the global
 * scope has it.  Open MPI loads UCX with RTLD_LOCAL: then libucs by name. */
static void say_ucx_clock (const char *when)
{
    void *h = dlopen ("libucs.so.0", RTLD_LAZY | RTLD_NOLOAD);
    int *choice = (int *)dlsym (RTLD_DEFAULT, "ucs_arch_x86_enable_rdtsc");
    double (*rate) (void) = h ? (double (*) (void))dlsym (h, "ucs_get_cpu_clocks_per_sec") : NULL;

    if (!choice && h)
        choice = (int *)dlsym (h, "ucs_arch_x86_enable_rdtsc");
    const char *name = !h ? "no libucs loaded"
        : !choice         ? "no ucs_arch_x86_enable_rdtsc"
        : *choice == 0    ? "gettimeofday"
        : *choice == 1    ? "rdtsc"
                          : "not chosen";

    fprintf (stderr, "mpi_verify: rank %d on %s: UCX clock %s: %s, %.0f ticks/s\n", rank, host,
             when, name, choice && *choice != 2 && rate ? rate () : 0.0);
    fflush (stderr);
    if (h)
        dlclose (h);
}

/* splitmix64: a fast generator whose stream is fixed by its seed. */
static uint64_t mix (uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t seed_of (int src, int dst, int iter, int size, int kind)
{
    return ((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^ ((uint64_t)iter << 8)
        ^ ((uint64_t)size << 20) ^ (uint64_t)kind;
}

static void fill (unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t s = seed, v;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        v = mix (&s);
        memcpy (p + i, &v, 8);
    }
    if (i < n) {
        v = mix (&s);
        memcpy (p + i, &v, n - i);
    }
}

/* FNV-1a, 64 bits. */
static uint64_t csum (const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* A message of SIZE bytes in total (at least the header). */
static void make_msg (unsigned char *buf, int size, int src, int dst, int iter, uint64_t seq,
                      int kind)
{
    struct msg_hdr h;
    int plen = size - HDR_BYTES;

    fill (buf + HDR_BYTES, plen, seed_of (src, dst, iter, size, kind));
    h.magic = VERIFY_MAGIC;
    h.src = src;
    h.dst = dst;
    h.iter = iter;
    h.size = size;
    h.seq = seq;
    h.csum = csum (buf + HDR_BYTES, plen);
    memcpy (buf, &h, HDR_BYTES);
}

static void check_msg (const unsigned char *buf, unsigned char *want, int size, int src, int dst,
                       int iter, uint64_t seq, int kind, const char *what)
{
    struct msg_hdr h;
    int plen = size - HDR_BYTES;

    memcpy (&h, buf, HDR_BYTES);
    if (h.magic != VERIFY_MAGIC || (int)h.src != src || (int)h.dst != dst || (int)h.iter != iter
        || (int)h.size != size)
        die ("%s of %d bytes from rank %d, iteration %d: header says "
             "magic %#llx, from %u to %u, iteration %u, %u bytes",
             what, size, src, iter, (unsigned long long)h.magic, h.src, h.dst, h.iter, h.size);
    if (h.seq != seq)
        die ("%s of %d bytes from rank %d: sequence number %llu, "
             "expected %llu (lost, repeated or reordered)",
             what, size, src, (unsigned long long)h.seq, (unsigned long long)seq);
    fill (want, plen, seed_of (src, dst, iter, size, kind));
    if (memcmp (buf + HDR_BYTES, want, plen) != 0) {
        int k = 0;

        while (buf[HDR_BYTES + k] == want[k])
            k++;
        die ("%s of %d bytes from rank %d, iteration %d, seq %llu: "
             "payload byte %d is %#x, expected %#x",
             what, size, src, iter, (unsigned long long)seq, k, buf[HDR_BYTES + k], want[k]);
    }
    if (csum (buf + HDR_BYTES, plen) != h.csum)
        die ("%s of %d bytes from rank %d: checksum mismatch", what, size, src);
}

/* One-sided traffic of iteration IT on WIN, whose local memory BASE is
 * NRANKS slots of SLOT bytes, then NACC counters; returns the transfers
 * it checked (puts, accumulates, gets). */
enum { NACC = 512 };

static uint64_t acc_term (int src, int dst, int it, int j)
{
    uint64_t s = seed_of (src, dst, it, j, 6);

    return mix (&s) >> 12;
}

static uint64_t one_sided (MPI_Win win, unsigned char *base, int slot, int it, unsigned char **put,
                           unsigned char **got, uint64_t *acc_in, unsigned char *want)
{
    uint64_t *acc = (uint64_t *)(base + (size_t)nranks * slot), n = 0;

    /* Our counters are ours to clear: nobody touches the window between
     * the last epoch's closing fence and this one's opening fence. */
    memset (acc, 0, NACC * sizeof (*acc));
    check_mpi (MPI_Win_fence (0, win), "MPI_Win_fence");
    for (int p = 0; p < nranks; p++) {
        if (p == rank)
            continue;
        make_msg (put[p], slot, rank, p, it, it, 5);
        check_mpi (MPI_Put (put[p], slot, MPI_BYTE, p, (MPI_Aint)rank * slot, slot, MPI_BYTE, win),
                   "MPI_Put");
        for (int j = 0; j < NACC; j++)
            acc_in[(size_t)p * NACC + j] = acc_term (rank, p, it, j);
        check_mpi (MPI_Accumulate (acc_in + (size_t)p * NACC, NACC, MPI_UINT64_T, p,
                                   (MPI_Aint)nranks * slot, NACC, MPI_UINT64_T, MPI_SUM, win),
                   "MPI_Accumulate");
    }
    check_mpi (MPI_Win_fence (0, win), "MPI_Win_fence");
    for (int p = 0; p < nranks; p++) {
        if (p == rank)
            continue;
        check_msg (base + (size_t)p * slot, want, slot, p, rank, it, it, 5, "MPI_Put");
        n += 2;
    }
    for (int j = 0; j < NACC; j++) {
        uint64_t sum = 0;

        for (int p = 0; p < nranks; p++)
            if (p != rank)
                sum += acc_term (p, rank, it, j);
        if (acc[j] != sum)
            die ("MPI_Accumulate iteration %d: counter %d is %llu, expected %llu", it, j,
                 (unsigned long long)acc[j], (unsigned long long)sum);
    }
    for (int p = 0; p < nranks; p++)
        if (p != rank)
            check_mpi (
                MPI_Get (got[p], slot, MPI_BYTE, p, (MPI_Aint)rank * slot, slot, MPI_BYTE, win),
                "MPI_Get");
    check_mpi (MPI_Win_fence (0, win), "MPI_Win_fence");
    for (int p = 0; p < nranks; p++) {
        if (p == rank)
            continue;
        check_msg (got[p], want, slot, rank, p, it, it, 5, "MPI_Get");
        n++;
    }
    return n;
}

static int parse_sizes (const char *arg, int *sizes)
{
    char *copy = strdup (arg), *tok, *save = NULL;
    int n = 0;

    for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        long v = strtol (tok, NULL, 0);
        if (n == MAX_SIZES || v < HDR_BYTES || v > (1 << 28)) {
            free (copy);
            return -1;
        }
        sizes[n++] = (int)v;
    }
    free (copy);
    return n;
}

int main (int argc, char **argv)
{
    int sizes[MAX_SIZES], nsizes = 0, iters = 10, quiet = 0, maxsize = 0;
    unsigned char **sbuf, **rbuf, *want, *ring_s, *ring_r, *bc;
    uint64_t *sseq, *rseq, msgs = 0, bytes = 0, tot[3], mine[3];
    MPI_Request *req;
    MPI_Status *st;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int opt, len, corrupt = 0, it, rma = 1, slot = 0, started = 0, tell_clock = 0, pace_ms = 0;
    const char *until = NULL;
    unsigned char **put = NULL, **got = NULL, *wbase = NULL;
    uint64_t *acc_in = NULL, rmas = 0;
    MPI_Win win = MPI_WIN_NULL;

    check_mpi (MPI_Init (&argc, &argv), "MPI_Init");
    MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &nranks);
    gethostname (host, sizeof (host) - 1);

    nsizes = parse_sizes ("48,1000,8000,65536,1048576,4194304", sizes);
    while ((opt = getopt (argc, argv, "n:s:qu:xRw:Scp:")) != -1) {
        switch (opt) {
        case 'n':
            iters = atoi (optarg);
            break;
        case 's':
            nsizes = parse_sizes (optarg, sizes);
            if (nsizes <= 0)
                die ("-s: sizes are %d to %d bytes, at most %d of them", HDR_BYTES, 1 << 28,
                     MAX_SIZES);
            break;
        case 'q':
            quiet = 1;
            break;
        case 'u':
            until = optarg;
            break;
        case 'x':
            corrupt = 1;
            break;
        case 'R':
            rma = 0;
            break;
        case 'S':
            started = 1;
            break;
        case 'c':
            tell_clock = 1;
            break;
        case 'p':
            pace_ms = atoi (optarg);
            if (pace_ms < 0 || pace_ms > 60000)
                die ("-p: a pause is 0 to 60000 milliseconds");
            break;
        case 'w':
            slot = atoi (optarg);
            if (slot < HDR_BYTES || slot > (1 << 26))
                die ("-w: a slot is %d to %d bytes", HDR_BYTES, 1 << 26);
            break;
        default:
            die ("usage: mpi_verify [-n ITERS] [-s SIZE,...] [-q] [-u FILE] [-x] [-R] "
                 "[-w SIZE] [-S] [-c] [-p MS]");
        }
    }
    if (iters < 1)
        die ("-n: at least one iteration");
    if (started) {
        fprintf (stderr, "mpi_verify: rank %d on %s: past MPI_Init\n", rank, host);
        fflush (stderr);
    }
    if (tell_clock)
        say_ucx_clock ("after MPI_Init");
    if (nsizes <= 0)
        die ("no message sizes");
    for (int k = 0; k < nsizes; k++)
        if (sizes[k] > maxsize)
            maxsize = sizes[k];

    /* One buffer per (peer, size) in each direction: all in flight. */
    sbuf = calloc ((size_t)nranks * nsizes, sizeof (*sbuf));
    rbuf = calloc ((size_t)nranks * nsizes, sizeof (*rbuf));
    sseq = calloc (nranks, sizeof (*sseq));
    rseq = calloc (nranks, sizeof (*rseq));
    req = calloc ((size_t)2 * nranks * nsizes, sizeof (*req));
    st = calloc ((size_t)2 * nranks * nsizes, sizeof (*st));
    want = malloc (maxsize);
    ring_s = malloc (maxsize);
    ring_r = malloc (maxsize);
    bc = malloc (maxsize);
    if (!sbuf || !rbuf || !sseq || !rseq || !req || !st || !want || !ring_s || !ring_r || !bc)
        die ("out of memory");
    for (int p = 0; p < nranks; p++)
        for (int k = 0; k < nsizes; k++) {
            if (p == rank)
                continue;
            sbuf[p * nsizes + k] = malloc (sizes[k]);
            rbuf[p * nsizes + k] = malloc (sizes[k]);
            if (!sbuf[p * nsizes + k] || !rbuf[p * nsizes + k])
                die ("out of memory");
        }
    if (rma && nranks > 1) {
        if (!slot)
            slot = maxsize < (1 << 20) ? maxsize : (1 << 20);
        if (slot > maxsize && !(want = realloc (want, slot)))
            die ("out of memory");
        put = calloc (nranks, sizeof (*put));
        got = calloc (nranks, sizeof (*got));
        acc_in = calloc ((size_t)nranks * NACC, sizeof (*acc_in));
        if (!put || !got || !acc_in)
            die ("out of memory");
        for (int p = 0; p < nranks; p++)
            if (p != rank && (!(put[p] = malloc (slot)) || !(got[p] = malloc (slot))))
                die ("out of memory");
        check_mpi (MPI_Win_allocate ((MPI_Aint)nranks * slot + NACC * sizeof (uint64_t), 1,
                                     MPI_INFO_NULL, MPI_COMM_WORLD, &wbase, &win),
                   "MPI_Win_allocate");
        MPI_Win_set_errhandler (win, MPI_ERRORS_RETURN);
    } else
        rma = 0;

    for (it = 0;; it++) {
        int nreq = 0;

        if (it >= iters) {
            int more = until && rank == 0 && access (until, F_OK) != 0;

            if (until)
                check_mpi (MPI_Bcast (&more, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
            if (!more)
                break;
        }

        /* point-to-point, all pairs, every size in flight at once */
        for (int p = 0; p < nranks; p++) {
            if (p == rank)
                continue;
            for (int k = 0; k < nsizes; k++)
                check_mpi (MPI_Irecv (rbuf[p * nsizes + k], sizes[k], MPI_BYTE, p, k,
                                      MPI_COMM_WORLD, &req[nreq++]),
                           "MPI_Irecv");
        }
        for (int p = 0; p < nranks; p++) {
            if (p == rank)
                continue;
            for (int k = 0; k < nsizes; k++) {
                make_msg (sbuf[p * nsizes + k], sizes[k], rank, p, it, sseq[p]++, 0);
                if (corrupt && rank == 1 && p == 0 && it == iters - 1 && k == nsizes - 1)
                    sbuf[p * nsizes + k][sizes[k] - 1] ^= 0x20;
                check_mpi (MPI_Isend (sbuf[p * nsizes + k], sizes[k], MPI_BYTE, p, k,
                                      MPI_COMM_WORLD, &req[nreq++]),
                           "MPI_Isend");
            }
        }
        /* -p: with every message of this round posted and none waited
         * for, so that a checkpoint then finds them in flight */
        if (pace_ms)
            pause_ms (pace_ms);
        check_mpi (MPI_Waitall (nreq, req, st), "MPI_Waitall");
        /* same-tag messages of a pair are matched in order: seq too */
        for (int p = 0; p < nranks; p++) {
            if (p == rank)
                continue;
            for (int k = 0; k < nsizes; k++) {
                check_msg (rbuf[p * nsizes + k], want, sizes[k], p, rank, it, rseq[p]++, 0,
                           "message");
                msgs++;
                bytes += sizes[k];
            }
        }

        /* a ring of blocking exchanges, the largest size */
        if (nranks > 1) {
            int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;

            make_msg (ring_s, maxsize, rank, to, it, sseq[to]++, 1);
            check_mpi (MPI_Sendrecv (ring_s, maxsize, MPI_BYTE, to, 100, ring_r, maxsize, MPI_BYTE,
                                     from, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                       "MPI_Sendrecv");
            check_msg (ring_r, want, maxsize, from, rank, it, rseq[from]++, 1, "ring message");
            msgs++;
            bytes += maxsize;
        }

        /* MPI_Bcast from a rotating root: dst field is -1 (everyone) */
        {
            int root = it % nranks;

            if (rank == root)
                make_msg (bc, maxsize, root, -1, it, it, 2);
            check_mpi (MPI_Bcast (bc, maxsize, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
            check_msg (bc, want, maxsize, root, -1, it, it, 2, "broadcast");
            bytes += maxsize;
        }

        /* MPI_Allreduce: element j of rank r is f(r, it, j) */
        {
            enum { NRED = 4096 };
            static uint64_t in[NRED], out[NRED];

            for (int j = 0; j < NRED; j++) {
                uint64_t s = seed_of (rank, 0, it, j, 3);
                in[j] = mix (&s) >> 8;
            }
            check_mpi (MPI_Allreduce (in, out, NRED, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD),
                       "MPI_Allreduce");
            for (int j = 0; j < NRED; j++) {
                uint64_t sum = 0;

                for (int r = 0; r < nranks; r++) {
                    uint64_t s = seed_of (r, 0, it, j, 3);
                    sum += mix (&s) >> 8;
                }
                if (out[j] != sum)
                    die ("MPI_Allreduce iteration %d: element %d is %llu, "
                         "expected %llu",
                         it, j, (unsigned long long)out[j], (unsigned long long)sum);
            }
            bytes += sizeof (out);
        }

        /* MPI_Alltoall: rank r sends (r, p, it) to p */
        {
            uint64_t a_in[2 * 64], a_out[2 * 64];

            if (nranks <= 64) {
                for (int p = 0; p < nranks; p++) {
                    a_in[2 * p] = ((uint64_t)rank << 32) | (uint64_t)p;
                    a_in[2 * p + 1] = seed_of (rank, p, it, 0, 4);
                }
                check_mpi (
                    MPI_Alltoall (a_in, 2, MPI_UINT64_T, a_out, 2, MPI_UINT64_T, MPI_COMM_WORLD),
                    "MPI_Alltoall");
                for (int p = 0; p < nranks; p++)
                    if (a_out[2 * p] != (((uint64_t)p << 32) | (uint64_t)rank)
                        || a_out[2 * p + 1] != seed_of (p, rank, it, 0, 4))
                        die ("MPI_Alltoall iteration %d: the block from "
                             "rank %d is wrong",
                             it, p);
            }
        }

        if (rma)
            rmas += one_sided (win, wbase, slot, it, put, got, acc_in, want);
    }

    iters = it;
    check_mpi (MPI_Barrier (MPI_COMM_WORLD), "MPI_Barrier");
    if (!quiet) {
        printf ("rank %d of %d on %s: %d iterations, %llu messages, "
                "%llu bytes verified\n",
                rank, nranks, host, iters, (unsigned long long)msgs, (unsigned long long)bytes);
        fflush (stdout);
    }
    if (rma)
        check_mpi (MPI_Win_free (&win), "MPI_Win_free");
    mine[0] = msgs;
    mine[1] = bytes;
    mine[2] = rmas;
    check_mpi (MPI_Reduce (mine, tot, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    if (rank == 0) {
        uint64_t want_msgs =
            (uint64_t)iters * nranks * ((uint64_t)(nranks - 1) * nsizes + (nranks > 1 ? 1 : 0));

        uint64_t want_rma = rma ? (uint64_t)iters * nranks * 3 * (uint64_t)(nranks - 1) : 0;

        if (tot[0] != want_msgs)
            die ("%llu messages verified in all, expected %llu", (unsigned long long)tot[0],
                 (unsigned long long)want_msgs);
        if (tot[2] != want_rma)
            die ("%llu one-sided transfers verified in all, expected %llu",
                 (unsigned long long)tot[2], (unsigned long long)want_rma);
        MPI_Get_library_version (lib, &len);
        lib[strcspn (lib, "\n,")] = '\0';
        for (char *c = lib; *c; c++)
            if (*c == '\t')
                *c = ' ';
        printf ("mpi_verify: OK %d ranks, %d iterations, %llu messages, "
                "%llu bytes, %llu one-sided (%s)\n",
                nranks, iters, (unsigned long long)tot[0], (unsigned long long)tot[1],
                (unsigned long long)tot[2], lib);
        fflush (stdout);
    }
    if (tell_clock)
        say_ucx_clock ("before MPI_Finalize");
    check_mpi (MPI_Finalize (), "MPI_Finalize");
    return 0;
}
