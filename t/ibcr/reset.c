/* reset.c - WRs that a QP's move to RESET dropped stay dropped across a
 * checkpoint, and completions it left in a CQ are seen once.
 *
 *   reset READY1 GO1 READY2 GO2
 *
 * One process, two RC QPs connected to each other (A, with one CQ, and
 * B, with a send CQ and a receive CQ), and a second pair (C and D), under
 * libibcr with a coordinator that runs two cycles; each READY/GO pair is
 * a handshake around one (selfqp_handshake).
 *   1. B receives one message from A and D one from C (the drain's counts
 *      are not 0), then the first cycle: ids are translated from now on.
 *   2. A posts a receive (wr 30) that nothing will fill, an RDMA WRITE
 *      (wr 5) whose completion is left unpolled in A's CQ (its completion
 *      channel says it is there), and a SEND (wr 2, "old") stuck in RNR:
 *      B has no receive.  A and B move to RESET, which drops wr 30 and
 *      wr 2, and are connected again.  D moves to RESET and stays there;
 *      C, its peer, is left as it was.  A third pair: E's SEND to F
 *      (no receive) is stuck, then E moves to the error state, which
 *      flushes it; F is left as it was.
 *   3. A posts a receive (wr 31) and a SEND (wr 3, "new"), stuck in RNR,
 *      then the second cycle: its drain must finish, and its rebuild
 *      must repost wr 31 and wr 3 alone.
 *   4. B posts two receives: exactly one message arrives, "new"; A sees
 *      wr 5 and wr 3 complete once each, nothing of wr 2; a message from
 *      B lands in wr 31, not wr 30; D is in RESET.
 * TAP on stdout.
 */
#include "config.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

#define MSG 64

static double now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Poll cq for up to secs or until want completions came; their wr_ids in
 * ids[] (at most max), and every one's status checked against success
 * and, unless qpn is 0, its QPN against qpn ((*bad)++ otherwise).  The
 * count. */
static int collect (struct ibv_cq *cq, double secs, int want, uint64_t *ids, int max, uint32_t qpn,
                    int *bad)
{
    int n = 0;
    double end = now () + secs;
    while (n < want && now () < end) {
        struct ibv_wc wc;
        int r = ibv_poll_cq (cq, 1, &wc);
        if (r < 0)
            BAIL_OUT ("ibv_poll_cq failed");
        if (r == 0) {
            usleep (200);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS || (qpn && wc.qp_num != qpn)) {
            diag ("completion wr_id %llu on QP %u: %s", (unsigned long long)wc.wr_id, wc.qp_num,
                  ibv_wc_status_str (wc.status));
            (*bad)++;
        }
        if (n < max)
            ids[n] = wc.wr_id;
        n++;
    }
    return n;
}

static void post_send (struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *buf,
                       uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
    struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = MSG, .lkey = lkey };
    struct ibv_send_wr wr = { .wr_id = id,
                              .sg_list = &sg,
                              .num_sge = 1,
                              .opcode = op,
                              .send_flags = IBV_SEND_SIGNALED },
                       *bad;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    if (ibv_post_send (qp, &wr, &bad))
        BAIL_OUT ("post send %llu: %s", (unsigned long long)id, strerror (errno));
}

static void post_recv (struct ibv_qp *qp, uint64_t id, void *buf, uint32_t lkey)
{
    struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = MSG, .lkey = lkey };
    struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 }, *bad;
    if (ibv_post_recv (qp, &wr, &bad))
        BAIL_OUT ("post recv %llu: %s", (unsigned long long)id, strerror (errno));
}

static void reset (struct ibv_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
    if (ibv_modify_qp (qp, &a, IBV_QP_STATE))
        BAIL_OUT ("move QP %u to RESET: %s", qp->qp_num, strerror (errno));
}

static int count_of (const uint64_t *ids, int n, uint64_t id)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += ids[i] == id;
    return c;
}

int main (int argc, char **argv)
{
    struct ibv_device **l;
    struct ibv_port_attr pa;
    /* A's buffers: what it sends and the slots its receives fill; B's:
     * its receive slots and the RDMA WRITE's target. */
    static char abuf[6][MSG], bbuf[4][MSG];
    uint64_t ids[16];
    int bad = 0, n;
    struct ibv_cq *ecq;
    void *ectx;

    if (argc != 5) {
        fprintf (stderr, "usage: reset READY1 GO1 READY2 GO2\n");
        return 2;
    }
    plan (13);
    struct ibv_context *ctx = selfqp_open (&l, &pa);
    struct ibv_pd *pd = ibv_alloc_pd (ctx);
    unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    struct ibv_mr *amr = pd ? ibv_reg_mr (pd, abuf, sizeof (abuf), acc) : NULL;
    struct ibv_mr *bmr = pd ? ibv_reg_mr (pd, bbuf, sizeof (bbuf), acc) : NULL;
    struct ibv_comp_channel *ch = ibv_create_comp_channel (ctx);
    struct ibv_cq *acq = ch ? ibv_create_cq (ctx, 16, NULL, ch, 0) : NULL;
    struct ibv_cq *bscq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    struct ibv_cq *brcq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    struct ibv_cq *ccq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    struct ibv_cq *fcq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    if (!amr || !bmr || !acq || !bscq || !brcq || !ccq || !fcq)
        BAIL_OUT ("pd/mr/cq: %s", strerror (errno));
    struct ibv_qp_init_attr ia = {
        .send_cq = acq,
        .recv_cq = acq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *a = ibv_create_qp (pd, &ia);
    ia.send_cq = bscq;
    ia.recv_cq = brcq;
    struct ibv_qp *b = ibv_create_qp (pd, &ia);
    ia.send_cq = ccq;
    ia.recv_cq = ccq;
    struct ibv_qp *c = ibv_create_qp (pd, &ia);
    struct ibv_qp *d = ibv_create_qp (pd, &ia);
    ia.send_cq = fcq;
    ia.recv_cq = fcq;
    struct ibv_qp *e = ibv_create_qp (pd, &ia);
    struct ibv_qp *f = ibv_create_qp (pd, &ia);
    if (!a || !b || !c || !d || !e || !f || selfqp_connect (a, pa.lid, b->qp_num, acc)
        || selfqp_connect (b, pa.lid, a->qp_num, acc) || selfqp_connect (c, pa.lid, d->qp_num, acc)
        || selfqp_connect (d, pa.lid, c->qp_num, acc) || selfqp_connect (e, pa.lid, f->qp_num, acc)
        || selfqp_connect (f, pa.lid, e->qp_num, acc))
        BAIL_OUT ("QPs: %s", strerror (errno));
    uint32_t qa = a->qp_num, qb = b->qp_num;

    /* 1. one message each, then a cycle */
    snprintf (abuf[0], MSG, "first");
    post_recv (b, 100, bbuf[0], bmr->lkey);
    post_send (a, 1, IBV_WR_SEND, abuf[0], amr->lkey, 0, 0);
    n = collect (brcq, 10, 1, ids, 16, qb, &bad) + collect (acq, 10, 1, ids + 1, 15, qa, &bad);
    ok (n == 2 && ids[0] == 100 && ids[1] == 1 && strcmp (bbuf[0], "first") == 0,
        "a first message goes from A to B (%d completions)", n);
    post_recv (d, 200, bbuf[1], bmr->lkey);
    post_send (c, 7, IBV_WR_SEND, abuf[0], amr->lkey, 0, 0);
    n = collect (ccq, 10, 2, ids, 16, 0, &bad);
    ok (n == 2 && count_of (ids, n, 200) == 1 && count_of (ids, n, 7) == 1,
        "and one from C to D (%d completions)", n);
    selfqp_handshake (argv[1], argv[2]);

    /* 2. work the RESET drops, and a completion it leaves */
    post_recv (a, 30, abuf[2], amr->lkey);
    snprintf (abuf[1], MSG, "written");
    /* The completion channel tells when the WRITE's completion is in A's
     * CQ, without polling it. */
    if (ibv_req_notify_cq (acq, 0))
        BAIL_OUT ("arm A's CQ: %s", strerror (errno));
    post_send (a, 5, IBV_WR_RDMA_WRITE, abuf[1], amr->lkey, (uintptr_t)bbuf[3], bmr->rkey);
    n = ibv_get_cq_event (ch, &ecq, &ectx);
    if (n == 0)
        ibv_ack_cq_events (ecq, 1);
    ok (n == 0 && ecq == acq && strcmp (bbuf[3], "written") == 0,
        "the RDMA WRITE landed, and its completion is in A's CQ, unpolled");
    snprintf (abuf[4], MSG, "old");
    post_send (a, 2, IBV_WR_SEND, abuf[4], amr->lkey, 0, 0);
    usleep (100 * 1000);
    reset (a);
    reset (b);
    if (selfqp_connect (a, pa.lid, qb, acc) || selfqp_connect (b, pa.lid, qa, acc))
        BAIL_OUT ("connect again after the RESET: %s", strerror (errno));
    reset (d);
    post_send (e, 8, IBV_WR_SEND, abuf[0], amr->lkey, 0, 0);
    usleep (100 * 1000);
    struct ibv_qp_attr qerr = { .qp_state = IBV_QPS_ERR };
    struct ibv_wc ewc = { 0 };
    if (ibv_modify_qp (e, &qerr, IBV_QP_STATE))
        BAIL_OUT ("move E to the error state: %s", strerror (errno));
    for (double end = now () + 10; ibv_poll_cq (fcq, 1, &ewc) == 0 && now () < end;)
        usleep (200);
    ok (ewc.wr_id == 8 && ewc.status == IBV_WC_WR_FLUSH_ERR,
        "E's SEND stuck in RNR is flushed when E moves to the error state (%s)",
        ibv_wc_status_str (ewc.status));

    /* 3. new work, stuck, then a cycle */
    post_recv (a, 31, abuf[3], amr->lkey);
    snprintf (abuf[5], MSG, "new");
    post_send (a, 3, IBV_WR_SEND, abuf[5], amr->lkey, 0, 0);
    selfqp_handshake (argv[3], argv[4]);

    /* 4. what arrives */
    memset (bbuf[1], 0, 2 * MSG);
    post_recv (b, 101, bbuf[1], bmr->lkey);
    post_recv (b, 102, bbuf[2], bmr->lkey);
    n = collect (brcq, 10, 1, ids, 16, qb, &bad);
    ok (n == 1 && ids[0] == 101 && strcmp (bbuf[1], "new") == 0,
        "B receives the SEND posted after the RESET (wr %llu: \"%s\")",
        n ? (unsigned long long)ids[0] : 0ULL, bbuf[1]);
    n = collect (brcq, 0.5, 1, ids, 16, qb, &bad);
    ok (n == 0, "and nothing else in 500 ms: the dropped SEND is not reposted (\"%s\")", bbuf[2]);
    n = collect (acq, 2, 16, ids, 16, qa, &bad);
    ok (count_of (ids, n, 5) == 1, "A sees the RDMA WRITE's completion once");
    ok (count_of (ids, n, 3) == 1, "A sees the new SEND complete once");
    ok (count_of (ids, n, 2) == 0 && n == 2, "and nothing else (%d completions)", n);

    snprintf (bbuf[0], MSG, "back");
    post_send (b, 4, IBV_WR_SEND, bbuf[0], bmr->lkey, 0, 0);
    n = collect (bscq, 10, 1, ids, 16, qb, &bad);
    ok (n == 1 && ids[0] == 4, "B's SEND to A completes");
    n = collect (acq, 10, 1, ids, 16, qa, &bad);
    ok (n == 1 && ids[0] == 31 && strcmp (abuf[3], "back") == 0 && abuf[2][0] == 0,
        "it lands in the receive posted after the RESET (wr %llu), not the dropped one",
        n ? (unsigned long long)ids[0] : 0ULL);
    struct ibv_qp_attr qa_d;
    struct ibv_qp_init_attr ia_d;
    ok (ibv_query_qp (d, &qa_d, IBV_QP_STATE, &ia_d) == 0 && qa_d.qp_state == IBV_QPS_RESET,
        "D, reset before the cycle and left so, is in RESET after it");
    ok (bad == 0, "no error completion, every one with its QP's own number");

    ibv_destroy_qp (a);
    ibv_destroy_qp (b);
    ibv_destroy_qp (c);
    ibv_destroy_qp (d);
    ibv_destroy_qp (e);
    ibv_destroy_qp (f);
    ibv_destroy_cq (acq);
    ibv_destroy_cq (bscq);
    ibv_destroy_cq (brcq);
    ibv_destroy_cq (ccq);
    ibv_destroy_cq (fcq);
    ibv_destroy_comp_channel (ch);
    ibv_dereg_mr (amr);
    ibv_dereg_mr (bmr);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    return exit_status ();
}
