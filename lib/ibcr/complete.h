/* complete.h - completion accounting, inline in the poll loop.
 *
 * Every completion a poll takes from a real CQ passes here before the
 * application may see it: its QP is found by real QPN, the WR it ends
 * leaves the QP's log, and the completion gets the QP's virtual number.
 * A completion the application did not ask for (an unsignaled WR; libibcr
 * signals every real WR) is hidden.  This runs per completion, so the
 * common case (a send completion of the QP the CQ's last completion came
 * from) is inline in cq.c, and so is a successful receive at the head of
 * an RC or UC QP's log; other receives go out of line (qp.c).
 *
 * Callers hold the CQ's plock, or are the checkpoint thread with the gate
 * closed: the CQ's hint is theirs alone.  Never look a QP up here other
 * than through the hint or qp_by_rqpn: ibcr_destroy_qp clears the hint
 * under the plock, and a QP found any other way could be freed under us.
 */
#ifndef IBCR_COMPLETE_H
#define IBCR_COMPLETE_H

#include "ibcr.h"
#include "xlate.h"

/* No real QPN has more than 24 bits. */
#define CQ_NO_HINT UINT32_MAX
/* No xl_key is this (its QPN half has more than 24 bits). */
#define RX_NO_SRC UINT64_MAX

static inline void cq_hint_clear (struct ibcr_cq *vcq)
{
    vcq->hint_rqpn = CQ_NO_HINT;
    vcq->hint_qp = NULL;
}

/* Wait for any poll of vcq in progress, and drop vqp from its hint: the
 * QP is about to be freed (ibcr_destroy_qp). */
static inline void cq_forget_qp (struct ibcr_cq *vcq, struct ibcr_qp *vqp)
{
    int how = block_lock (&vcq->plock);
    if (vcq->hint_qp == vqp)
        cq_hint_clear (vcq);
    block_unlock (&vcq->plock, how);
}

/* The QP of real QPN rqpn, or NULL.  A hit costs one compare instead of
 * the radix walk's four dependent loads.  A rebuild gives QPs new real
 * numbers: the pair (number, QP) is checked as a whole, and release clears
 * it anyway. */
static inline struct ibcr_qp *cq_qp_of (struct ibcr_cq *vcq, uint32_t rqpn)
{
    if (__builtin_expect (vcq->hint_rqpn == rqpn, 1)) {
        /* A hint's QP is never NULL (cq_hint_clear sets CQ_NO_HINT,
         * which no real QPN equals). */
        if (!vcq->hint_qp)
            __builtin_unreachable ();
        return vcq->hint_qp;
    }
    struct ibcr_qp *vqp = idtab_get (&vcq->ctx->qp_by_rqpn, rqpn);
    if (vqp) {
        vcq->hint_rqpn = rqpn;
        vcq->hint_qp = vqp;
    }
    return vqp;
}

/* Account a completion of the send queue: pop the send log's head.
 * Returns 1 if the application sees it, 0 if not (an unsignaled WR), -1
 * if it is not the send queue's: the opcode of an error completion is
 * undefined, so that is told by the log's head, and -1 has changed
 * nothing.  The pollers of the QP's send CQ are the send log's one
 * consumer (wrlog.h), under that CQ's plock: no QP lock is taken.  A
 * completion from any other CQ is not a send's, and must not touch the
 * log (its poller would be a second consumer). */
static inline __attribute__ ((always_inline)) int
qp_send_complete (struct ibcr_cq *vcq, struct ibcr_qp *vqp, const struct ibv_wc *wc)
{
    if (__builtin_expect (vcq != vqp->vscq, 0))
        return -1;
    struct wrlog_send *e = wrlog_sq_head (&vqp->sq);
    int show;
    if (__builtin_expect (!e, 0))
        show = wc->status == IBV_WC_SUCCESS ? 1 : -1;
    else if (wc->status != IBV_WC_SUCCESS && e->wr_id != wc->wr_id)
        show = -1;
    else {
        show = wrlog_app_signaled (e) || wc->status != IBV_WC_SUCCESS;
        /* A failed or flushed WR: an RC or UC QP is in error now (the
         * drain compares its counts one way only), a message it was is
         * not one the peer got, and a UD datagram was not sent. */
        if (__builtin_expect (wc->status != IBV_WC_SUCCESS, 0)) {
            vqp->sq_err = true;
            vqp->rmsg_failed += e->needs_recv;
        } else if (__builtin_expect (vqp->qpx.qp_base.qp_type == IBV_QPT_UD && e->vah, 0))
            map_add (&vqp->ud_sent, xl_key (e->vah->attr.dlid, e->remote_qpn), 1);
        wrlog_sq_pop_head (&vqp->sq);
    }
    return show;
}

/* A successful receive on an RC or UC QP without an SRQ whose WR is the
 * receive log's oldest (receives complete in order) and, after a
 * rebuild, whose source is the one the last receive had: the log's head
 * popped, the source translated, inline.  The pollers of the QP's
 * receive CQ are the receive log's one consumer (wrlog.h), under that
 * CQ's plock: no QP lock is taken.  False has changed nothing:
 * ibcr_qp_complete_recv (qp.c) does all of it then, UD, SRQs and the
 * first receive from a source included. */
static inline __attribute__ ((always_inline)) bool
qp_recv_complete_fast (struct ibcr_cq *vcq, struct ibcr_qp *vqp, struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS || vcq != vqp->rx_fast_cq)
        return false;
    bool xl = ibcr_xlate;
    if (xl && xl_key (wc->slid, wc->src_qp) != vqp->rx_src)
        return false;
    struct wrlog_rq *q = &vqp->rq;
    const struct wrlog_recv *e = wrlog_ring_head (&q->r);
    if (__builtin_expect (!e || e->wr_id != wc->wr_id || e->gone, 0))
        return false;
    wrlog_ring_pop_head (&q->r);
    vqp->recv_done++;
    if (xl) {
        wc->slid = vqp->rx_vlid;
        wc->src_qp = vqp->rx_vqpn;
    }
    wc->qp_num = vqp->vqpn;
    return true;
}

/* Account one completion polled from vcq's real CQ and give it the QP's
 * virtual number; false if the application must not see it. */
static inline __attribute__ ((always_inline)) bool cq_complete (struct ibcr_cq *vcq,
                                                                struct ibv_wc *wc)
{
    struct ibcr_qp *vqp = cq_qp_of (vcq, wc->qp_num);
    if (!vqp)
        return true;
    /* A send's opcode first: one test for the common successful send.
     * An error completion's opcode is undefined: those go to the send
     * log's head too, which tells. */
    if (!(wc->opcode & IBV_WC_RECV) || wc->status != IBV_WC_SUCCESS) {
        int show = qp_send_complete (vcq, vqp, wc);
        if (show >= 0) {
            wc->qp_num = vqp->vqpn;
            return show;
        }
    }
    if (__builtin_expect (qp_recv_complete_fast (vcq, vqp, wc), 1))
        return true;
    return ibcr_qp_complete_recv (vcq, vqp, wc);
}

#endif
