/* vw_server.c - verbs_stream's responder: receives and verifies.
 *
 * For SEND, SEND_WITH_IMM and RDMA_WRITE_WITH_IMM every message arrives as
 * a receive completion and is verified then; for RDMA_WRITE the client's
 * doorbell says which slots are in place; for RDMA_READ the server owns the
 * slots the client reads and refills them when the doorbell says they were
 * read.  Per QP, messages must arrive exactly once and in order: the next
 * one is always seq == done, and its bytes must be message (qp, seq).
 */
#include "config.h"

#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "vw_pattern.h"
#include "vw_stream.h"

static uint8_t *ring_slot (struct vw_run *r, struct vw_qp *q, uint64_t seq)
{
    return q->buf + q->data_off + (seq % r->window) * q->data_stride;
}

void vw_server_start (struct vw_run *r, struct vw_qp *q)
{
    switch (r->o.op) {
    case VW_OP_SEND:
    case VW_OP_SEND_IMM:
        for (uint32_t i = 0; i < r->window; i++)
            vw_post_recv (r, q, VW_WR_RDATA, i);
        break;
    case VW_OP_WRITE_IMM:
        for (uint32_t i = 0; i < r->window; i++)
            vw_post_recv (r, q, VW_WR_RIMM, i);
        break;
    case VW_OP_WRITE:
    case VW_OP_READ:
        for (uint32_t i = 0; i < r->nctl; i++)
            vw_post_recv (r, q, VW_WR_RCTL, i);
        for (uint32_t i = 0; i < r->window && i < r->o.count; i++) {
            uint8_t *slot = ring_slot (r, q, i);
            if (r->o.op == VW_OP_READ)
                vw_pattern_fill (slot, r->o.size, (uint32_t)q->idx, i);
            else
                memset (slot, 0, r->o.size);
            vw_slot_guard_init (slot, r->o.size, 1);
        }
        break;
    case VW_OP_FADD:
    case VW_OP_CSWAP: {
        uint64_t v = vw_atomic_value (r->o.op, q->idx, 0);
        memcpy (q->buf + q->data_off, &v, 8);
        break;
    }
    }
}

static void check_ring_slot (struct vw_run *r, struct vw_qp *q, uint64_t seq, const char *what)
{
    uint8_t *slot = ring_slot (r, q, seq);
    char why[256];
    ssize_t g;

    if (vw_pattern_check (slot, r->o.size, (uint32_t)q->idx, seq, NULL) >= 0) {
        vw_pattern_explain (slot, r->o.size, (uint32_t)q->idx, seq, why, sizeof (why));
        vw_die (r, "qp %d: %s: %s", q->idx, what, why);
    }
    if ((g = vw_slot_guard_check (slot, r->o.size, 1)) >= 0)
        vw_die (r,
                "qp %d: %s of seq %llu: memory past the target was "
                "overwritten (byte %zd of the slot)",
                q->idx, what, (unsigned long long)seq, g);
    q->hash = vw_hash (q->hash, slot, r->o.size);
    q->bytes += r->o.size;
}

/* -L: one line for each multiple of the step that q->done passed since
 * it stood at from; flushed at once, so the line is in the file before
 * any checkpoint that follows it. */
static void progress (struct vw_run *r, struct vw_qp *q, uint64_t from)
{
    uint64_t step = r->o.progress;

    if (!step || q->done / step == from / step)
        return;
    for (uint64_t m = (from / step + 1) * step; m <= q->done; m += step)
        printf ("progress qp %d msgs %llu\n", q->idx, (unsigned long long)m);
    fflush (stdout);
}

static void maybe_credit (struct vw_run *r, struct vw_qp *q)
{
    progress (r, q, q->done - 1);
    if (q->done < r->o.count && q->done % r->batch == 0)
        vw_post_ctl (r, q, VW_CTL_CREDIT, q->done + r->window);
}

static void ud_learn_peer (struct vw_run *r, struct vw_qp *q, const struct ibv_wc *wc, void *grh)
{
    if (wc->src_qp != q->remote.qpn)
        vw_die (r,
                "qp %d: UD message from QPN %u, expected the client's "
                "QPN %u",
                q->idx, wc->src_qp, q->remote.qpn);
    if (q->ah)
        return;
    /* Answer the way a UD server does: an AH built from the completion. */
    q->ah = ibv_create_ah_from_wc (r->dev.pd, (struct ibv_wc *)wc, grh, (uint8_t)r->dev.ib_port);
    if (!q->ah)
        vw_die (r, "qp %d: ibv_create_ah_from_wc (slid %u): %m", q->idx, wc->slid);
}

static void data_recv (struct vw_run *r, struct vw_qp *q, const struct ibv_wc *wc)
{
    struct vw_qp *owner = &r->qps[VW_WRID_QP (wc->wr_id)];
    uint64_t slot_idx = VW_WRID_VAL (wc->wr_id);
    uint8_t *slot = owner->buf + owner->data_off + slot_idx * owner->data_stride;
    uint32_t grh = r->o.ud ? VW_GRH_LEN : 0;
    uint8_t *data = slot + (r->o.ud ? 64 : 0);
    uint64_t seq = q->done;
    char why[256];
    ssize_t g;

    if (seq >= r->o.count)
        vw_die (r, "qp %d: message beyond the %llu expected (duplicate)", q->idx,
                (unsigned long long)r->o.count);
    if (wc->opcode != IBV_WC_RECV)
        vw_die (r,
                "qp %d: receive completion has opcode %d, expected "
                "IBV_WC_RECV",
                q->idx, wc->opcode);
    if (wc->byte_len != r->o.size + grh)
        vw_die (r, "qp %d: seq %llu: byte_len %u, expected %u", q->idx, (unsigned long long)seq,
                wc->byte_len, r->o.size + grh);
    if (r->o.op == VW_OP_SEND_IMM) {
        if (!(wc->wc_flags & IBV_WC_WITH_IMM))
            vw_die (r,
                    "qp %d: seq %llu: SEND_WITH_IMM arrived without "
                    "IBV_WC_WITH_IMM",
                    q->idx, (unsigned long long)seq);
        if (be32toh (wc->imm_data) != (uint32_t)seq)
            vw_die (r, "qp %d: seq %llu: immediate data %u, expected %u", q->idx,
                    (unsigned long long)seq, be32toh (wc->imm_data), (uint32_t)seq);
    } else if (wc->wc_flags & IBV_WC_WITH_IMM) {
        vw_die (r, "qp %d: seq %llu: plain SEND arrived with IBV_WC_WITH_IMM", q->idx,
                (unsigned long long)seq);
    }
    if (r->o.ud)
        ud_learn_peer (r, q, wc, slot);
    vw_slot_gather (q->thr->scratch, data, r->o.size, r->o.nsge);
    if (vw_pattern_check (q->thr->scratch, r->o.size, (uint32_t)q->idx, seq, NULL) >= 0) {
        vw_pattern_explain (q->thr->scratch, r->o.size, (uint32_t)q->idx, seq, why, sizeof (why));
        vw_die (r, "qp %d: received %s", q->idx, why);
    }
    if ((g = vw_slot_guard_check (data, r->o.size, r->o.nsge)) >= 0)
        vw_die (r,
                "qp %d: seq %llu: receive wrote past its sg entries "
                "(byte %zd of the slot)",
                q->idx, (unsigned long long)seq, g);
    q->hash = vw_hash (q->hash, q->thr->scratch, r->o.size);
    q->bytes += r->o.size;
    q->done = seq + 1;
    /* Stale bytes must not pass for the next message in this slot. */
    for (int k = 0; k < r->o.nsge; k++) {
        size_t off, len;
        vw_slot_piece_at (r->o.size, r->o.nsge, k, &off, &len);
        memset (data + off, 0, len);
    }
    vw_post_recv (r, owner, VW_WR_RDATA, slot_idx);
    maybe_credit (r, q);
}

static void imm_recv (struct vw_run *r, struct vw_qp *q, const struct ibv_wc *wc)
{
    struct vw_qp *owner = &r->qps[VW_WRID_QP (wc->wr_id)];
    uint64_t seq = q->done;

    if (seq >= r->o.count)
        vw_die (r,
                "qp %d: WRITE_WITH_IMM beyond the %llu expected "
                "(duplicate)",
                q->idx, (unsigned long long)r->o.count);
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
        vw_die (r,
                "qp %d: seq %llu: completion opcode %d, expected "
                "IBV_WC_RECV_RDMA_WITH_IMM",
                q->idx, (unsigned long long)seq, wc->opcode);
    if (!(wc->wc_flags & IBV_WC_WITH_IMM) || be32toh (wc->imm_data) != (uint32_t)seq)
        vw_die (r,
                "qp %d: seq %llu: immediate data %u (flags 0x%x), "
                "expected %u",
                q->idx, (unsigned long long)seq, be32toh (wc->imm_data), wc->wc_flags,
                (uint32_t)seq);
    if (wc->byte_len != r->o.size)
        vw_die (r, "qp %d: seq %llu: byte_len %u, expected the write's %u", q->idx,
                (unsigned long long)seq, wc->byte_len, r->o.size);
    check_ring_slot (r, q, seq, "RDMA WRITE_WITH_IMM");
    memset (ring_slot (r, q, seq), 0, r->o.size);
    q->done = seq + 1;
    vw_post_recv (r, owner, VW_WR_RIMM, VW_WRID_VAL (wc->wr_id));
    maybe_credit (r, q);
}

static void doorbell_recv (struct vw_run *r, struct vw_qp *q, const struct ibv_wc *wc)
{
    struct vw_qp *owner = &r->qps[VW_WRID_QP (wc->wr_id)];
    uint64_t slot = VW_WRID_VAL (wc->wr_id);
    uint64_t from;
    struct vw_ctl ctl;

    if (wc->opcode != IBV_WC_RECV || wc->byte_len != VW_CTL_LEN)
        vw_die (r,
                "qp %d: doorbell has opcode %d length %u, expected RECV "
                "of %u bytes",
                q->idx, wc->opcode, wc->byte_len, VW_CTL_LEN);
    memcpy (&ctl, owner->buf + owner->ctl_off + slot * VW_CTL_STRIDE, sizeof (ctl));
    if (ctl.magic != VW_CTL_MAGIC || ctl.type != VW_CTL_DOORBELL || ctl.qp != (uint64_t)q->idx
        || ctl.seq <= q->done || ctl.seq > r->o.count)
        vw_die (r,
                "qp %d: bad doorbell (magic 0x%x type %u qp %llu seq %llu, "
                "%llu done)",
                q->idx, ctl.magic, ctl.type, (unsigned long long)ctl.qp,
                (unsigned long long)ctl.seq, (unsigned long long)q->done);
    for (uint64_t s = q->done; s < ctl.seq; s++) {
        if (r->o.op == VW_OP_WRITE) {
            check_ring_slot (r, q, s, "RDMA WRITE");
            memset (ring_slot (r, q, s), 0, r->o.size);
        } else {
            /* A READ must leave the responder's memory as it was. */
            check_ring_slot (r, q, s, "memory under RDMA READ");
            if (s + r->window < r->o.count)
                vw_pattern_fill (ring_slot (r, q, s), r->o.size, (uint32_t)q->idx, s + r->window);
        }
    }
    from = q->done;
    q->done = ctl.seq;
    progress (r, q, from);
    vw_post_recv (r, owner, VW_WR_RCTL, slot);
    if (q->done < r->o.count)
        vw_post_ctl (r, q, VW_CTL_CREDIT, q->done + r->window);
}

/* -C: the last message was verified; tell the client our totals.  RC
 * ordering puts it behind every credit, so once it is acknowledged the
 * client may tear down. */
static void maybe_fin (struct vw_run *r, struct vw_qp *q)
{
    if (!r->o.ckpt || q->fin || q->done != r->o.count)
        return;
    vw_post_ctl_val (r, q, VW_CTL_FIN, q->done, q->hash);
    q->fin = 1;
}

void vw_server_wc (struct vw_run *r, struct vw_thread *t, const struct ibv_wc *wc)
{
    struct vw_qp *q = vw_qp_of_wc (r, t, wc);

    vw_check_wc (r, q, wc);
    switch (VW_WRID_KIND (wc->wr_id)) {
    case VW_WR_CTL: {
        uint64_t c = VW_WRID_VAL (wc->wr_id);
        if (wc->opcode != IBV_WC_SEND)
            vw_die (r, "qp %d: credit SEND completion has opcode %d", q->idx, wc->opcode);
        if (c < q->wr_done || c >= q->wr_posted)
            vw_die (r,
                    "qp %d: completion for WR %llu, but WRs %llu..%llu "
                    "are outstanding",
                    q->idx, (unsigned long long)c, (unsigned long long)q->wr_done,
                    (unsigned long long)q->wr_posted);
        q->wr_done = c + 1;
        break;
    }
    case VW_WR_RDATA:
        data_recv (r, q, wc);
        break;
    case VW_WR_RIMM:
        imm_recv (r, q, wc);
        break;
    case VW_WR_RCTL:
        doorbell_recv (r, q, wc);
        break;
    default:
        vw_die (r, "qp %d: completion with unknown wr_id 0x%llx", q->idx,
                (unsigned long long)wc->wr_id);
    }
    maybe_fin (r, q);
}

int vw_server_finished (struct vw_run *r, struct vw_qp *q)
{
    if (vw_op_is_atomic (r->o.op))
        return 1; /* nothing arrives; the counters are checked at the end */
    return q->done == r->o.count && q->wr_done == q->wr_posted && (!r->o.ckpt || q->fin);
}
