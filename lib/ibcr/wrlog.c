/* wrlog.c - rings of posted work requests (see wrlog.h).
 *
 * Invariant: an entry is in a log from the moment its post is accepted
 * until its completion is accounted; entries stay in posting order.
 */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "wrlog.h"

/* Capacities are powers of two, so that a slot's index is a mask. */
static int ring_init (struct wrlog_ring *r, size_t cap, size_t stride)
{
    stride = (stride + 7) & ~(size_t)7;
    size_t c = 4;
    while (c < cap)
        c *= 2;
    cap = c;
    r->buf = malloc (cap * stride);
    if (!r->buf) {
        errno = ENOMEM;
        return -1;
    }
    r->stride = stride;
    r->cap = cap;
    r->head = r->tail = r->ptail = 0;
    return 0;
}

static void ring_fini (struct wrlog_ring *r)
{
    free (r->buf);
    r->buf = NULL;
    r->cap = r->head = r->tail = r->ptail = 0;
}

/* Growing is rare (a backend that accepts more than it said): out of line,
 * so that a push is a few instructions inlined in its caller.  Each entry
 * keeps its count, so it moves to the slot its count has in the larger
 * ring. */
int wrlog_ring_grow (struct wrlog_ring *r, size_t end)
{
    size_t ncap = r->cap * 2;
    unsigned char *nb = malloc (ncap * r->stride);
    if (!nb) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t pos = r->head; pos != end; pos++)
        memcpy (nb + (pos & (ncap - 1)) * r->stride, wrlog_ring_slot (r, pos), r->stride);
    free (r->buf);
    r->buf = nb;
    r->cap = ncap;
    return 0;
}

void *wrlog_ring_grow_excl (struct wrlog_ring *r)
{
    int how = r->excl_lock ? r->excl_lock (r->excl_arg) : 0;
    int rc = 0;
    /* The consumer may have made room meanwhile; it is excluded now. */
    if (r->ptail - r->head == r->cap)
        rc = wrlog_ring_grow (r, r->ptail);
    if (r->excl_unlock)
        r->excl_unlock (r->excl_arg, how);
    return rc < 0 ? NULL : wrlog_ring_slot (r, r->ptail);
}

/* The producer drops the newest n entries, which it pushed and the
 * backend did not take.  They were published before the real post, so
 * the consumer may be reading one (an error completion's wr_id is
 * compared with the head), or may even have popped one whose wr_id
 * matched: under the consumer's lock, head is put back to the new end
 * too.  Refusals are rare; the lock costs the CQ lock's bias at most.
 * Entries never published (a push that failed on a bad WR) need no
 * lock.  The caller has taken back the entries' counts. */
void wrlog_ring_unpush (struct wrlog_ring *r, size_t n)
{
    if (n > r->ptail)
        n = r->ptail;
    bool shown = n && __atomic_load_n (&r->tail, __ATOMIC_RELAXED) > r->ptail - n;
    int how = shown && r->excl_lock ? r->excl_lock (r->excl_arg) : 0;
    r->ptail -= n;
    if (r->head > r->ptail)
        __atomic_store_n (&r->head, r->ptail, __ATOMIC_RELEASE);
    wrlog_ring_publish_to (r, r->ptail);
    if (shown && r->excl_unlock)
        r->excl_unlock (r->excl_arg, how);
}

/* The consumer removes published entry i, keeping order (moves the older
 * ones up by one: entries the producer no longer touches). */
static void ring_remove (struct wrlog_ring *r, size_t i)
{
    for (size_t j = i; j > 0; j--)
        memcpy (wrlog_ring_at (r, j), wrlog_ring_at (r, j - 1), r->stride);
    wrlog_ring_pop_head (r);
}

int wrlog_sq_init (struct wrlog_sq *q, size_t cap, int max_sge, uint32_t max_inline)
{
    memset (q, 0, sizeof (*q));
    if (max_sge < 1)
        max_sge = 1;
    q->max_sge = max_sge;
    q->max_inline = max_inline;
    return ring_init (&q->r, cap + 1,
                      sizeof (struct wrlog_send) + max_sge * sizeof (struct ibv_sge) + max_inline);
}

void wrlog_sq_fini (struct wrlog_sq *q)
{
    ring_fini (&q->r);
}

/* wrlog_ring_unpush, with the entries' counts.  A popped entry's other
 * effects stay: a UD send counted in ud_sent, and the receive whose error
 * completion matched the wr_id, left in its log (a receive's error
 * completion matching, at that instant, the wr_id of a send being refused
 * on the same CQ). */
void wrlog_sq_unpush (struct wrlog_sq *q, size_t n)
{
    if (n > q->r.ptail)
        n = q->r.ptail;
    for (size_t i = 1; i <= n; i++) {
        /* The producer's own entries: the consumer only reads them. */
        struct wrlog_send *e = wrlog_sq_slot (q, q->r.ptail - i);
        q->posted--;
        if (e->needs_recv)
            q->rmsg_posted--;
    }
    wrlog_ring_unpush (&q->r, n);
}

uint64_t wrlog_sq_rmsg_done (struct wrlog_sq *q)
{
    uint64_t pending = 0;
    for (size_t i = 0; i < wrlog_sq_len (q); i++)
        pending += ((struct wrlog_send *)wrlog_ring_at (&q->r, i))->needs_recv;
    return q->rmsg_posted - pending;
}

void wrlog_sq_recount (struct wrlog_sq *q)
{
    q->rmsg_posted -= wrlog_sq_rmsg_done (q);
    q->posted = wrlog_sq_len (q);
}

int wrlog_rq_init (struct wrlog_rq *q, size_t cap, int max_sge)
{
    memset (q, 0, sizeof (*q));
    if (max_sge < 1)
        max_sge = 1;
    q->max_sge = max_sge;
    return ring_init (&q->r, cap + 1,
                      sizeof (struct wrlog_recv) + max_sge * sizeof (struct ibv_sge));
}

void wrlog_rq_fini (struct wrlog_rq *q)
{
    ring_fini (&q->r);
}

void wrlog_rq_unpush (struct wrlog_rq *q, size_t n)
{
    wrlog_ring_unpush (&q->r, n);
}

int wrlog_rq_complete (struct wrlog_rq *q, uint64_t wr_id, bool keep_places)
{
    size_t end = __atomic_load_n (&q->r.tail, __ATOMIC_ACQUIRE);
    bool older_live = false; /* an older entry is not gone */
    for (size_t i = 0; q->r.head + i != end; i++) {
        struct wrlog_recv *e = wrlog_ring_at (&q->r, i);
        if (e->gone || e->wr_id != wr_id) {
            older_live |= !e->gone;
            continue;
        }
        if (!older_live) {
            /* the oldest live entry: it leaves, with the gone ones
             * before it */
            for (size_t k = 0; k <= i; k++)
                wrlog_ring_pop_head (&q->r);
        } else if (keep_places) {
            e->gone = 1;
        } else {
            ring_remove (&q->r, i);
        }
        return 0;
    }
    return -1;
}

void wrlog_rq_compact (struct wrlog_rq *q)
{
    size_t to = q->r.head;
    for (size_t from = q->r.head; from != q->r.ptail; from++) {
        struct wrlog_recv *e = wrlog_ring_slot (&q->r, from);
        if (e->gone)
            continue;
        if (to != from)
            memcpy (wrlog_ring_slot (&q->r, to), e, q->r.stride);
        to++;
    }
    q->r.ptail = to;
    wrlog_ring_publish_to (&q->r, to);
}
