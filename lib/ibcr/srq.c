/* srq.c - shared receive queues, virtualized.
 *
 * An SRQ keeps the log of its posted receives (reposted after rebuild,
 * before any send) and its armed limit.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "ibcr.h"
#include "backend.h"
#include "gate.h"
#include "exports.h"

int ibcr_srq_open_real (struct ibcr_srq *vsrq)
{
    struct ibv_srq_init_attr ia = vsrq->init;
    ia.srq_context = vsrq;
    vsrq->real = ibcr_be.create_srq (vsrq->vpd->real, &ia);
    if (!vsrq->real) {
        be_errno ();
        return -1;
    }
    return 0;
}

struct ibv_srq *ibcr_create_srq (struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
    struct ibcr_pd *vpd = vpd_of (pd);
    struct ibcr_srq *vsrq = calloc (1, sizeof (*vsrq));
    if (!vsrq) {
        errno = ENOMEM;
        return NULL;
    }
    vsrq->vpd = vpd;
    vsrq->init = *attr;
    block_init (&vsrq->lock);
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    struct ibv_srq_init_attr ia = *attr;
    ia.srq_context = vsrq;
    vsrq->real = ibcr_be.create_srq (vpd->real, &ia);
    if (!vsrq->real) {
        be_errno ();
        goto error;
    }
    attr->attr = ia.attr;
    vsrq->init.attr = ia.attr;
    if (wrlog_rq_init (&vsrq->rq, ia.attr.max_wr, ia.attr.max_sge) < 0)
        goto error;
    vsrq->srq.context = pd->context;
    vsrq->srq.srq_context = attr->srq_context;
    vsrq->srq.pd = pd;
    vsrq->srq.handle = vsrq->real->handle;
    pthread_mutex_init (&vsrq->srq.mutex, NULL);
    pthread_cond_init (&vsrq->srq.cond, NULL);
    ibcr_list_add (&vpd->ctx->srqs, &vsrq->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return &vsrq->srq;
error:;
    int saved = errno;
    if (vsrq->real)
        ibcr_be.destroy_srq (vsrq->real);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    free (vsrq);
    errno = saved;
    return NULL;
}

struct ibv_srq *ibcr_create_srq_ex (struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a)
{
    if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a->srq_type != IBV_SRQT_BASIC) {
        ibcr_refuse ("XRC and tag-matching SRQs", "their state cannot be drained and rebuilt");
        return NULL;
    }
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_srq_init_attr ia = { .srq_context = a->srq_context, .attr = a->attr };
    struct ibv_srq *srq = ibcr_create_srq (a->pd, &ia);
    if (srq)
        a->attr = ia.attr;
    return srq;
}

int ibcr_modify_srq (struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
    struct ibcr_srq *vsrq = vsrq_of (srq);
    gate_enter ();
    /* Armed before the real modify: its event may come (and the pump
     * disarm it) before the modify returns. */
    bool was_set = vsrq->limit_set;
    struct ibv_srq_attr was = vsrq->limit;
    if (mask & IBV_SRQ_LIMIT) {
        vsrq->limit = *attr;
        vsrq->limit_set = true;
    }
    int rc = ibcr_be.modify_srq (vsrq->real, attr, mask);
    if (rc != 0 && (mask & IBV_SRQ_LIMIT)) {
        vsrq->limit_set = was_set;
        vsrq->limit = was;
    }
    if (rc == 0 && (mask & IBV_SRQ_MAX_WR))
        vsrq->init.attr.max_wr = attr->max_wr;
    gate_leave ();
    return rc;
}

int ibcr_query_srq (struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
    gate_enter ();
    int rc = ibcr_be.query_srq (vsrq_of (srq)->real, attr);
    gate_leave ();
    return rc;
}

int ibcr_destroy_srq (struct ibv_srq *srq)
{
    struct ibcr_srq *vsrq = vsrq_of (srq);
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    int rc = ibcr_be.destroy_srq (vsrq->real);
    if (rc == 0)
        ibcr_list_del (&vsrq->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    if (rc == 0) {
        wrlog_rq_fini (&vsrq->rq);
        free (vsrq);
    }
    return rc;
}
