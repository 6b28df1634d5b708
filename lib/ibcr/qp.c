/* qp.c - queue pairs, virtualized; completion accounting.
 *
 * The real QP is always created with sq_sig_all = 1: every WR then has a
 * completion, so libibcr knows exactly which WRs are done (the drain's
 * "acknowledged" count) and hides the completions of WRs the application
 * posted unsignaled.  The QP's state-changing modify calls are kept to
 * replay them, with translated peer ids and fresh PSNs, after a rebuild.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "ibcr.h"
#include "backend.h"
#include "gate.h"
#include "xlate.h"
#include "exports.h"
#include "complete.h"

/* A QP's log's consumer lock: the plock of the CQ whose pollers pop it
 * (wrlog.h). */
static int log_excl_lock (void *vcq)
{
    return block_lock (&((struct ibcr_cq *)vcq)->plock);
}

static void log_excl_unlock (void *vcq, int how)
{
    block_unlock (&((struct ibcr_cq *)vcq)->plock, how);
}

static void fill_real_init (struct ibcr_qp *vqp, struct ibv_qp_init_attr *ra)
{
    *ra = vqp->init;
    ra->qp_context = vqp;
    ra->send_cq = vqp->vscq->real;
    ra->recv_cq = vqp->vrcq->real;
    ra->srq = vqp->vsrq ? vqp->vsrq->real : NULL;
    ra->sq_sig_all = 1;
}

int ibcr_qp_open_real (struct ibcr_qp *vqp)
{
    struct ibv_qp_init_attr ra;
    fill_real_init (vqp, &ra);
    vqp->real = ibcr_be.create_qp (vqp->vpd->real, &ra);
    if (!vqp->real) {
        be_errno ();
        return -1;
    }
    vqp->real_post_send = vqp->real->context->ops.post_send;
    vqp->real_post_recv = vqp->real->context->ops.post_recv;
    vqp->rqpn = vqp->real->qp_num;
    if (idtab_put (&vqp->ctx->qp_by_rqpn, vqp->rqpn, vqp) < 0) {
        ibcr_be.destroy_qp (vqp->real);
        vqp->real = NULL;
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* A QP created after a rebuild takes its real QPN as its virtual one; that
 * number must not be the virtual QPN of another QP of the job at this LID
 * (peers would translate it to that QP).  Take another real QP then. */
static int qp_open_fresh (struct ibcr_qp *vqp)
{
    struct ibv_qp *spare[8];
    int nspare = 0, rc;
    uint16_t vlid = vqp->ctx->port[1].vlid;
    for (;;) {
        if ((rc = ibcr_qp_open_real (vqp)) < 0 || !ibcr_xlate || !xlate_qp (vlid, vqp->rqpn)
            || nspare == 8)
            break;
        idtab_del (&vqp->ctx->qp_by_rqpn, vqp->rqpn);
        spare[nspare++] = vqp->real;
    }
    if (rc == 0 && ibcr_xlate && xlate_qp (vlid, vqp->rqpn))
        ibcr_log ("QP %u: its real QPN is another QP's virtual one; peers may "
                  "address the wrong QP until the next checkpoint",
                  vqp->rqpn);
    while (nspare > 0)
        ibcr_be.destroy_qp (spare[--nspare]);
    return rc;
}

struct ibv_qp *ibcr_create_qp (struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    struct ibcr_pd *vpd = vpd_of (pd);
    struct ibcr_qp *vqp;

    switch (attr->qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_UD:
        break;
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
        ibcr_refuse ("XRC QPs", "XRC state cannot be drained and rebuilt");
        return NULL;
    case IBV_QPT_DRIVER:
        ibcr_refuse ("driver QPs (DC and other direct-verbs types)",
                     "their state is private to the provider");
        return NULL;
    default:
        ibcr_refuse ("raw packet QPs", "Ethernet steering is not recreated at rebuild");
        return NULL;
    }
    if (!attr->send_cq || !attr->recv_cq) {
        errno = EINVAL;
        return NULL;
    }
    vqp = calloc (1, sizeof (*vqp));
    if (!vqp) {
        errno = ENOMEM;
        return NULL;
    }
    vqp->ctx = vpd->ctx;
    vqp->vpd = vpd;
    vqp->rx_src = RX_NO_SRC;
    vqp->vscq = vcq_of (attr->send_cq);
    vqp->vrcq = vcq_of (attr->recv_cq);
    vqp->vsrq = attr->srq ? vsrq_of (attr->srq) : NULL;
    vqp->rx_fast_cq = !vqp->vsrq && attr->qp_type != IBV_QPT_UD ? vqp->vrcq : NULL;
    vqp->init = *attr;
    vqp->app_sig_all = attr->sq_sig_all != 0;
    vqp->peer_rank = -1;
    vqp->port = 1;
    block_init (&vqp->slock);
    block_init (&vqp->rlock);
    map_init (&vqp->ud_sent);
    map_init (&vqp->ah_cache);
    map_init (&vqp->ud_recv);

    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    if (qp_open_fresh (vqp) < 0)
        goto error;
    /* What the backend granted is what the application gets, and what the
     * logs must be able to hold. */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    if (ibcr_be.query_qp (vqp->real, &qa, IBV_QP_CAP, &qi) == 0)
        attr->cap = qi.cap;
    vqp->init.cap = attr->cap;
    if (wrlog_sq_init (&vqp->sq, attr->cap.max_send_wr, attr->cap.max_send_sge,
                       attr->cap.max_inline_data)
        < 0)
        goto error;
    /* the send log's consumer: the pollers of the send CQ (wrlog.h) */
    vqp->sq.r.excl_lock = log_excl_lock;
    vqp->sq.r.excl_unlock = log_excl_unlock;
    vqp->sq.r.excl_arg = vqp->vscq;
    if (!vqp->vsrq) {
        if (wrlog_rq_init (&vqp->rq, attr->cap.max_recv_wr, attr->cap.max_recv_sge) < 0)
            goto error;
        /* the receive log's consumer: the pollers of the receive CQ */
        vqp->rq.r.excl_lock = log_excl_lock;
        vqp->rq.r.excl_unlock = log_excl_unlock;
        vqp->rq.r.excl_arg = vqp->vrcq;
    }
    ibcr_cq_grow (vqp->vscq, attr->cap.max_send_wr);
    if (!vqp->vsrq)
        ibcr_cq_grow (vqp->vrcq, attr->cap.max_recv_wr);

    struct ibv_qp *q = &vqp->qpx.qp_base;
    q->context = pd->context;
    q->qp_context = attr->qp_context;
    q->pd = pd;
    q->send_cq = attr->send_cq;
    q->recv_cq = attr->recv_cq;
    q->srq = attr->srq;
    q->handle = vqp->real->handle;
    q->qp_num = vqp->vqpn = vqp->rqpn;
    q->state = IBV_QPS_RESET;
    q->qp_type = attr->qp_type;
    pthread_mutex_init (&q->mutex, NULL);
    pthread_cond_init (&q->cond, NULL);
    ibcr_qpx_fill (vqp);
    ibcr_list_add (&vqp->ctx->qps, &vqp->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return q;
error:;
    int saved = errno;
    if (vqp->real) {
        idtab_del (&vqp->ctx->qp_by_rqpn, vqp->rqpn);
        ibcr_be.destroy_qp (vqp->real);
    }
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    wrlog_sq_fini (&vqp->sq);
    wrlog_rq_fini (&vqp->rq);
    free (vqp);
    errno = saved;
    return NULL;
}

#define SEND_OPS_SUPPORTED                                                                         \
    (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE                \
     | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ                               \
     | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

struct ibv_qp *ibcr_create_qp_ex (struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
    if (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
        ibcr_refuse ("ibv_create_qp_ex attributes beyond a PD and send_ops_flags",
                     "XRC, RSS, TSO, creation flags cannot be rebuilt");
        return NULL;
    }
    if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
        && (a->send_ops_flags & ~(uint64_t)SEND_OPS_SUPPORTED)) {
        ibcr_refuse ("ibv_wr_* operations beyond send, RDMA write/read and atomics "
                     "(memory windows, invalidation, TSO, atomic write)",
                     "not supported through libibcr");
        return NULL;
    }
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_qp_init_attr ia = {
        .qp_context = a->qp_context,
        .send_cq = a->send_cq,
        .recv_cq = a->recv_cq,
        .srq = a->srq,
        .cap = a->cap,
        .qp_type = a->qp_type,
        .sq_sig_all = a->sq_sig_all,
    };
    struct ibv_qp *qp = ibcr_create_qp (a->pd, &ia);
    if (qp)
        a->cap = ia.cap;
    return qp;
}

/* Every virtual QP carries the ibv_wr_* entry points (qpx.c): they build
 * ordinary WRs, so the backend needs no extended QP. */
struct ibv_qp_ex *ibcr_qp_to_qp_ex (struct ibv_qp *qp)
{
    return &vqp_of (qp)->qpx;
}

/* Copy the attributes 'mask' names from src into dst. */
static void attr_merge (struct ibv_qp_attr *dst, int *dmask, const struct ibv_qp_attr *src,
                        int mask)
{
#define M(bit, field)                                                                              \
    if (mask & (bit))                                                                              \
    dst->field = src->field
    M (IBV_QP_STATE, qp_state);
    M (IBV_QP_CUR_STATE, cur_qp_state);
    M (IBV_QP_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
    M (IBV_QP_ACCESS_FLAGS, qp_access_flags);
    M (IBV_QP_PKEY_INDEX, pkey_index);
    M (IBV_QP_PORT, port_num);
    M (IBV_QP_QKEY, qkey);
    M (IBV_QP_AV, ah_attr);
    M (IBV_QP_PATH_MTU, path_mtu);
    M (IBV_QP_TIMEOUT, timeout);
    M (IBV_QP_RETRY_CNT, retry_cnt);
    M (IBV_QP_RNR_RETRY, rnr_retry);
    M (IBV_QP_RQ_PSN, rq_psn);
    M (IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
    M (IBV_QP_MIN_RNR_TIMER, min_rnr_timer);
    M (IBV_QP_SQ_PSN, sq_psn);
    M (IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
    M (IBV_QP_PATH_MIG_STATE, path_mig_state);
    M (IBV_QP_CAP, cap);
    M (IBV_QP_DEST_QPN, dest_qp_num);
    M (IBV_QP_RATE_LIMIT, rate_limit);
#undef M
    if (mask & IBV_QP_ALT_PATH) {
        dst->alt_ah_attr = src->alt_ah_attr;
        dst->alt_pkey_index = src->alt_pkey_index;
        dst->alt_port_num = src->alt_port_num;
        dst->alt_timeout = src->alt_timeout;
    }
    *dmask |= mask;
}

/* Keep what a rebuilt QP needs to reach the same state: one entry per
 * state of the walk RESET -> INIT -> RTR -> RTS (-> SQD/ERR).  A modify
 * within a state, or back to a state already walked through (SQD -> RTS),
 * folds its attributes into that state's entry, so the history stays short
 * however often the application modifies. */
static void hist_add (struct ibcr_qp *vqp, const struct ibv_qp_attr *a, int mask)
{
    int max = (int)(sizeof (vqp->hist) / sizeof (vqp->hist[0]));
    if ((mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RESET) {
        vqp->nhist = 0;
        return;
    }
    if (mask & IBV_QP_STATE) {
        for (int i = 0; i < vqp->nhist; i++) {
            if (vqp->hist[i].attr.qp_state == a->qp_state) {
                attr_merge (&vqp->hist[i].attr, &vqp->hist[i].mask, a, mask & ~IBV_QP_CUR_STATE);
                vqp->nhist = i + 1;
                return;
            }
        }
    }
    if (!(mask & IBV_QP_STATE) || vqp->nhist == max) {
        if (vqp->nhist == 0)
            return;
        if (mask & IBV_QP_STATE)
            ibcr_log ("QP %u: more than %d states in its history; a rebuild replays "
                      "a shortened walk",
                      vqp->vqpn, max);
        struct ibcr_qp_mod *last = &vqp->hist[vqp->nhist - 1];
        attr_merge (&last->attr, &last->mask, a, mask & ~IBV_QP_CUR_STATE);
        return;
    }
    vqp->hist[vqp->nhist].attr = *a;
    vqp->hist[vqp->nhist].mask = mask & ~IBV_QP_CUR_STATE;
    vqp->nhist++;
}

/* Rewrite virtual peer ids in a modify to the current real ones. */
static void modify_xlate (struct ibcr_qp *vqp, struct ibv_qp_attr *a, int mask, bool rebuild)
{
    if (!(mask & (IBV_QP_AV | IBV_QP_DEST_QPN)))
        return;
    uint16_t vlid = (mask & IBV_QP_AV) ? a->ah_attr.dlid : vqp->peer_vlid;
    uint32_t vqpn = (mask & IBV_QP_DEST_QPN) ? a->dest_qp_num : vqp->peer_vqpn;
    const struct xl_qp *x = xlate_qp (vlid, vqpn);
    if (!x) {
        /* A peer QP created after the last rebuild: its QPN is real, its
         * host's LID may not be; its owner is known when one process of
         * the job lives behind that LID. */
        uint16_t rlid;
        int rank;
        if ((mask & IBV_QP_AV) && xlate_lid (vlid, &rlid))
            a->ah_attr.dlid = rlid;
        if ((mask & IBV_QP_AV) && a->ah_attr.is_global)
            xlate_gid (&a->ah_attr.grh.dgid, &a->ah_attr.grh.dgid);
        if (xlate_lid_rank (vlid, &rank))
            vqp->peer_rank = rank;
        if (rebuild)
            ibcr_log ("rebuild: peer LID %u QPN %u of QP %u is not in the id table; "
                      "left as is",
                      vlid, vqpn, vqp->vqpn);
        return;
    }
    if (mask & IBV_QP_AV) {
        a->ah_attr.dlid = x->rlid;
        if (a->ah_attr.is_global)
            xlate_gid_of (x->rank, &a->ah_attr.grh.dgid, &a->ah_attr.grh.dgid);
    }
    if (mask & IBV_QP_DEST_QPN)
        a->dest_qp_num = x->rqpn;
    /* The peer's send PSN is the one it published at the last rebuild,
     * whether its QP reached RTS before it (replayed) or after (see
     * ibcr_modify_qp): so is our receive PSN, replayed or not. */
    if (mask & IBV_QP_RQ_PSN)
        a->rq_psn = x->psn;
    vqp->peer_rank = x->rank;
}

/* Account every completion the QP's CQs hold, into their pend, where the
 * application polls them as it would have from the backend (the
 * producers' locks held: no post adds to them meanwhile); before a
 * RESET or a destroy. */
static void qp_take_completions (struct ibcr_qp *vqp)
{
    struct ibcr_cq *cq[2] = { vqp->vscq, vqp->vrcq };
    for (int i = 0; i < 2 && (i == 0 || cq[1] != cq[0]); i++) {
        int shown, how = block_lock (&cq[i]->plock);
        if (cq[i]->real && ibcr_cq_take_real (cq[i], &shown) < 0)
            ibcr_log ("QP %u: polling its CQ before a RESET or destroy failed", vqp->vqpn);
        block_unlock (&cq[i]->plock, how);
    }
}

/* Back in RTS (a UC QP from SQE): its queues work again, and the drain
 * compares its counts exactly again (failed sends stay left out of them:
 * rmsg_failed). */
static void qp_clear_err (struct ibcr_qp *vqp)
{
    int how = block_lock (&vqp->vscq->plock);
    vqp->sq_err = false;
    block_unlock (&vqp->vscq->plock, how);
    how = block_lock (&vqp->vrcq->plock);
    vqp->rq_err = false;
    block_unlock (&vqp->vrcq->plock, how);
}

/* A move to RESET succeeded: the backend dropped what was left in the
 * QP's queues, without completions (an SRQ keeps its receives).  A
 * rebuild must not repost those WRs, so they leave the logs.  The
 * completions the backend made before are accounted first, so that no
 * completion of this QP meets a log entry not its own later: some
 * backends (softib, rxe) leave them in the CQs, others (mlx4, mlx5)
 * delete them in the move; the caller took them before it too, so only
 * one that landed between the two is lost, as it is without libibcr.
 * An RC or UC QP's next connection is a new one: its drain counts start
 * from 0, and until it is connected again it has no peer and its peer's
 * counts are not compared with it (drain.h).  A UD QP has no connection:
 * its counts lose the dropped WRs, as for a refused post. */
static void qp_reset_logs (struct ibcr_qp *vqp)
{
    bool ud = vqp->qpx.qp_base.qp_type == IBV_QPT_UD;
    qp_take_completions (vqp);
    /* No completion of the dropped WRs can come now: the unpushes take
     * the CQs' plocks themselves. */
    wrlog_sq_unpush (&vqp->sq, wrlog_sq_len (&vqp->sq));
    if (!vqp->vsrq)
        wrlog_rq_unpush (&vqp->rq, wrlog_rq_len (&vqp->rq));
    int how = block_lock (&vqp->vscq->plock);
    vqp->sq_err = false;
    vqp->rmsg_failed = 0;
    block_unlock (&vqp->vscq->plock, how);
    if (!ud) {
        how = block_lock (&vqp->vrcq->plock);
        vqp->recv_done = 0;
        vqp->rq_err = false;
        block_unlock (&vqp->vrcq->plock, how);
        wrlog_sq_recount (&vqp->sq); /* the log is empty: 0 */
        vqp->has_peer = false;
        vqp->was_reset = true;
    }
}

int ibcr_modify_qp (struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    struct ibcr_qp *vqp = vqp_of (qp);
    struct ibv_qp_attr a = *attr;
    gate_enter ();
    if (mask & IBV_QP_AV) {
        vqp->has_peer = qp->qp_type != IBV_QPT_UD;
        vqp->was_reset = false;
        vqp->peer_rank = -1; /* a new peer: modify_xlate finds its owner */
        vqp->peer_vlid = attr->ah_attr.dlid;
        vqp->peer_global = attr->ah_attr.is_global;
        vqp->peer_vgid = attr->ah_attr.grh.dgid;
    }
    if (mask & IBV_QP_DEST_QPN)
        vqp->peer_vqpn = attr->dest_qp_num;
    if (mask & IBV_QP_PORT)
        vqp->port = attr->port_num;
    if (ibcr_xlate) {
        modify_xlate (vqp, &a, mask, false);
        /* A QP that existed at the last rebuild published a send PSN; its
         * peer expects that one even if this QP reaches RTS only now. */
        if ((mask & IBV_QP_SQ_PSN) && vqp->psn_published)
            a.sq_psn = vqp->psn;
    }
    /* A move to RESET: no post while it happens, and the completions
     * made until now accounted before a backend may delete them. */
    bool reset = (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET;
    int hs = 0, hr = 0;
    if (reset) {
        hs = block_lock (&vqp->slock);
        hr = block_lock (&vqp->rlock);
        qp_take_completions (vqp);
    }
    int rc = ibcr_be.modify_qp (vqp->real, &a, mask);
    if (rc == 0) {
        hist_add (vqp, attr, mask);
        if (mask & IBV_QP_STATE)
            qp->state = attr->qp_state;
        if (reset)
            qp_reset_logs (vqp);
        else if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTS)
            qp_clear_err (vqp);
    }
    if (reset) {
        block_unlock (&vqp->rlock, hr);
        block_unlock (&vqp->slock, hs);
    }
    gate_leave ();
    return rc;
}

/* Rebuild: walk the new real QP through the recorded modifies. */
int ibcr_qp_connect_real (struct ibcr_qp *vqp)
{
    for (int i = 0; i < vqp->nhist; i++) {
        struct ibv_qp_attr a = vqp->hist[i].attr;
        int mask = vqp->hist[i].mask;
        modify_xlate (vqp, &a, mask, true);
        if (mask & IBV_QP_SQ_PSN)
            a.sq_psn = vqp->psn;
        int rc = ibcr_be.modify_qp (vqp->real, &a, mask);
        if (rc) {
            ibcr_log ("rebuild: replaying modify %d of QP %u failed: %s", i, vqp->vqpn,
                      strerror (rc));
            errno = rc;
            return -1;
        }
    }
    return 0;
}

int ibcr_query_qp (struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                   struct ibv_qp_init_attr *init)
{
    struct ibcr_qp *vqp = vqp_of (qp);
    gate_enter ();
    int rc = ibcr_be.query_qp (vqp->real, attr, mask, init);
    gate_leave ();
    if (rc)
        return rc;
    /* Answer in the application's ids. */
    if (vqp->has_peer) {
        attr->dest_qp_num = vqp->peer_vqpn;
        attr->ah_attr.dlid = vqp->peer_vlid;
        if (vqp->peer_global)
            attr->ah_attr.grh.dgid = vqp->peer_vgid;
    }
    for (int i = vqp->nhist - 1; i >= 0; i--) {
        if (vqp->hist[i].mask & IBV_QP_SQ_PSN) {
            attr->sq_psn = vqp->hist[i].attr.sq_psn;
            break;
        }
    }
    if (init) {
        struct ibv_qp_cap cap = init->cap;
        *init = vqp->init;
        init->cap = cap;
    }
    return 0;
}

int ibcr_destroy_qp (struct ibv_qp *qp)
{
    struct ibcr_qp *vqp = vqp_of (qp);
    gate_enter ();
    /* Its completions still in the CQs are accounted while it can be
     * found (as before a RESET): some backends leave them there, and
     * once it is gone a later poll would show them untranslated, and
     * could take one for a WR of a QP that gets its number next. */
    int hs = block_lock (&vqp->slock), hr = block_lock (&vqp->rlock);
    qp_take_completions (vqp);
    block_unlock (&vqp->rlock, hr);
    block_unlock (&vqp->slock, hs);
    pthread_mutex_lock (&ibcr_lock);
    int rc = ibcr_be.destroy_qp (vqp->real);
    if (rc == 0) {
        /* and those that came before the backend's destroy returned */
        qp_take_completions (vqp);
        idtab_del (&vqp->ctx->qp_by_rqpn, vqp->rqpn);
        ibcr_list_del (&vqp->link);
        ibcr_cq_grow (vqp->vscq, -(int)vqp->init.cap.max_send_wr);
        if (!vqp->vsrq)
            ibcr_cq_grow (vqp->vrcq, -(int)vqp->init.cap.max_recv_wr);
        ibcr_ah_cache_clear (vqp);
    }
    pthread_mutex_unlock (&ibcr_lock);
    if (rc == 0) {
        /* A poller of its CQs may have found this QP in qp_by_rqpn or in
         * the CQ's hint just before it left: wait for any poll in progress
         * on them (each holds its CQ's plock while it uses the QP), and
         * clear their hints, so none touches it freed. */
        cq_forget_qp (vqp->vscq, vqp);
        if (vqp->vrcq != vqp->vscq)
            cq_forget_qp (vqp->vrcq, vqp);
    }
    gate_leave ();
    if (rc == 0) {
        wrlog_sq_fini (&vqp->sq);
        wrlog_rq_fini (&vqp->rq);
        map_fini (&vqp->ud_sent);
        map_fini (&vqp->ud_recv);
        map_fini (&vqp->ah_cache);
        ibcr_qpx_free (vqp);
        free (vqp);
    }
    return rc;
}

/* ---- completion accounting ---- */

/* A UD receive with a GRH: the HCA wrote real GIDs into the first 40
 * bytes of the buffer; the application must see virtual ones (it may make
 * an AH of the source GID).  Called before the receive leaves its log. */
static void grh_xlate (struct wrlog_rq *rq, const struct ibv_wc *wc)
{
    /* the consumer's view: published entries */
    size_t end = __atomic_load_n (&rq->r.tail, __ATOMIC_ACQUIRE);
    for (size_t i = 0; rq->r.head + i != end; i++) {
        struct wrlog_recv *e = wrlog_ring_at (&rq->r, i);
        if (e->gone || e->wr_id != wc->wr_id)
            continue;
        if (e->num_sge < 1 || e->sge[0].length < sizeof (struct ibv_grh))
            return;
        struct ibv_grh *g = (struct ibv_grh *)(uintptr_t)e->sge[0].addr;
        union ibv_gid v;
        if (xlate_gid_rev (&g->sgid, &v))
            g->sgid = v;
        if (xlate_gid_rev (&g->dgid, &v))
            g->dgid = v;
        return;
    }
}

/* A receive completion (or an error completion that is not the send
 * log's head's) polled from vcq: called by cq_complete (complete.h),
 * which did the rest.  A QP's receive log is popped by the pollers of its
 * receive CQ alone (wrlog.h); a completion from another CQ is not a
 * receive's (a send's error completion that did not match the send
 * log's head) and leaves the receive logs alone. */
bool ibcr_qp_complete_recv (struct ibcr_cq *vcq, struct ibcr_qp *vqp, struct ibv_wc *wc)
{
    bool grh = ibcr_xlate && wc->status == IBV_WC_SUCCESS && (wc->wc_flags & IBV_WC_GRH)
        && vqp->qpx.qp_base.qp_type == IBV_QPT_UD;
    if (vcq == vqp->vrcq) {
        if (vqp->vsrq) {
            int how = block_lock (&vqp->vsrq->lock);
            if (grh)
                grh_xlate (&vqp->vsrq->rq, wc);
            wrlog_rq_complete (&vqp->vsrq->rq, wc->wr_id, false);
            block_unlock (&vqp->vsrq->lock, how);
        } else {
            if (grh)
                grh_xlate (&vqp->rq, wc);
            wrlog_rq_complete (&vqp->rq, wc->wr_id, true);
        }
    }
    if (wc->status != IBV_WC_SUCCESS && vcq == vqp->vrcq)
        vqp->rq_err = true;
    if (wc->status == IBV_WC_SUCCESS) {
        vqp->recv_done++;
        if (ibcr_xlate) {
            uint16_t vl = wc->slid;
            uint32_t vq = wc->src_qp;
            uint64_t src = xl_key (vl, vq);
            xlate_qp_rev (vl, vq, &vl, &vq);
            if (vqp->rx_fast_cq) {
                /* The next receive's source is likely this one (the
                 * inline path's cache: no UD, no SRQ). */
                vqp->rx_src = src;
                vqp->rx_vlid = vl;
                vqp->rx_vqpn = vq;
            }
            wc->slid = vl;
            wc->src_qp = vq;
        }
        if (vqp->qpx.qp_base.qp_type == IBV_QPT_UD)
            map_add (&vqp->ud_recv, xl_key (wc->slid, wc->src_qp), 1);
    }
    wc->qp_num = vqp->vqpn;
    return true;
}
