/* mt_post.c - several threads posting at once.
 *
 * Four threads post SENDs on one RC QP at the same time (ibv_post_send),
 * then four threads post on four QPs sharing one send CQ (ibv_wr_* API),
 * while a receiver thread reposts receives and a poller thread reaps
 * send completions.  Every message carries (thread, sequence number) and
 * a payload derived from them: each must arrive exactly once, intact,
 * and in its thread's posting order; every send completes once,
 * successfully, in per-thread order.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

#define NTHR 4
#define NMSG 3000
#define MSGLEN 64
#define NRECV 256

struct msg {
    uint32_t thr, seq;
    uint8_t data[MSGLEN - 8];
};

static struct sv_dev dev;
static struct ibv_mr *mr;
static uint8_t *buf;            /* [0, NTHR*MSGLEN) send slots per thread,
				 * then NRECV receive slots */
static struct ibv_qp *sq[NTHR]; /* QP each sender posts on */
static struct ibv_qp *rq[NTHR]; /* their peers */
static int nrq;
static struct ibv_cq *scq, *rcq;
static int use_wr_api;
static volatile int stop;

static uint32_t got_next[NTHR], cq_next[NTHR];
static int bad_data, bad_order, bad_status, bad_post;
static uint64_t received, completed;

static void fill (struct msg *m, uint32_t thr, uint32_t seq)
{
    m->thr = thr;
    m->seq = seq;
    for (size_t i = 0; i < sizeof (m->data); i++)
        m->data[i] = (uint8_t)(thr * 31 + seq * 7 + i);
}

static int post_recv_slot (struct ibv_qp *qp, uint32_t slot)
{
    return sv_recv (qp, slot, buf + NTHR * MSGLEN * 64 + slot * MSGLEN, MSGLEN, mr->lkey);
}

static void *sender (void *arg)
{
    uint32_t thr = (uint32_t)(uintptr_t)arg;
    struct ibv_qp *qp = sq[thr];
    /* 64 send buffers per thread: a buffer is reused only after its
	 * send completed (cq_next tells) */
    uint8_t *mine = buf + thr * MSGLEN * 64;

    for (uint32_t s = 0; s < NMSG; s++) {
        struct msg *m = (struct msg *)(mine + (s % 64) * MSGLEN);
        uint64_t id = (uint64_t)thr << 32 | s;
        int rc;

        while (s - __atomic_load_n (&cq_next[thr], __ATOMIC_ACQUIRE) >= 64)
            sched_yield ();
        fill (m, thr, s);
        for (;;) {
            if (use_wr_api) {
                struct ibv_qp_ex *qx = ibv_qp_to_qp_ex (qp);

                ibv_wr_start (qx);
                qx->wr_id = id;
                qx->wr_flags = IBV_SEND_SIGNALED;
                ibv_wr_send (qx);
                ibv_wr_set_sge (qx, mr->lkey, (uintptr_t)m, MSGLEN);
                rc = ibv_wr_complete (qx);
            } else {
                rc = sv_send (qp, IBV_WR_SEND, id, m, MSGLEN, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
            }
            if (rc != ENOMEM && rc != EINVAL)
                break;
            if (rc == EINVAL && !use_wr_api)
                break;
            sched_yield (); /* send queue full: wait */
        }
        if (rc) {
            __atomic_add_fetch (&bad_post, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    return NULL;
}

static void *poller (void *arg)
{
    struct ibv_wc wc[16];

    (void)arg;
    while (!stop) {
        int n = ibv_poll_cq (scq, 16, wc);

        for (int i = 0; i < n; i++) {
            uint32_t thr = (uint32_t)(wc[i].wr_id >> 32);
            uint32_t seq = (uint32_t)wc[i].wr_id;

            if (wc[i].status != IBV_WC_SUCCESS || thr >= NTHR) {
                bad_status++;
                continue;
            }
            if (seq != cq_next[thr])
                bad_order++;
            __atomic_store_n (&cq_next[thr], seq + 1, __ATOMIC_RELEASE);
            completed++;
        }
    }
    return NULL;
}

static void *receiver (void *arg)
{
    struct ibv_wc wc[16];

    (void)arg;
    while (!stop) {
        int n = ibv_poll_cq (rcq, 16, wc);

        for (int i = 0; i < n; i++) {
            struct msg *m = (struct msg *)(buf + NTHR * MSGLEN * 64 + wc[i].wr_id * MSGLEN);
            struct msg want;
            struct ibv_qp *qp = NULL;

            if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != MSGLEN || m->thr >= NTHR) {
                bad_status++;
                continue;
            }
            fill (&want, m->thr, m->seq);
            if (memcmp (m, &want, MSGLEN) != 0)
                bad_data++;
            if (m->seq != got_next[m->thr])
                bad_order++;
            got_next[m->thr] = m->seq + 1;
            received++;
            for (int k = 0; k < nrq; k++)
                if (rq[k]->qp_num == wc[i].qp_num)
                    qp = rq[k];
            if (!qp || post_recv_slot (qp, (uint32_t)wc[i].wr_id))
                bad_status++;
        }
    }
    return NULL;
}

static void run (int shared_qp, int wr_api)
{
    struct sv_pair pairs[NTHR];
    struct ibv_qp_init_attr ia;
    pthread_t th[NTHR], tp, tr;
    int npairs = shared_qp ? 1 : NTHR;
    uint64_t t0;
    int complete = 1;

    memset (got_next, 0, sizeof (got_next));
    memset (cq_next, 0, sizeof (cq_next));
    bad_data = bad_order = bad_status = bad_post = 0;
    received = completed = 0;
    stop = 0;
    use_wr_api = wr_api;
    scq = ibv_create_cq (dev.ctx, 4096, NULL, NULL, 0);
    rcq = ibv_create_cq (dev.ctx, 4096, NULL, NULL, 0);
    if (!scq || !rcq)
        BAIL_OUT ("ibv_create_cq");
    nrq = npairs;
    for (int k = 0; k < npairs; k++) {
        memset (&ia, 0, sizeof (ia));
        ia.cap.max_send_wr = 64;
        ia.cap.max_recv_wr = NRECV;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        sv_pair_create (&dev, &pairs[k], IBV_QPT_RC, &ia, 16);
        for (int i = 0; i < 2; i++) {
            ibv_destroy_qp (pairs[k].qp[i]);
            ia.qp_type = IBV_QPT_RC;
            ia.send_cq = i ? pairs[k].cq[1] : scq;
            ia.recv_cq = i ? rcq : pairs[k].cq[0];
            pairs[k].qp[i] = ibv_create_qp (dev.pd, &ia);
            if (!pairs[k].qp[i])
                BAIL_OUT ("ibv_create_qp");
        }
        if (sv_pair_connect (&dev, &pairs[k], NULL, NULL))
            BAIL_OUT ("connect");
        rq[k] = pairs[k].qp[1];
    }
    for (uint32_t s = 0; s < NRECV; s++)
        if (post_recv_slot (rq[s % npairs], s))
            BAIL_OUT ("post_recv");
    for (int t = 0; t < NTHR; t++)
        sq[t] = pairs[shared_qp ? 0 : t].qp[0];
    t0 = sv_now_us ();
    pthread_create (&tp, NULL, poller, NULL);
    pthread_create (&tr, NULL, receiver, NULL);
    for (int t = 0; t < NTHR; t++)
        pthread_create (&th[t], NULL, sender, (void *)(uintptr_t)t);
    for (int t = 0; t < NTHR; t++)
        pthread_join (th[t], NULL);
    while ((completed < NTHR * NMSG || received < NTHR * NMSG) && sv_now_us () - t0 < 60000000
           && !bad_post)
        sched_yield ();
    stop = 1;
    pthread_join (tp, NULL);
    pthread_join (tr, NULL);
    for (int t = 0; t < NTHR; t++)
        if (got_next[t] != NMSG || cq_next[t] != NMSG)
            complete = 0;
    ok (!bad_post && !bad_status && complete && received == NTHR * NMSG && completed == NTHR * NMSG,
        "%s, %s: %d threads x %d SENDs all complete and arrive once "
        "(%llu sent, %llu received, %d post errors, %d bad completions)",
        shared_qp ? "one QP" : "one QP per thread, one send CQ",
        wr_api ? "ibv_wr_*" : "ibv_post_send", NTHR, NMSG, (unsigned long long)completed,
        (unsigned long long)received, bad_post, bad_status);
    ok (!bad_data && !bad_order,
        "... intact and in each thread's order "
        "(%d corrupt, %d out of order)",
        bad_data, bad_order);
    for (int k = 0; k < npairs; k++)
        sv_pair_destroy (&pairs[k]);
    ibv_destroy_cq (scq);
    ibv_destroy_cq (rcq);
}

int main (void)
{
    plan (NO_PLAN);
    sv_open (&dev);
    mr = sv_mr (&dev, NTHR * MSGLEN * 64 + NRECV * MSGLEN, IBV_ACCESS_LOCAL_WRITE);
    buf = mr->addr;
    run (1, 0);
    run (1, 1);
    run (0, 1);
    run (0, 0);
    sv_mr_free (mr);
    sv_close (&dev);
    done_testing ();
    return exit_status ();
}
