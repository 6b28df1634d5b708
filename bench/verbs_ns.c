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
 *   ud     BATCH ibv_post_send of one signaled 8-byte SEND each on the
 *          thread's UD QP (also in error), through an AH to that QP
 *          itself, polled untimed; after a rebuild each one looks up the
 *          destination and its real AH (libibcr's AH cache)
 * and prints, per measure, the median over threads x repetitions of the
 * ns per call:  "send 123.4" ...  A CQ is never polled empty (softib
 * yields the CPU on an empty poll).
 *
 * With -w/-g (run under libibcr with a coordinator): once the QPs exist
 * (still in INIT) the program creates READY, waits until GO exists (the
 * coordinator ran a checkpoint cycle meanwhile, so libibcr translates),
 * then moves the QPs to the error state and measures.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

enum { M_SEND, M_POLL, M_RECV, M_WR, M_UD, NM };
static const char *mname[NM] = { "send", "poll", "recv", "wr", "ud" };

static int nthreads = 1, batch = 64, reps = 2000;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char buf[64];
static pthread_barrier_t bar;
static uint16_t lid;

struct thr {
    pthread_t t;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_qp_ex *qx;
    struct ibv_qp *ud;
    struct ibv_ah *ah;
    double *ns[NM];
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
    for (int i = 0; i < NM; i++)
        th->ns[i] = calloc (reps, sizeof (double));
}

static void to_err (struct thr *th)
{
    struct ibv_qp_attr m = { .qp_state = IBV_QPS_ERR };
    if (ibv_modify_qp (th->qp, &m, IBV_QP_STATE) || ibv_modify_qp (th->ud, &m, IBV_QP_STATE))
        die ("modify to ERR");
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
            ibv_wr_start (th->qx);
            th->qx->wr_id = i;
            th->qx->wr_flags = IBV_SEND_SIGNALED;
            ibv_wr_send (th->qx);
            ibv_wr_set_sge (th->qx, mr->lkey, (uintptr_t)buf, 8);
            if (ibv_wr_complete (th->qx))
                die ("ibv_wr_complete");
        }
        double t5 = now_ns ();
        drain (th, batch);
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
        }
    }
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
    struct thr *th = calloc (nthreads, sizeof (*th));
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
        for (int i = 0; i < nthreads; i++)
            memcpy (all + (size_t)i * reps, th[i].ns[m], reps * sizeof (double));
        qsort (all, (size_t)nthreads * reps, sizeof (double), cmp);
        printf ("%s %.1f\n", mname[m], all[(size_t)nthreads * reps / 2]);
    }
    return 0;
}
