/*
 * req.c - the requester side of RC: responses arriving on a QP's
 * requester connection (ACK, NAKs, READ data, atomic results), RNR retry,
 * and what happens when the responder cannot be reached.
 *
 * Every response for sequence S also acknowledges everything before S:
 * the responder answers strictly in order on one stream.  RNR: the QP
 * waits the responder's min_rnr_timer and retransmits from S, rnr_retry
 * times (7 = forever), then completes S with IBV_WC_RNR_RETRY_EXC_ERR.
 */
#include "config.h"

#include <string.h>

#include "softib.h"

/* IB's local ACK timeout is 4.096 us * 2^timeout per try; 0 = infinite */
static uint64_t transport_ns (const struct sib_qp *qp)
{
    if (!qp->attr.timeout)
        return 0;
    return (4096ull << (qp->attr.timeout & 31)) * ((uint64_t)qp->attr.retry_cnt + 1);
}

/*
 * The responder cannot be reached any more.  An HCA would not know that:
 * its requests would go unanswered until retry_cnt retries of the local
 * ACK timeout ran out.  So WQEs fail only after that time, and a QP with
 * nothing outstanding stays quiet; a peer that exits right after its last
 * receive (ibv_srq_pingpong's server does) then ends no run that an HCA
 * would have let finish.
 */
void sib_req_lost (struct sib_qp *qp, const char *why)
{
    if (qp->req)
        sib_conn_kill (qp->req, why);
    if (!qp->gone_why)
        qp->gone_why = why;
    sib_req_gone_arm (qp);
}

void sib_req_gone_arm (struct sib_qp *qp)
{
    uint64_t ns;

    if (!qp->gone_why || qp->gone_at || qp->state == IBV_QPS_ERR || qp->sq_done == qp->sq_head)
        return;
    ns = transport_ns (qp);
    if (!ns)
        return; /* timeout 0: the IB spec's infinite wait */
    __atomic_store_n (&qp->gone_at, sib_now_ns () + ns, __ATOMIC_RELAXED);
    sib_progress_kick (qp->ctx);
}

uint64_t sib_req_gone_timer (struct sib_qp *qp, uint64_t now)
{
    if (!qp->gone_at)
        return 0;
    if (qp->gone_at > now)
        return qp->gone_at;
    qp->gone_at = 0;
    if (qp->state == IBV_QPS_ERR || qp->sq_done == qp->sq_head)
        return 0;
    sib_send_complete (qp, &qp->sq[qp->sq_done & (qp->sq_cap - 1)], IBV_WC_RETRY_EXC_ERR);
    sib_qp_error (qp, qp->gone_why);
    return 0;
}

static struct sib_swqe *head_wqe (struct sib_qp *qp, uint32_t seq)
{
    struct sib_swqe *w;

    if (qp->sq_done == qp->sq_tx)
        return NULL;
    w = &qp->sq[qp->sq_done & (qp->sq_cap - 1)];
    return w->seq == seq && w->sent ? w : NULL;
}

/* The WQE a NAK for seq names: the head of the transmitted ones, or the
 * one still being written when nothing before it is outstanding (the
 * responder acts on a request's header while its payload is still on the
 * way: with a full same-host ring that is common, on TCP it is rare). */
static struct sib_swqe *nak_wqe (struct sib_qp *qp, uint32_t seq)
{
    struct sib_swqe *w = head_wqe (qp, seq);

    if (w || qp->sq_done != qp->sq_tx || !qp->tx_off || qp->sq_tx == qp->sq_head)
        return w;
    w = &qp->sq[qp->sq_tx & (qp->sq_cap - 1)];
    return w->seq == seq ? w : NULL;
}

static void fail_head (struct sib_qp *qp, struct sib_swqe *w, enum ibv_wc_status st,
                       const char *why)
{
    if (!w->sent)
        qp->tx_off = 0; /* the partly written one: none goes on */
    sib_send_complete (qp, w, st);
    sib_qp_error (qp, why);
}

void sib_req_header (struct sib_conn *c)
{
    struct sib_qp *qp = c->qp;
    struct sib_hdr *h = &c->rh;
    struct sib_swqe *w;

    if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET) {
        c->rdiscard = h->len;
        c->rstatus = IBV_WC_GENERAL_ERR;
        return;
    }
    switch (h->op) {
    case SIB_OP_HELLO_NAK:
        sib_log ("QP 0x%06x: peer QP 0x%06x refused the connection "
                 "(reason %u)",
                 qp->qpx.qp_base.qp_num, qp->attr.dest_qp_num, h->imm);
        sib_req_lost (qp, "peer refused the connection");
        return;
    case SIB_OP_ACK:
        if (h->len)
            break;
        sib_sq_ack (qp, h->seq + 1);
        if (qp->sq_tx != qp->sq_head)
            sib_tx_progress (qp);
        return;
    case SIB_OP_NAK_RNR:
        if (h->len)
            break;
        sib_sq_ack (qp, h->seq);
        w = nak_wqe (qp, h->seq);
        if (!w)
            break;
        if (qp->attr.rnr_retry != 7 && qp->rnr_left-- <= 0) {
            fail_head (qp, w, IBV_WC_RNR_RETRY_EXC_ERR, "receiver not ready: rnr_retry exhausted");
            return;
        }
        /* retransmit from w once the timer ran (sib_tx_progress
		 * finishes a partly written WQE first) */
        for (uint32_t i = qp->sq_done; i != qp->sq_tx; i++)
            qp->sq[i & (qp->sq_cap - 1)].sent = 0;
        qp->rnr_until = sib_now_ns () + sib_rnr_ns ((uint8_t)h->imm);
        if (qp->tx_off == 0) {
            qp->sq_tx = qp->sq_done;
        } else {
            /* finish the partial WQE, whose bytes the responder
			 * drops, then rewind (see sib_tx_progress) */
            qp->rnr_rewind = true;
        }
        sib_progress_kick (qp->ctx);
        return;
    case SIB_OP_NAK_ACCESS:
    case SIB_OP_NAK_INV:
    case SIB_OP_NAK_OP:
        if (h->len)
            break;
        sib_sq_ack (qp, h->seq);
        w = nak_wqe (qp, h->seq);
        if (!w)
            break;
        if (h->op == SIB_OP_NAK_ACCESS)
            fail_head (qp, w, IBV_WC_REM_ACCESS_ERR,
                       "remote access error (rkey, bounds or "
                       "access rights)");
        else if (h->op == SIB_OP_NAK_OP)
            fail_head (qp, w, IBV_WC_REM_OP_ERR,
                       "remote operation error (the responder's "
                       "receive buffer is not writable: lkey or "
                       "local write access)");
        else
            fail_head (qp, w, IBV_WC_REM_INV_REQ_ERR,
                       "remote invalid request (message too long "
                       "for the receive buffer?)");
        return;
    case SIB_OP_READ_RESP:
        sib_sq_ack (qp, h->seq);
        w = head_wqe (qp, h->seq);
        if (!w || w->op != SIB_OP_READ || h->len != w->len)
            break;
        c->riovcnt = 0;
        for (uint32_t i = 0; i < w->nsge; i++) {
            if (!w->sge[i].length)
                continue;
            c->riov[c->riovcnt].iov_base = (void *)(uintptr_t)w->sge[i].addr;
            c->riov[c->riovcnt].iov_len = w->sge[i].length;
            c->riovcnt++;
        }
        c->rleft = h->len;
        return;
    case SIB_OP_ATOMIC_RESP:
        sib_sq_ack (qp, h->seq);
        w = head_wqe (qp, h->seq);
        if (!w || (w->op != SIB_OP_CMP_SWP && w->op != SIB_OP_FETCH_ADD) || h->len != 8)
            break;
        c->riov[0].iov_base = c->small;
        c->riov[0].iov_len = 8;
        c->riovcnt = 1;
        c->rleft = 8;
        return;
    default:
        break;
    }
    sib_conn_garbage (c, "unexpected response from the responder");
}

void sib_req_done (struct sib_conn *c)
{
    struct sib_qp *qp = c->qp;
    struct sib_swqe *w;

    if (c->rstatus != IBV_WC_SUCCESS)
        return;
    if (c->rh.op != SIB_OP_READ_RESP && c->rh.op != SIB_OP_ATOMIC_RESP)
        return;
    w = head_wqe (qp, c->rh.seq);
    if (!w)
        return;
    if (c->rh.op == SIB_OP_ATOMIC_RESP) {
        uint64_t v;

        memcpy (&v, c->small, 8);
        v = le64toh (v);
        memcpy ((void *)(uintptr_t)w->sge[0].addr, &v, 8);
    }
    sib_send_complete (qp, w, IBV_WC_SUCCESS);
    qp->rnr_left = qp->attr.rnr_retry;
    if (qp->sq_tx != qp->sq_head)
        sib_tx_progress (qp);
}
