/* udrace.c - UD senders on separate QPs after a rebuild, at once: a
 * data-race workload for libibcr's UD send path, run under
 * ThreadSanitizer by t2009.
 *
 *   udrace READY GO [-n MESSAGES] [-f]
 *
 * Once libibcr has rebuilt its objects (the test runs one coordinator
 * cycle between READY and GO), every UD send looks up a real address
 * handle for its destination's current LID in a cache (lib/ibcr/ah.c;
 * once per context under a global lock, now per QP) and makes one on a
 * miss.  Here four threads, each with
 * its own UD QP and CQ and four AHs of its own service levels (so sixteen
 * cache entries, added while the table grows), start sending together
 * to one receiver QP of the same process, turning through their AHs: the
 * misses and hits come from different threads at the same moment.
 * Every datagram carries (thread, sequence number) and a payload derived
 * from them; each must arrive once and intact, and every send must
 * complete successfully.
 *
 * With -f the senders' QPs are moved to the error state after the
 * rebuild: each send is still translated (the cache is used) but then
 * completes at once with a flush, and no datagram travels.  That is the
 * ThreadSanitizer run: softib's progress thread, which a datagram would
 * wake, runs in the backend's namespace unknown to TSan and would crash
 * in the instrumented libibcr's allocator (nsheap.c).  TAP on stdout.
 */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

#define NTHR 4
#define GRH 40
#define MSG 64
#define QKEY 0x11111111
#define MAXMSG 1000
#define NAH 4 /* AHs per thread: service levels */

struct msg {
    uint32_t thr, seq;
    unsigned char data[MSG - 8];
};

static int nmsg = 200;
static int flush;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_port_attr pa;
static uint32_t rqpn;
static atomic_int errors;
static pthread_barrier_t start, end;

static void fill (struct msg *m, uint32_t thr, uint32_t seq)
{
    m->thr = thr;
    m->seq = seq;
    for (size_t i = 0; i < sizeof (m->data); i++)
        m->data[i] = (unsigned char)(thr * 29 + seq * 13 + i);
}

static struct ibv_qp *ud_qp (struct ibv_cq *cq, uint32_t nrecv)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 2 * NAH,
                 .max_recv_wr = nrecv ? nrecv : 1,
                 .max_send_sge = 1,
                 .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp (pd, &ia);
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
    if (!qp || ibv_modify_qp (qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        BAIL_OUT ("UD QP: %s", strerror (errno));
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp (qp, &a, IBV_QP_STATE))
        BAIL_OUT ("UD QP to RTR: %s", strerror (errno));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    if (ibv_modify_qp (qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
        BAIL_OUT ("UD QP to RTS: %s", strerror (errno));
    return qp;
}

struct sender {
    uint32_t thr;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_ah *ah[NAH];
    struct ibv_mr *mr;
    struct msg buf[NAH];
    pthread_t t;
};

static void *send_main (void *arg)
{
    struct sender *s = arg;
    struct ibv_wc wc0;
    /* A first verb makes this thread known to libibcr's gate (a mutex);
     * once every thread is past that, nothing the threads do orders one
     * thread's cache accesses before another's (a thread that ended
     * would: its gate slot is returned under that mutex), so a race is
     * a race to ThreadSanitizer however the threads are scheduled. */
    if (ibv_poll_cq (s->cq, 1, &wc0) != 0)
        atomic_fetch_add (&errors, 1);
    pthread_barrier_wait (&start);
    /* a chain of NAH sends, one per AH, then their completions: a
     * thread's first chain misses on all its AHs before it polls */
    for (int i = 0; i < nmsg; i += NAH) {
        struct ibv_sge sg[NAH];
        struct ibv_send_wr wr[NAH], *bad;
        int k, n = nmsg - i < NAH ? nmsg - i : NAH;
        for (k = 0; k < n; k++) {
            fill (&s->buf[k], s->thr, (uint32_t)(i + k));
            sg[k] = (struct ibv_sge){ .addr = (uintptr_t)&s->buf[k],
                                      .length = MSG,
                                      .lkey = s->mr->lkey };
            wr[k] = (struct ibv_send_wr){ .wr_id = (uint64_t)(i + k),
                                          .sg_list = &sg[k],
                                          .num_sge = 1,
                                          .opcode = IBV_WR_SEND,
                                          .send_flags = IBV_SEND_SIGNALED,
                                          .next = k + 1 < n ? &wr[k + 1] : NULL };
            wr[k].wr.ud.ah = s->ah[k];
            wr[k].wr.ud.remote_qpn = rqpn;
            wr[k].wr.ud.remote_qkey = QKEY;
        }
        if (ibv_post_send (s->qp, &wr[0], &bad)) {
            atomic_fetch_add (&errors, 1);
            diag ("thread %u: post_send of %d..%d failed", s->thr, i, i + n - 1);
            goto out;
        }
        for (k = 0; k < n; k++) {
            struct ibv_wc wc;
            int got;
            while ((got = ibv_poll_cq (s->cq, 1, &wc)) == 0)
                ;
            if (got < 0 || wc.status != (flush ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS)
                || wc.wr_id != (uint64_t)(i + k)) {
                atomic_fetch_add (&errors, 1);
                diag ("thread %u: send %d completed with %s", s->thr, i + k,
                      got < 0 ? "a poll error" : ibv_wc_status_str (wc.status));
                goto out;
            }
        }
    }
out:
    pthread_barrier_wait (&end);
    return NULL;
}

int main (int argc, char **argv)
{
    struct ibv_device **l;
    static struct sender snd[NTHR];
    static unsigned char got[NTHR][MAXMSG];
    int opt;

    if (argc < 3) {
        fprintf (stderr, "usage: udrace READY GO [-n MESSAGES] [-f]\n");
        return 2;
    }
    optind = 3;
    while ((opt = getopt (argc, argv, "n:f")) != -1) {
        if (opt == 'n')
            nmsg = atoi (optarg);
        else if (opt == 'f')
            flush = 1;
    }
    if (nmsg < 1 || nmsg > MAXMSG)
        nmsg = MAXMSG;
    plan (flush ? 1 : 3);
    ctx = selfqp_open (&l, &pa);
    pd = ibv_alloc_pd (ctx);
    uint32_t nrecv = NTHR * (uint32_t)nmsg;
    size_t rlen = (size_t)nrecv * (GRH + MSG);
    unsigned char *rbuf = calloc (1, rlen);
    struct ibv_mr *rmr = pd && rbuf ? ibv_reg_mr (pd, rbuf, rlen, IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq *rcq = ibv_create_cq (ctx, (int)nrecv, NULL, NULL, 0);
    if (!rmr || !rcq)
        BAIL_OUT ("pd/mr/cq: %s", strerror (errno));
    struct ibv_qp *rq = ud_qp (rcq, nrecv);
    rqpn = rq->qp_num;
    for (uint32_t i = 0; i < nrecv; i++) {
        struct ibv_sge sg = { .addr = (uintptr_t)(rbuf + i * (GRH + MSG)),
                              .length = GRH + MSG,
                              .lkey = rmr->lkey };
        struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sg, .num_sge = 1 }, *bad;
        if (ibv_post_recv (rq, &wr, &bad))
            BAIL_OUT ("post_recv: %s", strerror (errno));
    }
    for (uint32_t t = 0; t < NTHR; t++) {
        snd[t].thr = t;
        snd[t].cq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
        snd[t].mr = ibv_reg_mr (pd, &snd[t].buf, sizeof (snd[t].buf), 0);
        if (!snd[t].cq || !snd[t].mr)
            BAIL_OUT ("sender %u: %s", t, strerror (errno));
        for (uint32_t k = 0; k < NAH; k++) {
            struct ibv_ah_attr aa = { .dlid = pa.lid,
                                      .sl = (uint8_t)(t + NTHR * k),
                                      .port_num = 1 };
            snd[t].ah[k] = ibv_create_ah (pd, &aa);
            if (!snd[t].ah[k])
                BAIL_OUT ("sender %u, AH %u: %s", t, k, strerror (errno));
        }
        snd[t].qp = ud_qp (snd[t].cq, 0);
    }

    /* the rebuild: from now on UD sends translate their destination */
    selfqp_handshake (argv[1], argv[2]);
    for (uint32_t t = 0; flush && t < NTHR; t++) {
        struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
        if (ibv_modify_qp (snd[t].qp, &a, IBV_QP_STATE))
            BAIL_OUT ("sender %u to ERR: %s", t, strerror (errno));
    }

    pthread_barrier_init (&start, NULL, NTHR);
    pthread_barrier_init (&end, NULL, NTHR);
    for (uint32_t t = 0; t < NTHR; t++)
        if (pthread_create (&snd[t].t, NULL, send_main, &snd[t]))
            BAIL_OUT ("pthread_create");
    for (uint32_t t = 0; t < NTHR; t++)
        pthread_join (snd[t].t, NULL);
    ok (atomic_load (&errors) == 0,
        "%d threads on their own UD QPs: every send completed "
        "%s",
        NTHR, flush ? "with a flush (QPs in error)" : "successfully");
    if (flush)
        goto out;

    /* a UD send completes when it leaves: wait for the last arrivals */
    int bad = 0, dup = 0, n = 0, idle = 0;
    struct ibv_wc wc;
    while (n < NTHR * nmsg && idle < 10000) {
        if (ibv_poll_cq (rcq, 1, &wc) != 1) {
            idle++;
            usleep (1000);
            continue;
        }
        idle = 0;
        n++;
        struct msg *m = (struct msg *)(rbuf + wc.wr_id * (GRH + MSG) + GRH), want;
        if (wc.status != IBV_WC_SUCCESS || wc.byte_len != GRH + MSG || m->thr >= NTHR
            || m->seq >= (uint32_t)nmsg) {
            bad++;
            continue;
        }
        fill (&want, m->thr, m->seq);
        if (memcmp (m, &want, sizeof (want)))
            bad++;
        else if (got[m->thr][m->seq]++)
            dup++;
    }
    int missing = 0;
    for (int t = 0; t < NTHR; t++)
        for (int i = 0; i < nmsg; i++)
            missing += !got[t][i];
    ok (bad == 0 && dup == 0, "%d datagrams arrived intact and once (%d bad, %d twice)", n, bad,
        dup);
    ok (missing == 0, "none of %d is missing (%d missing)", NTHR * nmsg, missing);
out:

    for (uint32_t t = 0; t < NTHR; t++) {
        ibv_destroy_qp (snd[t].qp);
        for (uint32_t k = 0; k < NAH; k++)
            ibv_destroy_ah (snd[t].ah[k]);
        ibv_dereg_mr (snd[t].mr);
        ibv_destroy_cq (snd[t].cq);
    }
    ibv_destroy_qp (rq);
    ibv_dereg_mr (rmr);
    ibv_destroy_cq (rcq);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    free (rbuf);
    return exit_status ();
}
