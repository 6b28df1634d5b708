/* err_state.c - the QP state machine refuses what a real HCA refuses.
 *
 * For every transition RESET->INIT->RTR->RTS of RC and UD QPs: leaving out
 * any required attribute, adding one the transition does not allow, asking
 * for an illegal transition or an invalid port must fail with EINVAL and
 * leave the QP in its state; the full mask must succeed and ibv_query_qp
 * must report what was set.  Posting to a QP in the wrong state must
 * return EINVAL with bad_wr set; overflowing a queue must return ENOMEM.
 * Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vw_pair.h"

static struct vw_dev dev;
static struct ibv_cq *cq;

#define RC_INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RC_RTR_MASK                                                                                \
    (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN                  \
     | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RC_RTS_MASK                                                                                \
    (IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY           \
     | IBV_QP_MAX_QP_RD_ATOMIC)
#define UD_INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)

struct bit {
    int mask;
    const char *name;
};

static const struct bit rc_rtr_bits[] = {
    { IBV_QP_AV, "AV" },
    { IBV_QP_PATH_MTU, "PATH_MTU" },
    { IBV_QP_DEST_QPN, "DEST_QPN" },
    { IBV_QP_RQ_PSN, "RQ_PSN" },
    { IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC" },
    { IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER" },
};
static const struct bit rc_rts_bits[] = {
    { IBV_QP_SQ_PSN, "SQ_PSN" },
    { IBV_QP_TIMEOUT, "TIMEOUT" },
    { IBV_QP_RETRY_CNT, "RETRY_CNT" },
    { IBV_QP_RNR_RETRY, "RNR_RETRY" },
    { IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC" },
};
static const struct bit rc_init_bits[] = {
    { IBV_QP_PKEY_INDEX, "PKEY_INDEX" },
    { IBV_QP_PORT, "PORT" },
    { IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS" },
};
static const struct bit ud_init_bits[] = {
    { IBV_QP_PKEY_INDEX, "PKEY_INDEX" },
    { IBV_QP_PORT, "PORT" },
    { IBV_QP_QKEY, "QKEY" },
};
#define NB(a) ((int)(sizeof (a) / sizeof ((a)[0])))

static struct ibv_qp *mkqp (enum ibv_qp_type type)
{
    struct ibv_qp_init_attr ia;
    struct ibv_qp *qp;

    memset (&ia, 0, sizeof (ia));
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.qp_type = type;
    ia.cap.max_send_wr = 8;
    ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    if (!(qp = ibv_create_qp (dev.pd, &ia)))
        BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
    return qp;
}

/* Attributes valid for every transition at once; masks pick from them. */
static void all_attrs (struct ibv_qp_attr *a, enum ibv_qp_state to, uint32_t dqpn)
{
    memset (a, 0, sizeof (*a));
    a->qp_state = to;
    a->pkey_index = 0;
    a->port_num = 1;
    a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    a->qkey = VW_QKEY;
    a->path_mtu = dev.port_attr.active_mtu;
    a->dest_qp_num = dqpn;
    a->rq_psn = 0x123;
    a->sq_psn = 0x456;
    a->max_dest_rd_atomic = 1;
    a->max_rd_atomic = 1;
    a->min_rnr_timer = 12;
    a->timeout = 14;
    a->retry_cnt = 7;
    a->rnr_retry = 7;
    a->ah_attr.dlid = dev.port_attr.lid;
    a->ah_attr.port_num = 1;
}

static int state_of (struct ibv_qp *qp)
{
    return vw_qp_state (qp);
}

/* Expect modify to fail with EINVAL and leave the state alone. */
static void refuse (struct ibv_qp *qp, enum ibv_qp_state to, int mask, const char *what)
{
    struct ibv_qp_attr a;
    int before = state_of (qp), rc;

    all_attrs (&a, to, qp->qp_num);
    rc = ibv_modify_qp (qp, &a, mask);
    if (!ok (rc == EINVAL, "%s: EINVAL", what))
        diag ("ibv_modify_qp returned %d (%s)", rc, rc ? strerror (rc) : "success");
    ok (state_of (qp) == before, "%s: QP stays in %s", what,
        vw_qp_state_str ((enum ibv_qp_state)before));
}

static int step (struct ibv_qp *qp, enum ibv_qp_state to, int mask, uint32_t dqpn, const char *what)
{
    struct ibv_qp_attr a;
    int rc;

    all_attrs (&a, to, dqpn);
    rc = ibv_modify_qp (qp, &a, mask);
    if (!ok (rc == 0 && state_of (qp) == (int)to, "%s: succeeds, QP in %s", what,
             vw_qp_state_str (to)))
        diag ("ibv_modify_qp returned %d (%s), state %d", rc, strerror (rc), state_of (qp));
    return rc;
}

static void missing_each (struct ibv_qp *qp, enum ibv_qp_state to, int full, const struct bit *bits,
                          int n, const char *tr)
{
    char what[128];

    for (int i = 0; i < n; i++) {
        snprintf (what, sizeof (what), "%s without %s", tr, bits[i].name);
        refuse (qp, to, full & ~bits[i].mask, what);
    }
}

static void rc_transitions (void)
{
    struct ibv_qp *qp = mkqp (IBV_QPT_RC);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    int rc;

    refuse (qp, IBV_QPS_RTR, RC_RTR_MASK, "RC RESET->RTR (skipping INIT)");
    refuse (qp, IBV_QPS_RTS, RC_RTS_MASK, "RC RESET->RTS");
    missing_each (qp, IBV_QPS_INIT, RC_INIT_MASK, rc_init_bits, NB (rc_init_bits),
                  "RC RESET->INIT");
    refuse (qp, IBV_QPS_INIT, RC_INIT_MASK | IBV_QP_DEST_QPN,
            "RC RESET->INIT with DEST_QPN (not allowed there)");
    refuse (qp, IBV_QPS_INIT, RC_INIT_MASK | IBV_QP_SQ_PSN,
            "RC RESET->INIT with SQ_PSN (not allowed there)");
    refuse (qp, IBV_QPS_INIT, (RC_INIT_MASK & ~IBV_QP_ACCESS_FLAGS) | IBV_QP_QKEY,
            "RC RESET->INIT with QKEY instead of ACCESS_FLAGS");
    all_attrs (&a, IBV_QPS_INIT, 0);
    a.port_num = 0;
    rc = ibv_modify_qp (qp, &a, RC_INIT_MASK);
    ok (rc == EINVAL, "RC RESET->INIT on port 0: EINVAL (got %d)", rc);
    a.port_num = (uint8_t)(dev.attr.phys_port_cnt + 1);
    rc = ibv_modify_qp (qp, &a, RC_INIT_MASK);
    ok (rc == EINVAL, "RC RESET->INIT on port %d (device has %d): EINVAL (got %d)", a.port_num,
        dev.attr.phys_port_cnt, rc);
    step (qp, IBV_QPS_INIT, RC_INIT_MASK, 0, "RC RESET->INIT with the full mask");

    refuse (qp, IBV_QPS_RTS, RC_RTS_MASK, "RC INIT->RTS (skipping RTR)");
    missing_each (qp, IBV_QPS_RTR, RC_RTR_MASK, rc_rtr_bits, NB (rc_rtr_bits), "RC INIT->RTR");
    refuse (qp, IBV_QPS_RTR, RC_RTR_MASK | IBV_QP_SQ_PSN,
            "RC INIT->RTR with SQ_PSN (not allowed there)");
    refuse (qp, IBV_QPS_RTR, RC_RTR_MASK | IBV_QP_RNR_RETRY,
            "RC INIT->RTR with RNR_RETRY (not allowed there)");
    step (qp, IBV_QPS_RTR, RC_RTR_MASK, qp->qp_num, "RC INIT->RTR with the full mask");
    memset (&a, 0, sizeof (a));
    rc = ibv_query_qp (qp, &a, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                       &ia);
    ok (rc == 0 && a.dest_qp_num == qp->qp_num && a.rq_psn == 0x123
            && a.path_mtu == dev.port_attr.active_mtu,
        "ibv_query_qp reports the RTR attributes (dest_qpn %u rq_psn 0x%x mtu %d)", a.dest_qp_num,
        a.rq_psn, a.path_mtu);

    missing_each (qp, IBV_QPS_RTS, RC_RTS_MASK, rc_rts_bits, NB (rc_rts_bits), "RC RTR->RTS");
    refuse (qp, IBV_QPS_RTS, RC_RTS_MASK | IBV_QP_DEST_QPN,
            "RC RTR->RTS with DEST_QPN (not allowed there)");
    step (qp, IBV_QPS_RTS, RC_RTS_MASK, qp->qp_num, "RC RTR->RTS with the full mask");
    memset (&a, 0, sizeof (a));
    rc = ibv_query_qp (qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, &ia);
    ok (rc == 0 && a.sq_psn == 0x456 && ia.qp_type == IBV_QPT_RC,
        "ibv_query_qp reports sq_psn 0x%x and type RC", a.sq_psn);

    step (qp, IBV_QPS_ERR, IBV_QP_STATE, 0, "RC RTS->ERR");
    refuse (qp, IBV_QPS_RTS, RC_RTS_MASK, "RC ERR->RTS");
    step (qp, IBV_QPS_RESET, IBV_QP_STATE, 0, "RC ERR->RESET");
    step (qp, IBV_QPS_ERR, IBV_QP_STATE, 0, "RC RESET->ERR");
    step (qp, IBV_QPS_RESET, IBV_QP_STATE, 0, "RC ERR->RESET again");
    step (qp, IBV_QPS_INIT, RC_INIT_MASK, 0, "RC RESET->INIT after a reset");
    ok (ibv_destroy_qp (qp) == 0, "destroy the RC QP");
}

static void ud_transitions (void)
{
    struct ibv_qp *qp = mkqp (IBV_QPT_UD);

    missing_each (qp, IBV_QPS_INIT, UD_INIT_MASK, ud_init_bits, NB (ud_init_bits),
                  "UD RESET->INIT");
    refuse (qp, IBV_QPS_INIT, UD_INIT_MASK | IBV_QP_ACCESS_FLAGS,
            "UD RESET->INIT with ACCESS_FLAGS (RC only)");
    step (qp, IBV_QPS_INIT, UD_INIT_MASK, 0, "UD RESET->INIT with the full mask");
    refuse (qp, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV, "UD INIT->RTR with an AV (UD has none)");
    refuse (qp, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_DEST_QPN, "UD INIT->RTR with DEST_QPN");
    step (qp, IBV_QPS_RTR, IBV_QP_STATE, 0, "UD INIT->RTR");
    refuse (qp, IBV_QPS_RTS, IBV_QP_STATE, "UD RTR->RTS without SQ_PSN");
    step (qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, 0, "UD RTR->RTS");
    ok (ibv_destroy_qp (qp) == 0, "destroy the UD QP");
}

static void post_states (void)
{
    struct ibv_qp *qp = mkqp (IBV_QPT_RC);
    struct ibv_sge sge;
    struct ibv_send_wr swr, *sbad;
    struct ibv_recv_wr rwr, *rbad;
    static uint8_t buf[64];
    struct ibv_mr *mr = ibv_reg_mr (dev.pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_wc wc;
    const struct {
        enum ibv_qp_state st;
        int mask;
        uint32_t dq;
    } path[] = {
        { IBV_QPS_RESET, 0, 0 },
        { IBV_QPS_INIT, RC_INIT_MASK, 0 },
        { IBV_QPS_RTR, RC_RTR_MASK, 0 },
    };
    int rc;

    if (!mr)
        BAIL_OUT ("ibv_reg_mr: %s", strerror (errno));
    sge = (struct ibv_sge){ (uintptr_t)buf, sizeof (buf), mr->lkey };
    for (int i = 0; i < 3; i++) {
        const char *sn = vw_qp_state_str (path[i].st);
        if (path[i].mask)
            step (qp, path[i].st, path[i].mask, qp->qp_num, "walk to the next state");
        memset (&swr, 0, sizeof (swr));
        swr.wr_id = 10 + i;
        swr.sg_list = &sge;
        swr.num_sge = 1;
        swr.opcode = IBV_WR_SEND;
        swr.send_flags = IBV_SEND_SIGNALED;
        sbad = NULL;
        rc = ibv_post_send (qp, &swr, &sbad);
        ok (rc == EINVAL && sbad == &swr, "ibv_post_send in %s: EINVAL with bad_wr set (got %d)",
            sn, rc);
        memset (&rwr, 0, sizeof (rwr));
        rwr.wr_id = 20 + i;
        rwr.sg_list = &sge;
        rwr.num_sge = 1;
        rbad = NULL;
        rc = ibv_post_recv (qp, &rwr, &rbad);
        if (path[i].st == IBV_QPS_RESET)
            ok (rc == EINVAL && rbad == &rwr,
                "ibv_post_recv in RESET: EINVAL with bad_wr set (got %d)", rc);
        else
            ok (rc == 0, "ibv_post_recv in %s is allowed (got %d)", sn, rc);
    }
    ok (ibv_poll_cq (cq, 1, &wc) == 0, "refused WRs produce no completion");
    ok (ibv_destroy_qp (qp) == 0, "destroy the QP with receives still posted");
    ibv_dereg_mr (mr);
}

/* A full send queue refuses the next WR with ENOMEM; so does a full
 * receive queue, and a WR with more sg entries than the QP allows gets
 * EINVAL.  The peer posts no receives, so (rnr_retry 7) nothing the
 * requester sends can complete and the queue really stays full. */
static void overflow (void)
{
    struct vw_pair p;
    static uint8_t buf[64];
    struct ibv_mr *mr = ibv_reg_mr (dev.pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    struct ibv_sge sge[8];
    struct ibv_send_wr wr, *bad;
    char err[256];
    uint32_t cap, i;
    int rc = 0;

    if (!mr || vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("overflow set-up: %s", mr ? err : strerror (errno));
    ibv_query_qp (p.qp[0], &a, IBV_QP_CAP, &ia);
    cap = ia.cap.max_send_wr;
    for (int k = 0; k < 8; k++)
        sge[k] = (struct ibv_sge){ (uintptr_t)buf, 8, mr->lkey };
    memset (&wr, 0, sizeof (wr));
    wr.sg_list = sge;
    wr.num_sge = (int)ia.cap.max_send_sge + 1;
    wr.opcode = IBV_WR_SEND;
    bad = NULL;
    rc = ibv_post_send (p.qp[0], &wr, &bad);
    ok (rc == EINVAL && bad == &wr,
        "ibv_post_send with %d sg entries on a QP of %u: EINVAL (got %d)", wr.num_sge,
        ia.cap.max_send_sge, rc);
    wr.num_sge = 1;
    for (i = 0; i < cap; i++) {
        wr.wr_id = i;
        wr.send_flags = IBV_SEND_SIGNALED;
        if ((rc = ibv_post_send (p.qp[0], &wr, &bad)) != 0)
            break;
    }
    ok (i == cap, "post %u SENDs, the send queue's capacity (stopped at %u: %d)", cap, i, rc);
    bad = NULL;
    rc = ibv_post_send (p.qp[0], &wr, &bad);
    ok (rc == ENOMEM && bad == &wr,
        "one more SEND on the full send queue: ENOMEM with bad_wr set (got %d)", rc);
    vw_pair_destroy (&p);
    ibv_dereg_mr (mr);
}

/* Inline data is bounded by what the QP was created with. */
static void inline_limits (void)
{
    static uint8_t big[1 << 16];
    struct ibv_qp_init_attr ia, qa_ia;
    struct ibv_qp_attr qa;
    struct ibv_sge sge;
    struct ibv_send_wr wr, *bad;
    struct vw_pair p;
    struct ibv_qp *qp;
    char err[256];
    int rc;

    memset (&ia, 0, sizeof (ia));
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = (struct ibv_qp_cap){ 4, 4, 1, 1, 1u << 30 };
    errno = 0;
    qp = ibv_create_qp (dev.pd, &ia);
    ok (qp == NULL && errno != 0, "ibv_create_qp asking 1 GiB of inline data fails (errno %d)",
        errno);
    if (qp)
        ibv_destroy_qp (qp);
    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    rc = ibv_query_qp (p.qp[0], &qa, IBV_QP_CAP, &qa_ia);
    ok (rc == 0, "query the QP's caps (max_inline_data %u)", qa_ia.cap.max_inline_data);
    sge = (struct ibv_sge){ (uintptr_t)big, qa_ia.cap.max_inline_data + 1, 0 };
    memset (&wr, 0, sizeof (wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    bad = NULL;
    rc = ibv_post_send (p.qp[0], &wr, &bad);
    ok (rc != 0 && bad == &wr,
        "an inline SEND one byte over max_inline_data is refused at post (got %d)", rc);
    vw_pair_destroy (&p);
}

int main (void)
{
    char err[256];

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    if (!(cq = ibv_create_cq (dev.ctx, 64, NULL, NULL, 0)))
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
    rc_transitions ();
    ud_transitions ();
    post_states ();
    overflow ();
    inline_limits ();
    ok (ibv_destroy_cq (cq) == 0, "destroy the CQ");
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
