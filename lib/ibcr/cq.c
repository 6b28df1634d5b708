/* cq.c - completion queues and completion channels, virtualized.
 *
 * A CQ keeps, besides its real CQ, the completions drained at the last
 * checkpoint ('pend'): they are older than anything in the new real CQ and
 * are returned first, in order.
 *
 * A completion channel's fd is an eventfd of ours (EFD_SEMAPHORE, one
 * count per event) that lives as long as the channel, so a thread blocked
 * in ibv_get_cq_event or in poll() on it is never broken by a rebuild.
 * The pump thread (pump.c) moves events from the real channel to it.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include "ibcr.h"
#include "backend.h"
#include "gate.h"
#include "pump.h"
#include "exports.h"
#include "complete.h"

/* ---- channels ---- */

int ibcr_chan_open_real (struct ibcr_chan *vchan)
{
    vchan->real = ibcr_be.create_comp_channel (vchan->ctx->real);
    if (!vchan->real) {
        be_errno ();
        return -1;
    }
    /* The pump must never block on a real channel. */
    int fl = fcntl (vchan->real->fd, F_GETFL);
    if (fl >= 0)
        fcntl (vchan->real->fd, F_SETFL, fl | O_NONBLOCK);
    return pump_add (vchan);
}

struct ibv_comp_channel *ibcr_create_comp_channel (struct ibv_context *ctx)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    struct ibcr_chan *vchan = calloc (1, sizeof (*vchan));
    if (!vchan) {
        errno = ENOMEM;
        return NULL;
    }
    vchan->ctx = vctx;
    pthread_mutex_init (&vchan->lock, NULL);
    vchan->ch.context = ctx;
    vchan->ch.fd = eventfd (0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (vchan->ch.fd < 0)
        goto error;
    if (pump_start () < 0)
        goto error;
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    if (ibcr_chan_open_real (vchan) < 0) {
        int saved = errno;
        pthread_mutex_unlock (&ibcr_lock);
        gate_leave ();
        errno = saved;
        goto error;
    }
    ibcr_list_add (&vctx->chans, &vchan->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return &vchan->ch;
error:;
    int saved = errno;
    if (vchan->real)
        ibcr_be.destroy_comp_channel (vchan->real);
    if (vchan->ch.fd >= 0)
        close (vchan->ch.fd);
    free (vchan);
    errno = saved;
    return NULL;
}

int ibcr_destroy_comp_channel (struct ibv_comp_channel *ch)
{
    struct ibcr_chan *vchan = vchan_of (ch);
    if (ch->refcnt > 0) {
        errno = EBUSY;
        return -1;
    }
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    pump_del (vchan);
    if (vchan->real && ibcr_be.destroy_comp_channel (vchan->real) != 0) {
        be_errno ();
        ibcr_log ("destroying the real completion channel failed: %m");
    }
    ibcr_list_del (&vchan->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    close (ch->fd);
    free (vchan->evq);
    free (vchan);
    return 0;
}

/* Queue one event for the application.  Called by the pump and by the
 * drain (an armed CQ that got completions must wake its waiter even though
 * the real channel that would have told it is about to go). */
void ibcr_chan_push (struct ibcr_chan *vchan, struct ibcr_cq *vcq)
{
    uint64_t one = 1;
    pthread_mutex_lock (&vchan->lock);
    if (vchan->evq_len == vchan->evq_cap) {
        size_t ncap = vchan->evq_cap ? vchan->evq_cap * 2 : 16;
        struct ibcr_cq **n = malloc (ncap * sizeof (*n));
        if (!n) {
            pthread_mutex_unlock (&vchan->lock);
            ibcr_log ("out of memory queueing a completion event: event lost");
            return;
        }
        for (size_t i = 0; i < vchan->evq_len; i++)
            n[i] = vchan->evq[(vchan->evq_head + i) % vchan->evq_cap];
        free (vchan->evq);
        vchan->evq = n;
        vchan->evq_cap = ncap;
        vchan->evq_head = 0;
    }
    vchan->evq[(vchan->evq_head + vchan->evq_len) % vchan->evq_cap] = vcq;
    vchan->evq_len++;
    /* The event answers the application's request, unless it asked again
     * since it last took an event: the real event may then answer the
     * older request and the newer one still stand.  Erring towards
     * "armed" costs at most a spurious event after a rebuild; erring the
     * other way loses a wakeup for good. */
    if (vcq->arms <= 1)
        vcq->armed = false;
    pthread_mutex_unlock (&vchan->lock);
    if (write (vchan->ch.fd, &one, sizeof (one)) != sizeof (one))
        ibcr_log ("signalling a completion event failed: %m");
}

int ibcr_get_cq_event (struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
    struct ibcr_chan *vchan = vchan_of (ch);
    uint64_t v;
    /* Wait outside the gate: a checkpoint may run meanwhile. */
    for (;;) {
        ssize_t n = read (ch->fd, &v, sizeof (v));
        if (n == (ssize_t)sizeof (v))
            break;
        if (n < 0 && errno != EINTR)
            return -1;
    }
    pthread_mutex_lock (&vchan->lock);
    struct ibcr_cq *vcq = NULL;
    if (vchan->evq_len) {
        vcq = vchan->evq[vchan->evq_head];
        vchan->evq_head = (vchan->evq_head + 1) % vchan->evq_cap;
        vchan->evq_len--;
        if (vcq)
            vcq->arms = 0;
    }
    pthread_mutex_unlock (&vchan->lock);
    if (!vcq) {
        errno = EIO;
        return -1;
    }
    vcq->events++;
    *cq = (struct ibv_cq *)&vcq->cqx;
    *cq_context = vcq->cqx.cq_context;
    return 0;
}

void ibcr_ack_cq_events (struct ibv_cq *cq, unsigned int nevents)
{
    /* Real events were acked by the pump when it forwarded them. */
    vcq_of (cq)->acked += nevents;
}

/* ---- CQs ---- */

int ibcr_cq_open_real (struct ibcr_cq *vcq)
{
    int want = vcq->cqe > vcq->wr_load ? vcq->cqe : vcq->wr_load;
    vcq->real = ibcr_be.create_cq (vcq->ctx->real, want, vcq, vcq->vchan ? vcq->vchan->real : NULL,
                                   vcq->comp_vector);
    if (!vcq->real) {
        be_errno ();
        return -1;
    }
    vcq->real_cqe = vcq->real->cqe;
    /* What ibv_poll_cq would call, without its two loads per poll. */
    vcq->real_poll = vcq->real->context->ops.poll_cq;
    return 0;
}

/* QPs signal every WR on the real QP (see post.c), so the real CQ must
 * hold every outstanding WR of the QPs attached to it. */
int ibcr_cq_grow (struct ibcr_cq *vcq, int more)
{
    vcq->wr_load += more;
    if (vcq->wr_load <= vcq->real_cqe || !vcq->real)
        return 0;
    if (ibcr_be.resize_cq (vcq->real, vcq->wr_load) != 0) {
        ibcr_log ("cannot grow a CQ to %d entries (%s): a QP posting many "
                  "unsignaled WRs may overrun it",
                  vcq->wr_load, strerror (be_errno ()));
        return -1;
    }
    vcq->real_cqe = vcq->real->cqe;
    return 0;
}

struct ibv_cq *ibcr_create_cq (struct ibv_context *ctx, int cqe, void *cq_context,
                               struct ibv_comp_channel *channel, int comp_vector)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    struct ibcr_cq *vcq = calloc (1, sizeof (*vcq));
    if (!vcq) {
        errno = ENOMEM;
        return NULL;
    }
    vcq->ctx = vctx;
    vcq->vchan = channel ? vchan_of (channel) : NULL;
    vcq->cqe = cqe;
    vcq->comp_vector = comp_vector;
    block_init (&vcq->plock);
    block_init (&vcq->xlock);
    cq_hint_clear (vcq);
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    if (ibcr_cq_open_real (vcq) < 0) {
        int saved = errno;
        pthread_mutex_unlock (&ibcr_lock);
        gate_leave ();
        free (vcq);
        errno = saved;
        return NULL;
    }
    struct ibv_cq *cq = (struct ibv_cq *)&vcq->cqx;
    cq->context = ctx;
    cq->channel = channel;
    cq->cq_context = cq_context;
    cq->handle = vcq->real->handle;
    cq->cqe = vcq->real->cqe;
    pthread_mutex_init (&cq->mutex, NULL);
    pthread_cond_init (&cq->cond, NULL);
    if (channel)
        channel->refcnt++;
    ibcr_list_add (&vctx->cqs, &vcq->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return cq;
}

int ibcr_resize_cq (struct ibv_cq *cq, int cqe)
{
    struct ibcr_cq *vcq = vcq_of (cq);
    gate_enter ();
    int want = cqe > vcq->wr_load ? cqe : vcq->wr_load;
    int rc = ibcr_be.resize_cq (vcq->real, want);
    if (rc == 0) {
        vcq->cqe = cqe;
        vcq->real_cqe = vcq->real->cqe;
        cq->cqe = vcq->real->cqe;
    }
    gate_leave ();
    return rc;
}

int ibcr_destroy_cq (struct ibv_cq *cq)
{
    struct ibcr_cq *vcq = vcq_of (cq);
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    int rc = ibcr_be.destroy_cq (vcq->real);
    if (rc == 0) {
        ibcr_list_del (&vcq->link);
        if (vcq->vchan) {
            /* Drop queued events of this CQ: the application may not read
             * an event for a CQ that no longer exists. */
            struct ibcr_chan *vchan = vcq->vchan;
            pthread_mutex_lock (&vchan->lock);
            for (size_t i = 0; i < vchan->evq_len; i++)
                if (vchan->evq[(vchan->evq_head + i) % vchan->evq_cap] == vcq)
                    vchan->evq[(vchan->evq_head + i) % vchan->evq_cap] = NULL;
            pthread_mutex_unlock (&vchan->lock);
            vchan->ch.refcnt--;
        }
    }
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    if (rc == 0) {
        free (vcq->pend);
        free (vcq);
    }
    return rc;
}

void ibcr_cq_pend_push (struct ibcr_cq *vcq, const struct ibv_wc *wc)
{
    if (vcq->pend_len == vcq->pend_cap) {
        size_t ncap = vcq->pend_cap ? vcq->pend_cap * 2 : 64;
        struct ibv_wc *n = malloc (ncap * sizeof (*n));
        if (!n) {
            ibcr_log ("out of memory keeping a drained completion: lost");
            return;
        }
        for (size_t i = 0; i < vcq->pend_len; i++)
            n[i] = vcq->pend[(vcq->pend_head + i) % vcq->pend_cap];
        free (vcq->pend);
        vcq->pend = n;
        vcq->pend_cap = ncap;
        vcq->pend_head = 0;
    }
    vcq->pend[(vcq->pend_head + vcq->pend_len) % vcq->pend_cap] = *wc;
    vcq->pend_len++;
}

/* Account the completions wc[got..end) just polled; keep the ones the
 * application must see, packed from wc[got]; returns how many it keeps. */
static inline __attribute__ ((always_inline)) int account (struct ibcr_cq *vcq, struct ibv_wc *wc,
                                                           int got, int end)
{
    int k = got;
    for (int i = got; i < end; i++)
        if (__builtin_expect (cq_complete (vcq, &wc[i]), 1)) {
            /* Copy only to close a gap: copying a completion onto itself
             * reads back what the backend just wrote in other widths, a
             * store-forwarding stall that cost 5 ns per completion. */
            if (__builtin_expect (k != i, 0))
                wc[k] = wc[i];
            k++;
        }
    return k;
}

/* poll_real's rare case: some completions were hidden and the real CQ
 * may hold more; got are kept in wc[] already. */
static __attribute__ ((noinline)) int poll_more (struct ibcr_cq *vcq, int n, struct ibv_wc *wc,
                                                 int got)
{
    for (;;) {
        int r = vcq->real_poll (vcq->real, n - got, wc + got);
        if (r <= 0)
            return got ? got : r;
        int k = account (vcq, wc, got, got + r);
        if (k == got + r || got + r < n)
            return k;
        got = k;
    }
}

/* poll_real after a real poll that returned r > 1 completions. */
static __attribute__ ((noinline)) int poll_many (struct ibcr_cq *vcq, int n, struct ibv_wc *wc,
                                                 int r)
{
    int k = account (vcq, wc, 0, r);
    /* Poll again only if we hid some and the CQ may hold more. */
    if (k == r || r < n)
        return k;
    return poll_more (vcq, n, wc, k);
}

/* Poll the real CQ, account every completion, keep the ones the
 * application must see in wc[]; returns how many, or -1.  One completion
 * (the most common answer) is straight-line code; more go out of line,
 * and so does polling again. */
static inline __attribute__ ((always_inline)) int poll_real (struct ibcr_cq *vcq, int n,
                                                             struct ibv_wc *wc)
{
    int r = vcq->real_poll (vcq->real, n, wc);
    if (__builtin_expect (r == 1, 1)) {
        if (__builtin_expect (cq_complete (vcq, wc), 1))
            return 1;
        /* Hidden: poll again only if the CQ may hold more (it gave all
         * that was asked). */
        return n == 1 ? poll_more (vcq, n, wc, 0) : 0;
    }
    if (r <= 0)
        return r;
    return poll_many (vcq, n, wc, r);
}

/* A poll while completions drained at the last checkpoint wait: those
 * first, then the real CQ. */
static __attribute__ ((noinline)) int poll_pend (struct ibcr_cq *vcq, int n, struct ibv_wc *wc)
{
    int got = 0;
    while (vcq->pend_len && got < n) {
        wc[got++] = vcq->pend[vcq->pend_head];
        vcq->pend_head = (vcq->pend_head + 1) % vcq->pend_cap;
        vcq->pend_len--;
    }
    if (got < n) {
        int r = poll_real (vcq, n - got, wc + got);
        if (r < 0 && got == 0)
            got = r;
        else if (r > 0)
            got += r;
    }
    return got;
}

int ibcr_poll_cq (struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    struct ibcr_cq *vcq = vcq_of (cq);
    struct gate_slot *s = gate_enter ();
    int how = block_lock_as (&vcq->plock, s);
    int got;
    if (__builtin_expect (!vcq->pend_len, 1))
        got = poll_real (vcq, n, wc);
    else
        got = poll_pend (vcq, n, wc);
    block_unlock (&vcq->plock, how);
    gate_leave_as (s);
    return got;
}

int ibcr_req_notify_cq (struct ibv_cq *cq, int solicited_only)
{
    struct ibcr_cq *vcq = vcq_of (cq);
    gate_enter ();
    if (vcq->vchan)
        pthread_mutex_lock (&vcq->vchan->lock);
    vcq->armed = true;
    vcq->arms++;
    vcq->solicited_only = solicited_only;
    if (vcq->vchan)
        pthread_mutex_unlock (&vcq->vchan->lock);
    int rc = ibv_req_notify_cq (vcq->real, solicited_only);
    gate_leave ();
    return rc;
}

int ibcr_cq_take_real (struct ibcr_cq *vcq, int *shown)
{
    struct ibv_wc wc[32];
    int total = 0;
    *shown = 0;
    for (;;) {
        int r = ibv_poll_cq (vcq->real, 32, wc);
        if (r < 0)
            return -1;
        for (int i = 0; i < r; i++)
            if (cq_complete (vcq, &wc[i])) {
                ibcr_cq_pend_push (vcq, &wc[i]);
                (*shown)++;
            }
        total += r;
        if (r < 32)
            break;
    }
    return total;
}

/* Checkpoint: move everything in the real CQ into 'pend'.  Returns the
 * number of completions accounted, or -1. */
int ibcr_cq_drain (struct ibcr_cq *vcq)
{
    int shown;
    int total = ibcr_cq_take_real (vcq, &shown);
    if (total < 0)
        return -1;
    /* An armed CQ that got completions owes its waiter an event; the real
     * one may die with the real channel before the pump forwards it. */
    if (shown && vcq->vchan) {
        pthread_mutex_lock (&vcq->vchan->lock);
        bool armed = vcq->armed;
        pthread_mutex_unlock (&vcq->vchan->lock);
        if (armed)
            ibcr_chan_push (vcq->vchan, vcq);
    }
    return total;
}
