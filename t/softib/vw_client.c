/* vw_client.c - verbs_stream's requester: posts the opcode under test.
 *
 * Per QP the client posts data seq s only when the server granted it
 * (s < credit) and its own slot s % W is free (s - done < W).  For READ and
 * the atomics it verifies what came back itself; for the others the server
 * verifies and the client only checks that every completion succeeded.
 * A completion of WR c proves every earlier WR of that QP completed (send
 * queues complete in order), which is how unsignaled WRs are accounted.
 */
#include "config.h"

#include <endian.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "vw_pattern.h"
#include "vw_stream.h"

static int is_doorbell_op (enum vw_op op)
{
    return op == VW_OP_WRITE || op == VW_OP_READ;
}

void vw_client_start (struct vw_run *r, struct vw_qp *q)
{
    for (uint32_t i = 0; i < r->nctl; i++)
        vw_post_recv (r, q, VW_WR_RCTL, i);
    /* Atomics target one counter: the server has nothing to grant. */
    q->credit = vw_op_is_atomic (r->o.op) ? UINT64_MAX : r->window;
    if (r->o.op == VW_OP_READ) {
        /* The server filled slots 0..W-1 before it told us its address. */
        q->credit = r->window;
    }
}

static uint8_t *slot_at (struct vw_run *r, struct vw_qp *q, uint64_t seq)
{
    return q->buf + q->data_off + (seq % r->window) * q->data_stride;
}

static int build_sges (struct vw_run *r, struct vw_qp *q, uint64_t seq, struct ibv_sge *sge)
{
    uint8_t *slot = slot_at (r, q, seq);
    int n = 0;

    if (vw_op_is_atomic (r->o.op)) {
        sge[0].addr = (uintptr_t)slot;
        sge[0].length = 8;
        sge[0].lkey = q->mr->lkey;
        return 1;
    }
    for (int k = 0; k < r->o.nsge; k++) {
        size_t off, len;
        vw_slot_piece_at (r->o.size, r->o.nsge, k, &off, &len);
        if (len == 0)
            continue;
        sge[n].addr = (uintptr_t)(slot + off);
        sge[n].length = (uint32_t)len;
        sge[n].lkey = q->mr->lkey;
        n++;
    }
    return n;
}

static int want_signal (struct vw_run *r, struct vw_qp *q, uint64_t seq)
{
    /* Signal the batch ends and the last message whatever -u says: the
     * window and the doorbells depend on seeing them complete, and so does
     * an SQ about to fill up. */
    return (seq + 1) % (uint64_t)r->o.sig_every == 0 || (seq + 1) % r->batch == 0
        || seq + 1 == r->o.count || q->wr_posted - q->wr_done + 2 >= q->sq_depth;
}

static void post_data (struct vw_run *r, struct vw_qp *q, uint64_t seq)
{
    struct ibv_sge sge[64];
    struct ibv_send_wr wr;
    uint8_t *slot = slot_at (r, q, seq);
    uint64_t rslot = q->remote.addr + (seq % r->window) * q->remote_stride;

    memset (&wr, 0, sizeof (wr));
    wr.sg_list = sge;
    wr.num_sge = build_sges (r, q, seq, sge);
    if (want_signal (r, q, seq))
        wr.send_flags |= IBV_SEND_SIGNALED;
    switch (r->o.op) {
    case VW_OP_SEND:
    case VW_OP_SEND_IMM:
    case VW_OP_WRITE:
    case VW_OP_WRITE_IMM:
        vw_pattern_fill (q->thr->scratch, r->o.size, (uint32_t)q->idx, seq);
        if (q->idx == 0 && seq == r->corrupt_seq)
            q->thr->scratch[r->o.size / 2] ^= 0x01;
        vw_slot_scatter (slot, q->thr->scratch, r->o.size, r->o.nsge);
        break;
    case VW_OP_READ:
        /* Stale bytes must not pass for fresh ones. */
        for (int k = 0; k < wr.num_sge; k++)
            memset ((void *)(uintptr_t)sge[k].addr, 0, sge[k].length);
        break;
    default:
        memset (slot, 0, 8);
        break;
    }
    switch (r->o.op) {
    case VW_OP_SEND:
        wr.opcode = IBV_WR_SEND;
        break;
    case VW_OP_SEND_IMM:
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.imm_data = htobe32 ((uint32_t)seq);
        break;
    case VW_OP_WRITE:
    case VW_OP_WRITE_IMM:
        wr.opcode = r->o.op == VW_OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = htobe32 ((uint32_t)seq);
        wr.wr.rdma.remote_addr = rslot;
        wr.wr.rdma.rkey = q->remote.rkey;
        break;
    case VW_OP_READ:
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = rslot;
        wr.wr.rdma.rkey = q->remote.rkey;
        break;
    case VW_OP_FADD:
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = q->remote.addr;
        wr.wr.atomic.rkey = q->remote.rkey;
        wr.wr.atomic.compare_add = seq + 1;
        break;
    case VW_OP_CSWAP:
        wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = q->remote.addr;
        wr.wr.atomic.rkey = q->remote.rkey;
        wr.wr.atomic.compare_add = vw_atomic_value (r->o.op, q->idx, seq);
        if (vw_cswap_fails (seq)) {
            wr.wr.atomic.compare_add ^= 0x5555;
            wr.wr.atomic.swap = 0xbad0bad0bad0bad0ULL;
        } else {
            wr.wr.atomic.swap = vw_atomic_value (r->o.op, q->idx, seq + 1);
        }
        break;
    }
    if (r->o.ud) {
        wr.wr.ud.ah = q->ah;
        wr.wr.ud.remote_qpn = q->remote.qpn;
        wr.wr.ud.remote_qkey = VW_QKEY;
    }
    if (r->o.inline_data)
        wr.send_flags |= IBV_SEND_INLINE;
    vw_post_sq (r, q, &wr, VW_WR_DATA, seq);
    if (r->o.inline_data) {
        /* Inline data was copied at post time: scribbling over the source
         * now must not change what the server receives. */
        for (int k = 0; k < wr.num_sge; k++)
            memset ((void *)(uintptr_t)sge[k].addr, 0xee, sge[k].length);
    }
    q->posted = seq + 1;
}

/* How many messages -r allows QP q by now (UINT64_MAX without -r).  A
 * QP more than a second behind its pace (the process was stopped, or
 * dumped and restored later) starts its clock again from where it is:
 * the stream goes on at its rate instead of catching up in a burst, so
 * work paced to last N seconds runs N seconds whatever the pauses. */
static uint64_t paced_limit (struct vw_run *r, struct vw_qp *q)
{
    struct timespec ts;
    double now;
    uint64_t limit;

    if (!r->o.rate)
        return UINT64_MAX;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    if (q->pace_t == 0) {
        q->pace_t = r->t_start;
        q->pace_seq = 0;
    }
    limit = q->pace_seq + 1 + (uint64_t)((now - q->pace_t) * r->o.rate);
    if (limit > q->posted + r->o.rate + (uint64_t)r->window) {
        q->pace_t = now;
        q->pace_seq = q->posted;
        limit = q->posted + 1;
    }
    return limit;
}

int vw_client_post (struct vw_run *r, struct vw_qp *q)
{
    uint64_t limit = paced_limit (r, q);
    int n = 0;

    if (q->posted < r->o.count && q->posted >= limit)
        q->thr->throttled = 1;
    while (q->posted < r->o.count && q->posted < q->credit && q->posted < limit
           && q->posted - q->done < r->window && q->wr_posted - q->wr_done + 2 < q->sq_depth) {
        uint64_t seq = q->posted;

        post_data (r, q, seq);
        n++;
        if (r->o.op == VW_OP_WRITE && ((seq + 1) % r->batch == 0 || seq + 1 == r->o.count)) {
            vw_post_ctl (r, q, VW_CTL_DOORBELL, seq + 1);
            q->doorbell = seq + 1;
        }
    }
    return n;
}

/* Data seq completed: verify what the client itself can verify. */
static void data_done (struct vw_run *r, struct vw_qp *q, uint64_t seq)
{
    uint8_t *slot = slot_at (r, q, seq);
    struct vw_thread *t = q->thr;
    char why[256];

    if (seq != q->done)
        vw_die (r,
                "qp %d: completion for seq %llu while seq %llu was next "
                "(send queue completed out of order)",
                q->idx, (unsigned long long)seq, (unsigned long long)q->done);
    switch (r->o.op) {
    case VW_OP_READ: {
        ssize_t g;
        vw_slot_gather (t->scratch, slot, r->o.size, r->o.nsge);
        if (vw_pattern_check (t->scratch, r->o.size, (uint32_t)q->idx, seq, NULL) >= 0) {
            vw_pattern_explain (t->scratch, r->o.size, (uint32_t)q->idx, seq, why, sizeof (why));
            vw_die (r, "qp %d: RDMA READ of seq %llu: %s", q->idx, (unsigned long long)seq, why);
        }
        if ((g = vw_slot_guard_check (slot, r->o.size, r->o.nsge)) >= 0)
            vw_die (r,
                    "qp %d: RDMA READ of seq %llu wrote past its sg "
                    "entries (byte %zd of the slot)",
                    q->idx, (unsigned long long)seq, g);
        q->hash = vw_hash (q->hash, t->scratch, r->o.size);
        break;
    }
    case VW_OP_FADD:
    case VW_OP_CSWAP: {
        uint64_t got, want = vw_atomic_value (r->o.op, q->idx, seq);
        memcpy (&got, slot, 8);
        if (got != want)
            vw_die (r,
                    "qp %d: %s seq %llu returned 0x%016llx, expected "
                    "0x%016llx%s",
                    q->idx, vw_op_name (r->o.op), (unsigned long long)seq, (unsigned long long)got,
                    (unsigned long long)want,
                    got == be64toh (want) ? " (byte-swapped: the device "
                                            "returns atomics in big-endian)"
                                          : "");
        q->hash = vw_hash (q->hash, &got, 8);
        break;
    }
    default:
        /* The server verifies the data; hash what we sent. */
        vw_pattern_fill (t->scratch, r->o.size, (uint32_t)q->idx, seq);
        q->hash = vw_hash (q->hash, t->scratch, r->o.size);
        break;
    }
    q->bytes += r->o.size;
    q->done = seq + 1;
    if (r->o.op == VW_OP_READ && (q->done % r->batch == 0 || q->done == r->o.count)) {
        /* Tell the server these slots were read so it can refill them. */
        vw_post_ctl (r, q, VW_CTL_DOORBELL, q->done);
        q->doorbell = q->done;
    }
}

static void send_wc (struct vw_run *r, struct vw_qp *q, const struct ibv_wc *wc)
{
    uint64_t c = VW_WRID_VAL (wc->wr_id);
    static const enum ibv_wc_opcode want[] = {
        [VW_OP_SEND] = IBV_WC_SEND,        [VW_OP_SEND_IMM] = IBV_WC_SEND,
        [VW_OP_WRITE] = IBV_WC_RDMA_WRITE, [VW_OP_WRITE_IMM] = IBV_WC_RDMA_WRITE,
        [VW_OP_READ] = IBV_WC_RDMA_READ,   [VW_OP_FADD] = IBV_WC_FETCH_ADD,
        [VW_OP_CSWAP] = IBV_WC_COMP_SWAP,
    };

    if (c < q->wr_done || c >= q->wr_posted)
        vw_die (r,
                "qp %d: completion for WR %llu, but WRs %llu..%llu are "
                "outstanding (duplicate or stray completion)",
                q->idx, (unsigned long long)c, (unsigned long long)q->wr_done,
                (unsigned long long)q->wr_posted);
    if (VW_WRID_KIND (wc->wr_id) == VW_WR_DATA && wc->opcode != want[r->o.op])
        vw_die (r, "qp %d: %s completion has opcode %d, expected %d", q->idx, vw_op_name (r->o.op),
                wc->opcode, want[r->o.op]);
    if (VW_WRID_KIND (wc->wr_id) == VW_WR_CTL && wc->opcode != IBV_WC_SEND)
        vw_die (r, "qp %d: doorbell SEND completion has opcode %d", q->idx, wc->opcode);
    /* Every WR up to c is complete.  Collect their seqs before verifying:
     * verifying a READ batch posts a doorbell, which may reuse SQ slots. */
    uint64_t from = q->wr_done;
    uint64_t n = 0;
    for (uint64_t w = from; w <= c; w++) {
        uint64_t seq = q->wr_seq[w % q->sq_depth];
        if (seq != UINT64_MAX)
            q->wr_tmp[n++] = seq;
    }
    q->wr_done = c + 1;
    for (uint64_t i = 0; i < n; i++)
        data_done (r, q, q->wr_tmp[i]);
}

static void credit_wc (struct vw_run *r, struct vw_qp *q, const struct ibv_wc *wc)
{
    uint64_t slot = VW_WRID_VAL (wc->wr_id);
    uint32_t off = r->o.ud ? VW_GRH_LEN : 0;
    struct vw_ctl ctl;

    if (wc->opcode != IBV_WC_RECV || wc->byte_len != VW_CTL_LEN + off)
        vw_die (r,
                "qp %d: credit message has opcode %d length %u, expected "
                "RECV of %u bytes",
                q->idx, wc->opcode, wc->byte_len, VW_CTL_LEN + off);
    memcpy (&ctl, q->buf + q->ctl_off + slot * VW_CTL_STRIDE + off, sizeof (ctl));
    if (r->o.ckpt && ctl.magic == VW_CTL_MAGIC && ctl.type == VW_CTL_FIN
        && ctl.qp == (uint64_t)q->idx) {
        /* Compared with our own totals once our completions are in. */
        if (q->fin)
            vw_die (r, "qp %d: a second FIN from the server (duplicate)", q->idx);
        q->fin = 1;
        q->fin_done = ctl.seq;
        q->fin_hash = ctl.pad;
        vw_post_recv (r, q, VW_WR_RCTL, slot);
        return;
    }
    if (ctl.magic != VW_CTL_MAGIC || ctl.type != VW_CTL_CREDIT || ctl.qp != (uint64_t)q->idx)
        vw_die (r, "qp %d: bad credit message (magic 0x%x type %u qp %llu)", q->idx, ctl.magic,
                ctl.type, (unsigned long long)ctl.qp);
    if (ctl.seq > q->credit || q->credit == UINT64_MAX)
        q->credit = ctl.seq;
    vw_post_recv (r, q, VW_WR_RCTL, slot);
}

void vw_client_wc (struct vw_run *r, struct vw_thread *t, const struct ibv_wc *wc)
{
    struct vw_qp *q = vw_qp_of_wc (r, t, wc);

    vw_check_wc (r, q, wc);
    switch (VW_WRID_KIND (wc->wr_id)) {
    case VW_WR_DATA:
    case VW_WR_CTL:
        send_wc (r, q, wc);
        break;
    case VW_WR_RCTL:
        credit_wc (r, q, wc);
        break;
    default:
        vw_die (r, "qp %d: completion with unknown wr_id 0x%llx", q->idx,
                (unsigned long long)wc->wr_id);
    }
}

int vw_client_finished (struct vw_run *r, struct vw_qp *q)
{
    /* Done when every message completed (and was verified here when the
     * client is the one that can) and every WR, doorbells included, is
     * acknowledged, so the server is guaranteed to get the last one; with
     * -C also when the server's FIN arrived, its last SEND to us. */
    return q->done == r->o.count && q->wr_done == q->wr_posted
        && (!is_doorbell_op (r->o.op) || q->doorbell == r->o.count) && (!r->o.ckpt || q->fin);
}
