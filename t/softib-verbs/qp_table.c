/* qp_table.c - ibv_modify_qp refuses every attribute mask a real HCA
 * refuses, accepts every one it accepts, and ibv_query_qp answers what
 * was set.
 *
 * For RC, UC and UD QPs and every legal transition of the IB spec's QP
 * state table (RESET->INIT, INIT->INIT, INIT->RTR, RTR->RTS, RTS->RTS,
 * RTS->SQD, SQD->RTS, SQD->SQD, any->RESET, any->ERR): the required mask
 * succeeds; dropping any one required attribute, or adding any attribute
 * the transition does not allow, fails with EINVAL and leaves the QP where
 * it was; each optional attribute is accepted (alternate paths may be
 * refused with EOPNOTSUPP, never EINVAL).  Illegal transitions fail with
 * EINVAL, and so does IBV_QP_CUR_STATE outside RTS/SQD/SQE, as the
 * kernel's verbs core rules.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

enum { RC, UC, UD, NTYPE };
static const enum ibv_qp_type qpt[NTYPE] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
static const char *tname[NTYPE] = { "RC", "UC", "UD" };

#define A(x) IBV_QP_##x

static const struct {
    int bit;
    const char *name;
} bits[] = {
    { A (CUR_STATE), "CUR_STATE" },
    { A (EN_SQD_ASYNC_NOTIFY), "EN_SQD" },
    { A (ACCESS_FLAGS), "ACCESS_FLAGS" },
    { A (PKEY_INDEX), "PKEY_INDEX" },
    { A (PORT), "PORT" },
    { A (QKEY), "QKEY" },
    { A (AV), "AV" },
    { A (PATH_MTU), "PATH_MTU" },
    { A (TIMEOUT), "TIMEOUT" },
    { A (RETRY_CNT), "RETRY_CNT" },
    { A (RNR_RETRY), "RNR_RETRY" },
    { A (RQ_PSN), "RQ_PSN" },
    { A (MAX_QP_RD_ATOMIC), "MAX_QP_RD_ATOMIC" },
    { A (ALT_PATH), "ALT_PATH" },
    { A (MIN_RNR_TIMER), "MIN_RNR_TIMER" },
    { A (SQ_PSN), "SQ_PSN" },
    { A (MAX_DEST_RD_ATOMIC), "MAX_DEST_RD_ATOMIC" },
    { A (PATH_MIG_STATE), "PATH_MIG_STATE" },
    { A (CAP), "CAP" },
    { A (DEST_QPN), "DEST_QPN" },
    { A (RATE_LIMIT), "RATE_LIMIT" },
};
#define NBITS (int)(sizeof (bits) / sizeof (bits[0]))

struct trans {
    enum ibv_qp_state from, to;
    int req[NTYPE], opt[NTYPE];
};

/* The IB spec's table (what a driver's modify path enforces). */
static const struct trans table[] = {
    { IBV_QPS_RESET,
      IBV_QPS_INIT,
      { A (PKEY_INDEX) | A (PORT) | A (ACCESS_FLAGS), A (PKEY_INDEX) | A (PORT) | A (ACCESS_FLAGS),
        A (PKEY_INDEX) | A (PORT) | A (QKEY) },
      { 0, 0, 0 } },
    { IBV_QPS_INIT,
      IBV_QPS_INIT,
      { 0, 0, 0 },
      { A (PKEY_INDEX) | A (PORT) | A (ACCESS_FLAGS), A (PKEY_INDEX) | A (PORT) | A (ACCESS_FLAGS),
        A (PKEY_INDEX) | A (PORT) | A (QKEY) } },
    { IBV_QPS_INIT,
      IBV_QPS_RTR,
      { A (AV) | A (PATH_MTU) | A (DEST_QPN) | A (RQ_PSN) | A (MAX_DEST_RD_ATOMIC)
            | A (MIN_RNR_TIMER),
        A (AV) | A (PATH_MTU) | A (DEST_QPN) | A (RQ_PSN), 0 },
      { A (ALT_PATH) | A (ACCESS_FLAGS) | A (PKEY_INDEX),
        A (ALT_PATH) | A (ACCESS_FLAGS) | A (PKEY_INDEX), A (PKEY_INDEX) | A (QKEY) } },
    { IBV_QPS_RTR,
      IBV_QPS_RTS,
      { A (SQ_PSN) | A (TIMEOUT) | A (RETRY_CNT) | A (RNR_RETRY) | A (MAX_QP_RD_ATOMIC), A (SQ_PSN),
        A (SQ_PSN) },
      /* CUR_STATE is listed, but only RTS/SQD/SQE may name it */
      { A (ALT_PATH) | A (ACCESS_FLAGS) | A (MIN_RNR_TIMER) | A (PATH_MIG_STATE),
        A (ALT_PATH) | A (ACCESS_FLAGS) | A (PATH_MIG_STATE), A (QKEY) } },
    { IBV_QPS_RTS,
      IBV_QPS_RTS,
      { 0, 0, 0 },
      { A (CUR_STATE) | A (ACCESS_FLAGS) | A (ALT_PATH) | A (PATH_MIG_STATE) | A (MIN_RNR_TIMER),
        A (CUR_STATE) | A (ACCESS_FLAGS) | A (ALT_PATH) | A (PATH_MIG_STATE),
        A (CUR_STATE) | A (QKEY) } },
    { IBV_QPS_RTS,
      IBV_QPS_SQD,
      { 0, 0, 0 },
      { A (EN_SQD_ASYNC_NOTIFY), A (EN_SQD_ASYNC_NOTIFY), A (EN_SQD_ASYNC_NOTIFY) } },
    { IBV_QPS_SQD,
      IBV_QPS_RTS,
      { 0, 0, 0 },
      { A (CUR_STATE) | A (ACCESS_FLAGS) | A (ALT_PATH) | A (PATH_MIG_STATE) | A (MIN_RNR_TIMER),
        A (CUR_STATE) | A (ACCESS_FLAGS) | A (ALT_PATH) | A (PATH_MIG_STATE),
        A (CUR_STATE) | A (QKEY) } },
    { IBV_QPS_SQD,
      IBV_QPS_SQD,
      { 0, 0, 0 },
      { A (PORT) | A (AV) | A (TIMEOUT) | A (RETRY_CNT) | A (RNR_RETRY) | A (MAX_QP_RD_ATOMIC)
            | A (MAX_DEST_RD_ATOMIC) | A (ALT_PATH) | A (ACCESS_FLAGS) | A (PKEY_INDEX)
            | A (MIN_RNR_TIMER) | A (PATH_MIG_STATE),
        A (AV) | A (ALT_PATH) | A (ACCESS_FLAGS) | A (PKEY_INDEX) | A (PATH_MIG_STATE),
        A (PKEY_INDEX) | A (QKEY) } },
};
#define NTRANS (int)(sizeof (table) / sizeof (table[0]))

static struct sv_dev dev;
static struct ibv_cq *cq;

static const char *sname (int s)
{
    static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

    return s >= 0 && s <= 6 ? n[s] : "?";
}

/* attribute values that are all valid; from = the QP's current state */
static void fill (struct ibv_qp *qp, struct ibv_qp_attr *a, enum ibv_qp_state from,
                  enum ibv_qp_state to)
{
    memset (a, 0, sizeof (*a));
    a->qp_state = to;
    a->cur_qp_state = from;
    a->en_sqd_async_notify = 0;
    a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    a->pkey_index = 0;
    a->port_num = 1;
    a->qkey = 0x1234;
    a->ah_attr.dlid = dev.lid;
    a->ah_attr.port_num = 1;
    a->path_mtu = IBV_MTU_2048;
    a->timeout = 12;
    a->retry_cnt = 5;
    a->rnr_retry = 6;
    a->rq_psn = 0x123456;
    a->sq_psn = 0x123456; /* loops back to itself: PSNs must match */
    a->max_rd_atomic = 2;
    a->max_dest_rd_atomic = 3;
    a->min_rnr_timer = 9;
    a->path_mig_state = IBV_MIG_MIGRATED;
    a->dest_qp_num = qp->qp_num;
}

static const struct trans *find (enum ibv_qp_state f, enum ibv_qp_state t)
{
    for (int i = 0; i < NTRANS; i++)
        if (table[i].from == f && table[i].to == t)
            return &table[i];
    return NULL;
}

/* Drives qp from RESET to `s` along RESET-INIT-RTR-RTS(-SQD) with the
 * required masks; BAIL_OUT if a legal step fails. */
static void drive (struct ibv_qp *qp, int ty, enum ibv_qp_state s)
{
    static const enum ibv_qp_state path[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD };
    struct ibv_qp_attr a;
    enum ibv_qp_state cur = IBV_QPS_RESET;
    int rc;

    fill (qp, &a, IBV_QPS_RESET, IBV_QPS_RESET);
    if ((rc = ibv_modify_qp (qp, &a, IBV_QP_STATE)))
        BAIL_OUT ("%s: to RESET: %s", tname[ty], strerror (rc));
    for (int i = 0; i < 4 && cur != s; i++) {
        const struct trans *t = find (cur, path[i]);

        fill (qp, &a, cur, path[i]);
        if ((rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | t->req[ty])))
            BAIL_OUT ("%s: %s->%s with the required mask: %s", tname[ty], sname (cur),
                      sname (path[i]), strerror (rc));
        cur = path[i];
    }
}

static void check_trans (struct ibv_qp *qp, int ty, const struct trans *t)
{
    struct ibv_qp_attr a;
    int rc, bad = 0, opt_bad = 0, extra_bad = 0;
    char what[512] = "";

    /* the required mask */
    drive (qp, ty, t->from);
    fill (qp, &a, t->from, t->to);
    rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | t->req[ty]);
    ok (rc == 0 && sv_state (qp) == (int)t->to,
        "%s %s->%s with exactly the required attributes (%s)", tname[ty], sname (t->from),
        sname (t->to), strerror (rc));

    /* each required attribute left out */
    for (int b = 0; b < NBITS; b++) {
        if (!(t->req[ty] & bits[b].bit))
            continue;
        drive (qp, ty, t->from);
        fill (qp, &a, t->from, t->to);
        rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | (t->req[ty] & ~bits[b].bit));
        if (rc != EINVAL || sv_state (qp) != (int)t->from) {
            bad++;
            snprintf (what + strlen (what), sizeof (what) - strlen (what), " %s:%d", bits[b].name,
                      rc);
        }
    }
    ok (bad == 0,
        "%s %s->%s: leaving out any required attribute gives "
        "EINVAL, state kept%s",
        tname[ty], sname (t->from), sname (t->to), what);

    /* each attribute outside req|opt added */
    what[0] = 0;
    for (int b = 0; b < NBITS; b++) {
        if ((t->req[ty] | t->opt[ty]) & bits[b].bit)
            continue;
        drive (qp, ty, t->from);
        fill (qp, &a, t->from, t->to);
        rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | t->req[ty] | bits[b].bit);
        if (rc != EINVAL || sv_state (qp) != (int)t->from) {
            extra_bad++;
            snprintf (what + strlen (what), sizeof (what) - strlen (what), " %s:%d", bits[b].name,
                      rc);
        }
    }
    ok (extra_bad == 0,
        "%s %s->%s: any attribute the transition does not "
        "take gives EINVAL, state kept%s",
        tname[ty], sname (t->from), sname (t->to), what);

    /* each optional attribute accepted */
    what[0] = 0;
    for (int b = 0; b < NBITS; b++) {
        if (!(t->opt[ty] & bits[b].bit))
            continue;
        drive (qp, ty, t->from);
        fill (qp, &a, t->from, t->to);
        rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | t->req[ty] | bits[b].bit);
        if (rc == EOPNOTSUPP && bits[b].bit == A (ALT_PATH))
            continue; /* no APM: refused, never ignored */
        if (rc != 0 || sv_state (qp) != (int)t->to) {
            opt_bad++;
            snprintf (what + strlen (what), sizeof (what) - strlen (what), " %s:%d", bits[b].name,
                      rc);
        }
    }
    ok (opt_bad == 0, "%s %s->%s: every optional attribute is accepted%s", tname[ty],
        sname (t->from), sname (t->to), what);
}

static void check_illegal (struct ibv_qp *qp, int ty)
{
    static const enum ibv_qp_state st[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                                            IBV_QPS_SQD };
    char what[512] = "";
    int bad = 0, rc;

    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 5; j++) {
            struct ibv_qp_attr a;
            int mask = IBV_QP_STATE;

            if (find (st[i], st[j]) || st[j] == IBV_QPS_RESET)
                continue;
            if (st[i] == st[j] && st[i] == IBV_QPS_RESET)
                continue;
            drive (qp, ty, st[i]);
            fill (qp, &a, st[i], st[j]);
            /* give it every attribute it might want */
            for (int b = 0; b < NBITS; b++)
                if (bits[b].bit != A (ALT_PATH) && bits[b].bit != A (RATE_LIMIT)
                    && bits[b].bit != A (CAP) && bits[b].bit != A (CUR_STATE))
                    mask |= bits[b].bit;
            rc = ibv_modify_qp (qp, &a, mask);
            if (rc != EINVAL || sv_state (qp) != (int)st[i]) {
                bad++;
                snprintf (what + strlen (what), sizeof (what) - strlen (what), " %s->%s:%d",
                          sname (st[i]), sname (st[j]), rc);
            }
        }
    }
    ok (bad == 0, "%s: illegal transitions give EINVAL, state kept%s", tname[ty], what);

    /* to RESET and ERR from anywhere: with no attribute only */
    bad = 0;
    what[0] = 0;
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 2; k++) {
            enum ibv_qp_state to = k ? IBV_QPS_ERR : IBV_QPS_RESET;
            struct ibv_qp_attr a;

            drive (qp, ty, st[i]);
            fill (qp, &a, st[i], to);
            rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | A (PKEY_INDEX));
            if (rc != EINVAL || sv_state (qp) != (int)st[i])
                bad++;
            rc = ibv_modify_qp (qp, &a, IBV_QP_STATE);
            if (rc != 0 || sv_state (qp) != (int)to) {
                bad++;
                snprintf (what + strlen (what), sizeof (what) - strlen (what), " %s->%s:%d",
                          sname (st[i]), sname (to), rc);
            }
        }
    }
    ok (bad == 0, "%s: any state -> RESET/ERR takes no attribute%s", tname[ty], what);

    /* CUR_STATE must name the real state; only RTS/SQD may name it */
    {
        struct ibv_qp_attr a;

        drive (qp, ty, IBV_QPS_RTS);
        fill (qp, &a, IBV_QPS_SQD, IBV_QPS_RTS);
        rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | A (CUR_STATE));
        ok (rc == EINVAL,
            "%s RTS->RTS naming CUR_STATE=SQD gives "
            "EINVAL (%d)",
            tname[ty], rc);
        drive (qp, ty, IBV_QPS_RTR);
        fill (qp, &a, IBV_QPS_RTR, IBV_QPS_RTS);
        rc = ibv_modify_qp (
            qp, &a, IBV_QP_STATE | A (CUR_STATE) | find (IBV_QPS_RTR, IBV_QPS_RTS)->req[ty]);
        ok (rc == EINVAL && sv_state (qp) == IBV_QPS_RTR,
            "%s RTR->RTS with CUR_STATE gives EINVAL (%d)", tname[ty], rc);
    }
    /* a mask without IBV_QP_STATE modifies in place */
    {
        struct ibv_qp_attr a;

        drive (qp, ty, IBV_QPS_RTR);
        fill (qp, &a, IBV_QPS_RTR, IBV_QPS_RTR);
        rc = ibv_modify_qp (qp, &a, A (PKEY_INDEX));
        ok (rc == EINVAL && sv_state (qp) == IBV_QPS_RTR,
            "%s RTR->RTR (no IBV_QP_STATE) gives EINVAL (%d)", tname[ty], rc);
    }
}

/* values a driver stores are what ibv_query_qp answers */
static void check_query (int ty)
{
    struct ibv_qp_init_attr ia, qi;
    struct ibv_qp_attr a, q;
    struct ibv_qp *qp;
    int rc,
        mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS
        | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY
        | IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_DEST_QPN | IBV_QP_CAP;

    memset (&ia, 0, sizeof (ia));
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = qpt[ty];
    ia.sq_sig_all = 1;
    ia.cap.max_send_wr = 33;
    ia.cap.max_recv_wr = 17;
    ia.cap.max_send_sge = 3;
    ia.cap.max_recv_sge = 2;
    ia.cap.max_inline_data = 100;
    ia.qp_context = &dev;
    qp = ibv_create_qp (dev.pd, &ia);
    if (!qp)
        BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
    ok (ia.cap.max_send_wr >= 33 && ia.cap.max_recv_wr >= 17 && ia.cap.max_send_sge >= 3
            && ia.cap.max_recv_sge >= 2 && ia.cap.max_inline_data >= 100,
        "%s create_qp returns caps at least those asked (%u %u %u %u %u)", tname[ty],
        ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge, ia.cap.max_recv_sge,
        ia.cap.max_inline_data);
    drive (qp, ty, IBV_QPS_RTS);
    fill (qp, &a, IBV_QPS_RTS, IBV_QPS_RTS);
    a.min_rnr_timer = 17;
    a.qkey = 0x7777;
    a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
    rc = ibv_modify_qp (qp, &a,
                        IBV_QP_STATE
                            | (ty == RC       ? A (MIN_RNR_TIMER) | A (ACCESS_FLAGS)
                                   : ty == UC ? A (ACCESS_FLAGS)
                                              : A (QKEY)));
    ok (rc == 0, "%s RTS->RTS changes attributes (%s)", tname[ty], strerror (rc));
    memset (&q, 0xa5, sizeof (q));
    rc = ibv_query_qp (qp, &q, mask, &qi);
    fill (qp, &a, IBV_QPS_RTS, IBV_QPS_RTS);
    ok (rc == 0 && q.qp_state == IBV_QPS_RTS && q.port_num == 1 && q.pkey_index == 0,
        "%s query_qp: state RTS, port 1, pkey 0 "
        "(%d %s %u %u)",
        tname[ty], rc, sname (q.qp_state), q.port_num, q.pkey_index);
    if (ty == UD) {
        ok (q.qkey == 0x7777 && q.sq_psn == a.sq_psn, "UD query_qp: qkey 0x%x sq_psn 0x%x", q.qkey,
            q.sq_psn);
    } else {
        ok (q.dest_qp_num == qp->qp_num && q.rq_psn == a.rq_psn && q.sq_psn == a.sq_psn
                && q.path_mtu == a.path_mtu && q.ah_attr.dlid == dev.lid
                && q.qp_access_flags == IBV_ACCESS_REMOTE_READ,
            "%s query_qp: dest_qpn, PSNs, MTU, dlid, access flags as set", tname[ty]);
    }
    if (ty == RC)
        ok (q.timeout == a.timeout && q.retry_cnt == a.retry_cnt && q.rnr_retry == a.rnr_retry
                && q.min_rnr_timer == 17 && q.max_rd_atomic == a.max_rd_atomic
                && q.max_dest_rd_atomic == a.max_dest_rd_atomic,
            "RC query_qp: timeout %u retry %u rnr_retry %u "
            "min_rnr_timer %u rd_atomic %u/%u",
            q.timeout, q.retry_cnt, q.rnr_retry, q.min_rnr_timer, q.max_rd_atomic,
            q.max_dest_rd_atomic);
    ok (qi.qp_type == qpt[ty] && qi.sq_sig_all == 1 && qi.send_cq == cq && qi.recv_cq == cq
            && qi.qp_context == &dev && qi.cap.max_send_wr == ia.cap.max_send_wr
            && qi.cap.max_inline_data == ia.cap.max_inline_data
            && q.cap.max_recv_wr == ia.cap.max_recv_wr,
        "%s query_qp: init attributes (type, sq_sig_all, CQs, context, "
        "caps) as created",
        tname[ty]);
    ibv_destroy_qp (qp);
}

int main (void)
{
    struct ibv_qp_init_attr ia;

    plan (NO_PLAN);
    sv_open (&dev);
    cq = ibv_create_cq (dev.ctx, 64, NULL, NULL, 0);
    if (!cq)
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
    for (int ty = 0; ty < NTYPE; ty++) {
        struct ibv_qp *qp;

        memset (&ia, 0, sizeof (ia));
        ia.send_cq = ia.recv_cq = cq;
        ia.qp_type = qpt[ty];
        ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        qp = ibv_create_qp (dev.pd, &ia);
        if (!qp)
            BAIL_OUT ("%s ibv_create_qp: %s", tname[ty], strerror (errno));
        for (int i = 0; i < NTRANS; i++)
            check_trans (qp, ty, &table[i]);
        check_illegal (qp, ty);
        ibv_destroy_qp (qp);
        check_query (ty);
    }
    ibv_destroy_cq (cq);
    sv_close (&dev);
    done_testing ();
    return exit_status ();
}
