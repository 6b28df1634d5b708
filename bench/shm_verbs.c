/*
 * shm_verbs.c - a verbs message loop between two processes on one host,
 * with no clock read per message (bench/softib-shm-bench.sh).
 *
 *   shm_verbs -s SIZE -n ITERS
 *
 * The counterpart of shm_ring.c through softib: the parent (sender) and
 * the child (receiver, fork) each open the first device and connect one
 * RC QP to the other's (QPN and LID exchanged over a socketpair).  The
 * sender posts ITERS SENDs of SIZE bytes, one WR per ibv_post_send, each
 * carrying its sequence number in its first 8 bytes, with at most 128
 * outstanding and one signaled every 64 (perftest's defaults are 128 and
 * 100; fewer when 512 buffers would not fit in 8 MiB, see RX).  The
 * receiver keeps 512 receives posted, polls up to 16
 * completions at a time, checks each one's length and sequence number,
 * and posts its buffer again.  Timed by the receiver from its first to
 * its last message.  Prints, as shm_ring:
 *   SIZE ITERS MB/s Mmsg/s
 *   cpu NS
 * the second line being the CPU time per message of both processes (all
 * their threads: softib's progress threads too), in ns.
 *
 * perftest (ib_send_bw) reads the clock for every post and completion;
 * on the project machine a clock read costs 40-90 ns (RDTSC is slow
 * there), more than the raw ring's whole message, so perftest alone
 * cannot show softib's own cost per small message.  This loop reads the
 * clock twice per run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define TXMAX 128   /* outstanding sends */
#define SIGEVERY 64 /* one signaled send every SIGEVERY (at most TX/2) */
#define RXMAX 512   /* posted receives */
#define POLL 16

/* Queue depths: 128 and 512 as above while the buffers fit in 8 MiB
 * (perftest cycles over a few buffers; 512 of 64 KiB would measure the
 * caches), shallower for large messages. */
static uint64_t TX = TXMAX, RX = RXMAX, SIG = SIGEVERY;

struct ep {
    uint32_t qpn, psn;
    uint16_t lid;
};

static void die (const char *what)
{
    fprintf (stderr, "shm_verbs: %s: %s\n", what, strerror (errno));
    exit (1);
}

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

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    unsigned char *buf;
    struct ep self;
};

static void open_side (struct side *s, size_t bytes)
{
    struct ibv_device **l = ibv_get_device_list (NULL);
    struct ibv_port_attr pa;

    if (!l || !l[0])
        die ("no device");
    s->ctx = ibv_open_device (l[0]);
    ibv_free_device_list (l);
    if (!s->ctx)
        die ("ibv_open_device");
    if (ibv_query_port (s->ctx, 1, &pa))
        die ("ibv_query_port");
    s->pd = ibv_alloc_pd (s->ctx);
    s->buf = aligned_alloc (4096, (bytes + 4095) & ~(size_t)4095);
    if (!s->pd || !s->buf)
        die ("ibv_alloc_pd");
    memset (s->buf, 0, bytes);
    s->mr = ibv_reg_mr (s->pd, s->buf, bytes, IBV_ACCESS_LOCAL_WRITE);
    s->cq = ibv_create_cq (s->ctx, 2 * RXMAX, NULL, NULL, 0);
    if (!s->mr || !s->cq)
        die ("ibv_reg_mr/ibv_create_cq");
    struct ibv_qp_init_attr ia = {
        .send_cq = s->cq,
        .recv_cq = s->cq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = TXMAX, .max_recv_wr = RXMAX, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    s->qp = ibv_create_qp (s->pd, &ia);
    if (!s->qp)
        die ("ibv_create_qp");
    s->self.qpn = s->qp->qp_num;
    s->self.lid = pa.lid;
    s->self.psn = (uint32_t)getpid () & 0xffffff;
}

static void connect_side (struct side *s, const struct ep *peer)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
    };

    if (ibv_modify_qp (s->qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die ("INIT");
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer->qpn;
    a.rq_psn = peer->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = peer->lid;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp (s->qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
                           | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die ("RTR");
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = s->self.psn;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp (s->qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY
                           | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        die ("RTS");
}

static void post_recv (struct side *s, size_t size, uint64_t slot)
{
    struct ibv_sge sg = {
        .addr = (uintptr_t)(s->buf + slot * size),
        .length = (uint32_t)size,
        .lkey = s->mr->lkey,
    };
    struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sg, .num_sge = 1 };
    struct ibv_recv_wr *bad;

    if (ibv_post_recv (s->qp, &wr, &bad))
        die ("ibv_post_recv");
}

static int receiver (int sock, size_t size, uint64_t n)
{
    struct side s;
    struct ep peer;
    struct ibv_wc wc[POLL];
    uint64_t got = 0;
    double t0 = 0;

    open_side (&s, RX * size);
    if (write (sock, &s.self, sizeof (s.self)) != sizeof (s.self)
        || read (sock, &peer, sizeof (peer)) != sizeof (peer))
        die ("exchange");
    connect_side (&s, &peer);
    for (uint64_t i = 0; i < RX; i++)
        post_recv (&s, size, i);
    if (write (sock, "r", 1) != 1)
        die ("ready");
    while (got < n) {
        int k = ibv_poll_cq (s.cq, POLL, wc);

        if (k < 0)
            die ("ibv_poll_cq");
        for (int i = 0; i < k; i++) {
            uint64_t seq;

            if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV
                || wc[i].byte_len != size) {
                fprintf (stderr,
                         "shm_verbs: bad completion "
                         "(status %d, len %u) at %" PRIu64 "\n",
                         wc[i].status, wc[i].byte_len, got);
                return 1;
            }
            memcpy (&seq, s.buf + wc[i].wr_id * size, sizeof (seq));
            if (seq != got) {
                fprintf (stderr, "shm_verbs: message %" PRIu64 " carries %" PRIu64 "\n", got, seq);
                return 1;
            }
            if (got++ == 0)
                t0 = now_s ();
            post_recv (&s, size, wc[i].wr_id);
        }
    }
    double secs = now_s () - t0;
    /* n - 1 intervals between the first and the last message */
    printf ("%zu %" PRIu64 " %.2f %.6f\n", size, n,
            (double)(n - 1) * (double)size / secs / 1048576.0, (double)(n - 1) / secs / 1e6);
    fflush (stdout);
    if (write (sock, "d", 1) != 1)
        die ("done");
    return 0;
}

static int sender (int sock, size_t size, uint64_t n)
{
    struct side s;
    struct ep peer;
    struct ibv_wc wc[POLL];
    uint64_t posted = 0, done = 0; /* done: sends known complete */
    char c;

    open_side (&s, TX * size);
    if (read (sock, &peer, sizeof (peer)) != sizeof (peer)
        || write (sock, &s.self, sizeof (s.self)) != sizeof (s.self))
        die ("exchange");
    connect_side (&s, &peer);
    if (read (sock, &c, 1) != 1)
        die ("peer not ready");
    /* One WR, built once and updated per post, and masks for the slots
     * (TX and SIG are powers of two), as perftest does: a 120-byte
     * initialisation (`rep stos`) and two 64-bit divisions per message
     * were a fifth of this loop's samples, the benchmark's own work. */
    struct ibv_sge sg = { .length = (uint32_t)size, .lkey = s.mr->lkey };
    struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;

    while (done < n) {
        while (posted < n && posted - done < TX) {
            uint64_t slot = posted & (TX - 1);

            sg.addr = (uintptr_t)(s.buf + slot * size);
            wr.wr_id = posted;
            wr.send_flags =
                ((posted + 1) & (SIG - 1)) == 0 || posted + 1 == n ? IBV_SEND_SIGNALED : 0;
            memcpy (s.buf + slot * size, &posted, sizeof (posted));
            if (ibv_post_send (s.qp, &wr, &bad))
                die ("ibv_post_send");
            posted++;
        }
        int k = ibv_poll_cq (s.cq, POLL, wc);

        if (k < 0)
            die ("ibv_poll_cq");
        for (int i = 0; i < k; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf (stderr, "shm_verbs: send %" PRIu64 " failed: %s\n", wc[i].wr_id,
                         ibv_wc_status_str (wc[i].status));
                return 1;
            }
            done = wc[i].wr_id + 1;
        }
    }
    /* the receiver's last check before the QP goes away */
    if (read (sock, &c, 1) != 1)
        die ("receiver failed");
    return 0;
}

int main (int argc, char **argv)
{
    size_t size = 8;
    uint64_t n = 1000000;
    int c, sv[2], st;

    while ((c = getopt (argc, argv, "s:n:")) != -1) {
        switch (c) {
        case 's':
            size = strtoull (optarg, NULL, 0);
            break;
        case 'n':
            n = strtoull (optarg, NULL, 0);
            break;
        default:
            fprintf (stderr, "usage: shm_verbs [-s SIZE] [-n ITERS]\n");
            return 2;
        }
    }
    if (size < 8 || n < 2) {
        fprintf (stderr, "shm_verbs: SIZE >= 8 and ITERS >= 2\n");
        return 2;
    }
    while (RX > 16 && RX * size > (8u << 20))
        RX /= 2;
    if (TX > RX / 2)
        TX = RX / 2;
    if (SIG > TX / 2)
        SIG = TX / 2;
    if (socketpair (AF_UNIX, SOCK_STREAM, 0, sv))
        die ("socketpair");
    pid_t pid = fork ();

    if (pid < 0)
        die ("fork");
    if (pid == 0) {
        close (sv[0]);
        _exit (receiver (sv[1], size, n));
    }
    close (sv[1]);
    int rc = sender (sv[0], size, n);

    if (rc)
        kill (pid, SIGTERM);
    if (waitpid (pid, &st, 0) < 0 || !WIFEXITED (st) || WEXITSTATUS (st))
        rc = 1;
    if (rc == 0)
        printf ("cpu %.1f\n", cpu_s () / (double)n * 1e9);
    return rc;
}
