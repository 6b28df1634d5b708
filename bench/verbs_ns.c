/* verbs_ns.c - CPU time of the verbs data-path calls, in nanoseconds.
 *
 *   verbs_ns [-t THREADS] [-b BATCH] [-r REPS] [-w READY -g GO]
 *
 * Each thread has its own CQ and RC QP on the first device, both in the
 * error state, so softib completes every posted WR at once with a flush
 * completion and nothing goes to the network: no round trip, no progress
 * thread.  Per repetition, each thread times (CLOCK_MONOTONIC around the
 * loop, BATCH calls):
 *   send   BATCH ibv_post_send of one signaled 8-byte SEND each
 *   poll   BATCH ibv_poll_cq of one completion each (the CQ holds them all)
 *   recv   BATCH ibv_post_recv of one 8-byte receive each, then the
 *          completions are polled untimed
 *   wr     BATCH ibv_wr_start/ibv_wr_send/ibv_wr_set_sge/ibv_wr_complete
 *          (one WR each), polled untimed
 *   wrb    the same builder calls with ibv_wr_abort instead of
 *          ibv_wr_complete: the builder alone, nothing posted (what wr
 *          costs beyond it is the post)
 *   ud     BATCH ibv_post_send of one signaled 8-byte SEND each on the
 *          thread's UD QP (also in error), through an AH to that QP
 *          itself, polled untimed; after a rebuild each one looks up the
 *          destination and its real AH (libibcr's AH cache)
 *   psend  BATCH ibv_poll_cq of one successful send completion each
 *   precv  BATCH ibv_poll_cq of one successful receive completion each
 *          (8 bytes, checked): the thread's second pair of RC QPs, A and
 *          B, connected to each other once the measures above are done
 *          (softib's progress thread serves them, and would otherwise
 *          run beside those measures); per repetition BATCH receives are
 *          posted on B and BATCH signaled SENDs on A (untimed), softib's
 *          progress thread carries them while the thread waits on the
 *          CPU (sched_yield) until the last payload is in B's buffer,
 *          then B's CQ and A's CQ are polled, timed
 * and prints, per measure, the median over threads x repetitions of the
 * ns per call:  "send 123.4" ...  A CQ is never polled empty in a timed
 * loop (softib yields the CPU on an empty poll): a repetition of psend or
 * precv that found its CQ empty once (its completions not all in yet) is
 * left out of that measure, and their number is printed
 * ("psend_skipped N").
 *
 * With -w/-g (run under libibcr with a coordinator): once the QPs exist
 * (still in INIT) the program creates READY, waits until GO exists (the
 * coordinator ran a checkpoint cycle meanwhile, so libibcr translates),
 * then moves the QPs to the error state and measures.
 */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

enum { M_SEND, M_POLL, M_RECV, M_WR, M_WRB, M_UD, M_PSEND, M_PRECV, NM };
static const char *mname[NM] = { "send", "poll", "recv", "wr", "wrb", "ud", "psend", "precv" };

static int nthreads = 1, batch = 64, reps = 2000;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char buf[64];
static pthread_barrier_t bar;
static struct thr *th0; /* all threads' */
static uint16_t lid;

struct thr {
    pthread_t t;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_qp_ex *qx;
    struct ibv_qp *ud;
    struct ibv_ah *ah;
    struct ibv_cq *acq, *bcq; /* the connected pair's CQs */
    struct ibv_qp *a, *b;
    uint64_t *pbuf; /* BATCH payloads A sends, then B's receive buffer */
    struct ibv_mr *pmr;
    double *ns[NM];
    int nok[NM]; /* repetitions measured */
};

static void die (const char *what)
{
    fprintf (stderr, "verbs_ns: %s: %s\n", what, strerror (errno));
    exit (1);
}

static double now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* An RC QP in INIT whose send and receive CQ is cq. */
static struct ibv_qp *rc_init (struct ibv_cq *cq)
{
    struct ibv_qp_init_attr a = { .send_cq = cq,
                                  .recv_cq = cq,
                                  .qp_type = IBV_QPT_RC,
                                  .cap = { .max_send_wr = batch + 1,
                                           .max_recv_wr = batch + 1,
                                           .max_send_sge = 1,
                                           .max_recv_sge = 1 } };
    struct ibv_qp *q = ibv_create_qp (pd, &a);
    struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT,
                             .port_num = 1,
                             .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
    if (!q
        || ibv_modify_qp (q, &m,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die ("RC QP for psend/precv");
    return q;
}

static void setup (struct thr *th)
{
    th->cq = ibv_create_cq (ctx, 4 * batch + 16, NULL, NULL, 0);
    if (!th->cq)
        die ("ibv_create_cq");
    struct ibv_qp_init_attr_ex a = {
        .send_cq = th->cq,
        .recv_cq = th->cq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = batch + 1,
                 .max_recv_wr = batch + 1,
                 .max_send_sge = 1,
                 .max_recv_sge = 1 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .pd = pd,
        .send_ops_flags = IBV_QP_EX_WITH_SEND,
    };
    th->qp = ibv_create_qp_ex (ctx, &a);
    if (!th->qp)
        die ("ibv_create_qp_ex");
    th->qx = ibv_qp_to_qp_ex (th->qp);
    struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT,
                             .port_num = 1,
                             .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
    if (ibv_modify_qp (th->qp, &m,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die ("modify to INIT");
    struct ibv_qp_init_attr u = {
        .send_cq = th->cq,
        .recv_cq = th->cq,
        .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = batch + 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    th->ud = ibv_create_qp (pd, &u);
    struct ibv_qp_attr um = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
    if (!th->ud
        || ibv_modify_qp (th->ud, &um,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        die ("UD QP");
    struct ibv_ah_attr aa = { .dlid = lid, .port_num = 1 };
    th->ah = ibv_create_ah (pd, &aa);
    if (!th->ah)
        die ("ibv_create_ah");
    th->acq = ibv_create_cq (ctx, batch + 16, NULL, NULL, 0);
    th->bcq = ibv_create_cq (ctx, batch + 16, NULL, NULL, 0);
    if (!th->acq || !th->bcq)
        die ("ibv_create_cq");
    if (posix_memalign ((void **)&th->pbuf, 64, (batch + 8) * sizeof (uint64_t)))
        die ("posix_memalign");
    th->pmr = ibv_reg_mr (pd, th->pbuf, (batch + 8) * sizeof (uint64_t), IBV_ACCESS_LOCAL_WRITE);
    if (!th->pmr)
        die ("ibv_reg_mr");
    th->a = rc_init (th->acq);
    th->b = rc_init (th->bcq);
    for (int i = 0; i < NM; i++)
        th->ns[i] = calloc (reps, sizeof (double));
}

/* Connect RC QP q (in INIT) to QP number dqpn of this device. */
static void rc_connect (struct ibv_qp *q, uint32_t dqpn)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR,
                             .path_mtu = IBV_MTU_4096,
                             .dest_qp_num = dqpn,
                             .max_dest_rd_atomic = 1,
                             .min_rnr_timer = 1,
                             .ah_attr = { .dlid = lid, .port_num = 1 } };
    if (ibv_modify_qp (q, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
                           | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die ("modify to RTR");
    struct ibv_qp_attr b = {
        .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1
    };
    if (ibv_modify_qp (q, &b,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY
                           | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        die ("modify to RTS");
}

static void to_err (struct thr *th)
{
    struct ibv_qp_attr m = { .qp_state = IBV_QPS_ERR };
    if (ibv_modify_qp (th->qp, &m, IBV_QP_STATE) || ibv_modify_qp (th->ud, &m, IBV_QP_STATE))
        die ("modify to ERR");
}

/* Poll n successful completions of opcode op from cq, one per call, the
 * i-th with wr_id i; returns the ns per poll, or -1 if a poll found the
 * CQ empty (the rest are then polled all the same, untimed). */
static double poll_ok (struct ibv_cq *cq, int n, enum ibv_wc_opcode op)
{
    struct ibv_wc wc;
    int empty = 0;
    double t0 = now_ns ();
    for (int i = 0; i < n;) {
        int r = ibv_poll_cq (cq, 1, &wc);
        if (r < 0)
            die ("ibv_poll_cq");
        if (r == 0) {
            empty = 1;
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != op || wc.wr_id != (uint64_t)i
            || (op == IBV_WC_RECV && wc.byte_len != 8)) {
            fprintf (stderr, "verbs_ns: completion %d of %s: status %d opcode %d wr_id %llu\n", i,
                     op == IBV_WC_RECV ? "precv" : "psend", wc.status, wc.opcode,
                     (unsigned long long)wc.wr_id);
            exit (1);
        }
        i++;
    }
    double t1 = now_ns ();
    return empty ? -1 : (t1 - t0) / n;
}

/* Stay on the CPU for us microseconds, yielding it to softib's progress
 * thread if it is runnable. */
static void spin_us (double us)
{
    double t0 = now_ns ();
    while (now_ns () - t0 < us * 1e3)
        sched_yield ();
}

/* One repetition of psend and precv: BATCH 8-byte SENDs from A to B,
 * carried while this thread sleeps, then both CQs polled. */
static void pair_round (struct thr *th, int r)
{
    volatile uint64_t *last = &th->pbuf[batch];
    struct ibv_sge ss = { 0, 8, th->pmr->lkey };
    struct ibv_sge rs = { (uintptr_t)last, 8, th->pmr->lkey };
    struct ibv_recv_wr rw = { .sg_list = &rs, .num_sge = 1 }, *br;
    struct ibv_send_wr sw = { .sg_list = &ss,
                              .num_sge = 1,
                              .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED },
                       *bs;
    for (int i = 0; i < batch; i++) {
        rw.wr_id = i;
        if (ibv_post_recv (th->b, &rw, &br))
            die ("ibv_post_recv (B)");
    }
    *last = 0;
    for (int i = 0; i < batch; i++) {
        th->pbuf[i] = i + 1;
        sw.wr_id = i;
        ss.addr = (uintptr_t)&th->pbuf[i];
        if (ibv_post_send (th->a, &sw, &bs))
            die ("ibv_post_send (A)");
    }
    /* Wait, awake, until the last message's payload is in B's buffer
     * (at most 1 s), and a little longer for its completion.  A sleep
     * would let the core idle and its caches go cold, which the first
     * polls after it would pay. */
    double t0 = now_ns ();
    while (*last != (uint64_t)batch && now_ns () - t0 < 1e9)
        sched_yield ();
    spin_us (20);
    double pr = poll_ok (th->bcq, batch, IBV_WC_RECV);
    /* The ACKs that complete A's sends come back the same way. */
    spin_us (50);
    double ps = poll_ok (th->acq, batch, IBV_WC_SEND);
    if (r >= 0 && pr >= 0)
        th->ns[M_PRECV][th->nok[M_PRECV]++] = pr;
    if (r >= 0 && ps >= 0)
        th->ns[M_PSEND][th->nok[M_PSEND]++] = ps;
}

/* Poll exactly n completions, one per call; every one must be a flush. */
static void drain (struct thr *th, int n)
{
    struct ibv_wc wc;
    for (int got = 0; got < n;) {
        int r = ibv_poll_cq (th->cq, 1, &wc);
        if (r < 0)
            die ("ibv_poll_cq");
        if (r == 1 && wc.status != IBV_WC_WR_FLUSH_ERR) {
            fprintf (stderr, "verbs_ns: completion status %d\n", wc.status);
            exit (1);
        }
        got += r;
    }
}

/* The builder calls of one signaled 8-byte SEND (wr and wrb). */
static inline __attribute__ ((always_inline)) void wr_build (struct thr *th, int i)
{
    ibv_wr_start (th->qx);
    th->qx->wr_id = i;
    th->qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send (th->qx);
    ibv_wr_set_sge (th->qx, mr->lkey, (uintptr_t)buf, 8);
}

static void *run (void *p)
{
    struct thr *th = p;
    struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
    struct ibv_send_wr sw = { .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED },
                       *bs;
    struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *br;
    struct ibv_wc wc;
    pthread_barrier_wait (&bar);
    for (int r = -reps / 10; r < reps; r++) { /* first tenth: warm-up */
        double t0 = now_ns ();
        for (int i = 0; i < batch; i++) {
            sw.wr_id = i;
            if (ibv_post_send (th->qp, &sw, &bs))
                die ("ibv_post_send");
        }
        double t1 = now_ns ();
        for (int i = 0; i < batch; i++)
            if (ibv_poll_cq (th->cq, 1, &wc) != 1 || wc.status != IBV_WC_WR_FLUSH_ERR
                || wc.wr_id != (uint64_t)i) {
                fprintf (stderr, "verbs_ns: send completion %d wrong\n", i);
                exit (1);
            }
        double t2 = now_ns ();
        for (int i = 0; i < batch; i++) {
            rw.wr_id = i;
            if (ibv_post_recv (th->qp, &rw, &br))
                die ("ibv_post_recv");
        }
        double t3 = now_ns ();
        drain (th, batch);
        double t4 = now_ns ();
        for (int i = 0; i < batch; i++) {
            wr_build (th, i);
            if (ibv_wr_complete (th->qx))
                die ("ibv_wr_complete");
        }
        double t5 = now_ns ();
        drain (th, batch);
        double t5a = now_ns ();
        for (int i = 0; i < batch; i++) {
            wr_build (th, i);
            ibv_wr_abort (th->qx);
        }
        double t5b = now_ns ();
        struct ibv_send_wr uw = sw;
        uw.wr.ud.ah = th->ah;
        uw.wr.ud.remote_qpn = th->ud->qp_num;
        uw.wr.ud.remote_qkey = 0x11111111;
        double t6 = now_ns ();
        for (int i = 0; i < batch; i++) {
            uw.wr_id = i;
            if (ibv_post_send (th->ud, &uw, &bs))
                die ("ibv_post_send (UD)");
        }
        double t7 = now_ns ();
        drain (th, batch);
        if (r >= 0) {
            th->ns[M_UD][r] = (t7 - t6) / batch;
            th->ns[M_SEND][r] = (t1 - t0) / batch;
            th->ns[M_POLL][r] = (t2 - t1) / batch;
            th->ns[M_RECV][r] = (t3 - t2) / batch;
            th->ns[M_WR][r] = (t5 - t4) / batch;
            th->ns[M_WRB][r] = (t5b - t5a) / batch;
        }
    }
    /* The connected pair last: its connection and softib's progress
     * thread serving it do not overlap the measures above. */
    pthread_barrier_wait (&bar);
    if (th == th0) {
        for (int i = 0; i < nthreads; i++) {
            rc_connect (th0[i].a, th0[i].b->qp_num);
            rc_connect (th0[i].b, th0[i].a->qp_num);
        }
    }
    pthread_barrier_wait (&bar);
    for (int r = -reps / 10; r < reps; r++)
        pair_round (th, r);
    return NULL;
}

static int cmp (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main (int argc, char **argv)
{
    const char *ready = NULL, *go = NULL;
    int c;
    while ((c = getopt (argc, argv, "t:b:r:w:g:")) != -1) {
        switch (c) {
        case 't':
            nthreads = atoi (optarg);
            break;
        case 'b':
            batch = atoi (optarg);
            break;
        case 'r':
            reps = atoi (optarg);
            break;
        case 'w':
            ready = optarg;
            break;
        case 'g':
            go = optarg;
            break;
        default:
            fprintf (stderr,
                     "usage: verbs_ns [-t THREADS] [-b BATCH] [-r REPS] "
                     "[-w READY -g GO]\n");
            return 2;
        }
    }
    if (nthreads < 1 || batch < 1 || reps < 10)
        return 2;
    int n;
    struct ibv_device **list = ibv_get_device_list (&n);
    if (!list || n < 1)
        die ("no verbs device");
    ctx = ibv_open_device (list[0]);
    if (!ctx)
        die ("ibv_open_device");
    pd = ibv_alloc_pd (ctx);
    if (!pd)
        die ("ibv_alloc_pd");
    struct ibv_port_attr pa;
    if (ibv_query_port (ctx, 1, &pa))
        die ("ibv_query_port");
    lid = pa.lid;
    mr = ibv_reg_mr (pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE);
    if (!mr)
        die ("ibv_reg_mr");
    struct thr *th = th0 = calloc (nthreads, sizeof (*th));
    for (int i = 0; i < nthreads; i++)
        setup (&th[i]);
    if (ready && go) {
        int fd = open (ready, O_WRONLY | O_CREAT, 0644);
        if (fd >= 0)
            close (fd);
        while (access (go, F_OK) != 0)
            usleep (10000);
    }
    for (int i = 0; i < nthreads; i++)
        to_err (&th[i]);
    pthread_barrier_init (&bar, NULL, nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create (&th[i].t, NULL, run, &th[i]))
            die ("pthread_create");
    for (int i = 0; i < nthreads; i++)
        pthread_join (th[i].t, NULL);
    double *all = calloc ((size_t)nthreads * reps, sizeof (double));
    for (int m = 0; m < NM; m++) {
        size_t k = 0;
        for (int i = 0; i < nthreads; i++) {
            int nok = m == M_PSEND || m == M_PRECV ? th[i].nok[m] : reps;
            memcpy (all + k, th[i].ns[m], nok * sizeof (double));
            k += nok;
        }
        if (m == M_PSEND || m == M_PRECV)
            printf ("%s_skipped %zu\n", mname[m], (size_t)nthreads * reps - k);
        if (!k) {
            printf ("%s none\n", mname[m]);
            continue;
        }
        qsort (all, k, sizeof (double), cmp);
        printf ("%s %.1f\n", mname[m], all[k / 2]);
    }
    return 0;
}
