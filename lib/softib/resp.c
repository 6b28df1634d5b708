/*
 * resp.c - the responder side of RC (and UC): requests arriving on a QP's
 * responder connection.
 *
 * Requests are taken strictly in sequence.  A SEND with no receive posted
 * is answered with an RNR NAK and dropped, and so is everything after it
 * until the requester retransmits that sequence number (go-back-N, as
 * IB's RNR NAK works).  Access violations answer NAK_ACCESS and put this
 * QP in ERROR with IBV_EVENT_QP_ACCESS_ERR.  Successful requests are
 * acknowledged once per receive batch (one ACK covers all), READ and
 * atomic results carry their own acknowledgement.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "softib.h"

static void respond (struct sib_conn *c, uint8_t op, uint32_t seq, uint32_t imm, const void *data,
                     uint32_t len)
{
    struct sib_hdr h;

    memset (&h, 0, sizeof (h));
    h.op = op;
    h.seq = seq;
    h.imm = imm;
    h.len = len;
    sib_hdr_to_wire (&h);
    if (sib_conn_queue (c, &h, sizeof (h), data, len) < 0)
        sib_conn_garbage (c, "out of memory for a response");
}

/* Points the payload sink at a receive WQE's buffers, skipping `skip`
 * bytes (UD's GRH room); returns false with c->rstatus set on error. */
bool sib_sink_rwqe (struct sib_conn *c, struct sib_qp *qp, uint32_t skip, uint64_t len)
{
    uint64_t room = 0, want = len;
    uint32_t i;

    c->riovcnt = 0;
    for (i = 0; i < c->rwqe.nsge; i++) {
        struct ibv_sge *s = &c->rwqe.sge[i];
        enum ibv_wc_status st;
        uint8_t *p;

        if (!s->length)
            continue;
        p = sib_mr_check (qp, s->lkey, s->addr, s->length, IBV_ACCESS_LOCAL_WRITE,
                          IBV_WC_LOC_PROT_ERR, &st);
        if (!p) {
            c->rstatus = st;
            return false;
        }
        room += s->length;
        if (skip >= s->length) {
            skip -= s->length;
            continue;
        }
        if (want) {
            size_t k = s->length - skip;

            if (k > want)
                k = (size_t)want;
            c->riov[c->riovcnt].iov_base = p + skip;
            c->riov[c->riovcnt].iov_len = k;
            c->riovcnt++;
            want -= k;
        }
        skip = 0;
    }
    if (want) {
        c->rstatus = IBV_WC_LOC_LEN_ERR;
        c->riovcnt = 0;
        return false;
    }
    (void)room;
    return true;
}

static bool active (struct sib_qp *qp)
{
    return qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD
        || qp->state == IBV_QPS_SQE;
}

static void rnr (struct sib_conn *c, struct sib_qp *qp)
{
    c->rdiscard = c->rh.len;
    if (qp->qpx.qp_base.qp_type == IBV_QPT_UC) {
        /* UC has no RNR: the message is silently lost */
        c->rstatus = IBV_WC_GENERAL_ERR;
        return;
    }
    respond (c, SIB_OP_NAK_RNR, c->rh.seq, qp->attr.min_rnr_timer, NULL, 0);
    qp->resp_acked = c->rh.seq;
    qp->resp_rnr_drop = true;
    c->rstatus = IBV_WC_RNR_RETRY_EXC_ERR; /* marker: nothing to do */
}

static void *remote_check (struct sib_conn *c, struct sib_qp *qp, int need, uint64_t len)
{
    enum ibv_wc_status st;
    void *p;

    if ((qp->attr.qp_access_flags & (unsigned int)need) != (unsigned int)need) {
        c->rstatus = IBV_WC_REM_ACCESS_ERR;
        return NULL;
    }
    if (!len)
        return NULL;
    p = sib_mr_check (qp, c->rh.rkey, c->rh.addr, len, need, IBV_WC_REM_ACCESS_ERR, &st);
    if (!p)
        c->rstatus = st;
    return p;
}

void sib_resp_header (struct sib_conn *c)
{
    struct sib_qp *qp = c->qp;
    struct sib_hdr *h = &c->rh;
    void *p;

    if (h->op < SIB_OP_SEND || h->op > SIB_OP_FETCH_ADD) {
        sib_conn_garbage (c, "not a request opcode");
        return;
    }
    if (!active (qp)) {
        c->rdiscard = h->len; /* RESET/INIT/ERR drop requests */
        c->rstatus = IBV_WC_GENERAL_ERR;
        return;
    }
    if (qp->resp_rnr_drop) {
        if (h->seq != qp->resp_expect) {
            c->rdiscard = h->len;
            c->rstatus = IBV_WC_GENERAL_ERR;
            return;
        }
        qp->resp_rnr_drop = false;
    }
    if (h->seq != qp->resp_expect) {
        sib_conn_garbage (c, "request out of sequence");
        return;
    }
    if (qp->qpx.qp_base.qp_type == IBV_QPT_UC && h->op >= SIB_OP_READ) {
        sib_conn_garbage (c, "READ or atomic on a UC QP");
        return;
    }
    switch (h->op) {
    case SIB_OP_SEND:
    case SIB_OP_SEND_IMM:
        if (!sib_take_recv (qp, &c->rwqe)) {
            rnr (c, qp);
            return;
        }
        c->have_rwqe = true;
        if (!sib_sink_rwqe (c, qp, 0, h->len)) {
            c->rdiscard = h->len;
            return;
        }
        c->rleft = h->len;
        return;
    case SIB_OP_WRITE:
    case SIB_OP_WRITE_IMM:
        p = remote_check (c, qp, IBV_ACCESS_REMOTE_WRITE, h->len);
        if (c->rstatus != IBV_WC_SUCCESS) {
            c->rdiscard = h->len;
            return;
        }
        if (h->op == SIB_OP_WRITE_IMM) {
            if (!sib_take_recv (qp, &c->rwqe)) {
                rnr (c, qp);
                return;
            }
            c->have_rwqe = true;
        }
        if (h->len) {
            c->riov[0].iov_base = p;
            c->riov[0].iov_len = h->len;
            c->riovcnt = 1;
            c->rleft = h->len;
            c->rx_key = h->rkey;
        }
        return;
    default:
        if (h->len) {
            sib_conn_garbage (c, "READ/atomic request with payload");
            return;
        }
        return; /* READ and atomics are served in sib_resp_done */
    }
}

/* The receive completion of request h, which consumed the receive wr_id,
 * written into wc. */
static inline __attribute__ ((always_inline)) void fill_recv_wc (struct ibv_wc *wc,
                                                                 struct sib_qp *qp, uint64_t wr_id,
                                                                 const struct sib_hdr *h,
                                                                 enum ibv_wc_status st)
{
    *wc = (struct ibv_wc){
        .wr_id = wr_id,
        .status = st,
        .opcode = h->op == SIB_OP_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
        .byte_len = h->len,
        .qp_num = qp->qpx.qp_base.qp_num,
        .src_qp = qp->attr.dest_qp_num,
        .slid = h->lid,
        .sl = qp->attr.ah_attr.sl,
    };
    if (h->flags & SIB_F_IMM) {
        wc->wc_flags |= IBV_WC_WITH_IMM;
        wc->imm_data = h->imm;
    }
}

/* The receive completion of request h, which consumed the receive wr_id. */
static void push_recv_cqe (struct sib_qp *qp, uint64_t wr_id, const struct sib_hdr *h,
                           enum ibv_wc_status st)
{
    struct ibv_wc *wc = sib_cq_slot (qp->rcq); /* filled in place */

    if (!wc)
        return;
    fill_recv_wc (wc, qp, wr_id, h, st);
    sib_cq_commit (qp->rcq, (h->flags & SIB_F_SOLICITED) != 0);
}

static void recv_cqe (struct sib_qp *qp, struct sib_conn *c, enum ibv_wc_status st)
{
    c->have_rwqe = false; /* completed: a flush must not repeat it */
    push_recv_cqe (qp, c->rwqe.wr_id, &c->rh, st);
}

/*
 * The common request in one step: a SEND (or SEND with immediate) with a
 * tiny or short header (wire.h), wholly in the n bytes at p, in sequence, on an active QP
 * without an SRQ whose next receive is one buffer that holds it, in a
 * registered MR the QP's cache knows.  It is taken, its payload copied and
 * its completion pushed without the header and sink state of the general
 * path (sib_resp_header, sink_copy, sib_resp_done), which take everything
 * else: errors, RNR, SRQs, several sges, payloads cut by the ring's end.
 * Takes as many such messages in a row as there are; returns the bytes
 * consumed, 0 if the first is not one (nothing changed: the general path
 * takes it).  The QP's lock is held.
 */
uint32_t sib_resp_fast_send (struct sib_conn *c, const uint8_t *p, uint32_t n)
{
    struct sib_qp *qp = c->qp;
    struct sib_cq *cq = qp->rcq;
    uint32_t used = 0;
    bool locked = false;

    /* a CQ that keeps completion times (fixed at its creation) takes the
     * general path's sib_cq_commit_slow */
    if (qp->resp_rnr_drop || qp->srq || !active (qp)
        || (cq->wc_flags_ex
            & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
               | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)))
        return 0;
    /* nothing below changes the QP's state: a run of them in one call,
     * under one take of the CQ's lock, held across small payloads' copies
     * only (what runs under it is short, softib.h) */
    while (n - used >= SIB_HDR_TINY) {
        const uint8_t *m = p + used;
        enum ibv_wc_status st;
        const struct sib_rwqe_e *w;
        struct sib_hdr h;
        uint32_t hl;
        uint64_t wr_id;
        uint8_t *dst;

        /* each opcode tested again on our copy: the peer may rewrite the
         * ring under us, and only this copy is what we act on */
        if (m[0] == (SIB_OP_SEND | SIB_OP_TINY)) {
            struct sib_hdr_tiny t;

            memcpy (&t, m, SIB_HDR_TINY);
            if (t.op != (SIB_OP_SEND | SIB_OP_TINY))
                break;
            h.op = SIB_OP_SEND;
            h.flags = t.flags & (uint8_t)~SIB_F_IMM;
            h.lid = c->ctx->addr.lid; /* wire.h: the receiver's own */
            h.len = le16toh (t.len);
            h.seq = le32toh (t.seq);
            h.imm = 0;
            hl = SIB_HDR_TINY;
        } else if (n - used >= SIB_HDR_SHORT
                   && (m[0] == (SIB_OP_SEND | SIB_OP_SHORT)
                       || m[0] == (SIB_OP_SEND_IMM | SIB_OP_SHORT))) {
            memcpy (&h, m, SIB_HDR_SHORT);
            if (h.op != (SIB_OP_SEND | SIB_OP_SHORT) && h.op != (SIB_OP_SEND_IMM | SIB_OP_SHORT))
                break;
            h.op &= (uint8_t)~SIB_OP_SHORT;
            h.lid = le16toh (h.lid);
            h.len = le32toh (h.len);
            h.seq = le32toh (h.seq);
            hl = SIB_HDR_SHORT;
        } else {
            break;
        }
        if (h.len > n - used - hl || h.seq != qp->resp_expect || qp->rq.head == qp->rq.tail)
            break;
        w = sib_rq_slot (&qp->rq, qp->rq.tail);
        if (w->nsge != 1 || w->sge[0].length < h.len || !w->sge[0].length)
            break;
        dst = sib_mr_check (qp, w->sge[0].lkey, w->sge[0].addr, w->sge[0].length,
                            IBV_ACCESS_LOCAL_WRITE, IBV_WC_LOC_PROT_ERR, &st);
        if (!dst)
            break; /* the general path reports it */
        /* The payload goes into the receive's buffer before the CQ is
         * looked at: if the general path takes the message after all, it
         * writes the same bytes there again. */
        if (h.len <= 16) {
            sib_copy_small (dst, m + hl, h.len);
        } else {
            if (locked && h.len > 256) {
                sib_unlock (&cq->lock);
                locked = false;
            }
            memcpy (dst, m + hl, h.len);
        }
        if (!locked) {
            sib_lock (&cq->lock);
            locked = true;
        }
        /* a full or an armed CQ: sib_cq_commit's cases, which the general
         * path takes */
        if (cq->head - cq->tail >= cq->size || cq->ts || cq->armed)
            break;
        wr_id = w->wr_id;
        qp->rq.tail++;
        fill_recv_wc (&cq->ring[cq->head & (cq->size - 1)], qp, wr_id, &h, IBV_WC_SUCCESS);
        cq->head++;
        qp->resp_expect++;
        used += hl + h.len;
    }
    if (locked)
        sib_unlock (&cq->lock);
    return used;
}

static void serve_read (struct sib_conn *c, struct sib_qp *qp)
{
    void *p = remote_check (c, qp, IBV_ACCESS_REMOTE_READ, c->rh.rlen);

    if (c->rstatus != IBV_WC_SUCCESS)
        return;
    respond (c, SIB_OP_READ_RESP, c->rh.seq, 0, p, c->rh.rlen);
}

static void serve_atomic (struct sib_conn *c, struct sib_qp *qp)
{
    uint64_t *p, old;

    if (c->rh.addr & 7) {
        c->rstatus = IBV_WC_REM_INV_REQ_ERR;
        return;
    }
    p = remote_check (c, qp, IBV_ACCESS_REMOTE_ATOMIC, 8);
    if (c->rstatus != IBV_WC_SUCCESS)
        return;
    /* CPU atomics keep local atomic users of the same memory coherent */
    if (c->rh.op == SIB_OP_CMP_SWP) {
        old = c->rh.cmp;
        __atomic_compare_exchange_n (p, &old, c->rh.swp, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    } else {
        old = __atomic_fetch_add (p, c->rh.cmp, __ATOMIC_SEQ_CST);
    }
    old = htole64 (old);
    respond (c, SIB_OP_ATOMIC_RESP, c->rh.seq, 0, &old, sizeof (old));
}

void sib_resp_done (struct sib_conn *c)
{
    struct sib_qp *qp = c->qp;
    enum ibv_wc_status st;

    if (c->rstatus == IBV_WC_GENERAL_ERR || c->rstatus == IBV_WC_RNR_RETRY_EXC_ERR) {
        if (qp->qpx.qp_base.qp_type == IBV_QPT_UC && c->rstatus == IBV_WC_GENERAL_ERR && active (qp)
            && !qp->resp_rnr_drop && c->rh.seq == qp->resp_expect)
            qp->resp_expect++; /* UC drop still consumes */
        return;
    }
    if (c->rstatus == IBV_WC_SUCCESS) {
        if (c->rh.op == SIB_OP_READ)
            serve_read (c, qp);
        else if (c->rh.op == SIB_OP_CMP_SWP || c->rh.op == SIB_OP_FETCH_ADD)
            serve_atomic (c, qp);
    }
    st = c->rstatus;
    if (st != IBV_WC_SUCCESS) {
        char why[128];

        if (st == IBV_WC_REM_ACCESS_ERR) {
            respond (c, SIB_OP_NAK_ACCESS, c->rh.seq, 0, NULL, 0);
            sib_async_event (qp->ctx, IBV_EVENT_QP_ACCESS_ERR, qp);
            snprintf (why, sizeof (why),
                      "remote access error: rkey "
                      "0x%x addr 0x%llx len %u",
                      c->rh.rkey, (unsigned long long)c->rh.addr,
                      c->rh.op == SIB_OP_READ ? c->rh.rlen : c->rh.len);
        } else {
            /* IB: a length error is an invalid request, any
			 * other local error of ours a remote op error */
            respond (c, st == IBV_WC_LOC_LEN_ERR ? SIB_OP_NAK_INV : SIB_OP_NAK_OP, c->rh.seq, 0,
                     NULL, 0);
            if (c->have_rwqe)
                recv_cqe (qp, c, st);
            snprintf (why, sizeof (why),
                      "%s on an incoming message "
                      "of %u bytes",
                      sib_wc_status_str (st), c->rh.len);
        }
        sib_conn_flush (c);
        sib_qp_error (qp, why);
        return;
    }
    if (c->have_rwqe)
        recv_cqe (qp, c, IBV_WC_SUCCESS);
    qp->resp_expect++;
    if (c->rh.op == SIB_OP_READ || c->rh.op == SIB_OP_CMP_SWP || c->rh.op == SIB_OP_FETCH_ADD)
        qp->resp_acked = qp->resp_expect;
}

void sib_resp_batch_end (struct sib_conn *c)
{
    struct sib_qp *qp = c->qp;

    if (qp->resp_acked != qp->resp_expect && !qp->resp_rnr_drop) {
        respond (c, SIB_OP_ACK, qp->resp_expect - 1, 0, NULL, 0);
        qp->resp_acked = qp->resp_expect;
    }
}
