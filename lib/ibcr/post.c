/* post.c - posting work requests: log, translate, forward.
 *
 * Every accepted WR enters its queue's log (wrlog.h) before it reaches the
 * real queue, and leaves the log when its completion is accounted (qp.c).
 * Before the first rebuild (ibcr_xlate == 0) RC/UC WRs go to the backend
 * untouched: virtual ids are the real ones.  After it, lkeys are mapped
 * locally, rkeys through the peer rank's table, and UD destinations to the
 * peer's current real LID and QPN, on a private copy of the WR list.
 */
#include "config.h"
#include <errno.h>
#include <string.h>
#include <alloca.h>
#include "ibcr.h"
#include "backend.h"
#include "gate.h"
#include "xlate.h"
#include "exports.h"
#include "post.h"

static uint32_t lkey_real (struct ibcr_ctx *vctx, uint32_t vlkey)
{
    struct ibcr_mr *vmr = idtab_get (&vctx->mr_by_vlkey, vlkey);
    return vmr && vmr->real ? vmr->real->lkey : vlkey;
}

/* lkey_real through the QP's one-entry cache: a send's sges mostly name
 * the MR the last one named, and the walk (the radix tree's levels, the
 * MR, its real MR) is six dependent loads.  Caller holds the QP's slock
 * or the gate is closed.  ibcr_mr_gen moves whenever a virtual lkey may
 * name another real one (an MR registered or deregistered: a later MR may
 * get the same virtual lkey; a release or rebuild): a registration
 * another thread made before handing us its lkey happens before this
 * acquire load, so the entry is never stale for a key the application may
 * use. */
static uint32_t lkey_real_qp (struct ibcr_qp *vqp, uint32_t vlkey)
{
    unsigned g = atomic_load_explicit (&ibcr_mr_gen, memory_order_acquire);
    if (vqp->lk_gen == g && vqp->lk_vlkey == vlkey)
        return vqp->lk_rlkey;
    uint32_t r = lkey_real (vqp->ctx, vlkey);
    vqp->lk_vlkey = vlkey;
    vqp->lk_rlkey = r;
    vqp->lk_gen = g;
    return r;
}

/* Fill 'out' (with room for e->num_sge sges in 'sg') from a log entry, in
 * real ids.  0, or an errno value. */
static int send_real (struct ibcr_qp *vqp, struct wrlog_send *e, struct ibv_send_wr *out,
                      struct ibv_sge *sg)
{
    /* Every field written once, each by one store of its own width: a
     * memset of the whole WR under the field stores made the backend's
     * reads of them wait on partly overlapping stores.  The last union
     * (bind_mw, tso) is for opcodes libibcr refuses (qpx.c). */
    out->next = NULL;
    memset (&out->wr, 0, sizeof (out->wr));
    memset (&out->qp_type, 0, sizeof (out->qp_type));
    out->wr_id = e->wr_id;
    out->opcode = e->opcode;
    out->send_flags = e->send_flags;
    out->imm_data = e->imm_data;
    if (e->inl_len || (e->send_flags & IBV_SEND_INLINE)) {
        sg[0].addr = (uintptr_t)wrlog_inl (e);
        sg[0].length = e->inl_len;
        sg[0].lkey = 0;
        out->num_sge = e->inl_len ? 1 : 0;
    } else {
        for (int i = 0; i < e->num_sge; i++) {
            sg[i] = e->sge[i];
            if (ibcr_xlate)
                sg[i].lkey = lkey_real_qp (vqp, sg[i].lkey);
        }
        out->num_sge = e->num_sge;
    }
    out->sg_list = sg;
    /* An rkey only for the opcodes that have one (the log entry has it
     * for those only): a SEND after a rebuild looks nothing up. */
    switch (e->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
        out->wr.rdma.remote_addr = e->remote_addr;
        out->wr.rdma.rkey =
            ibcr_xlate ? xlate_rkey_peer (vqp->peer_rank, vqp->peer_vlid, e->rkey) : e->rkey;
        break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        out->wr.atomic.remote_addr = e->remote_addr;
        out->wr.atomic.rkey =
            ibcr_xlate ? xlate_rkey_peer (vqp->peer_rank, vqp->peer_vlid, e->rkey) : e->rkey;
        out->wr.atomic.compare_add = e->compare_add;
        out->wr.atomic.swap = e->swap;
        break;
    default:
        break;
    }
    if (vqp->qpx.qp_base.qp_type == IBV_QPT_UD) {
        if (!e->vah)
            return EINVAL;
        out->wr.ud.remote_qpn = e->remote_qpn;
        out->wr.ud.remote_qkey = e->remote_qkey;
        out->wr.ud.ah = e->vah->real;
        if (ibcr_xlate) {
            const struct xl_qp *x = xlate_qp (e->vah->attr.dlid, e->remote_qpn);
            if (x) {
                struct ibv_ah *ra = ibcr_ah_real_for (vqp, e->vah, x->rlid, x->rank);
                if (!ra)
                    return errno;
                out->wr.ud.ah = ra;
                out->wr.ud.remote_qpn = x->rqpn;
            }
        }
    }
    return 0;
}

int ibcr_post_real_send (struct ibcr_qp *vqp, struct wrlog_send *e)
{
    struct ibv_send_wr w, *bad;
    struct ibv_sge *sg = alloca ((e->num_sge + 1) * sizeof (*sg));
    int rc = send_real (vqp, e, &w, sg);
    if (rc == 0)
        rc = vqp->real_post_send (vqp->real, &w, &bad);
    return rc;
}

void ibcr_post_send_refused (struct ibcr_qp *vqp, struct ibv_send_wr *bad)
{
    size_t left = 0;
    for (struct ibv_send_wr *w = bad; w; w = w->next)
        left++;
    wrlog_sq_unpush (&vqp->sq, left);
}

int ibcr_post_send (struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct ibcr_qp *vqp = vqp_of (qp);
    if (__builtin_expect (!wr->next, 1)) {
        if (__builtin_expect (vqp->qpx.qp_base.qp_type != IBV_QPT_UD, 1))
            return post_send_one (vqp, wr, bad, false, false);
        return post_send_one (vqp, wr, bad, false, true);
    }
    return post_send_as (vqp, wr, bad, false);
}

static void recv_real (struct ibcr_ctx *vctx, struct wrlog_recv *e, struct ibv_recv_wr *out,
                       struct ibv_sge *sg)
{
    /* Every field written once (see send_real). */
    out->next = NULL;
    out->wr_id = e->wr_id;
    for (int i = 0; i < e->num_sge; i++) {
        sg[i] = e->sge[i];
        if (ibcr_xlate)
            sg[i].lkey = lkey_real (vctx, sg[i].lkey);
    }
    out->sg_list = sg;
    out->num_sge = e->num_sge;
}

int ibcr_post_real_recv (struct ibcr_qp *vqp, struct ibcr_srq *vsrq, struct wrlog_recv *e)
{
    struct ibv_recv_wr w, *bad;
    struct ibv_sge *sg = alloca ((e->num_sge + 1) * sizeof (*sg));
    if (vsrq) {
        recv_real (vsrq->vpd->ctx, e, &w, sg);
        return ibv_post_srq_recv (vsrq->real, &w, &bad);
    }
    recv_real (vqp->ctx, e, &w, sg);
    return vqp->real_post_recv (vqp->real, &w, &bad);
}

/* A backend refused a receive post: drop what it did not take. */
static void post_recv_refused (struct wrlog_rq *log, struct ibv_recv_wr *bad)
{
    size_t left = 0;
    for (struct ibv_recv_wr *w = bad; w; w = w->next)
        left++;
    wrlog_rq_unpush (log, left);
}

/* Shared by QP and SRQ receive posting (inline in both: vsrq is a
 * constant in each). */
static inline __attribute__ ((always_inline)) int
post_recv_common (struct ibcr_qp *vqp, struct ibcr_srq *vsrq, struct wrlog_rq *log,
                  struct ibcr_block *lock, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    int rc = 0;
    size_t n = 0;
    struct gate_slot *s = gate_enter ();
    int how = block_lock_as (lock, s);
    for (struct ibv_recv_wr *w = wr; w; w = w->next) {
        if (!wrlog_rq_push_as (log, w)) {
            rc = errno;
            *bad = w;
            wrlog_rq_unpush (log, n);
            goto out;
        }
        n++;
    }
    if (!ibcr_xlate) {
        /* before the real post: its completion may be polled at once */
        wrlog_rq_publish (log);
        rc = vsrq ? ibv_post_srq_recv (vsrq->real, wr, bad)
                  : vqp->real_post_recv (vqp->real, wr, bad);
        if (rc)
            post_recv_refused (log, *bad);
        goto out;
    }
    /* Translated: each entry published just before its real post. */
    size_t first = log->r.ptail - n, i = 0;
    for (struct ibv_recv_wr *w = wr; w; w = w->next, i++) {
        wrlog_ring_publish_to (&log->r, first + i + 1);
        rc = ibcr_post_real_recv (vqp, vsrq, wrlog_rq_slot (log, first + i));
        if (rc) {
            *bad = w;
            wrlog_rq_unpush (log, n - i);
            break;
        }
    }
out:
    block_unlock (lock, how);
    gate_leave_as (s);
    return rc;
}

/* post_recv_common for one WR on a QP (wr->next is NULL), most posts:
 * straight-line code, the same steps in the same order. */
static inline __attribute__ ((always_inline)) int
post_recv_one (struct ibcr_qp *vqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    int rc;
    struct gate_slot *s = gate_enter ();
    int how = block_lock_as (&vqp->rlock, s);
    struct wrlog_recv *e = wrlog_rq_push_as (&vqp->rq, wr);
    if (__builtin_expect (!e, 0)) {
        rc = errno;
        *bad = wr;
        goto out;
    }
    wrlog_rq_publish (&vqp->rq); /* before the real post */
    if (__builtin_expect (!ibcr_xlate, 1)) {
        rc = vqp->real_post_recv (vqp->real, wr, bad);
        if (__builtin_expect (rc != 0, 0))
            post_recv_refused (&vqp->rq, *bad);
    } else {
        rc = ibcr_post_real_recv (vqp, NULL, e);
        if (rc) {
            *bad = wr;
            wrlog_rq_unpush (&vqp->rq, 1);
        }
    }
out:
    block_unlock (&vqp->rlock, how);
    gate_leave_as (s);
    return rc;
}

int ibcr_post_recv (struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct ibcr_qp *vqp = vqp_of (qp);
    if (vqp->vsrq) {
        *bad = wr;
        return EINVAL; /* receives of an SRQ QP go to the SRQ */
    }
    if (__builtin_expect (!wr->next, 1))
        return post_recv_one (vqp, wr, bad);
    return post_recv_common (vqp, NULL, &vqp->rq, &vqp->rlock, wr, bad);
}

int ibcr_post_srq_recv (struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct ibcr_srq *vsrq = vsrq_of (srq);
    return post_recv_common (NULL, vsrq, &vsrq->rq, &vsrq->lock, wr, bad);
}
