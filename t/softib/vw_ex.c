/* vw_ex.c - extended verbs adapters (vw_ex.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vw_ex.h"

struct ibv_cq *vw_ex_create_cq (struct ibv_context *ctx, int cqe, void *cq_ctx,
                                struct ibv_comp_channel *ch, struct ibv_cq_ex **cqx)
{
    struct ibv_cq_init_attr_ex a;

    memset (&a, 0, sizeof (a));
    a.cqe = (uint32_t)cqe;
    a.cq_context = cq_ctx;
    a.channel = ch;
    a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM
        | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL
        | IBV_WC_EX_WITH_DLID_PATH_BITS;
    *cqx = ibv_create_cq_ex (ctx, &a);
    return *cqx ? ibv_cq_ex_to_cq (*cqx) : NULL;
}

struct ibv_qp *vw_ex_create_qp (struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
                                struct ibv_qp_ex **qpx)
{
    struct ibv_qp_init_attr_ex a;
    struct ibv_qp *qp;

    memset (&a, 0, sizeof (a));
    a.qp_context = ia->qp_context;
    a.send_cq = ia->send_cq;
    a.recv_cq = ia->recv_cq;
    a.srq = ia->srq;
    a.cap = ia->cap;
    a.qp_type = ia->qp_type;
    a.sq_sig_all = ia->sq_sig_all;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = pd;
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    if (ia->qp_type != IBV_QPT_UD)
        a.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
            | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
            | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    qp = ibv_create_qp_ex (pd->context, &a);
    if (!qp)
        return NULL;
    ia->cap = a.cap;
    if (!(*qpx = ibv_qp_to_qp_ex (qp))) {
        int err = errno ? errno : EOPNOTSUPP;
        ibv_destroy_qp (qp);
        errno = err;
        return NULL;
    }
    return qp;
}

int vw_ex_post_send (struct ibv_qp_ex *qpx, const struct ibv_send_wr *wr)
{
    struct ibv_data_buf bufs[64];

    ibv_wr_start (qpx);
    qpx->wr_id = wr->wr_id;
    qpx->wr_flags = wr->send_flags & ~(unsigned)IBV_SEND_INLINE;
    switch (wr->opcode) {
    case IBV_WR_SEND:
        ibv_wr_send (qpx);
        break;
    case IBV_WR_SEND_WITH_IMM:
        ibv_wr_send_imm (qpx, wr->imm_data);
        break;
    case IBV_WR_RDMA_WRITE:
        ibv_wr_rdma_write (qpx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
        break;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        ibv_wr_rdma_write_imm (qpx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, wr->imm_data);
        break;
    case IBV_WR_RDMA_READ:
        ibv_wr_rdma_read (qpx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
        break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        ibv_wr_atomic_fetch_add (qpx, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
                                 wr->wr.atomic.compare_add);
        break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        ibv_wr_atomic_cmp_swp (qpx, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
                               wr->wr.atomic.compare_add, wr->wr.atomic.swap);
        break;
    default:
        ibv_wr_abort (qpx);
        return EINVAL;
    }
    if (qpx->qp_base.qp_type == IBV_QPT_UD)
        ibv_wr_set_ud_addr (qpx, wr->wr.ud.ah, wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey);
    if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge <= 64) {
        for (int i = 0; i < wr->num_sge; i++) {
            bufs[i].addr = (void *)(uintptr_t)wr->sg_list[i].addr;
            bufs[i].length = wr->sg_list[i].length;
        }
        ibv_wr_set_inline_data_list (qpx, (size_t)wr->num_sge, bufs);
    } else {
        ibv_wr_set_sge_list (qpx, (size_t)wr->num_sge, wr->sg_list);
    }
    return ibv_wr_complete (qpx);
}

static void read_one (struct ibv_cq_ex *cqx, struct ibv_wc *wc)
{
    memset (wc, 0, sizeof (*wc));
    wc->wr_id = cqx->wr_id;
    wc->status = cqx->status;
    wc->opcode = ibv_wc_read_opcode (cqx);
    wc->vendor_err = ibv_wc_read_vendor_err (cqx);
    wc->byte_len = ibv_wc_read_byte_len (cqx);
    wc->wc_flags = ibv_wc_read_wc_flags (cqx);
    if (wc->wc_flags & IBV_WC_WITH_IMM)
        wc->imm_data = ibv_wc_read_imm_data (cqx);
    wc->qp_num = ibv_wc_read_qp_num (cqx);
    wc->src_qp = ibv_wc_read_src_qp (cqx);
    wc->slid = (uint16_t)ibv_wc_read_slid (cqx);
    wc->sl = ibv_wc_read_sl (cqx);
    wc->dlid_path_bits = ibv_wc_read_dlid_path_bits (cqx);
}

int vw_ex_poll (struct ibv_cq_ex *cqx, int n, struct ibv_wc *wc)
{
    struct ibv_poll_cq_attr attr = { 0 };
    int got = 0, rc;

    if (n < 1)
        return 0;
    rc = ibv_start_poll (cqx, &attr);
    if (rc == ENOENT)
        return 0;
    if (rc) {
        fprintf (stderr, "ibv_start_poll: %s\n", strerror (rc));
        return -1;
    }
    for (;;) {
        read_one (cqx, &wc[got++]);
        if (got == n)
            break;
        rc = ibv_next_poll (cqx);
        if (rc == ENOENT)
            break;
        if (rc) {
            fprintf (stderr, "ibv_next_poll: %s\n", strerror (rc));
            ibv_end_poll (cqx);
            return -1;
        }
    }
    ibv_end_poll (cqx);
    return got;
}
