/*
 * tx.c - transmission and completion of RC/UC send work requests.
 *
 * Send WQEs move through three counters: posted (sq_head), fully written
 * to the requester connection (sq_tx), completed (sq_done).  A WQE
 * completes only when the responder's answer covers it (ACK, READ or
 * ATOMIC response): "completion only after the peer accepted it".  The
 * posting thread writes straight to the stream (gathering header and the
 * application's buffers: one sendmsg on a socket, one copy into the ring
 * on the same host); the progress thread only continues a write the
 * stream could not take at once.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>
#include <sys/socket.h>

#include "softib.h"

static bool op_has_payload (uint8_t op)
{
    return op == SIB_OP_SEND || op == SIB_OP_SEND_IMM || op == SIB_OP_WRITE
        || op == SIB_OP_WRITE_IMM || op == SIB_OP_UD_SEND;
}

static enum ibv_wc_opcode wc_opcode (uint8_t op)
{
    switch (op) {
    case SIB_OP_WRITE:
    case SIB_OP_WRITE_IMM:
        return IBV_WC_RDMA_WRITE;
    case SIB_OP_READ:
        return IBV_WC_RDMA_READ;
    case SIB_OP_CMP_SWP:
        return IBV_WC_COMP_SWAP;
    case SIB_OP_FETCH_ADD:
        return IBV_WC_FETCH_ADD;
    default:
        return IBV_WC_SEND;
    }
}

void sib_send_complete (struct sib_qp *qp, struct sib_swqe *w, enum ibv_wc_status st)
{
    if (w->signaled || st != IBV_WC_SUCCESS) {
        struct ibv_wc *wc = sib_cq_slot (qp->scq); /* filled in place */

        if (wc) {
            *wc = (struct ibv_wc){
                .wr_id = w->wr_id,
                .status = st,
                .opcode = wc_opcode (w->op),
                .qp_num = qp->qpx.qp_base.qp_num,
                .byte_len = w->op == SIB_OP_READ                           ? w->len
                    : w->op == SIB_OP_CMP_SWP || w->op == SIB_OP_FETCH_ADD ? 8
                                                                           : 0,
            };
            sib_cq_commit (qp->scq, false);
        }
    }
    qp->sq_done++;
    /* Free-running counters: compared by their difference, as everywhere
     * (a plain < took sq_tx back once it had wrapped and sq_done had not,
     * and the WQEs between were sent again). */
    if ((int32_t)(qp->sq_tx - qp->sq_done) < 0)
        qp->sq_tx = qp->sq_done;
}

/* Completes every transmitted WQE with seq < seq_excl. */
void sib_sq_ack (struct sib_qp *qp, uint32_t seq_excl)
{
    uint32_t done = qp->sq_done, start = done;

    while (done != qp->sq_tx) {
        struct sib_swqe *w = &qp->sq[done & (qp->sq_cap - 1)];

        if ((int32_t)(w->seq - seq_excl) >= 0 || !w->sent)
            break;
        if (w->signaled) {
            qp->sq_done = done;
            sib_send_complete (qp, w, IBV_WC_SUCCESS);
        }
        /* an unsignaled one only moves sq_done (sib_send_complete) */
        done++;
    }
    qp->sq_done = done;
    if (done != start)
        qp->rnr_left = qp->attr.rnr_retry;
}

static void wqe_build_hdr (struct sib_qp *qp, struct sib_swqe *w)
{
    struct sib_hdr *h = &w->hdr;

    memset (h, 0, sizeof (*h));
    h->op = w->op;
    h->flags = (w->solicited ? SIB_F_SOLICITED : 0)
        | (w->op == SIB_OP_SEND_IMM || w->op == SIB_OP_WRITE_IMM ? SIB_F_IMM : 0);
    h->lid = qp->ctx->addr.lid;
    h->len = op_has_payload (w->op) ? w->len : 0;
    h->seq = w->seq;
    h->imm = w->imm;
    h->addr = w->raddr;
    h->rkey = w->rkey;
    h->rlen = w->op == SIB_OP_READ ? w->len : 0;
    h->cmp = w->cmp;
    h->swp = w->swp;
    sib_hdr_to_wire (h);
}

static size_t wqe_bytes (const struct sib_swqe *w)
{
    return sizeof (struct sib_hdr) + (op_has_payload (w->op) ? w->len : 0);
}

static int wqe_iov (struct sib_swqe *w, struct iovec *iov, int max)
{
    int n = 0;

    iov[n].iov_base = &w->hdr;
    iov[n++].iov_len = sizeof (w->hdr);
    if (!op_has_payload (w->op) || !w->len)
        return n;
    if (w->nsge == 0) {
        iov[n].iov_base = w->inl;
        iov[n++].iov_len = w->len;
        return n;
    }
    for (uint32_t i = 0; i < w->nsge && n < max; i++) {
        if (!w->sge[i].length)
            continue;
        iov[n].iov_base = (void *)(uintptr_t)w->sge[i].addr;
        iov[n++].iov_len = w->sge[i].length;
    }
    return n;
}

/* Fails the WQE at sq_done with its local error once everything before
 * it completed; returns true if it did. */
static bool fail_local (struct sib_qp *qp)
{
    struct sib_swqe *w = &qp->sq[qp->sq_done & (qp->sq_cap - 1)];

    if (qp->sq_done == qp->sq_head || qp->sq_done != qp->sq_tx || w->hdr.op != 0xff)
        return false;
    sib_send_complete (qp, w, (enum ibv_wc_status)w->hdr.flags);
    sib_qp_error (qp,
                  "local error in a posted work request (bad lkey, "
                  "bounds or length)");
    return true;
}

#define SIB_TX_IOV 64

/* Same host, nothing partly written: each WQE with at most one piece of
 * payload goes into the ring as one message, without an iovec; the
 * general loop below takes over at the first one that does not fit. */
static void tx_shm_whole (struct sib_qp *qp, struct sib_conn *c)
{
    while (qp->sq_tx != qp->sq_head && qp->tx_off == 0 && !qp->rnr_until && !qp->rnr_rewind
           && qp->state == IBV_QPS_RTS) {
        struct sib_swqe *w = &qp->sq[qp->sq_tx & (qp->sq_cap - 1)];
        const void *pay = NULL;
        size_t plen = 0;

        if (w->hdr.op == 0xff || w->nsge > 1)
            return;
        if (op_has_payload (w->op) && w->len) {
            pay = w->nsge ? (const void *)(uintptr_t)w->sge[0].addr : (const void *)w->inl;
            plen = w->len;
        }
        wqe_build_hdr (qp, w);
        if (w->op == SIB_OP_SEND || w->op == SIB_OP_SEND_IMM) {
            uint8_t h[SIB_HDR_SHORT]; /* wire.h: nothing after imm */

            memcpy (h, &w->hdr, sizeof (h));
            h[0] |= SIB_OP_SHORT;
            if (!sib_shm_put (c, h, sizeof (h), pay, plen))
                return;
        } else if (!sib_shm_put (c, &w->hdr, sizeof (w->hdr), pay, plen)) {
            return;
        }
        w->sent = 1;
        qp->sq_tx++;
    }
}

void sib_tx_progress (struct sib_qp *qp)
{
    struct sib_conn *c = qp->req;
    struct iovec iov[SIB_TX_IOV + SIB_MAX_SGE + 1];

    if (qp->qpx.qp_base.qp_type == IBV_QPT_UD)
        return;
    if (!c) {
        if (qp->state == IBV_QPS_RTS && qp->sq_tx != qp->sq_head)
            sib_req_lost (qp, "no connection to the peer QP");
        return;
    }
    if (c->connecting || c->dead)
        return;
    if (c->olen > c->ooff) {
        if (sib_conn_flush (c) < 0) {
            sib_req_lost (qp, "write to peer failed");
            return;
        }
        if (c->olen > c->ooff)
            return;
    }
    if (c->shm)
        tx_shm_whole (qp, c);
    for (;;) {
        uint32_t i = qp->sq_tx;
        size_t skip = qp->tx_off, built = 0;
        int n = 0;
        ssize_t wr;

        if (qp->tx_off == 0 && qp->rnr_rewind) {
            qp->rnr_rewind = false;
            qp->sq_tx = qp->sq_done;
            continue;
        }
        if (qp->tx_off == 0 && (qp->rnr_until || qp->state != IBV_QPS_RTS))
            break;
        while (i != qp->sq_head && n < SIB_TX_IOV) {
            struct sib_swqe *w = &qp->sq[i & (qp->sq_cap - 1)];

            /* while an RNR wait is pending only the partly
			 * written WQE may go out, to keep the stream framed */
            if ((qp->rnr_until || qp->rnr_rewind) && i != qp->sq_tx)
                break;
            if (w->hdr.op == 0xff) { /* local error */
                if (i == qp->sq_tx && fail_local (qp))
                    return;
                break;
            }
            if (i != qp->sq_tx || qp->tx_off == 0)
                wqe_build_hdr (qp, w);
            n += wqe_iov (w, iov + n, SIB_TX_IOV + SIB_MAX_SGE - n);
            built += wqe_bytes (w);
            i++;
        }
        if (!n)
            break;
        /* drop what an earlier partial write already sent */
        {
            int k = 0;

            while (skip && skip >= iov[k].iov_len) {
                skip -= iov[k].iov_len;
                k++;
            }
            iov[k].iov_base = (char *)iov[k].iov_base + skip;
            iov[k].iov_len -= skip;
            wr = sib_conn_writev (c, iov + k, n - k);
        }
        if (wr < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                sib_conn_want_out (c, true);
                return;
            }
            sib_req_lost (qp, "write to peer failed");
            return;
        }
        built -= qp->tx_off;
        {
            size_t left = (size_t)wr;

            while (left) {
                struct sib_swqe *w = &qp->sq[qp->sq_tx & (qp->sq_cap - 1)];
                size_t rem = wqe_bytes (w) - qp->tx_off;

                if (left >= rem) {
                    left -= rem;
                    w->sent = 1;
                    qp->sq_tx++;
                    qp->tx_off = 0;
                } else {
                    qp->tx_off += left;
                    left = 0;
                }
            }
        }
        if ((size_t)wr < built) {
            sib_conn_want_out (c, true);
            return;
        }
    }
    if (c->out_armed)
        sib_conn_want_out (c, false);
}
