/* post.h - the send post path, inline in ibcr_post_send (post.c) and in
 * the ibv_wr_* builder's wr_complete (qpx.c), so that a builder batch pays
 * no second call and none of the checks its builder already made.
 *
 * Every accepted WR enters the QP's send log before it reaches the real
 * queue, under the QP's send lock and inside the gate; a WR the backend
 * refuses leaves the log again.  Never post a WR the log does not hold:
 * the drain and the replay at a checkpoint know only the log.
 */
#ifndef IBCR_POST_H
#define IBCR_POST_H

#include <errno.h>
#include "ibcr.h"
#include "gate.h"

/* A backend refused a post: drop what it did not take from the log. */
void ibcr_post_send_refused (struct ibcr_qp *vqp, struct ibv_send_wr *bad);

/* A UD WR's destination, into its log entry. */
static inline void wrlog_set_ud (struct wrlog_send *e, const struct ibv_send_wr *w)
{
    e->vah = vah_of (w->wr.ud.ah);
    e->remote_qpn = w->wr.ud.remote_qpn;
    e->remote_qkey = w->wr.ud.remote_qkey;
}

/* post_send_as for one WR (wr->next is NULL), most posts: straight-line
 * code without the list's loops, the same steps in the same order.  'ud'
 * (a constant): the QP is UD; before the first rebuild its WR is posted
 * as the application built it, in a copy whose AH is the real one,
 * rather than rebuilt field by field from the log entry (send_real). */
static inline __attribute__ ((always_inline)) int post_send_one (struct ibcr_qp *vqp,
                                                                 struct ibv_send_wr *wr,
                                                                 struct ibv_send_wr **bad,
                                                                 bool built, bool ud)
{
    int rc;
    struct gate_slot *s = gate_enter ();
    int how = block_lock_as (&vqp->slock, s);
    struct wrlog_send *e = wrlog_sq_push_as (&vqp->sq, wr, vqp->app_sig_all, built);
    if (__builtin_expect (!e, 0)) {
        rc = errno;
        *bad = wr;
        goto out;
    }
    if (ud)
        wrlog_set_ud (e, wr);
    /* before the real post: its completion may be polled at once */
    wrlog_sq_publish (&vqp->sq);
    if (__builtin_expect (!ibcr_xlate && (!ud || e->vah), 1)) {
        /* Hot path: virtual == real (but a UD WR's AH). */
        struct ibv_send_wr w, *b;
        if (ud) {
            /* Field by field, what a UD WR has: an application that has
             * just stored some of them (wr_id, at least) probably makes
             * a struct copy's 16-byte loads wait until those stores reach
             * the cache, and the last union (48 bytes) is TSO's alone
             * for UD (a real QP made by libibcr has no TSO: the backend
             * refuses it).  About 1 ns a post less than a struct copy on
             * an AMD EPYC (doc/libibcr-ns.md). */
            w.wr_id = wr->wr_id;
            w.next = NULL; /* one WR */
            w.sg_list = wr->sg_list;
            w.num_sge = wr->num_sge;
            w.opcode = wr->opcode;
            w.send_flags = wr->send_flags;
            w.imm_data = wr->imm_data;
            w.wr.ud.remote_qpn = wr->wr.ud.remote_qpn;
            w.wr.ud.remote_qkey = wr->wr.ud.remote_qkey;
            w.qp_type = wr->qp_type;
            if (__builtin_expect (wr->opcode == IBV_WR_TSO, 0))
                w.tso = wr->tso;
            w.wr.ud.ah = e->vah->real;
        }
        rc = vqp->real_post_send (vqp->real, ud ? &w : wr, ud ? &b : bad);
        if (__builtin_expect (rc != 0, 0)) {
            if (ud)
                *bad = wr;
            ibcr_post_send_refused (vqp, *bad);
        }
    } else {
        rc = ibcr_post_real_send (vqp, e);
        if (rc) {
            *bad = wr;
            wrlog_sq_unpush (&vqp->sq, 1);
        }
    }
out:
    block_unlock (&vqp->slock, how);
    gate_leave_as (s);
    return rc;
}

/* Log a list of send WRs and post it to the real QP (translated after a
 * rebuild); ibv_post_send's contract.  'built' (a constant): the list comes
 * from the ibv_wr_* builder (qpx.c) on a QP that is not UD, each WR with at
 * most one sge and none inline, so the log's checks and the UD fields are
 * left out. */
static inline __attribute__ ((always_inline)) int
post_send_as (struct ibcr_qp *vqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad, bool built)
{
    bool ud = !built && vqp->qpx.qp_base.qp_type == IBV_QPT_UD;
    int rc = 0;
    size_t n = 0;

    struct gate_slot *s = gate_enter ();
    int how = block_lock_as (&vqp->slock, s);
    for (struct ibv_send_wr *w = wr; w; w = w->next) {
        struct wrlog_send *e = wrlog_sq_push_as (&vqp->sq, w, vqp->app_sig_all, built);
        if (!e) {
            rc = errno;
            *bad = w;
            break;
        }
        if (ud)
            wrlog_set_ud (e, w);
        n++;
    }
    if (rc) {
        wrlog_sq_unpush (&vqp->sq, n);
        goto out;
    }
    if (!ibcr_xlate && !ud) {
        /* Hot path: virtual == real.  Every entry is complete; all are
         * published before the real post. */
        wrlog_sq_publish (&vqp->sq);
        rc = vqp->real_post_send (vqp->real, wr, bad);
        if (rc)
            ibcr_post_send_refused (vqp, *bad);
        goto out;
    }
    /* Translated path: one real WR per logged entry, posted in order,
     * each published just before its real post. */
    size_t first = vqp->sq.r.ptail - n, i = 0;
    for (struct ibv_send_wr *w = wr; w; w = w->next, i++) {
        wrlog_ring_publish_to (&vqp->sq.r, first + i + 1);
        rc = ibcr_post_real_send (vqp, wrlog_sq_slot (&vqp->sq, first + i));
        if (rc) {
            *bad = w;
            wrlog_sq_unpush (&vqp->sq, n - i);
            break;
        }
    }
out:
    block_unlock (&vqp->slock, how);
    gate_leave_as (s);
    return rc;
}

#endif
