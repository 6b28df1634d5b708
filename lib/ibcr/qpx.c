/* qpx.c - the ibv_wr_* send API of virtual QPs (ibv_qp_to_qp_ex).
 *
 * libibcr builds ordinary ibv_send_wr lists from the ibv_wr_* calls made
 * between ibv_wr_start and ibv_wr_complete, and posts them through the
 * send path of ibv_post_send (post.h): the same logging, translation and
 * drain accounting serve both APIs, and the real QP needs no extended
 * interface (any backend).
 * Inline data is copied when it is set, as rdma-core providers do.  The
 * application serializes wr_start..wr_complete per QP (verbs' rule), so the
 * builder needs no lock of its own.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "ibcr.h"
#include "exports.h"
#include "post.h"

static struct ibcr_wrb *wrb_of (struct ibv_qp_ex *qx)
{
    return &((struct ibcr_qp *)qx)->wrb;
}

static int grow (void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *n = realloc (*p, ncap * size);
    if (!n)
        return -1;
    *p = n;
    *cap = ncap;
    return 0;
}

static void wr_start (struct ibv_qp_ex *qx)
{
    struct ibcr_wrb *b = wrb_of (qx);
    b->n = b->nsge = b->ninl = 0;
    b->err = 0;
    b->slow = false;
}

/* A new WR of 'op' with the QP's current wr_id and flags, linked after
 * the batch's last one.  Only the fields a post reads are written (a
 * memset of the whole entry per WR showed in the per-WR cost,
 * doc/libibcr-ns.md).  Inline in each opcode's function: one call per
 * builder call, as the backend's own builder has. */
static inline __attribute__ ((always_inline)) struct wrb_ent *new_wr (struct ibv_qp_ex *qx,
                                                                      enum ibv_wr_opcode op)
{
    struct ibcr_wrb *b = wrb_of (qx);
    if (__builtin_expect (b->n == b->cap, 0)) {
        if (grow ((void **)&b->e, &b->cap, b->n + 1, sizeof (*b->e)) < 0) {
            b->err = b->err ? b->err : ENOMEM;
            return NULL;
        }
        b->slow = true; /* the entries moved: link them afresh */
    }
    struct wrb_ent *e = &b->e[b->n];
    if (b->n)
        e[-1].wr.next = &e->wr;
    b->n++;
    e->wr.next = NULL;
    e->wr.wr_id = qx->wr_id;
    e->wr.sg_list = NULL;
    e->wr.num_sge = 0;
    e->wr.opcode = op;
    e->wr.send_flags = qx->wr_flags;
    e->wr.imm_data = 0;
    memset (&e->wr.wr, 0, sizeof (e->wr.wr));
    /* An inline WR whose bytes come from wr_set_sge: its log entry must
     * copy them (wrlog_sq_push), which only ibcr_post_send does. */
    if (__builtin_expect (qx->wr_flags & IBV_SEND_INLINE, 0))
        b->slow = true;
    e->kind = WRB_NODATA;
    return e;
}

static struct wrb_ent *cur (struct ibv_qp_ex *qx)
{
    struct ibcr_wrb *b = wrb_of (qx);
    if (__builtin_expect (b->n == 0, 0)) {
        if (!b->err)
            b->err = EINVAL; /* a setter before any WR */
        return NULL;
    }
    return &b->e[b->n - 1];
}

static void wr_send (struct ibv_qp_ex *qx)
{
    new_wr (qx, IBV_WR_SEND);
}

static void wr_send_imm (struct ibv_qp_ex *qx, __be32 imm)
{
    struct wrb_ent *e = new_wr (qx, IBV_WR_SEND_WITH_IMM);
    if (e)
        e->wr.imm_data = imm;
}

static void wr_rdma (struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
                     __be32 imm)
{
    struct wrb_ent *e = new_wr (qx, op);
    if (e) {
        e->wr.wr.rdma.rkey = rkey;
        e->wr.wr.rdma.remote_addr = addr;
        e->wr.imm_data = imm;
    }
}

static void wr_rdma_write (struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
    wr_rdma (qx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm (struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, __be32 imm)
{
    wr_rdma (qx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read (struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
    wr_rdma (qx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_atomic (struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
                       uint64_t cmp_add, uint64_t swap)
{
    struct wrb_ent *e = new_wr (qx, op);
    if (e) {
        e->wr.wr.atomic.rkey = rkey;
        e->wr.wr.atomic.remote_addr = addr;
        e->wr.wr.atomic.compare_add = cmp_add;
        e->wr.wr.atomic.swap = swap;
    }
}

static void wr_atomic_cmp_swp (struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t compare,
                               uint64_t swap)
{
    wr_atomic (qx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_atomic_fetch_add (struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t add)
{
    wr_atomic (qx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* Operations libibcr refuses at creation (send_ops_flags); reaching one
 * anyway fails the whole batch at wr_complete. */
static void refuse_op (struct ibv_qp_ex *qx, const char *what)
{
    struct ibcr_wrb *b = wrb_of (qx);
    ibcr_refuse (what, "not supported through libibcr");
    if (!b->err)
        b->err = EOPNOTSUPP;
}

static void wr_bind_mw (struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
                        const struct ibv_mw_bind_info *info)
{
    refuse_op (qx, "ibv_wr_bind_mw (memory windows)");
}

static void wr_local_inv (struct ibv_qp_ex *qx, uint32_t rkey)
{
    refuse_op (qx, "ibv_wr_local_inv");
}

static void wr_send_inv (struct ibv_qp_ex *qx, uint32_t rkey)
{
    refuse_op (qx, "ibv_wr_send_inv");
}

static void wr_send_tso (struct ibv_qp_ex *qx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
    refuse_op (qx, "ibv_wr_send_tso");
}

static void wr_set_xrc_srqn (struct ibv_qp_ex *qx, uint32_t srqn)
{
    refuse_op (qx, "ibv_wr_set_xrc_srqn (XRC)");
}

static void wr_atomic_write (struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, const void *data)
{
    refuse_op (qx, "ibv_wr_atomic_write");
}

static void wr_set_ud_addr (struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
    struct wrb_ent *e = cur (qx);
    if (e) {
        e->wr.wr.ud.ah = ah;
        e->wr.wr.ud.remote_qpn = qpn;
        e->wr.wr.ud.remote_qkey = qkey;
    }
}

static void wr_set_sge_list (struct ibv_qp_ex *qx, size_t n, const struct ibv_sge *sg)
{
    struct ibcr_wrb *b = wrb_of (qx);
    struct wrb_ent *e = cur (qx);
    if (!e)
        return;
    if (n == 1) {
        e->sge1 = sg[0];
        e->kind = WRB_SGE1;
        e->wr.sg_list = &e->sge1;
        e->wr.num_sge = 1;
        return;
    }
    b->slow = true;
    if (grow ((void **)&b->sge, &b->sgecap, b->nsge + n, sizeof (*b->sge)) < 0) {
        b->err = b->err ? b->err : ENOMEM;
        return;
    }
    e->sge0 = b->nsge;
    e->nsge = n;
    e->kind = WRB_SGES;
    memcpy (b->sge + b->nsge, sg, n * sizeof (*sg));
    b->nsge += n;
}

static void wr_set_sge (struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t len)
{
    struct wrb_ent *e = cur (qx);
    if (e) {
        e->sge1.addr = addr;
        e->sge1.length = len;
        e->sge1.lkey = lkey;
        e->kind = WRB_SGE1;
        e->wr.sg_list = &e->sge1;
        e->wr.num_sge = 1;
    }
}

static void wr_set_inline_data_list (struct ibv_qp_ex *qx, size_t n,
                                     const struct ibv_data_buf *bufs)
{
    struct ibcr_wrb *b = wrb_of (qx);
    struct wrb_ent *e = cur (qx);
    size_t total = 0;
    if (!e)
        return;
    b->slow = true;
    for (size_t i = 0; i < n; i++)
        total += bufs[i].length;
    if (grow ((void **)&b->inl, &b->inlcap, b->ninl + total, 1) < 0) {
        b->err = b->err ? b->err : ENOMEM;
        return;
    }
    e->inl0 = b->ninl;
    e->ninl = total;
    e->kind = WRB_INL;
    for (size_t i = 0; i < n; i++) {
        memcpy (b->inl + b->ninl, bufs[i].addr, bufs[i].length);
        b->ninl += bufs[i].length;
    }
}

static void wr_set_inline_data (struct ibv_qp_ex *qx, void *addr, size_t len)
{
    struct ibv_data_buf d = { .addr = addr, .length = len };
    wr_set_inline_data_list (qx, 1, &d);
}

/* wr_complete of a batch not linked as it was built. */
static int complete_slow (struct ibv_qp_ex *qx, struct ibcr_wrb *b)
{
    /* Pointers into the arrays only now: they may have moved while
     * growing.  One inline sge per WR lives in a side array kept with the
     * builder (a malloc and free per wr_complete cost 15 ns). */
    if (__builtin_expect (b->n > b->isgcap, 0)
        && grow ((void **)&b->isg, &b->isgcap, b->n, sizeof (*b->isg)) < 0)
        return ENOMEM;
    struct ibv_sge *isg = b->isg;
    for (size_t i = 0; i < b->n; i++) {
        struct wrb_ent *e = &b->e[i];
        switch (e->kind) {
        case WRB_SGE1:
            e->wr.sg_list = &e->sge1;
            e->wr.num_sge = 1;
            break;
        case WRB_SGES:
            e->wr.sg_list = b->sge + e->sge0;
            e->wr.num_sge = (int)e->nsge;
            break;
        case WRB_INL:
            isg[i].addr = (uintptr_t)(b->inl + e->inl0);
            isg[i].length = e->ninl;
            isg[i].lkey = 0;
            e->wr.sg_list = &isg[i];
            e->wr.num_sge = e->ninl ? 1 : 0;
            e->wr.send_flags |= IBV_SEND_INLINE;
            break;
        default:
            e->wr.sg_list = NULL;
            e->wr.num_sge = 0;
            break;
        }
        e->wr.next = i + 1 < b->n ? &b->e[i + 1].wr : NULL;
    }
    struct ibv_send_wr *bad;
    int rc = ibcr_post_send (&qx->qp_base, &b->e[0].wr, &bad);
    b->n = b->nsge = b->ninl = 0;
    return rc;
}

/* wr_complete of a batch of several WRs, or of one not linked as it was
 * built, or on a UD QP: out of line, the common one-WR batch goes
 * without these tests. */
static __attribute__ ((noinline)) int complete_batch (struct ibv_qp_ex *qx, struct ibcr_wrb *b)
{
    struct ibcr_qp *vqp = (struct ibcr_qp *)qx;
    /* A batch is posted whole or not at all, as a provider's: one the
     * send queue has no room for is refused before any of it is posted
     * (the backend would take its head and refuse the rest, and an
     * application that posts the batch again would run that head twice).
     * Every real WR is signaled, so the queue holds what the log holds. */
    if (b->n > 1 && wrlog_sq_len (&vqp->sq) + b->n > vqp->init.cap.max_send_wr) {
        b->n = b->nsge = b->ninl = 0;
        return ENOMEM;
    }
    if (b->slow || qx->qp_base.qp_type == IBV_QPT_UD)
        return complete_slow (qx, b);
    struct ibv_send_wr *bad;
    int rc = post_send_as (vqp, &b->e[0].wr, &bad, true);
    b->n = 0; /* nsge and ninl are 0: the batch is not slow */
    return rc;
}

static int wr_complete (struct ibv_qp_ex *qx)
{
    struct ibcr_wrb *b = wrb_of (qx);
    if (b->err)
        return b->err;
    if (b->n == 0)
        return 0;
    if (__builtin_expect (b->n > 1 || b->slow || qx->qp_base.qp_type == IBV_QPT_UD, 0))
        return complete_batch (qx, b);
    struct ibv_send_wr *bad;
    int rc = post_send_one ((struct ibcr_qp *)qx, &b->e[0].wr, &bad, true, false);
    b->n = 0; /* nsge and ninl are 0: the batch is not slow */
    return rc;
}

static void wr_abort (struct ibv_qp_ex *qx)
{
    struct ibcr_wrb *b = wrb_of (qx);
    b->n = b->nsge = b->ninl = 0;
}

void ibcr_qpx_fill (struct ibcr_qp *vqp)
{
    struct ibv_qp_ex *x = &vqp->qpx;
    x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x->wr_atomic_fetch_add = wr_atomic_fetch_add;
    x->wr_bind_mw = wr_bind_mw;
    x->wr_local_inv = wr_local_inv;
    x->wr_rdma_read = wr_rdma_read;
    x->wr_rdma_write = wr_rdma_write;
    x->wr_rdma_write_imm = wr_rdma_write_imm;
    x->wr_send = wr_send;
    x->wr_send_imm = wr_send_imm;
    x->wr_send_inv = wr_send_inv;
    x->wr_send_tso = wr_send_tso;
    x->wr_set_ud_addr = wr_set_ud_addr;
    x->wr_set_xrc_srqn = wr_set_xrc_srqn;
    x->wr_set_inline_data = wr_set_inline_data;
    x->wr_set_inline_data_list = wr_set_inline_data_list;
    x->wr_set_sge = wr_set_sge;
    x->wr_set_sge_list = wr_set_sge_list;
    x->wr_start = wr_start;
    x->wr_complete = wr_complete;
    x->wr_abort = wr_abort;
    x->wr_atomic_write = wr_atomic_write;
}

void ibcr_qpx_free (struct ibcr_qp *vqp)
{
    struct ibcr_wrb *b = &vqp->wrb;
    free (b->e);
    free (b->sge);
    free (b->inl);
    free (b->isg);
    memset (b, 0, sizeof (*b));
}
