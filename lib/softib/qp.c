/*
 * qp.c - queue pairs: creation, the IB state machine with the attribute
 * masks an HCA requires per transition, query, destroy, error handling.
 *
 * A QP's number is slot << 12 | index: the slot names this context's TCP
 * endpoint, so a peer needs nothing but (LID or GID, QPN) to reach it.
 * Moving to RTS starts the requester connection; moving to RTR lets a
 * parked incoming connection deliver.  Moving to ERROR flushes every
 * outstanding WQE with IBV_WC_WR_FLUSH_ERR and drops the connections (the
 * peer sees what an IB peer would: its next request is not answered).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "softib.h"

uint64_t sib_now_ns (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* IB spec table of the RNR NAK timer field, in microseconds */
uint64_t sib_rnr_ns (uint8_t t)
{
    static const uint32_t us[32] = { 655360, 10,    20,    30,     40,     60,     80,     120,
                                     160,    240,   320,   480,    640,    960,    1280,   1920,
                                     2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                     40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520 };

    return (uint64_t)us[t & 31] * 1000;
}

struct sib_qp *sib_qp_lookup (struct sib_ctx *ctx, uint32_t qpn)
{
    struct sib_qp *qp;

    if (((qpn >> SIB_QP_IDX_BITS) & 0xfff) != ctx->slot)
        return NULL;
    pthread_mutex_lock (&ctx->lock);
    qp = ctx->qps[qpn & (SIB_MAX_QP - 1)];
    pthread_mutex_unlock (&ctx->lock);
    return qp;
}

/* ---- errors and flushing (qp->lock held) ---- */

void sib_qp_flush (struct sib_qp *qp)
{
    struct sib_conn *c = qp->resp;
    struct sib_rwqe r;

    /* a receive WQE a half-arrived message already took completes
	 * first (it was posted before those still queued), and no more of
	 * that message lands in its buffer afterwards */
    if (c && c->have_rwqe) {
        struct ibv_wc wc;

        memset (&wc, 0, sizeof (wc));
        wc.wr_id = c->rwqe.wr_id;
        wc.status = IBV_WC_WR_FLUSH_ERR;
        wc.opcode = IBV_WC_RECV;
        wc.qp_num = qp->qpx.qp_base.qp_num;
        sib_cq_push (qp->rcq, &wc, false);
        c->have_rwqe = false;
        c->rdiscard += c->rleft;
        c->rleft = 0;
        c->riovcnt = 0;
        c->rstatus = IBV_WC_GENERAL_ERR;
    }

    while (qp->sq_done != qp->sq_head) {
        struct sib_swqe *w = &qp->sq[qp->sq_done & (qp->sq_cap - 1)];

        sib_send_complete (qp, w, IBV_WC_WR_FLUSH_ERR);
    }
    qp->sq_tx = qp->sq_head;
    qp->tx_off = 0;
    while (sib_rq_pop (&qp->rq, &r)) {
        struct ibv_wc wc;

        memset (&wc, 0, sizeof (wc));
        wc.wr_id = r.wr_id;
        wc.status = IBV_WC_WR_FLUSH_ERR;
        wc.opcode = IBV_WC_RECV;
        wc.qp_num = qp->qpx.qp_base.qp_num;
        sib_cq_push (qp->rcq, &wc, false);
    }
}

void sib_qp_error (struct sib_qp *qp, const char *why)
{
    if (qp->state == IBV_QPS_ERR)
        return;
    if (why)
        sib_log ("QP 0x%06x -> ERROR: %s", qp->qpx.qp_base.qp_num, why);
    qp->state = IBV_QPS_ERR;
    qp->qpx.qp_base.state = IBV_QPS_ERR;
    qp->rnr_until = 0;
    qp->gone_at = 0;
    sib_qp_flush (qp);
    /* IB: a QP on an SRQ tells when its last WQE is done, so the
	 * application knows when destroying it loses nothing */
    if (qp->srq)
        sib_async_event (qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, qp);
    qp->close_conns = true;
    sib_progress_kick (qp->ctx);
}

/* ---- creation ---- */

static int check_caps (struct ibv_qp_cap *cap)
{
    if (cap->max_send_wr > SIB_MAX_WR || cap->max_recv_wr > SIB_MAX_WR
        || cap->max_send_sge > SIB_MAX_SGE || cap->max_recv_sge > SIB_MAX_SGE
        || cap->max_inline_data > SIB_MAX_INLINE)
        return -1;
    return 0;
}

static const uint64_t sib_send_ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

static struct ibv_qp *qp_create (struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
    struct sib_ctx *ctx = sib_ctx_of (c);
    struct sib_qp *qp;
    uint32_t idx, i, cap = 1;

    if (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
        errno = EOPNOTSUPP; /* XRC, RSS, TSO, ... */
        return NULL;
    }
    if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
        errno = EOPNOTSUPP; /* XRC, DC, raw packet */
        return NULL;
    }
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || !a->send_cq || (!a->recv_cq && !a->srq)
        || check_caps (&a->cap) < 0) {
        errno = EINVAL;
        return NULL;
    }
    if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
        if (a->send_ops_flags & ~sib_send_ops) {
            errno = EOPNOTSUPP; /* MW bind, TSO, ... */
            return NULL;
        }
    }
    qp = calloc (1, sizeof (*qp));
    if (!qp)
        goto nomem;
    while (cap < a->cap.max_send_wr)
        cap <<= 1;
    qp->sq_cap = cap;
    /* cache-line aligned, so that a WQE's lines are its own */
    qp->sq = aligned_alloc (64, cap * sizeof (*qp->sq));
    if (!qp->sq)
        goto nomem;
    memset (qp->sq, 0, cap * sizeof (*qp->sq));
    if (a->cap.max_inline_data) {
        qp->inl_pool = malloc ((size_t)cap * a->cap.max_inline_data);
        if (!qp->inl_pool)
            goto nomem;
        for (i = 0; i < cap; i++)
            qp->sq[i].inl = qp->inl_pool + (size_t)i * a->cap.max_inline_data;
    }
    if (!a->srq
        && sib_rq_init (&qp->rq, a->cap.max_recv_wr ? a->cap.max_recv_wr : 1, a->cap.max_recv_sge)
            < 0)
        goto error;
    qp->ctx = ctx;
    qp->scq = (struct sib_cq *)a->send_cq;
    qp->rcq = (struct sib_cq *)(a->recv_cq ? a->recv_cq : a->send_cq);
    qp->srq = (struct sib_srq *)a->srq;
    qp->sq_sig_all = a->sq_sig_all != 0;
    qp->cap = a->cap;
    qp->cap.max_send_wr = cap;
    if (!a->srq)
        qp->cap.max_recv_wr = qp->rq.cap;
    if (!qp->cap.max_send_sge)
        qp->cap.max_send_sge = 1;
    sib_lock_init (&qp->lock, ctx->lock_bias);
    qp->state = IBV_QPS_RESET;

    pthread_mutex_lock (&ctx->lock);
    for (i = 0; i < SIB_MAX_QP - 2; i++) {
        idx = ctx->qp_next;
        ctx->qp_next = ctx->qp_next + 1 >= SIB_MAX_QP ? 2 : ctx->qp_next + 1;
        if (!ctx->qps[idx])
            break;
    }
    if (i == SIB_MAX_QP - 2) {
        pthread_mutex_unlock (&ctx->lock);
        errno = ENOMEM;
        goto error;
    }
    ctx->qps[idx] = qp;
    pthread_mutex_unlock (&ctx->lock);
    qp->idx = idx;

    if (sib_cq_attach (qp->scq, qp) < 0
        || (qp->rcq != qp->scq && sib_cq_attach (qp->rcq, qp) < 0)) {
        sib_cq_detach (qp->scq, qp);
        pthread_mutex_lock (&ctx->lock);
        ctx->qps[idx] = NULL;
        pthread_mutex_unlock (&ctx->lock);
        errno = ENOMEM;
        goto error;
    }
    qp->qpx.qp_base.context = c;
    qp->qpx.qp_base.qp_context = a->qp_context;
    qp->qpx.qp_base.pd = a->pd;
    qp->qpx.qp_base.send_cq = a->send_cq;
    qp->qpx.qp_base.recv_cq = a->recv_cq;
    qp->qpx.qp_base.srq = a->srq;
    qp->qpx.qp_base.qp_num = ((uint32_t)ctx->slot << SIB_QP_IDX_BITS) | idx;
    qp->qpx.qp_base.state = IBV_QPS_RESET;
    qp->qpx.qp_base.qp_type = a->qp_type;
    pthread_mutex_init (&qp->qpx.qp_base.mutex, NULL);
    pthread_cond_init (&qp->qpx.qp_base.cond, NULL);
    sib_qp_ex_init (qp);
    a->cap = qp->cap;
    __atomic_add_fetch (&qp->scq->users, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch (&qp->rcq->users, 1, __ATOMIC_ACQ_REL);
    if (qp->srq)
        __atomic_add_fetch (&qp->srq->users, 1, __ATOMIC_ACQ_REL);
    return &qp->qpx.qp_base;
nomem:
    errno = ENOMEM;
error:
    if (qp) {
        int err = errno;

        free (qp->sq);
        free (qp->inl_pool);
        free (qp->rq.ring);
        free (qp);
        errno = err;
    }
    return NULL;
}

SIB_EXPORT struct ibv_qp *ibv_create_qp (struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    struct ibv_qp_init_attr_ex ex;
    struct ibv_qp *qp;

    if (!pd || !a) {
        errno = EINVAL;
        return NULL;
    }
    memset (&ex, 0, sizeof (ex));
    ex.qp_context = a->qp_context;
    ex.send_cq = a->send_cq;
    ex.recv_cq = a->recv_cq;
    ex.srq = a->srq;
    ex.cap = a->cap;
    ex.qp_type = a->qp_type;
    ex.sq_sig_all = a->sq_sig_all;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    qp = qp_create (pd->context, &ex);
    if (qp)
        a->cap = ex.cap;
    return qp;
}

static struct ibv_qp *sib_create_qp_ex (struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
    return qp_create (c, a);
}

SIB_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex (struct ibv_qp *qp)
{
    return (struct ibv_qp_ex *)qp;
}

/* ---- modify: per-transition attribute masks ---- */

enum { T_RC, T_UC, T_UD };

struct sib_trans {
    int req[3], opt[3];
};

#define M(x) IBV_QP_##x
static const struct sib_trans *trans_of (enum ibv_qp_state cur, enum ibv_qp_state next)
{
    static const struct sib_trans none = { { 0, 0, 0 }, { 0, 0, 0 } };
    static const struct sib_trans reset_init = { { M (PKEY_INDEX) | M (PORT) | M (ACCESS_FLAGS),
                                                   M (PKEY_INDEX) | M (PORT) | M (ACCESS_FLAGS),
                                                   M (PKEY_INDEX) | M (PORT) | M (QKEY) },
                                                 { 0, 0, 0 } };
    static const struct sib_trans init_init = { { 0, 0, 0 },
                                                { M (PKEY_INDEX) | M (PORT) | M (ACCESS_FLAGS),
                                                  M (PKEY_INDEX) | M (PORT) | M (ACCESS_FLAGS),
                                                  M (PKEY_INDEX) | M (PORT) | M (QKEY) } };
    static const struct sib_trans init_rtr = {
        { M (AV) | M (PATH_MTU) | M (DEST_QPN) | M (RQ_PSN) | M (MAX_DEST_RD_ATOMIC)
              | M (MIN_RNR_TIMER),
          M (AV) | M (PATH_MTU) | M (DEST_QPN) | M (RQ_PSN), 0 },
        { M (ALT_PATH) | M (ACCESS_FLAGS) | M (PKEY_INDEX),
          M (ALT_PATH) | M (ACCESS_FLAGS) | M (PKEY_INDEX), M (PKEY_INDEX) | M (QKEY) }
    };
    static const struct sib_trans rtr_rts = {
        { M (SQ_PSN) | M (TIMEOUT) | M (RETRY_CNT) | M (RNR_RETRY) | M (MAX_QP_RD_ATOMIC),
          M (SQ_PSN), M (SQ_PSN) },
        { M (CUR_STATE) | M (ALT_PATH) | M (ACCESS_FLAGS) | M (MIN_RNR_TIMER) | M (PATH_MIG_STATE),
          M (CUR_STATE) | M (ALT_PATH) | M (ACCESS_FLAGS) | M (PATH_MIG_STATE),
          M (CUR_STATE) | M (QKEY) }
    };
    static const struct sib_trans rts_rts = {
        { 0, 0, 0 },
        { M (CUR_STATE) | M (ACCESS_FLAGS) | M (ALT_PATH) | M (PATH_MIG_STATE) | M (MIN_RNR_TIMER),
          M (CUR_STATE) | M (ACCESS_FLAGS) | M (ALT_PATH) | M (PATH_MIG_STATE),
          M (CUR_STATE) | M (QKEY) }
    };
    static const struct sib_trans rts_sqd = {
        { 0, 0, 0 }, { M (EN_SQD_ASYNC_NOTIFY), M (EN_SQD_ASYNC_NOTIFY), M (EN_SQD_ASYNC_NOTIFY) }
    };
    static const struct sib_trans sqd_sqd = {
        { 0, 0, 0 },
        { M (PORT) | M (AV) | M (TIMEOUT) | M (RETRY_CNT) | M (RNR_RETRY) | M (MAX_QP_RD_ATOMIC)
              | M (MAX_DEST_RD_ATOMIC) | M (ALT_PATH) | M (ACCESS_FLAGS) | M (PKEY_INDEX)
              | M (MIN_RNR_TIMER) | M (PATH_MIG_STATE),
          M (AV) | M (ALT_PATH) | M (ACCESS_FLAGS) | M (PKEY_INDEX) | M (PATH_MIG_STATE),
          M (PKEY_INDEX) | M (QKEY) }
    };
    static const struct sib_trans sqe_rts = {
        { 0, 0, 0 }, { 0, M (CUR_STATE) | M (ACCESS_FLAGS), M (CUR_STATE) | M (QKEY) }
    };

    if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
        return &none;
    switch (cur) {
    case IBV_QPS_RESET:
        return next == IBV_QPS_INIT ? &reset_init : NULL;
    case IBV_QPS_INIT:
        if (next == IBV_QPS_INIT)
            return &init_init;
        return next == IBV_QPS_RTR ? &init_rtr : NULL;
    case IBV_QPS_RTR:
        return next == IBV_QPS_RTS ? &rtr_rts : NULL;
    case IBV_QPS_RTS:
        if (next == IBV_QPS_RTS)
            return &rts_rts;
        return next == IBV_QPS_SQD ? &rts_sqd : NULL;
    case IBV_QPS_SQD:
        if (next == IBV_QPS_RTS)
            return &rts_rts;
        return next == IBV_QPS_SQD ? &sqd_sqd : NULL;
    case IBV_QPS_SQE:
        return next == IBV_QPS_RTS ? &sqe_rts : NULL;
    default:
        return NULL;
    }
}
#undef M

/* the peer host an address vector names (checked by check_values) */
static uint32_t av_ip (const struct sib_ctx *ctx, const struct ibv_ah_attr *av)
{
    uint32_t ip = 0;

    if (av->is_global)
        sib_gid_to_ip (&av->grh.dgid, &ip);
    else
        ip = sib_lid_to_ip (ctx, av->dlid);
    return ip;
}

static int check_values (struct sib_qp *qp, struct ibv_qp_attr *a, int mask)
{
    if ((mask & IBV_QP_PORT) && a->port_num != 1)
        return -1;
    if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
        return -1;
    if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
        return -1;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SIB_MAX_RD_ATOM)
        return -1;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SIB_MAX_RD_ATOM)
        return -1;
    if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
        return -1;
    if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
        return -1;
    if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
        return -1;
    if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
        return -1;
    if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
        return -1;
    if ((mask & IBV_QP_AV)) {
        if (a->ah_attr.port_num && a->ah_attr.port_num != 1)
            return -1;
        if (a->ah_attr.is_global) {
            uint32_t ip;

            if (a->ah_attr.grh.sgid_index != 0 || !sib_gid_to_ip (&a->ah_attr.grh.dgid, &ip))
                return -1;
        } else if (a->ah_attr.dlid == 0 || a->ah_attr.dlid == 0xffff) {
            return -1;
        }
    }
    if ((mask & IBV_QP_ACCESS_FLAGS)
        && (a->qp_access_flags
            & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
                | IBV_ACCESS_REMOTE_ATOMIC)))
        return -1;
    if ((mask & IBV_QP_ALT_PATH) || (mask & IBV_QP_RATE_LIMIT))
        return -2; /* APM and rate limiting: not emulated */
    return 0;
}

static void apply_attrs (struct sib_qp *qp, struct ibv_qp_attr *a, int mask)
{
    struct ibv_qp_attr *s = &qp->attr;

#define SET(m, f)                                                                                  \
    do {                                                                                           \
        if (mask & (m))                                                                            \
            s->f = a->f;                                                                           \
    } while (0)
    SET (IBV_QP_PKEY_INDEX, pkey_index);
    SET (IBV_QP_PORT, port_num);
    SET (IBV_QP_ACCESS_FLAGS, qp_access_flags);
    SET (IBV_QP_QKEY, qkey);
    SET (IBV_QP_AV, ah_attr);
    SET (IBV_QP_PATH_MTU, path_mtu);
    SET (IBV_QP_DEST_QPN, dest_qp_num);
    SET (IBV_QP_RQ_PSN, rq_psn);
    SET (IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
    SET (IBV_QP_MIN_RNR_TIMER, min_rnr_timer);
    SET (IBV_QP_SQ_PSN, sq_psn);
    SET (IBV_QP_TIMEOUT, timeout);
    SET (IBV_QP_RETRY_CNT, retry_cnt);
    SET (IBV_QP_RNR_RETRY, rnr_retry);
    SET (IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
    SET (IBV_QP_PATH_MIG_STATE, path_mig_state);
    SET (IBV_QP_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
#undef SET
}

static void qp_reset (struct sib_qp *qp)
{
    qp->sq_head = qp->sq_tx = qp->sq_done = 0;
    qp->tx_off = 0;
    qp->next_seq = 0;
    qp->rnr_until = 0;
    qp->gone_why = NULL;
    qp->gone_at = 0;
    qp->rq.head = qp->rq.tail = 0;
    qp->resp_expect = qp->resp_acked = 0;
    qp->resp_rnr_drop = false;
    memset (&qp->attr, 0, sizeof (qp->attr));
}

SIB_EXPORT int ibv_modify_qp (struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
    struct sib_qp *qp = (struct sib_qp *)ibqp;
    const struct sib_trans *t;
    enum ibv_qp_state cur, next;
    int type, req, opt, rc;

    if (!ibqp || !a)
        return EINVAL;
    type = ibqp->qp_type == IBV_QPT_RC ? T_RC : ibqp->qp_type == IBV_QPT_UC ? T_UC : T_UD;
    sib_lock (&qp->lock);
    cur = qp->state;
    /* the tables list CUR_STATE for RTR->RTS too, but the verbs core
	 * takes it only from RTS, SQD and SQE (and it must be true) */
    if ((mask & IBV_QP_CUR_STATE)
        && ((cur != IBV_QPS_RTS && cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
            || (a->cur_qp_state != cur
                && !(cur == IBV_QPS_SQE && a->cur_qp_state == IBV_QPS_RTS)))) {
        sib_unlock (&qp->lock);
        return EINVAL;
    }
    next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
    t = trans_of (cur, next);
    if (!t) {
        sib_unlock (&qp->lock);
        return EINVAL; /* no such transition from this state */
    }
    req = t->req[type];
    opt = t->opt[type];
    if ((mask & req) != req || (mask & ~(req | opt | IBV_QP_STATE))) {
        sib_unlock (&qp->lock);
        return EINVAL; /* attribute mask wrong for the transition */
    }
    rc = check_values (qp, a, mask);
    if (!rc && cur == IBV_QPS_SQD && next == IBV_QPS_SQD && (mask & IBV_QP_AV) && type != T_UD
        && av_ip (qp->ctx, &a->ah_attr) != qp->peer_ip)
        rc = -2; /* a new path would need a new connection */
    if (rc) {
        sib_unlock (&qp->lock);
        return rc == -2 ? EOPNOTSUPP : EINVAL;
    }
    if (next == IBV_QPS_RESET) {
        sib_unlock (&qp->lock);
        /* connections belong to the progress thread: it drops them */
        sib_progress_cmd (qp->ctx, SIB_CMD_RESET_QP, qp);
        sib_lock (&qp->lock);
        qp_reset (qp);
        qp->state = IBV_QPS_RESET;
        ibqp->state = IBV_QPS_RESET;
        sib_unlock (&qp->lock);
        return 0;
    }
    if (next == IBV_QPS_ERR) {
        sib_qp_error (qp, NULL);
        sib_unlock (&qp->lock);
        return 0;
    }
    apply_attrs (qp, a, mask);
    if (type != T_UD && next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
        qp->peer_ip = av_ip (qp->ctx, &qp->attr.ah_attr);
        qp->peer_port = sib_port_of_qpn (qp->ctx, qp->attr.dest_qp_num);
        qp->resp_expect = 0;
        qp->state = next;
        if (qp->resp && qp->resp->parked)
            sib_conn_resume (qp->resp);
    }
    if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
        qp->rnr_left = qp->attr.rnr_retry;
        qp->next_seq = 0;
        if (type != T_UD && !qp->req) {
            struct sib_conn *c = sib_conn_new (qp->ctx, -1, SIB_CONN_RC_REQ);

            if (!c) {
                sib_unlock (&qp->lock);
                return ENOMEM;
            }
            /* owner first: events may fire as soon as it connects */
            c->qp = qp;
            c->pollable = true; /* always under qp->lock */
            qp->req = c;
            if (sib_conn_connect (c, qp->peer_ip, qp->peer_port) < 0) {
                rc = errno;
                sib_conn_kill (c, "connect failed");
                sib_unlock (&qp->lock);
                return rc ? rc : ENOMEM;
            }
        }
    }
    if (next == IBV_QPS_SQD && (qp->attr.en_sqd_async_notify))
        sib_async_event (qp->ctx, IBV_EVENT_SQ_DRAINED, qp);
    qp->state = next;
    ibqp->state = next;
    if (next == IBV_QPS_RTS)
        sib_tx_progress (qp);
    sib_unlock (&qp->lock);
    return 0;
}

SIB_EXPORT int ibv_query_qp (struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
                             struct ibv_qp_init_attr *init)
{
    struct sib_qp *qp = (struct sib_qp *)ibqp;

    if (!ibqp || !a || !init)
        return EINVAL;
    sib_lock (&qp->lock);
    *a = qp->attr;
    a->qp_state = qp->state;
    a->cur_qp_state = qp->state;
    a->cap = qp->cap;
    a->sq_draining = 0;
    a->sq_psn = (qp->attr.sq_psn + qp->next_seq) & 0xffffff;
    a->rq_psn = (qp->attr.rq_psn + qp->resp_expect) & 0xffffff;
    memset (init, 0, sizeof (*init));
    init->qp_context = ibqp->qp_context;
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->srq = ibqp->srq;
    init->cap = qp->cap;
    init->qp_type = ibqp->qp_type;
    init->sq_sig_all = qp->sq_sig_all;
    sib_unlock (&qp->lock);
    return 0;
}

SIB_EXPORT int ibv_query_qp_data_in_order (struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
    /* TCP places data in order, and the data is visible in order */
    return flags ? 0 : 1;
}

SIB_EXPORT int ibv_destroy_qp (struct ibv_qp *ibqp)
{
    struct sib_qp *qp = (struct sib_qp *)ibqp;

    if (!ibqp)
        return EINVAL;
    /* the progress thread unlinks the QP and drops its connections, so
	 * no event for it is in flight when we free it */
    /* no poller may reach it, then no event */
    sib_cq_detach (qp->scq, qp);
    if (qp->rcq != qp->scq)
        sib_cq_detach (qp->rcq, qp);
    sib_progress_cmd (qp->ctx, SIB_CMD_DESTROY_QP, qp);
    __atomic_sub_fetch (&qp->scq->users, 1, __ATOMIC_ACQ_REL);
    __atomic_sub_fetch (&qp->rcq->users, 1, __ATOMIC_ACQ_REL);
    if (qp->srq)
        __atomic_sub_fetch (&qp->srq->users, 1, __ATOMIC_ACQ_REL);
    free (qp->sq);
    free (qp->inl_pool);
    free (qp->rq.ring);
    pthread_mutex_destroy (&ibqp->mutex);
    pthread_cond_destroy (&ibqp->cond);
    free (qp);
    return 0;
}

/* ---- refused features ---- */

static struct ibv_qp *sib_open_qp (struct ibv_context *c, struct ibv_qp_open_attr *a)
{
    errno = EOPNOTSUPP; /* XRC */
    return NULL;
}

static struct ibv_flow *sib_create_flow (struct ibv_qp *qp, struct ibv_flow_attr *a)
{
    errno = EOPNOTSUPP; /* flow steering */
    return NULL;
}

static int sib_destroy_flow (struct ibv_flow *f)
{
    return EOPNOTSUPP;
}

static struct ibv_xrcd *sib_open_xrcd (struct ibv_context *c, struct ibv_xrcd_init_attr *a)
{
    errno = EOPNOTSUPP;
    return NULL;
}

static struct ibv_dm *sib_alloc_dm (struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
    errno = EOPNOTSUPP; /* device memory */
    return NULL;
}

static struct ibv_mw *sib_alloc_mw (struct ibv_pd *pd, enum ibv_mw_type t)
{
    errno = EOPNOTSUPP; /* memory windows */
    return NULL;
}

static struct ibv_wq *sib_create_wq (struct ibv_context *c, struct ibv_wq_init_attr *a)
{
    errno = EOPNOTSUPP;
    return NULL;
}

static struct ibv_td *sib_alloc_td (struct ibv_context *c, struct ibv_td_init_attr *a)
{
    errno = EOPNOTSUPP;
    return NULL;
}

static struct ibv_pd *sib_alloc_parent_domain (struct ibv_context *c,
                                               struct ibv_parent_domain_init_attr *a)
{
    errno = EOPNOTSUPP;
    return NULL;
}

static struct ibv_counters *sib_create_counters (struct ibv_context *c,
                                                 struct ibv_counters_init_attr *a)
{
    errno = EOPNOTSUPP;
    return NULL;
}

static int sib_query_rt_values (struct ibv_context *c, struct ibv_values_ex *v)
{
    return EOPNOTSUPP;
}

SIB_HIDDEN void sib_cq_ops_init (struct sib_ctx *ctx);
SIB_HIDDEN void sib_srq_ops_init (struct sib_ctx *ctx);
SIB_HIDDEN void sib_ctx_ops_init (struct sib_ctx *ctx);

void sib_ctx_ops_init (struct sib_ctx *ctx)
{
    struct verbs_context *v = &ctx->vctx;

    v->context.ops.post_send = sib_post_send;
    v->context.ops.post_recv = sib_post_recv;
    v->context.ops.alloc_mw = sib_alloc_mw;
    v->create_qp_ex = sib_create_qp_ex;
    v->open_qp = sib_open_qp;
    v->ibv_create_flow = sib_create_flow;
    v->ibv_destroy_flow = sib_destroy_flow;
    v->open_xrcd = sib_open_xrcd;
    v->alloc_dm = sib_alloc_dm;
    v->create_wq = sib_create_wq;
    v->alloc_td = sib_alloc_td;
    v->alloc_parent_domain = sib_alloc_parent_domain;
    v->create_counters = sib_create_counters;
    v->query_rt_values = sib_query_rt_values;
    sib_cq_ops_init (ctx);
    sib_srq_ops_init (ctx);
}

/* default versions; IBVERBS_1.0 ones are in misc.c */
SIB_V11 (ibv_create_qp);
SIB_V11 (ibv_modify_qp);
SIB_V11 (ibv_query_qp);
SIB_V11 (ibv_destroy_qp);
