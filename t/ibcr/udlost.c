/* udlost.c - a UD datagram the fabric dropped does not keep a checkpoint
 * from draining, and costs only the drain it was missing in.
 *
 *   udlost READY1 GO1 READY2 GO2
 *
 * One process, two UD QPs (A sends, B receives, Q_Key 0x1111), under
 * libibcr with a coordinator that runs two cycles; each READY/GO pair is
 * a handshake around one (selfqp_handshake).
 *   1. B posts receives; A sends one datagram with Q_Key 0x2222, which
 *      softib drops as an HCA would, and its send completes.  The first
 *      cycle's drain must end all the same (the test reads the
 *      coordinator's line for it).
 *   2. A sends a datagram with the right Q_Key: B receives it, and only
 *      it.  A third UD QP, Z (own CQ), sends one and is destroyed before
 *      its completion is polled: the completion still comes, with Z's
 *      number as the application knows it.  A moves to the error state
 *      and posts one more datagram, which is flushed, not sent.  Then
 *      the second cycle: its drain is exact, as the counts started again
 *      at the first cycle's release and a flushed datagram is not
 *      counted.
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

#define QKEY 0x1111
#define MSG 32
#define GRH 40

static double now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Poll cq for up to secs for one completion: 1 (in *wc), 0, or -1. */
static int poll_one (struct ibv_cq *cq, double secs, struct ibv_wc *wc)
{
    for (double end = now () + secs; now () < end;) {
        int r = ibv_poll_cq (cq, 1, wc);
        if (r)
            return r;
        usleep (200);
    }
    return 0;
}

static int ud_up (struct ibv_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
    if (ibv_modify_qp (qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        return -1;
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp (qp, &a, IBV_QP_STATE))
        return -1;
    a.qp_state = IBV_QPS_RTS;
    return ibv_modify_qp (qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int send_dgram (struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, char *buf,
                       uint32_t lkey)
{
    struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = MSG, .lkey = lkey };
    struct ibv_send_wr wr = { .wr_id = qkey,
                              .sg_list = &sg,
                              .num_sge = 1,
                              .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED },
                       *bad;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    return ibv_post_send (qp, &wr, &bad);
}

int main (int argc, char **argv)
{
    struct ibv_device **l;
    struct ibv_port_attr pa;
    static char sbuf[2][MSG], rbuf[2][GRH + MSG];
    struct ibv_wc wc;
    int n;

    if (argc != 5) {
        fprintf (stderr, "usage: udlost READY1 GO1 READY2 GO2\n");
        return 2;
    }
    plan (8);
    struct ibv_context *ctx = selfqp_open (&l, &pa);
    struct ibv_pd *pd = ibv_alloc_pd (ctx);
    struct ibv_mr *smr = pd ? ibv_reg_mr (pd, sbuf, sizeof (sbuf), 0) : NULL;
    struct ibv_mr *rmr = pd ? ibv_reg_mr (pd, rbuf, sizeof (rbuf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq *scq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    struct ibv_cq *rcq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    struct ibv_cq *zcq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    if (!smr || !rmr || !scq || !rcq || !zcq)
        BAIL_OUT ("pd/mr/cq: %s", strerror (errno));
    struct ibv_qp_init_attr ia = {
        .send_cq = scq,
        .recv_cq = scq,
        .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *a = ibv_create_qp (pd, &ia);
    ia.send_cq = rcq;
    ia.recv_cq = rcq;
    struct ibv_qp *b = ibv_create_qp (pd, &ia);
    ia.send_cq = zcq;
    ia.recv_cq = zcq;
    struct ibv_qp *z = ibv_create_qp (pd, &ia);
    struct ibv_ah_attr aa = { .dlid = pa.lid, .port_num = 1 };
    struct ibv_ah *ah = pd ? ibv_create_ah (pd, &aa) : NULL;
    if (!a || !b || !z || !ah || ud_up (a) || ud_up (b) || ud_up (z))
        BAIL_OUT ("UD QPs: %s", strerror (errno));

    for (int i = 0; i < 2; i++) {
        struct ibv_sge sg = { .addr = (uintptr_t)rbuf[i], .length = GRH + MSG, .lkey = rmr->lkey };
        struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sg, .num_sge = 1 }, *bad;
        if (ibv_post_recv (b, &wr, &bad))
            BAIL_OUT ("post recv: %s", strerror (errno));
    }
    snprintf (sbuf[0], MSG, "dropped");
    ok (send_dgram (a, ah, b->qp_num, 0x2222, sbuf[0], smr->lkey) == 0
            && poll_one (scq, 10, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 0x2222,
        "a datagram with the wrong Q_Key is sent");
    ok (poll_one (rcq, 0.2, &wc) == 0, "and B does not receive it");
    selfqp_handshake (argv[1], argv[2]);

    snprintf (sbuf[1], MSG, "received");
    ok (send_dgram (a, ah, b->qp_num, QKEY, sbuf[1], smr->lkey) == 0 && poll_one (scq, 10, &wc) == 1
            && wc.status == IBV_WC_SUCCESS && wc.wr_id == QKEY,
        "after the cycle, a datagram with the right Q_Key is sent");
    n = poll_one (rcq, 10, &wc);
    ok (n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 && wc.byte_len == GRH + MSG
            && strcmp (rbuf[0] + GRH, "received") == 0,
        "B receives it in its first receive (\"%s\")", rbuf[0] + GRH);
    ok (poll_one (rcq, 0.5, &wc) == 0, "and nothing else");

    /* Z's datagram (dropped at B: the wrong Q_Key) completes at once on
     * softib; Z is destroyed before that completion is polled. */
    uint32_t zqpn = z->qp_num;
    if (send_dgram (z, ah, b->qp_num, 0x2222, sbuf[0], smr->lkey) || ibv_destroy_qp (z))
        BAIL_OUT ("Z: %s", strerror (errno));
    n = poll_one (zcq, 10, &wc);
    ok (n == 1 && wc.wr_id == 0x2222 && wc.qp_num == zqpn,
        "a completion of a QP destroyed before it was polled has the QP's number (%u, the "
        "application's %u)",
        n == 1 ? wc.qp_num : 0, zqpn);

    struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
    if (ibv_modify_qp (a, &err, IBV_QP_STATE))
        BAIL_OUT ("A to the error state: %s", strerror (errno));
    n = send_dgram (a, ah, b->qp_num, QKEY, sbuf[1], smr->lkey) == 0 ? poll_one (scq, 10, &wc) : -1;
    ok (n == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == QKEY,
        "a datagram posted on A in the error state is flushed (%s)",
        n == 1 ? ibv_wc_status_str (wc.status) : "no completion");
    selfqp_handshake (argv[3], argv[4]);
    ok (poll_one (rcq, 0.2, &wc) == 0, "nothing after the second cycle either");

    ibv_destroy_qp (a);
    ibv_destroy_qp (b);
    ibv_destroy_ah (ah);
    ibv_destroy_cq (scq);
    ibv_destroy_cq (rcq);
    ibv_destroy_cq (zcq);
    ibv_dereg_mr (smr);
    ibv_dereg_mr (rmr);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    return exit_status ();
}
