/* vw_setup.c - verbs_stream's resources, posting helpers and thread loop.
 *
 * Thread k owns QPs i with i % T == k and CQs j with j % T == k, so no CQ
 * is ever polled by two threads and per-QP state needs no lock.  With two
 * or more CQs per thread a QP's send and receive CQs differ, so both the
 * shared-CQ and the split-CQ paths of the device are exercised.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vw_ex.h"
#include "vw_pattern.h"
#include "vw_stream.h"

void vw_die (struct vw_run *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (msg, sizeof (msg), fmt, ap);
    va_end (ap);
    fflush (stdout);
    fprintf (stderr, "verbs_stream: %s: %s\n", r ? r->role : "setup", msg);
    fflush (stderr);
    _exit (1);
}

uint64_t vw_atomic_value (enum vw_op op, int qp, uint64_t k)
{
    uint64_t base = (uint64_t)(qp + 1) << 32;

    if (op == VW_OP_FADD)
        return base + k * (k + 1) / 2; /* op s adds s + 1 */
    /* CMP_AND_SWP: the value after the successful ones among ops 0..k-1 */
    return vw_mix64 (base ^ (k - (k + 1) / 5));
}

int vw_cswap_fails (uint64_t seq)
{
    /* One op in five compares against a wrong value: the device must
     * return the current value and leave memory alone. */
    return seq % 5 == 3;
}

void vw_post_sq (struct vw_run *r, struct vw_qp *q, struct ibv_send_wr *wr, int kind, uint64_t seq)
{
    struct ibv_send_wr *bad = NULL;
    int rc;

    if (q->wr_posted - q->wr_done >= q->sq_depth)
        vw_die (r, "qp %d: internal error: send queue of %u would overflow", q->idx, q->sq_depth);
    wr->wr_id = VW_WRID (kind, q->idx, q->wr_posted);
    wr->next = NULL;
    q->wr_seq[q->wr_posted % q->sq_depth] = seq;
    if (q->qpx)
        rc = vw_ex_post_send (q->qpx, wr);
    else
        rc = ibv_post_send (q->qp, wr, &bad);
    if (rc != 0)
        vw_die (r,
                "qp %d: ibv_post_send (WR %llu, opcode %d, %d sge, flags "
                "0x%x): %s",
                q->idx, (unsigned long long)q->wr_posted, wr->opcode, wr->num_sge, wr->send_flags,
                strerror (rc));
    q->wr_posted++;
}

void vw_post_ctl (struct vw_run *r, struct vw_qp *q, uint32_t type, uint64_t seq)
{
    vw_post_ctl_val (r, q, type, seq, 0);
}

void vw_post_ctl_val (struct vw_run *r, struct vw_qp *q, uint32_t type, uint64_t seq, uint64_t val)
{
    uint8_t *buf = q->buf + q->ctls_off + (q->wr_posted % q->sq_depth) * VW_CTL_STRIDE;
    struct vw_ctl ctl = {
        .magic = VW_CTL_MAGIC, .type = type, .seq = seq, .qp = (uint64_t)q->idx, .pad = val
    };
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = VW_CTL_LEN, .lkey = q->mr->lkey };
    struct ibv_send_wr wr;

    memcpy (buf, &ctl, sizeof (ctl));
    memset (&wr, 0, sizeof (wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (r->o.ud) {
        if (!q->ah)
            vw_die (r, "qp %d: internal error: no address handle for the peer", q->idx);
        wr.wr.ud.ah = q->ah;
        wr.wr.ud.remote_qpn = q->remote.qpn;
        wr.wr.ud.remote_qkey = VW_QKEY;
    }
    vw_post_sq (r, q, &wr, VW_WR_CTL, UINT64_MAX);
}

void vw_post_recv (struct vw_run *r, struct vw_qp *q, int kind, uint64_t slot)
{
    struct ibv_sge sge[66];
    struct ibv_recv_wr wr, *bad = NULL;
    int n = 0, rc;

    if (kind == VW_WR_RDATA) {
        uint8_t *base = q->buf + q->data_off + slot * q->data_stride;
        uint8_t *data = base;
        if (r->o.ud) {
            /* The GRH lands in its own entry, ahead of the message. */
            sge[n++] = (struct ibv_sge){ (uintptr_t)base, VW_GRH_LEN, q->mr->lkey };
            data = base + 64;
        }
        for (int k = 0; k < r->o.nsge; k++) {
            size_t off, len;
            vw_slot_piece_at (r->o.size, r->o.nsge, k, &off, &len);
            if (len)
                sge[n++] = (struct ibv_sge){ (uintptr_t)(data + off), (uint32_t)len, q->mr->lkey };
        }
    } else if (kind == VW_WR_RCTL) {
        sge[n++] = (struct ibv_sge){ (uintptr_t)(q->buf + q->ctl_off + slot * VW_CTL_STRIDE),
                                     VW_CTL_STRIDE, q->mr->lkey };
    }
    /* VW_WR_RIMM: a WRITE_WITH_IMM consumes a receive but no buffer. */
    memset (&wr, 0, sizeof (wr));
    wr.wr_id = VW_WRID (kind, q->idx, slot);
    wr.sg_list = n ? sge : NULL;
    wr.num_sge = n;
    if (q->srq)
        rc = ibv_post_srq_recv (q->srq, &wr, &bad);
    else
        rc = ibv_post_recv (q->qp, &wr, &bad);
    if (rc)
        vw_die (r, "qp %d: %s (%d sge): %s", q->idx, q->srq ? "ibv_post_srq_recv" : "ibv_post_recv",
                n, strerror (rc));
}

struct vw_qp *vw_qp_of_wc (struct vw_run *r, struct vw_thread *t, const struct ibv_wc *wc)
{
    int idx = VW_WRID_QP (wc->wr_id);

    if (idx < r->o.nqp && r->qps[idx].qp->qp_num == wc->qp_num)
        return &r->qps[idx];
    /* Shared receive queue: the buffer's owner is not the receiving QP. */
    for (int i = 0; i < t->nqp; i++)
        if (t->qps[i]->qp->qp_num == wc->qp_num)
            return t->qps[i];
    vw_die (r,
            "completion (wr_id 0x%llx, status %s) names QPN %u, which is "
            "none of this thread's QPs",
            (unsigned long long)wc->wr_id, ibv_wc_status_str (wc->status), wc->qp_num);
}

void vw_check_wc (struct vw_run *r, const struct vw_qp *q, const struct ibv_wc *wc)
{
    static const char *kinds[] = {
        "?", "data", "control send", "data receive", "control receive", "immediate receive"
    };
    int kind = VW_WRID_KIND (wc->wr_id);

    if (wc->status == IBV_WC_SUCCESS) {
        /* A device may leave an RC receive's source 0; softib gives it,
         * and libibcr must give it back in the peer's virtual numbers,
         * also after every rebuild (UD: the server checks it itself). */
        if ((wc->opcode & IBV_WC_RECV) && !r->o.ud
            && ((wc->src_qp && wc->src_qp != q->remote.qpn)
                || (wc->slid && wc->slid != q->remote.lid)))
            vw_die (r,
                    "qp %d: %s WR %llu: message from LID %u QPN %u, expected the peer's LID %u "
                    "QPN %u",
                    q->idx, kind < 6 ? kinds[kind] : "?",
                    (unsigned long long)VW_WRID_VAL (wc->wr_id), wc->slid, wc->src_qp,
                    q->remote.lid, q->remote.qpn);
        return;
    }
    vw_die (r,
            "qp %d: %s WR %llu (%s) completed with %s (status %d, "
            "vendor_err 0x%x)",
            VW_WRID_QP (wc->wr_id), kind < 6 ? kinds[kind] : "?",
            (unsigned long long)VW_WRID_VAL (wc->wr_id), vw_op_name (r->o.op),
            ibv_wc_status_str (wc->status), wc->status, wc->vendor_err);
}

/* ---- resources ---- */

static void *xzalloc (struct vw_run *r, size_t n)
{
    void *p = calloc (1, n ? n : 1);

    if (!p)
        vw_die (r, "out of memory (%zu bytes)", n);
    return p;
}

static void qp_layout (struct vw_run *r, struct vw_qp *q)
{
    const struct vw_opts *o = &r->o;
    size_t data_len;

    if (vw_op_is_atomic (o->op))
        q->data_stride = 8;
    else if (!r->server || o->op == VW_OP_SEND || o->op == VW_OP_SEND_IMM)
        q->data_stride = (o->ud && r->server ? 64 : 0) + vw_slot_stride (o->size, o->nsge);
    else
        q->data_stride = vw_slot_stride (o->size, 1);
    q->remote_stride = vw_slot_stride (o->size, 1);
    data_len = (r->server && vw_op_is_atomic (o->op)) ? 8 : (size_t)r->window * q->data_stride;
    q->data_off = 0;
    q->ctl_off = (data_len + 63) & ~(size_t)63;
    q->ctls_off = q->ctl_off + (size_t)r->nctl * VW_CTL_STRIDE;
    q->buf_len = q->ctls_off + (size_t)q->sq_depth * VW_CTL_STRIDE;
    q->local.addr = 0;
    q->local.len = data_len;
}

static void create_qp (struct vw_run *r, struct vw_qp *q)
{
    const struct vw_opts *o = &r->o;
    struct ibv_qp_init_attr ia;
    int access = IBV_ACCESS_LOCAL_WRITE;
    q->sq_depth = 2 * r->window + 4;
    q->rq_depth = r->nctl;
    q->wr_seq = xzalloc (r, q->sq_depth * sizeof (uint64_t));
    q->wr_tmp = xzalloc (r, q->sq_depth * sizeof (uint64_t));
    qp_layout (r, q);
    if (posix_memalign ((void **)&q->buf, 4096, q->buf_len) != 0)
        vw_die (r, "out of memory (%zu bytes for qp %d)", q->buf_len, q->idx);
    memset (q->buf, 0, q->buf_len);
    if (!vw_op_is_atomic (o->op)) {
        /* Server ring slots for WRITE/READ are one contiguous piece: the
         * remote side of an RDMA op has no sg list. */
        int ring = r->server && o->op != VW_OP_SEND && o->op != VW_OP_SEND_IMM;
        size_t grh = o->ud && r->server ? 64 : 0;
        for (uint32_t i = 0; i < r->window; i++)
            vw_slot_guard_init (q->buf + q->data_off + i * q->data_stride + grh, o->size,
                                ring ? 1 : o->nsge);
    }
    /* Only the server's memory is a remote target; the client's MR has
     * no remote rights, which a correct device never needs. */
    if (r->server)
        access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    q->mr = ibv_reg_mr (r->dev.pd, q->buf, q->buf_len, access);
    if (!q->mr)
        vw_die (r, "qp %d: ibv_reg_mr(%zu bytes, access 0x%x): %s", q->idx, q->buf_len, access,
                strerror (errno));
    memset (&ia, 0, sizeof (ia));
    ia.send_cq = q->scq;
    ia.recv_cq = q->rcq;
    ia.srq = q->srq;
    ia.qp_type = o->ud ? IBV_QPT_UD : IBV_QPT_RC;
    ia.cap.max_send_wr = q->sq_depth;
    ia.cap.max_recv_wr = q->srq ? 0 : q->rq_depth;
    ia.cap.max_send_sge = (uint32_t)o->nsge;
    ia.cap.max_recv_sge = (uint32_t)(o->nsge + o->ud);
    ia.cap.max_inline_data = o->inline_data ? o->size : 0;
    q->qp = o->ex ? vw_ex_create_qp (r->dev.pd, &ia, &q->qpx) : ibv_create_qp (r->dev.pd, &ia);
    if (!q->qp)
        vw_die (r,
                "qp %d: ibv_create_qp%s(%s, send %u x %d sge, recv %u, "
                "inline %u): %s",
                q->idx, o->ex ? "_ex" : "", o->ud ? "UD" : "RC", q->sq_depth, o->nsge,
                ia.cap.max_recv_wr, ia.cap.max_inline_data, strerror (errno));
    if (o->inline_data && ia.cap.max_inline_data < o->size)
        vw_die (r,
                "qp %d: the device allows only %u bytes inline; use a "
                "smaller -s with -I",
                q->idx, ia.cap.max_inline_data);
    vw_ep_local (&r->dev, &q->local);
    q->local.qpn = q->qp->qp_num;
    q->local.psn = (uint32_t)(random () & 0xffffff);
    q->local.rkey = q->mr->rkey;
    q->local.addr = (uintptr_t)(q->buf + q->data_off);
}

void vw_setup (struct vw_run *r)
{
    const struct vw_opts *o = &r->o;
    int T = o->nthread, per = o->ncq / o->nthread;
    int cqe;

    r->window = (uint32_t)o->window;
    r->batch = r->window / 2 ? r->window / 2 : 1;
    r->nctl = r->window + VW_CTL_EXTRA;
    r->rd_atomic = r->dev.attr.max_qp_rd_atom;
    if (r->dev.attr.max_qp_init_rd_atom < r->rd_atomic)
        r->rd_atomic = r->dev.attr.max_qp_init_rd_atom;
    if (r->rd_atomic > 16)
        r->rd_atomic = 16;
    if ((o->op == VW_OP_READ || vw_op_is_atomic (o->op)) && r->rd_atomic < 1)
        vw_die (r, "device allows no outstanding RDMA READ/atomic (max_qp_rd_atom %d)",
                r->dev.attr.max_qp_rd_atom);
    if (vw_op_is_atomic (o->op) && r->dev.attr.atomic_cap == IBV_ATOMIC_NONE)
        vw_die (r, "device %s reports no atomic support (atomic_cap NONE)",
                ibv_get_device_name (r->dev.ctx->device));
    if (2 * r->window + 4 > (uint32_t)r->dev.attr.max_qp_wr)
        vw_die (r, "-W %u needs %u send WRs, device allows %d", r->window, 2 * r->window + 4,
                r->dev.attr.max_qp_wr);
    /* A UD receive takes one more entry: the GRH lands in its own. */
    if (o->nsge + o->ud > r->dev.attr.max_sge)
        vw_die (r, "-g %d needs %d sg entries, device allows %d", o->nsge, o->nsge + o->ud,
                r->dev.attr.max_sge);
    if (o->ud && o->size > (128u << r->dev.port_attr.active_mtu))
        vw_die (r, "-U: a UD message must fit the path MTU (%u bytes), not -s %u",
                128u << r->dev.port_attr.active_mtu, o->size);

    r->thr = xzalloc (r, (size_t)T * sizeof (*r->thr));
    r->qps = xzalloc (r, (size_t)o->nqp * sizeof (*r->qps));
    r->cqs = xzalloc (r, (size_t)o->ncq * sizeof (*r->cqs));
    cqe = (o->nqp / T + 1) * (int)(2 * r->window + 4 + r->nctl) + 16;
    if (cqe > r->dev.attr.max_cqe)
        cqe = r->dev.attr.max_cqe;
    for (int k = 0; k < T; k++) {
        struct vw_thread *t = &r->thr[k];
        t->idx = k;
        t->run = r;
        t->scratch = xzalloc (r, o->size);
        t->qps = xzalloc (r, (size_t)(o->nqp / T + 1) * sizeof (*t->qps));
        t->cqs = xzalloc (r, (size_t)per * sizeof (*t->cqs));
        if (o->ex)
            t->cqxs = xzalloc (r, (size_t)per * sizeof (*t->cqxs));
        if (o->wait != VW_WAIT_BUSY && !(t->ch = ibv_create_comp_channel (r->dev.ctx)))
            vw_die (r, "ibv_create_comp_channel: %s", strerror (errno));
        if (r->server && o->srq) {
            struct ibv_srq_init_attr sa = { 0 };
            sa.attr.max_wr = (uint32_t)((o->nqp / T + 1) * (int)r->nctl);
            sa.attr.max_sge = (uint32_t)(o->nsge + o->ud);
            if (!(t->srq = ibv_create_srq (r->dev.pd, &sa)))
                vw_die (r, "ibv_create_srq(%u WRs, %u sge): %s", sa.attr.max_wr, sa.attr.max_sge,
                        strerror (errno));
        }
        t->waiter.mode = o->wait;
        t->waiter.ch = t->ch;
        t->waiter.cqs = t->cqs;
    }
    for (int j = 0; j < o->ncq; j++) {
        struct vw_thread *t = &r->thr[j % T];
        if (o->ex)
            r->cqs[j] = vw_ex_create_cq (r->dev.ctx, cqe, t, t->ch, &t->cqxs[t->ncq]);
        else
            r->cqs[j] = ibv_create_cq (r->dev.ctx, cqe, t, t->ch, 0);
        if (!r->cqs[j])
            vw_die (r, "ibv_create_cq%s(%d entries): %s", o->ex ? "_ex" : "", cqe,
                    strerror (errno));
        t->cqs[t->ncq++] = r->cqs[j];
    }
    for (int k = 0; k < T; k++)
        r->thr[k].waiter.ncq = r->thr[k].ncq;
    for (int i = 0; i < o->nqp; i++) {
        struct vw_qp *q = &r->qps[i];
        struct vw_thread *t = &r->thr[i % T];
        int l = i / T;
        q->idx = i;
        q->thr = t;
        q->scq = t->cqs[(2 * l) % t->ncq];
        q->rcq = t->cqs[(2 * l + 1) % t->ncq];
        q->srq = t->srq;
        create_qp (r, q);
        t->qps[t->nqp++] = q;
    }
}

void vw_teardown (struct vw_run *r)
{
    const struct vw_opts *o = &r->o;
    int rc;

    /* Every destroy must succeed: a device that refuses to free an idle
     * object would leak it across a checkpoint. */
    for (int i = 0; i < o->nqp; i++) {
        struct vw_qp *q = &r->qps[i];
        if (q->ah && (rc = ibv_destroy_ah (q->ah)))
            vw_die (r, "qp %d: ibv_destroy_ah: %s", i, strerror (rc));
        if ((rc = ibv_destroy_qp (q->qp)))
            vw_die (r, "qp %d: ibv_destroy_qp: %s", i, strerror (rc));
        if ((rc = ibv_dereg_mr (q->mr)))
            vw_die (r, "qp %d: ibv_dereg_mr: %s", i, strerror (rc));
        free (q->buf);
        free (q->wr_seq);
        free (q->wr_tmp);
    }
    for (int k = 0; k < o->nthread; k++)
        if (r->thr[k].srq && (rc = ibv_destroy_srq (r->thr[k].srq)))
            vw_die (r, "ibv_destroy_srq: %s", strerror (rc));
    for (int j = 0; j < o->ncq; j++)
        if ((rc = ibv_destroy_cq (r->cqs[j])))
            vw_die (r, "ibv_destroy_cq: %s", strerror (rc));
    for (int k = 0; k < o->nthread; k++) {
        struct vw_thread *t = &r->thr[k];
        if (t->ch && (rc = ibv_destroy_comp_channel (t->ch)))
            vw_die (r, "ibv_destroy_comp_channel: %s", strerror (rc));
        free (t->scratch);
        free (t->qps);
        free (t->cqs);
        free (t->cqxs);
    }
    free (r->qps);
    free (r->thr);
    free (r->cqs);
}

/* ---- the per-thread loop ---- */

static pthread_mutex_t end_lock = PTHREAD_MUTEX_INITIALIZER;

static void *thread_main (void *arg)
{
    struct vw_thread *t = arg;
    struct vw_run *r = t->run;
    struct ibv_wc wc[32];
    char err[256];

    while (t->nfinished < t->nqp) {
        int progress = 0;

        t->throttled = 0;
        if (!r->server)
            for (int i = 0; i < t->nqp; i++)
                if (!t->qps[i]->finished)
                    progress += vw_client_post (r, t->qps[i]);
        for (int j = 0; j < t->ncq; j++) {
            int n = t->cqxs ? vw_ex_poll (t->cqxs[j], 32, wc) : ibv_poll_cq (t->cqs[j], 32, wc);
            if (n < 0)
                vw_die (r, "ibv_poll_cq: returned %d", n);
            for (int i = 0; i < n; i++) {
                if (r->server)
                    vw_server_wc (r, t, &wc[i]);
                else
                    vw_client_wc (r, t, &wc[i]);
            }
            progress += n;
        }
        for (int i = 0; i < t->nqp; i++) {
            struct vw_qp *q = t->qps[i];
            if (!q->finished
                && (r->server ? vw_server_finished (r, q) : vw_client_finished (r, q))) {
                q->finished = 1;
                t->nfinished++;
            }
        }
        if (progress || t->nfinished == t->nqp)
            continue;
        if (t->throttled)
            usleep (500); /* -r: the next post is due soon, not on an event */
        else if (vw_waiter_idle (&t->waiter, err, sizeof (err)) < 0)
            vw_die (r, "thread %d: %s", t->idx, err);
    }
    {
        struct timespec ts;
        clock_gettime (CLOCK_MONOTONIC, &ts);
        pthread_mutex_lock (&end_lock);
        double t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
        if (t > r->t_end)
            r->t_end = t;
        pthread_mutex_unlock (&end_lock);
    }
    __atomic_add_fetch (&r->threads_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

void vw_threads_start (struct vw_run *r)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    r->t_start = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    for (int k = 0; k < r->o.nthread; k++) {
        int rc = pthread_create (&r->thr[k].tid, NULL, thread_main, &r->thr[k]);
        if (rc)
            vw_die (r, "pthread_create: %s", strerror (rc));
    }
}

void vw_threads_join (struct vw_run *r)
{
    for (int k = 0; k < r->o.nthread; k++)
        pthread_join (r->thr[k].tid, NULL);
}
