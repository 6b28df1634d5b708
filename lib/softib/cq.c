/*
 * cq.c - completion queues, extended CQ polling, completion channels.
 *
 * A CQ is a ring of struct ibv_wc filled by QPs (from the posting thread
 * or the progress thread) and drained by poll_cq or the ibv_cq_ex
 * start/next/end_poll calls.  A completion channel is an eventfd in
 * semaphore mode plus a queue of fired CQs: poll(2) on its fd works, a
 * blocking ibv_get_cq_event sleeps in read(2), and O_NONBLOCK set by the
 * application is honoured.  Overflow raises IBV_EVENT_CQ_ERR, as on an HCA.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "softib.h"

/* ---- channels ---- */

SIB_EXPORT struct ibv_comp_channel *ibv_create_comp_channel (struct ibv_context *c)
{
    struct sib_chan *ch = calloc (1, sizeof (*ch));

    if (!ch) {
        errno = ENOMEM;
        return NULL;
    }
    ch->ch.fd = eventfd (0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->ch.fd < 0) {
        free (ch);
        return NULL;
    }
    ch->ch.context = c;
    ch->ch.refcnt = 0;
    pthread_mutex_init (&ch->lock, NULL);
    return &ch->ch;
}

SIB_EXPORT int ibv_destroy_comp_channel (struct ibv_comp_channel *chan)
{
    struct sib_chan *ch = (struct sib_chan *)chan;
    struct sib_chan_ev *e, *n;

    if (!chan)
        return EINVAL;
    if (chan->refcnt)
        return EBUSY;
    for (e = ch->head; e; e = n) {
        n = e->next;
        free (e);
    }
    close (chan->fd);
    pthread_mutex_destroy (&ch->lock);
    free (ch);
    return 0;
}

static void chan_fire (struct sib_chan *ch, struct ibv_cq *cq)
{
    struct sib_chan_ev *e = calloc (1, sizeof (*e));
    uint64_t one = 1;

    if (!e)
        return;
    e->cq = cq;
    pthread_mutex_lock (&ch->lock);
    if (ch->tail)
        ch->tail->next = e;
    else
        ch->head = e;
    ch->tail = e;
    pthread_mutex_unlock (&ch->lock);
    if (write (ch->ch.fd, &one, sizeof (one)) < 0)
        sib_log ("completion channel fd: %s", strerror (errno));
}

SIB_EXPORT int ibv_get_cq_event (struct ibv_comp_channel *chan, struct ibv_cq **cq,
                                 void **cq_context)
{
    struct sib_chan *ch = (struct sib_chan *)chan;
    struct sib_chan_ev *e;
    uint64_t n;

    for (;;) {
        bool stale = false;

        if (read (chan->fd, &n, sizeof (n)) != sizeof (n))
            return -1;
        pthread_mutex_lock (&ch->lock);
        e = ch->head;
        if (e) {
            ch->head = e->next;
            if (!ch->head)
                ch->tail = NULL;
        } else if (ch->stale) {
            /* the count of an event whose CQ was destroyed
			 * unread: wait for a real one */
            ch->stale--;
            stale = true;
        }
        pthread_mutex_unlock (&ch->lock);
        if (e)
            break;
        if (!stale) {
            errno = EAGAIN;
            return -1;
        }
    }
    *cq = e->cq;
    *cq_context = e->cq->cq_context;
    free (e);
    return 0;
}

SIB_EXPORT void ibv_ack_cq_events (struct ibv_cq *cq, unsigned int nevents)
{
    pthread_mutex_lock (&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_cond_signal (&cq->cond);
    pthread_mutex_unlock (&cq->mutex);
}

/* ---- pushing completions ---- */

/* sib_cq_slot on a full CQ: releases the lock, reports the overflow once,
 * NULL. */
struct ibv_wc *sib_cq_full (struct sib_cq *cq)
{
    bool overflow;

    overflow = !cq->overflowed;
    cq->overflowed = true;
    sib_unlock (&cq->lock);
    if (overflow) {
        sib_log ("CQ %p overflowed (more than %d entries unpolled); "
                 "completions are being lost",
                 (void *)cq, cq->cqx.cqe);
        sib_async_event (sib_ctx_of (cq->cqx.context), IBV_EVENT_CQ_ERR, cq);
    }
    return NULL;
}

/* sib_cq_commit of a CQ that keeps times or is armed. */
void sib_cq_commit_slow (struct sib_cq *cq, bool solicited)
{
    const struct ibv_wc *wc = &cq->ring[cq->head & (cq->size - 1)];
    bool fire = false;

    if (cq->ts)
        cq->ts[cq->head & (cq->size - 1)] = sib_now_ns ();
    cq->head++;
    if (cq->armed && (!cq->solicited_only || solicited || wc->status != IBV_WC_SUCCESS)) {
        cq->armed = false;
        fire = true;
    }
    sib_unlock (&cq->lock);
    if (fire && cq->cqx.channel)
        chan_fire ((struct sib_chan *)cq->cqx.channel, (struct ibv_cq *)&cq->cqx);
}

void sib_cq_push (struct sib_cq *cq, const struct ibv_wc *wc, bool solicited)
{
    struct ibv_wc *e = sib_cq_slot (cq);

    if (e) {
        *e = *wc;
        sib_cq_commit (cq, solicited);
    }
}

/* ---- progress from polling threads ----
 *
 * A thread that polls an empty CQ reads the RC connections of the CQ's
 * QPs itself instead of waiting for the progress thread to wake up, read
 * and hand over: on a busy-polled CQ that removes a thread hand-off from
 * every message (latency, message rate).  It only tries locks, so it
 * never waits behind the progress thread or another poller; the progress
 * thread still serves every connection nobody polls for.
 */

int sib_cq_attach (struct sib_cq *cq, struct sib_qp *qp)
{
    int rc = 0;

    sib_lock (&cq->qlock);
    if (cq->nqps == cq->qcap) {
        uint32_t n = cq->qcap ? cq->qcap * 2 : 4;
        struct sib_qp **q = realloc (cq->qps, n * sizeof (*q));

        if (!q) {
            rc = -1;
            errno = ENOMEM;
            goto out;
        }
        cq->qps = q;
        cq->qcap = n;
    }
    cq->qps[cq->nqps++] = qp;
out:
    sib_unlock (&cq->qlock);
    return rc;
}

void sib_cq_detach (struct sib_cq *cq, struct sib_qp *qp)
{
    /* waits for a poller's pass over the list: the QP may be freed
	 * once this returns */
    sib_lock (&cq->qlock);
    for (uint32_t i = 0; i < cq->nqps; i++) {
        if (cq->qps[i] == qp) {
            cq->qps[i] = cq->qps[--cq->nqps];
            break;
        }
    }
    sib_unlock (&cq->qlock);
}

static void cq_progress (struct sib_cq *cq)
{
    if (!sib_trylock_app (&cq->qlock))
        return; /* another thread is at it */
    for (uint32_t i = 0; i < cq->nqps; i++) {
        struct sib_qp *qp = cq->qps[i];

        if (qp->qpx.qp_base.qp_type == IBV_QPT_UD || !sib_trylock_app (&qp->lock))
            continue;
        /* qp->req/resp are live while qp->lock is held: only a kill
		 * under that lock unlinks them before the progress thread
		 * frees them */
        if (qp->resp)
            sib_conn_poll (qp->resp);
        if (qp->req)
            sib_conn_poll (qp->req);
        sib_unlock (&qp->lock);
    }
    sib_unlock (&cq->qlock);
}

static bool cq_empty (struct sib_cq *cq)
{
    return __atomic_load_n (&cq->head, __ATOMIC_ACQUIRE) == cq->tail;
}

/* ---- classic polling ---- */

static int sib_poll_cq (struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
    struct sib_cq *cq = (struct sib_cq *)ibcq;
    int i = 0;

    /* unlocked peek keeps empty polls (the common case in busy loops)
	 * off the mutex */
    if (cq_empty (cq)) {
        cq_progress (cq);
        if (cq_empty (cq)) {
            /* a busy-polling application must leave the CPU to
			 * the progress thread for what it did not do here:
			 * with few cores the two would otherwise take turns
			 * per time slice */
            sched_yield ();
            return 0;
        }
    }
    sib_lock_app (&cq->lock);
    while (i < n && cq->tail != cq->head) {
        wc[i++] = cq->ring[cq->tail & (cq->size - 1)];
        cq->tail++;
    }
    sib_unlock (&cq->lock);
    return i;
}

static int sib_req_notify_cq (struct ibv_cq *ibcq, int solicited_only)
{
    struct sib_cq *cq = (struct sib_cq *)ibcq;

    sib_lock (&cq->lock);
    cq->armed = true;
    cq->solicited_only = solicited_only != 0;
    sib_unlock (&cq->lock);
    /* the application may sleep now: same-host rings it was polling
	 * must wake the progress thread again (see shm_service) */
    sib_shm_app_sleeps (sib_ctx_of (ibcq->context));
    return 0;
}

/* ---- extended polling (ibv_cq_ex) ---- */

static struct sib_cq *cqx_of (struct ibv_cq_ex *c)
{
    return (struct sib_cq *)c;
}

static int cqx_take (struct sib_cq *cq)
{
    if (cq->tail == cq->head)
        return ENOENT;
    cq->cur = cq->ring[cq->tail & (cq->size - 1)];
    cq->cur_ts = cq->ts ? cq->ts[cq->tail & (cq->size - 1)] : 0;
    cq->tail++;
    cq->cqx.status = cq->cur.status;
    cq->cqx.wr_id = cq->cur.wr_id;
    return 0;
}

static int cqx_start_poll (struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
    struct sib_cq *cq = cqx_of (c);
    int rc;

    if (attr && attr->comp_mask)
        return EINVAL;
    if (cq_empty (cq)) {
        cq_progress (cq);
        if (cq_empty (cq)) {
            sched_yield (); /* see sib_poll_cq */
            return ENOENT;
        }
    }
    sib_lock_app (&cq->xlock);
    sib_lock_app (&cq->lock);
    rc = cqx_take (cq);
    sib_unlock (&cq->lock);
    if (rc)
        sib_unlock (&cq->xlock); /* no end_poll follows */
    return rc;
}

static int cqx_next_poll (struct ibv_cq_ex *c)
{
    struct sib_cq *cq = cqx_of (c);
    int rc;

    sib_lock_app (&cq->lock);
    rc = cqx_take (cq);
    sib_unlock (&cq->lock);
    return rc;
}

static void cqx_end_poll (struct ibv_cq_ex *c)
{
    sib_unlock (&cqx_of (c)->xlock);
}

static enum ibv_wc_opcode cqx_opcode (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.opcode;
}

static uint32_t cqx_vendor_err (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.vendor_err;
}

static uint32_t cqx_byte_len (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.byte_len;
}

static __be32 cqx_imm (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.imm_data;
}

static uint32_t cqx_qp_num (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.qp_num;
}

static uint32_t cqx_src_qp (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.src_qp;
}

static unsigned int cqx_wc_flags (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.wc_flags;
}

static uint32_t cqx_slid (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.slid;
}

static uint8_t cqx_sl (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.sl;
}

static uint8_t cqx_dlid_path_bits (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur.dlid_path_bits;
}

/* hca_core_clock is 1 GHz: the raw timestamp is in nanoseconds */
static uint64_t cqx_ts (struct ibv_cq_ex *c)
{
    return cqx_of (c)->cur_ts;
}

/* ---- create / destroy ---- */

#define SIB_CQX_FLAGS                                                                              \
    (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP  \
     | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS                     \
     | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

static struct sib_cq *cq_new (struct ibv_context *c, int cqe, void *cq_context,
                              struct ibv_comp_channel *chan, int comp_vector)
{
    struct sib_cq *cq;
    uint32_t size = 1;

    if (cqe < 1 || cqe > SIB_MAX_CQE || comp_vector < 0 || comp_vector >= c->num_comp_vectors) {
        errno = EINVAL;
        return NULL;
    }
    while (size < (uint32_t)cqe)
        size <<= 1;
    cq = calloc (1, sizeof (*cq));
    if (!cq)
        goto nomem;
    cq->ring = calloc (size, sizeof (*cq->ring));
    if (!cq->ring)
        goto nomem;
    cq->size = size;
    sib_lock_init (&cq->lock, sib_ctx_of (c)->lock_bias);
    sib_lock_init (&cq->qlock, sib_ctx_of (c)->lock_bias);
    sib_lock_init (&cq->xlock, sib_ctx_of (c)->lock_bias);
    pthread_mutex_init (&cq->cqx.mutex, NULL);
    pthread_cond_init (&cq->cqx.cond, NULL);
    cq->cqx.context = c;
    cq->cqx.channel = chan;
    cq->cqx.cq_context = cq_context;
    cq->cqx.cqe = (int)size;
    if (chan)
        __atomic_add_fetch (&chan->refcnt, 1, __ATOMIC_RELAXED);
    cq->cqx.start_poll = cqx_start_poll;
    cq->cqx.next_poll = cqx_next_poll;
    cq->cqx.end_poll = cqx_end_poll;
    cq->cqx.read_opcode = cqx_opcode;
    cq->cqx.read_vendor_err = cqx_vendor_err;
    cq->cqx.read_byte_len = cqx_byte_len;
    cq->cqx.read_imm_data = cqx_imm;
    cq->cqx.read_qp_num = cqx_qp_num;
    cq->cqx.read_src_qp = cqx_src_qp;
    cq->cqx.read_wc_flags = cqx_wc_flags;
    cq->cqx.read_slid = cqx_slid;
    cq->cqx.read_sl = cqx_sl;
    cq->cqx.read_dlid_path_bits = cqx_dlid_path_bits;
    cq->cqx.read_completion_ts = cqx_ts;
    cq->cqx.read_completion_wallclock_ns = cqx_ts;
    return cq;
nomem:
    if (cq)
        free (cq->ring);
    free (cq);
    errno = ENOMEM;
    return NULL;
}

SIB_EXPORT struct ibv_cq *ibv_create_cq (struct ibv_context *c, int cqe, void *cq_context,
                                         struct ibv_comp_channel *chan, int comp_vector)
{
    struct sib_cq *cq = cq_new (c, cqe, cq_context, chan, comp_vector);

    return cq ? (struct ibv_cq *)&cq->cqx : NULL;
}

static struct ibv_cq_ex *sib_create_cq_ex (struct ibv_context *c, struct ibv_cq_init_attr_ex *a)
{
    struct sib_cq *cq;

    if (a->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (a->wc_flags & ~(uint64_t)SIB_CQX_FLAGS) {
        errno = EOPNOTSUPP; /* e.g. flow tag, CVLAN, TM info */
        return NULL;
    }
    cq = cq_new (c, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector);
    if (!cq)
        return NULL;
    if (a->wc_flags
        & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)) {
        cq->ts = calloc (cq->size, sizeof (*cq->ts));
        if (!cq->ts) {
            free (cq->ring);
            free (cq);
            errno = ENOMEM;
            return NULL;
        }
    }
    cq->wc_flags_ex = a->wc_flags;
    return &cq->cqx;
}

SIB_EXPORT int ibv_resize_cq (struct ibv_cq *ibcq, int cqe)
{
    struct sib_cq *cq = (struct sib_cq *)ibcq;
    struct ibv_wc *ring;
    uint64_t *ts;
    uint32_t size = 1, n, i;

    if (!ibcq || cqe < 1 || cqe > SIB_MAX_CQE)
        return EINVAL;
    while (size < (uint32_t)cqe)
        size <<= 1;
    sib_lock (&cq->lock);
    n = cq->head - cq->tail;
    if (size < n) {
        sib_unlock (&cq->lock);
        return EINVAL; /* would drop unpolled completions */
    }
    ring = calloc (size, sizeof (*ring));
    ts = cq->ts ? calloc (size, sizeof (*ts)) : NULL;
    if (!ring || (cq->ts && !ts)) {
        sib_unlock (&cq->lock);
        free (ring);
        free (ts);
        return ENOMEM;
    }
    for (i = 0; i < n; i++) {
        ring[i] = cq->ring[(cq->tail + i) & (cq->size - 1)];
        if (ts)
            ts[i] = cq->ts[(cq->tail + i) & (cq->size - 1)];
    }
    free (cq->ring);
    free (cq->ts);
    cq->ts = ts;
    cq->ring = ring;
    cq->size = size;
    cq->tail = 0;
    cq->head = n;
    cq->cqx.cqe = (int)size;
    sib_unlock (&cq->lock);
    return 0;
}

SIB_EXPORT int ibv_destroy_cq (struct ibv_cq *ibcq)
{
    struct sib_cq *cq = (struct sib_cq *)ibcq;
    struct sib_chan *ch;

    if (!ibcq)
        return EINVAL;
    if (__atomic_load_n (&cq->users, __ATOMIC_ACQUIRE))
        return EBUSY; /* a QP still completes into it */
    ch = (struct sib_chan *)ibcq->channel;
    if (ch) {
        /* drop events of this CQ nobody will read anymore */
        struct sib_chan_ev **pp, *e;

        pthread_mutex_lock (&ch->lock);
        for (pp = &ch->head; (e = *pp);) {
            if (e->cq == ibcq) {
                *pp = e->next;
                free (e);
                ch->stale++;
            } else {
                pp = &e->next;
            }
        }
        ch->tail = NULL;
        for (e = ch->head; e; e = e->next)
            ch->tail = e;
        pthread_mutex_unlock (&ch->lock);
        __atomic_sub_fetch (&ch->ch.refcnt, 1, __ATOMIC_RELAXED);
    }
    free (cq->ring);
    free (cq->ts);
    free (cq->qps);
    pthread_mutex_destroy (&cq->cqx.mutex);
    pthread_cond_destroy (&cq->cqx.cond);
    free (cq);
    return 0;
}

static int sib_modify_cq (struct ibv_cq *cq, struct ibv_modify_cq_attr *attr)
{
    return EOPNOTSUPP; /* no interrupt moderation to tune */
}

SIB_HIDDEN void sib_cq_ops_init (struct sib_ctx *ctx);
void sib_cq_ops_init (struct sib_ctx *ctx)
{
    ctx->vctx.context.ops.poll_cq = sib_poll_cq;
    ctx->vctx.context.ops.req_notify_cq = sib_req_notify_cq;
    ctx->vctx.create_cq_ex = sib_create_cq_ex;
    ctx->vctx.modify_cq = sib_modify_cq;
}

/* default versions; IBVERBS_1.0 ones are in misc.c */
SIB_V11 (ibv_create_cq);
SIB_V11 (ibv_destroy_cq);
SIB_V11 (ibv_resize_cq);
SIB_V11 (ibv_get_cq_event);
SIB_V11 (ibv_ack_cq_events);
