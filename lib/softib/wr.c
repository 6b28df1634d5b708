/*
 * wr.c - the ibv_wr_* builder API of ibv_qp_ex (perftest's default).
 *
 * WQEs are built at sq_head between wr_start and wr_complete with the QP
 * locked, validated together at wr_complete by the same checks as
 * ibv_post_send (post.c), and become visible all at once; any error
 * discards the whole batch, as the API requires.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "softib.h"

/* ---- ibv_wr_* API: WQEs are built between wr_start and wr_complete
 * with the QP locked, and become visible all at once. ---- */

static struct sib_qp *qpx_of (struct ibv_qp_ex *q)
{
    return (struct sib_qp *)q;
}

static struct sib_swqe *wr_cur (struct sib_qp *qp)
{
    return &qp->sq[(qp->sq_head - 1) & (qp->sq_cap - 1)];
}

static struct sib_swqe *wr_new (struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
    struct sib_qp *qp = qpx_of (q);
    struct sib_swqe *w;
    int err;

    if (qp->wr_err)
        return NULL;
    if (qp->sq_head - qp->sq_done >= qp->sq_cap) {
        qp->wr_err = true;
        return NULL;
    }
    w = &qp->sq[qp->sq_head & (qp->sq_cap - 1)];
    w->op = sib_wr_op (op, q->qp_base.qp_type, &err);
    if (err) {
        qp->wr_err = true;
        return NULL;
    }
    w->wr_id = q->wr_id;
    w->signaled = qp->sq_sig_all || (q->wr_flags & IBV_SEND_SIGNALED);
    w->solicited = (q->wr_flags & IBV_SEND_SOLICITED) != 0;
    w->sent = 0;
    w->imm = 0;
    w->nsge = 0;
    w->len = 0;
    w->raddr = 0;
    w->rkey = 0;
    w->cmp = w->swp = 0;
    w->hdr.op = 1; /* "not prepared yet" until wr_complete */
    w->hdr.flags = (q->wr_flags & IBV_SEND_INLINE) != 0;
    qp->sq_head++;
    return w;
}

static void wr_send (struct ibv_qp_ex *q)
{
    wr_new (q, IBV_WR_SEND);
}

static void wr_send_imm (struct ibv_qp_ex *q, __be32 imm)
{
    struct sib_swqe *w = wr_new (q, IBV_WR_SEND_WITH_IMM);

    if (w) {
        w->imm = imm;
        w->cmp = 1;
    }
}

static void wr_rdma (struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
                     __be32 imm)
{
    struct sib_swqe *w = wr_new (q, op);

    if (w) {
        w->rkey = rkey;
        w->raddr = addr;
        w->imm = imm;
    }
}

static void wr_rdma_write (struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
    wr_rdma (q, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm (struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, __be32 imm)
{
    wr_rdma (q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read (struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
    wr_rdma (q, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_cmp_swp (struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t cmp,
                        uint64_t swp)
{
    struct sib_swqe *w = wr_new (q, IBV_WR_ATOMIC_CMP_AND_SWP);

    if (w) {
        w->rkey = rkey;
        w->raddr = addr;
        w->cmp = cmp;
        w->swp = swp;
    }
}

static void wr_fetch_add (struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t add)
{
    struct sib_swqe *w = wr_new (q, IBV_WR_ATOMIC_FETCH_AND_ADD);

    if (w) {
        w->rkey = rkey;
        w->raddr = addr;
        w->cmp = add;
    }
}

static void wr_unsupported (struct ibv_qp_ex *q)
{
    qpx_of (q)->wr_err = true;
}

static void wr_bind_mw (struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
                        const struct ibv_mw_bind_info *info)
{
    wr_unsupported (q);
}

static void wr_local_inv (struct ibv_qp_ex *q, uint32_t rkey)
{
    wr_unsupported (q);
}

static void wr_send_tso (struct ibv_qp_ex *q, void *hdr, uint16_t sz, uint16_t mss)
{
    wr_unsupported (q);
}

static void wr_set_xrc_srqn (struct ibv_qp_ex *q, uint32_t srqn)
{
    wr_unsupported (q);
}

static void wr_atomic_write (struct ibv_qp_ex *q, uint32_t rkey, uint64_t a, const void *v)
{
    wr_unsupported (q);
}

static void wr_set_ud_addr (struct ibv_qp_ex *q, struct ibv_ah *ibah, uint32_t rqpn, uint32_t qkey)
{
    struct sib_qp *qp = qpx_of (q);
    struct sib_ah *ah = (struct sib_ah *)ibah;
    struct sib_swqe *w;

    if (qp->wr_err || qp->sq_head == qp->wr_first)
        return;
    w = wr_cur (qp);
    if (!ah) {
        qp->wr_err = true;
        return;
    }
    w->ud_ip = ah->ip;
    w->ud_grh = ah->attr.is_global;
    w->rqpn = rqpn;
    w->ud_port = sib_port_of_qpn (qp->ctx, rqpn);
    w->qkey = (qkey & 0x80000000u) ? qp->attr.qkey : qkey;
}

static void wr_set_sge_list (struct ibv_qp_ex *q, size_t n, const struct ibv_sge *sg)
{
    struct sib_qp *qp = qpx_of (q);
    struct sib_swqe *w;

    if (qp->wr_err || qp->sq_head == qp->wr_first)
        return;
    if (n > SIB_MAX_SGE) {
        qp->wr_err = true;
        return;
    }
    w = wr_cur (qp);
    sib_sge_copy (w->sge, sg, n);
    w->nsge = (uint32_t)n;
}

static void wr_set_sge (struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t len)
{
    struct ibv_sge s = { .addr = addr, .length = len, .lkey = lkey };

    wr_set_sge_list (q, 1, &s);
}

static void wr_set_inline_data_list (struct ibv_qp_ex *q, size_t n, const struct ibv_data_buf *b)
{
    struct sib_qp *qp = qpx_of (q);
    struct sib_swqe *w;
    size_t len = 0, i;

    if (qp->wr_err || qp->sq_head == qp->wr_first)
        return;
    w = wr_cur (qp);
    for (i = 0; i < n; i++)
        len += b[i].length;
    if (len > qp->cap.max_inline_data || !w->inl) {
        qp->wr_err = true;
        return;
    }
    len = 0;
    for (i = 0; i < n; i++) {
        memcpy (w->inl + len, b[i].addr, b[i].length);
        len += b[i].length;
    }
    w->len = (uint32_t)len;
    w->nsge = 0;
    w->hdr.flags = 2; /* already inline */
}

static void wr_set_inline_data (struct ibv_qp_ex *q, void *addr, size_t len)
{
    struct ibv_data_buf b = { .addr = addr, .length = len };

    wr_set_inline_data_list (q, 1, &b);
}

static void wr_start (struct ibv_qp_ex *q)
{
    struct sib_qp *qp = qpx_of (q);

    sib_lock_app (&qp->lock);
    qp->wr_first = qp->sq_head;
    qp->wr_err = false;
}

static void wr_abort (struct ibv_qp_ex *q)
{
    struct sib_qp *qp = qpx_of (q);

    qp->sq_head = qp->wr_first;
    sib_unlock (&qp->lock);
}

static int wr_complete (struct ibv_qp_ex *q)
{
    struct sib_qp *qp = qpx_of (q);
    uint32_t i, end = qp->sq_head, st;
    int err = 0;

    if (qp->wr_err)
        err = EINVAL;
    else if (!sib_send_state_ok (qp))
        err = EINVAL;
    for (i = qp->wr_first; !err && i != end; i++) {
        struct sib_swqe *w = &qp->sq[i & (qp->sq_cap - 1)];

        if (w->hdr.flags == 2) {
            err = 0;
            st = IBV_WC_SUCCESS;
        } else {
            err = sib_wqe_prepare (qp, w, w->hdr.flags == 1, &st);
        }
        w->hdr.op = st == IBV_WC_SUCCESS ? 0 : 0xff;
        w->hdr.flags = (uint8_t)st;
        w->seq = qp->next_seq + (i - qp->wr_first);
    }
    if (err) {
        qp->sq_head = qp->wr_first;
        sib_unlock (&qp->lock);
        return err;
    }
    qp->next_seq += end - qp->wr_first;
    sib_post_kick (qp);
    sib_unlock (&qp->lock);
    return 0;
}

void sib_qp_ex_init (struct sib_qp *qp)
{
    struct ibv_qp_ex *q = &qp->qpx;

    q->comp_mask = 0;
    q->wr_atomic_cmp_swp = wr_cmp_swp;
    q->wr_atomic_fetch_add = wr_fetch_add;
    q->wr_bind_mw = wr_bind_mw;
    q->wr_local_inv = wr_local_inv;
    q->wr_rdma_read = wr_rdma_read;
    q->wr_rdma_write = wr_rdma_write;
    q->wr_rdma_write_imm = wr_rdma_write_imm;
    q->wr_send = wr_send;
    q->wr_send_imm = wr_send_imm;
    q->wr_send_inv = wr_local_inv;
    q->wr_send_tso = wr_send_tso;
    q->wr_set_ud_addr = wr_set_ud_addr;
    q->wr_set_xrc_srqn = wr_set_xrc_srqn;
    q->wr_set_inline_data = wr_set_inline_data;
    q->wr_set_inline_data_list = wr_set_inline_data_list;
    q->wr_set_sge = wr_set_sge;
    q->wr_set_sge_list = wr_set_sge_list;
    q->wr_start = wr_start;
    q->wr_complete = wr_complete;
    q->wr_abort = wr_abort;
    q->wr_atomic_write = wr_atomic_write;
}
