/*
 * post.c - the send and receive queues as the application sees them:
 * ibv_post_send / ibv_post_recv (through context->ops), and the checks
 * every posted work request passes, whichever API built it (opcode for
 * the QP type, SGE count and lengths, inline limits, local keys and
 * rights).
 *
 * A bad lkey is not a post error but a completion error, as on an HCA:
 * the WQE is marked and fails in order when it reaches the head of the
 * send queue (tx.c).  Transmission is tx.c's, the ibv_wr_* builder
 * API wr.c's.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "softib.h"

uint8_t sib_wr_op (enum ibv_wr_opcode op, enum ibv_qp_type t, int *err)
{
    *err = 0;
    switch (op) {
    case IBV_WR_SEND:
        return t == IBV_QPT_UD ? SIB_OP_UD_SEND : SIB_OP_SEND;
    case IBV_WR_SEND_WITH_IMM:
        return t == IBV_QPT_UD ? SIB_OP_UD_SEND : SIB_OP_SEND_IMM;
    case IBV_WR_RDMA_WRITE:
        if (t != IBV_QPT_UD)
            return SIB_OP_WRITE;
        break;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        if (t != IBV_QPT_UD)
            return SIB_OP_WRITE_IMM;
        break;
    case IBV_WR_RDMA_READ:
        if (t == IBV_QPT_RC)
            return SIB_OP_READ;
        break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        if (t == IBV_QPT_RC)
            return SIB_OP_CMP_SWP;
        break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        if (t == IBV_QPT_RC)
            return SIB_OP_FETCH_ADD;
        break;
    case IBV_WR_LOCAL_INV:
    case IBV_WR_BIND_MW:
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_TSO:
    case IBV_WR_DRIVER1:
    case IBV_WR_ATOMIC_WRITE:
        *err = EOPNOTSUPP;
        return 0;
    }
    *err = EINVAL;
    return 0;
}

/* A bad lkey is not a post error but a completion error, as on an HCA:
 * the WQE is marked (hdr.op 0xff, hdr.flags = status) and fails in
 * order.  Inline data is copied now: the caller may reuse its buffer. */
int sib_wqe_prepare (struct sib_qp *qp, struct sib_swqe *w, bool inl, uint32_t *err_status)
{
    bool dst = w->op == SIB_OP_READ || w->op == SIB_OP_CMP_SWP || w->op == SIB_OP_FETCH_ADD;
    uint64_t len = 0;
    uint32_t i;

    *err_status = IBV_WC_SUCCESS;
    if (w->nsge > qp->cap.max_send_sge)
        return EINVAL;
    for (i = 0; i < w->nsge; i++)
        len += w->sge[i].length;
    if (len > SIB_MAX_MSG)
        return EINVAL;
    if (qp->qpx.qp_base.qp_type == IBV_QPT_UD && len > SIB_MTU_BYTES) {
        *err_status = IBV_WC_LOC_LEN_ERR;
        return 0;
    }
    w->len = (uint32_t)len;
    if (w->op == SIB_OP_CMP_SWP || w->op == SIB_OP_FETCH_ADD) {
        if (w->nsge != 1 || len != 8 || (w->raddr & 7))
            return EINVAL;
    }
    if (inl) {
        char *p = (char *)w->inl;

        if (dst || len > qp->cap.max_inline_data)
            return EINVAL;
        for (i = 0; i < w->nsge; i++) {
            memcpy (p, (void *)(uintptr_t)w->sge[i].addr, w->sge[i].length);
            p += w->sge[i].length;
        }
        w->nsge = 0;
        return 0;
    }
    for (i = 0; i < w->nsge; i++) {
        enum ibv_wc_status st;
        void *p;

        if (!w->sge[i].length)
            continue;
        p = sib_mr_check (qp, w->sge[i].lkey, w->sge[i].addr, w->sge[i].length,
                          dst ? IBV_ACCESS_LOCAL_WRITE : 0, IBV_WC_LOC_PROT_ERR, &st);
        if (!p) {
            *err_status = st;
            return 0;
        }
        w->sge[i].addr = (uintptr_t)p;
    }
    return 0;
}

/* ---- ibv_post_send ---- */

static int post_one (struct sib_qp *qp, struct ibv_send_wr *wr)
{
    struct sib_swqe *w;
    uint32_t st;
    int err;
    uint8_t op;

    if (qp->sq_head - qp->sq_done >= qp->sq_cap)
        return ENOMEM;
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > SIB_MAX_SGE)
        return EINVAL;
    op = sib_wr_op (wr->opcode, qp->qpx.qp_base.qp_type, &err);
    if (err)
        return err;
    w = &qp->sq[qp->sq_head & (qp->sq_cap - 1)];
    w->wr_id = wr->wr_id;
    w->op = op;
    w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    w->solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
    w->sent = 0;
    w->imm = (wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
        ? wr->imm_data
        : 0;
    w->nsge = (uint32_t)wr->num_sge;
    if (wr->num_sge)
        sib_sge_copy (w->sge, wr->sg_list, (size_t)wr->num_sge);
    w->raddr = 0;
    w->rkey = 0;
    w->cmp = w->swp = 0;
    switch (op) {
    case SIB_OP_WRITE:
    case SIB_OP_WRITE_IMM:
    case SIB_OP_READ:
        w->raddr = wr->wr.rdma.remote_addr;
        w->rkey = wr->wr.rdma.rkey;
        break;
    case SIB_OP_CMP_SWP:
    case SIB_OP_FETCH_ADD:
        w->raddr = wr->wr.atomic.remote_addr;
        w->rkey = wr->wr.atomic.rkey;
        w->cmp = wr->wr.atomic.compare_add;
        w->swp = wr->wr.atomic.swap;
        break;
    case SIB_OP_UD_SEND: {
        struct sib_ah *ah = (struct sib_ah *)wr->wr.ud.ah;

        if (!ah)
            return EINVAL;
        w->ud_ip = ah->ip;
        w->ud_grh = ah->attr.is_global;
        w->rqpn = wr->wr.ud.remote_qpn;
        w->ud_port = sib_port_of_qpn (qp->ctx, w->rqpn);
        w->qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
        if (wr->opcode == IBV_WR_SEND_WITH_IMM)
            w->imm = wr->imm_data;
        w->cmp = wr->opcode == IBV_WR_SEND_WITH_IMM;
        break;
    }
    }
    err = sib_wqe_prepare (qp, w, (wr->send_flags & IBV_SEND_INLINE) != 0, &st);
    if (err)
        return err;
    w->hdr.op = st == IBV_WC_SUCCESS ? 0 : 0xff;
    w->hdr.flags = (uint8_t)st;
    w->seq = qp->next_seq++;
    qp->sq_head++;
    return 0;
}

/* Called after WQEs were added at sq_head (qp->lock held). */
void sib_post_kick (struct sib_qp *qp)
{
    if (qp->state == IBV_QPS_ERR) {
        sib_qp_flush (qp);
        return;
    }
    if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
        while (qp->sq_done != qp->sq_head) {
            struct sib_swqe *w = &qp->sq[qp->sq_done & (qp->sq_cap - 1)];

            if (w->hdr.op == 0xff)
                sib_send_complete (qp, w, w->hdr.flags);
            else
                sib_send_complete (qp, w,
                                   sib_ud_send (qp, w) < 0 ? IBV_WC_LOC_QP_OP_ERR : IBV_WC_SUCCESS);
        }
        qp->sq_tx = qp->sq_done;
        return;
    }
    sib_tx_progress (qp);
}

bool sib_send_state_ok (struct sib_qp *qp)
{
    return qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD || qp->state == IBV_QPS_SQE
        || qp->state == IBV_QPS_ERR;
}

/*
 * The common post in one step: one SEND (or SEND with immediate) of one
 * sge, not inline, on an RC or UC QP in RTS whose earlier WQEs are all
 * written, to a peer on this host (the rings).  The WQE is queued as
 * post_one queues it, and written into the ring with a tiny or short header
 * (wire.h) at once, without sib_wr_op, sib_wqe_prepare's loops, sib_tx_progress and
 * the 48-byte header.  false with nothing changed when any of that does
 * not hold, or the sge fails its check (post_one marks the error): the
 * general path takes the WR.  qp->lock is held.
 */
static bool post_send_fast (struct sib_qp *qp, const struct ibv_send_wr *wr)
{
    struct sib_conn *c = qp->req;
    struct sib_swqe *w;
    enum ibv_wc_status st;
    uint32_t len = wr->sg_list[0].length;
    uint8_t *p = NULL;
    bool put;

    if (qp->state != IBV_QPS_RTS || qp->qpx.qp_base.qp_type == IBV_QPT_UD || !c || !c->shm
        || c->connecting || c->dead || c->out_armed || c->olen != c->ooff
        || qp->sq_tx != qp->sq_head || qp->tx_off || qp->rnr_until || qp->rnr_rewind
        || qp->sq_head - qp->sq_done >= qp->sq_cap || !qp->cap.max_send_sge || len > SIB_MAX_MSG)
        return false;
    if (len) {
        p = sib_mr_check (qp, wr->sg_list[0].lkey, wr->sg_list[0].addr, len, 0, IBV_WC_LOC_PROT_ERR,
                          &st);
        if (!p)
            return false;
    }
    w = &qp->sq[qp->sq_head & (qp->sq_cap - 1)];
    w->wr_id = wr->wr_id;
    w->op = wr->opcode == IBV_WR_SEND ? SIB_OP_SEND : SIB_OP_SEND_IMM;
    w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    w->solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
    w->sent = 0;
    w->imm = wr->opcode == IBV_WR_SEND ? 0 : wr->imm_data;
    w->nsge = 1;
    w->sge[0].addr = (uintptr_t)p;
    w->sge[0].length = len;
    w->sge[0].lkey = wr->sg_list[0].lkey;
    w->len = len;
    w->raddr = 0;
    w->rkey = 0;
    w->cmp = w->swp = 0;
    w->hdr.op = 0; /* no local error */
    w->seq = qp->next_seq++;
    qp->sq_head++;
    /* wire.h: a tiny header, the LID the receiver's own.  Both ends of a
     * ring have one address (conn.c tries the rings only for a peer at
     * this context's own), so one LID; the test of dlid keeps it so
     * should that ever change (GID-addressed QPs keep the short one). */
    if (w->op == SIB_OP_SEND && len <= UINT16_MAX && qp->attr.ah_attr.dlid == qp->ctx->addr.lid) {
        struct sib_hdr_tiny t = {
            .op = SIB_OP_SEND | SIB_OP_TINY,
            .flags = w->solicited ? SIB_F_SOLICITED : 0,
            .len = htole16 ((uint16_t)len),
            .seq = htole32 (w->seq),
        };

        put = sib_shm_put_small (c, &t, SIB_HDR_TINY, p, len);
    } else {
        /* wire.h: a short header, every field after imm implied 0 */
        struct sib_hdr h;

        h.op = w->op | SIB_OP_SHORT;
        h.flags = (w->solicited ? SIB_F_SOLICITED : 0) | (w->op == SIB_OP_SEND_IMM ? SIB_F_IMM : 0);
        h.lid = htole16 (qp->ctx->addr.lid);
        h.len = htole32 (len);
        h.seq = htole32 (w->seq);
        h.imm = w->imm;
        put = sib_shm_put_small (c, &h, SIB_HDR_SHORT, p, len);
    }
    if (put) {
        w->sent = 1;
        qp->sq_tx++;
    } else {
        sib_tx_progress (qp); /* full ring: queued, the general path goes on */
    }
    return true;
}

int sib_post_send (struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct sib_qp *qp = (struct sib_qp *)ibqp;
    int rc = 0;

    sib_lock_app (&qp->lock);
    if (!wr->next && (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM)
        && wr->num_sge == 1 && !(wr->send_flags & IBV_SEND_INLINE) && post_send_fast (qp, wr)) {
        sib_unlock (&qp->lock);
        return 0;
    }
    if (!sib_send_state_ok (qp)) {
        *bad = wr;
        sib_unlock (&qp->lock);
        return EINVAL; /* sends need RTS (IB spec) */
    }
    for (; wr; wr = wr->next) {
        rc = post_one (qp, wr);
        if (rc) {
            *bad = wr;
            break;
        }
    }
    sib_post_kick (qp);
    sib_unlock (&qp->lock);
    return rc;
}

int sib_post_recv (struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct sib_qp *qp = (struct sib_qp *)ibqp;
    int rc;

    sib_lock_app (&qp->lock);
    if (qp->state == IBV_QPS_RESET || qp->srq) {
        *bad = wr;
        sib_unlock (&qp->lock);
        return EINVAL;
    }
    rc = sib_rq_post (&qp->rq, wr, bad);
    if (qp->state == IBV_QPS_ERR)
        sib_qp_flush (qp);
    sib_unlock (&qp->lock);
    return rc;
}
