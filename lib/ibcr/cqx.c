/* cqx.c - extended CQs (ibv_create_cq_ex) and their polling API.
 *
 * The real CQ is an ordinary one (any backend will do); ibv_start_poll and
 * ibv_next_poll take one completion at a time through ibcr_poll_cq, so the
 * completions drained at a checkpoint come first and every completion is
 * accounted and translated exactly as for ibv_poll_cq.  The ibv_wc_read_*
 * calls answer from that completion.  Fields libibcr cannot keep across a
 * rebuild (HCA timestamps, flow tags, tag matching) are refused at
 * creation.
 */
#include "config.h"
#include <errno.h>
#include <string.h>
#include "ibcr.h"
#include "exports.h"

#define CQX_SUPPORTED                                                                              \
    (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP  \
     | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS)

static struct ibcr_cq *vcq_x (struct ibv_cq_ex *c)
{
    return (struct ibcr_cq *)c;
}

static int take (struct ibv_cq_ex *c)
{
    struct ibcr_cq *vcq = vcq_x (c);
    int n = ibcr_poll_cq ((struct ibv_cq *)c, 1, &vcq->cur);
    if (n < 0)
        return EIO;
    if (n == 0)
        return ENOENT;
    c->wr_id = vcq->cur.wr_id;
    c->status = vcq->cur.status;
    return 0;
}

/* A poll from start to end excludes other threads' (xlock), as a
 * provider's CQ lock does; it is taken outside the gate, and each take
 * passes the gate on its own, so a checkpoint never waits for a thread
 * between two completions, nor one thread for another inside the gate.
 * A post meanwhile (a receive posted again from the poll loop) takes no
 * xlock. */
static int start_poll (struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
    struct ibcr_cq *vcq = vcq_x (c);
    if (attr && attr->comp_mask)
        return EINVAL;
    /* A thread without a gate slot would be taken for libibcr's own. */
    struct gate_slot *s = gate_self;
    if (__builtin_expect (!s, 0))
        s = gate_slot_new ();
    int how = block_lock_as (&vcq->xlock, s);
    int rc = take (c);
    if (rc) /* no end_poll follows a start_poll that failed */
        block_unlock (&vcq->xlock, how);
    else
        vcq->xhow = how;
    return rc;
}

static int next_poll (struct ibv_cq_ex *c)
{
    return take (c);
}

static void end_poll (struct ibv_cq_ex *c)
{
    struct ibcr_cq *vcq = vcq_x (c);
    block_unlock (&vcq->xlock, vcq->xhow);
}

static enum ibv_wc_opcode read_opcode (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.opcode;
}

static uint32_t read_vendor_err (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.vendor_err;
}

static uint32_t read_byte_len (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.byte_len;
}

static __be32 read_imm_data (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.imm_data;
}

static uint32_t read_qp_num (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.qp_num;
}

static uint32_t read_src_qp (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.src_qp;
}

static unsigned int read_wc_flags (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.wc_flags;
}

static uint32_t read_slid (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.slid;
}

static uint8_t read_sl (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.sl;
}

static uint8_t read_dlid_path_bits (struct ibv_cq_ex *c)
{
    return vcq_x (c)->cur.dlid_path_bits;
}

struct ibv_cq_ex *ibcr_create_cq_ex (struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
    if (a->wc_flags & ~(uint64_t)CQX_SUPPORTED) {
        ibcr_refuse ("ibv_create_cq_ex wc_flags beyond byte_len, imm, qp_num, src_qp, "
                     "slid, sl, dlid_path_bits",
                     "timestamps, flow tags and tag matching "
                     "do not survive a rebuild");
        return NULL;
    }
    if (a->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS) {
        ibcr_refuse ("ibv_create_cq_ex with a parent domain",
                     "parent domains are not "
                     "recreated at rebuild");
        return NULL;
    }
    struct ibv_cq *cq =
        ibcr_create_cq (ctx, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector);
    if (!cq)
        return NULL;
    struct ibv_cq_ex *c = &vcq_of (cq)->cqx;
    c->start_poll = start_poll;
    c->next_poll = next_poll;
    c->end_poll = end_poll;
    c->read_opcode = read_opcode;
    c->read_vendor_err = read_vendor_err;
    c->read_byte_len = read_byte_len;
    c->read_imm_data = read_imm_data;
    c->read_qp_num = read_qp_num;
    c->read_src_qp = read_src_qp;
    c->read_wc_flags = read_wc_flags;
    c->read_slid = read_slid;
    c->read_sl = read_sl;
    c->read_dlid_path_bits = read_dlid_path_bits;
    return c;
}
