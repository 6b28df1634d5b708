/*
 * srq.c - receive queues: the per-QP RQ ring and shared receive queues.
 *
 * Both are rings of receive WQEs.  An SRQ's limit is one-shot, as on an
 * HCA: armed by ibv_modify_srq(IBV_SRQ_LIMIT), it raises
 * IBV_EVENT_SRQ_LIMIT_REACHED once when the queue drops below it, then
 * disarms until set again.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "softib.h"

int sib_rq_init (struct sib_rq *rq, uint32_t max_wr, uint32_t max_sge)
{
    uint32_t cap = 1;

    if (max_wr > SIB_MAX_WR || max_sge > SIB_MAX_SGE) {
        errno = EINVAL;
        return -1;
    }
    while (cap < max_wr)
        cap <<= 1;
    rq->max_sge = max_sge ? max_sge : 1;
    rq->stride =
        (uint32_t)(offsetof (struct sib_rwqe, sge) + rq->max_sge * sizeof (struct ibv_sge));
    rq->stride = (rq->stride + 15) & ~15u;
    rq->ring = calloc (cap, rq->stride);
    if (!rq->ring) {
        errno = ENOMEM;
        return -1;
    }
    rq->cap = cap;
    rq->head = rq->tail = 0;
    return 0;
}

bool sib_rq_pop (struct sib_rq *rq, struct sib_rwqe *out)
{
    const struct sib_rwqe_e *w;

    if (rq->head == rq->tail)
        return false;
    /* the sges in use only: a whole WQE is 272 bytes */
    w = sib_rq_slot (rq, rq->tail);
    out->wr_id = w->wr_id;
    out->nsge = w->nsge;
    sib_sge_copy (out->sge, w->sge, w->nsge);
    rq->tail++;
    return true;
}

bool sib_take_recv (struct sib_qp *qp, struct sib_rwqe *out)
{
    struct sib_srq *srq = qp->srq;
    bool ok, limit = false;

    if (!srq)
        return sib_rq_pop (&qp->rq, out);
    pthread_mutex_lock (&srq->lock);
    ok = sib_rq_pop (&srq->rq, out);
    if (ok && srq->limit && srq->rq.head - srq->rq.tail < srq->limit) {
        srq->limit = 0;
        limit = true;
    }
    pthread_mutex_unlock (&srq->lock);
    if (limit)
        sib_async_event (qp->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, &srq->srq);
    return ok;
}

static int sib_post_srq_recv (struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
                              struct ibv_recv_wr **bad)
{
    struct sib_srq *srq = (struct sib_srq *)ibsrq;
    int rc;

    pthread_mutex_lock (&srq->lock);
    rc = sib_rq_post (&srq->rq, wr, bad);
    pthread_mutex_unlock (&srq->lock);
    return rc;
}

static struct ibv_srq *srq_create (struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
    struct sib_srq *srq;

    if (!pd || !a || a->attr.max_wr < 1 || a->attr.max_wr > SIB_MAX_WR
        || a->attr.max_sge > SIB_MAX_SGE || a->attr.srq_limit > a->attr.max_wr) {
        errno = EINVAL;
        return NULL;
    }
    srq = calloc (1, sizeof (*srq));
    if (!srq) {
        errno = ENOMEM;
        return NULL;
    }
    if (sib_rq_init (&srq->rq, a->attr.max_wr, a->attr.max_sge) < 0) {
        free (srq);
        return NULL;
    }
    pthread_mutex_init (&srq->lock, NULL);
    pthread_mutex_init (&srq->srq.mutex, NULL);
    pthread_cond_init (&srq->srq.cond, NULL);
    srq->srq.context = pd->context;
    srq->srq.srq_context = a->srq_context;
    srq->srq.pd = pd;
    a->attr.max_wr = srq->rq.cap;
    a->attr.max_sge = srq->rq.max_sge;
    return &srq->srq;
}

SIB_EXPORT struct ibv_srq *ibv_create_srq (struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
    return srq_create (pd, a);
}

static struct ibv_srq *sib_create_srq_ex (struct ibv_context *c, struct ibv_srq_init_attr_ex *a)
{
    struct ibv_srq_init_attr sa;
    struct ibv_srq *srq;

    if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a->srq_type != IBV_SRQT_BASIC) {
        errno = EOPNOTSUPP; /* XRC and tag matching */
        return NULL;
    }
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) {
        errno = EINVAL;
        return NULL;
    }
    memset (&sa, 0, sizeof (sa));
    sa.srq_context = a->srq_context;
    sa.attr = a->attr;
    srq = srq_create (a->pd, &sa);
    if (srq)
        a->attr = sa.attr;
    return srq;
}

SIB_EXPORT int ibv_modify_srq (struct ibv_srq *ibsrq, struct ibv_srq_attr *a, int mask)
{
    struct sib_srq *srq = (struct sib_srq *)ibsrq;
    int rc = 0;

    if (!ibsrq || !a || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
        return EINVAL;
    pthread_mutex_lock (&srq->lock);
    if (mask & IBV_SRQ_MAX_WR) {
        if (a->max_wr < srq->rq.cap || a->max_wr > SIB_MAX_WR) {
            rc = EINVAL; /* resizing down is not supported */
        } else if (a->max_wr > srq->rq.cap) {
            struct sib_rq nrq;
            struct sib_rwqe w;

            if (sib_rq_init (&nrq, a->max_wr, srq->rq.max_sge) < 0) {
                rc = errno;
            } else {
                while (sib_rq_pop (&srq->rq, &w)) {
                    struct sib_rwqe_e *n = sib_rq_slot (&nrq, nrq.head++);

                    n->wr_id = w.wr_id;
                    n->nsge = w.nsge;
                    sib_sge_copy (n->sge, w.sge, w.nsge);
                }
                free (srq->rq.ring);
                srq->rq = nrq;
            }
        }
    }
    if (!rc && (mask & IBV_SRQ_LIMIT)) {
        if (a->srq_limit > srq->rq.cap)
            rc = EINVAL;
        else
            srq->limit = a->srq_limit;
    }
    pthread_mutex_unlock (&srq->lock);
    return rc;
}

SIB_EXPORT int ibv_query_srq (struct ibv_srq *ibsrq, struct ibv_srq_attr *a)
{
    struct sib_srq *srq = (struct sib_srq *)ibsrq;

    if (!ibsrq || !a)
        return EINVAL;
    pthread_mutex_lock (&srq->lock);
    a->max_wr = srq->rq.cap;
    a->max_sge = srq->rq.max_sge;
    a->srq_limit = srq->limit;
    pthread_mutex_unlock (&srq->lock);
    return 0;
}

SIB_EXPORT int ibv_destroy_srq (struct ibv_srq *ibsrq)
{
    struct sib_srq *srq = (struct sib_srq *)ibsrq;

    if (!ibsrq)
        return EINVAL;
    if (__atomic_load_n (&srq->users, __ATOMIC_ACQUIRE))
        return EBUSY; /* a QP still takes receives from it */
    free (srq->rq.ring);
    pthread_mutex_destroy (&srq->lock);
    pthread_mutex_destroy (&srq->srq.mutex);
    pthread_cond_destroy (&srq->srq.cond);
    free (srq);
    return 0;
}

static int sib_get_srq_num (struct ibv_srq *srq, uint32_t *num)
{
    return EOPNOTSUPP; /* XRC only */
}

SIB_HIDDEN void sib_srq_ops_init (struct sib_ctx *ctx);
void sib_srq_ops_init (struct sib_ctx *ctx)
{
    ctx->vctx.context.ops.post_srq_recv = sib_post_srq_recv;
    ctx->vctx.create_srq_ex = sib_create_srq_ex;
    ctx->vctx.get_srq_num = sib_get_srq_num;
}

/* default versions; IBVERBS_1.0 ones are in misc.c */
SIB_V11 (ibv_create_srq);
SIB_V11 (ibv_modify_srq);
SIB_V11 (ibv_query_srq);
SIB_V11 (ibv_destroy_srq);
