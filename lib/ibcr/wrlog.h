/* wrlog.h - the logs of posted, not yet completed work requests.
 *
 * A send log per QP and a receive log per QP or SRQ keep every WR exactly
 * as the application posted it (virtual lkeys, rkeys, AHs and QPNs, a copy
 * of inline data) from post until its completion is polled.  What is still
 * in a log at release was never executed (the drain guarantees it) and is
 * reposted after rebuild, in order.
 *
 * Entries live in a ring of fixed-stride slots sized from the QP's
 * capabilities; the ring grows if a backend accepts more than it said.
 * head, tail and ptail count entries since the ring began (a slot is a
 * count masked by cap): the oldest entry is at head, the next push goes to
 * ptail, and tail is how far the consumer may look.
 *
 * Every log has one producer and one consumer, which may take different
 * locks.  A QP's send log: posters push under the QP's slock, and pollers
 * of the QP's send CQ pop under that CQ's plock (a poll takes no QP lock:
 * it was a quarter of what libibcr added to a poll, doc/libibcr-ns.md).
 * A QP's receive log likewise: posters under the QP's rlock, pollers of
 * its receive CQ under that CQ's plock.  The producer writes an entry,
 * then publishes it by storing tail (release) before it posts the real
 * WR; the consumer reads tail (acquire) and stores head (release) after
 * it has read the entry.  Growing a ring moves entries under the
 * consumer, and dropping entries the backend refused takes back what the
 * consumer may be reading: the producer holds the consumer's lock for
 * both (the ring's excl callbacks).  An SRQ's receive log is pushed and
 * popped under the SRQ's one lock: its ring has no excl callbacks.
 */
#ifndef IBCR_WRLOG_H
#define IBCR_WRLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>
#include <infiniband/verbs.h>

struct ibcr_ah;

struct wrlog_send {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    /* As posted, with IBV_SEND_SIGNALED added on a QP that signals all
     * (the real QP signals every WR anyway): set when the application
     * expects a completion. */
    unsigned int send_flags;
    bool needs_recv; /* consumes a receive at the peer */
    __be32 imm_data;
    uint64_t remote_addr;
    uint32_t rkey;
    uint64_t compare_add, swap;
    struct ibcr_ah *vah; /* UD */
    uint32_t remote_qpn, remote_qkey;
    int num_sge;
    uint32_t inl_len;     /* IBV_SEND_INLINE: bytes copied below */
    struct ibv_sge sge[]; /* num_sge, then inline bytes */
};

struct wrlog_recv {
    uint64_t wr_id;
    int num_sge;
    /* Completed while an older entry was not (wrlog_rq_complete): left
     * in its place in a QP's log, and popped with the next live entry to
     * complete after it, or dropped by wrlog_rq_compact. */
    int gone;
    struct ibv_sge sge[];
};

struct wrlog_ring {
    unsigned char *buf;
    size_t stride, cap;
    /* Counts: the consumer's head, the published tail (tail - head
     * entries the consumer may see) and the producer's tail (entries
     * pushed, published or not). */
    size_t head, tail, ptail;
    /* Take and release the consumer's lock, around a grow or the drop of
     * published entries (NULL: the producer holds the consumer's lock
     * anyway, or there is no other thread, as in unit tests). */
    int (*excl_lock) (void *arg);
    void (*excl_unlock) (void *arg, int how);
    void *excl_arg;
};

struct wrlog_sq {
    struct wrlog_ring r;
    int max_sge;
    uint32_t max_inline;
    /* Pushed less unpushed: all WRs, and those that consume a peer
     * receive.  The completed ones are the posted ones no longer in the
     * ring (wrlog_sq_done): a completion only pops, it counts nothing. */
    uint64_t posted, rmsg_posted;
};

struct wrlog_rq {
    struct wrlog_ring r;
    int max_sge;
};

int wrlog_sq_init (struct wrlog_sq *q, size_t cap, int max_sge, uint32_t max_inline);
void wrlog_sq_fini (struct wrlog_sq *q);
/* Drop the newest n entries (a post that the backend refused). */
void wrlog_sq_unpush (struct wrlog_sq *q, size_t n);
/* Entries in the log, as the producer (or the checkpoint thread, the gate
 * closed) sees it. */
static inline size_t wrlog_sq_len (const struct wrlog_sq *q)
{
    return q->r.ptail - __atomic_load_n (&q->r.head, __ATOMIC_ACQUIRE);
}
/* Inline bytes of an entry. */
static inline unsigned char *wrlog_inl (struct wrlog_send *e)
{
    return (unsigned char *)&e->sge[e->num_sge];
}

int wrlog_rq_init (struct wrlog_rq *q, size_t cap, int max_sge);
void wrlog_rq_fini (struct wrlog_rq *q);
/* The producer drops the newest n entries (a post that the backend
 * refused, or that failed on a bad WR). */
void wrlog_rq_unpush (struct wrlog_rq *q, size_t n);
/* The consumer removes the oldest published entry with this wr_id; 0, or
 * -1 when none matches.  Receives complete in order on a QP, but a log
 * can meet a completion out of order: an SRQ's completions are polled
 * from several CQs, and on a CQ shared by both queues an error
 * completion is matched with the send log first, by wr_id, which two WRs
 * can share.  An entry that is not the oldest live one is removed in
 * place ('keep_places', a QP's log: the producer may be reading the
 * entries it published, or dropping its newest ones, at that moment):
 * marked gone, and popped with the next live entry to complete after it.
 * Otherwise (an SRQ's
 * log, whose producer and consumer hold one lock) the older entries move
 * up by one. */
int wrlog_rq_complete (struct wrlog_rq *q, uint64_t wr_id, bool keep_places);
/* Drop the entries marked gone: the checkpoint thread, the gate closed,
 * before it reads the log (a count, a repost). */
void wrlog_rq_compact (struct wrlog_rq *q);
/* Entries in the log, as the producer (or the checkpoint thread, the gate
 * closed) sees it. */
static inline size_t wrlog_rq_len (const struct wrlog_rq *q)
{
    return q->r.ptail - __atomic_load_n (&q->r.head, __ATOMIC_ACQUIRE);
}

/* The data path's operations, inline in their callers (post.c, qp.c):
 * called per WR and per completion. */

/* The slot of count pos. */
static inline void *wrlog_ring_slot (struct wrlog_ring *r, size_t pos)
{
    unsigned char *p = r->buf + (pos & (r->cap - 1)) * r->stride;
    /* A ring in use has its buffer: its slots are never NULL, and
     * callers need not test them. */
    if (!p)
        __builtin_unreachable ();
    return p;
}

/* Entry i, counted from the oldest. */
static inline void *wrlog_ring_at (struct wrlog_ring *r, size_t i)
{
    return wrlog_ring_slot (r, r->head + i);
}

/* Doubles a full ring's capacity, keeping every count where it is; 0, or
 * -1 + ENOMEM (wrlog.c).  end: the count after the newest entry. */
int wrlog_ring_grow (struct wrlog_ring *r, size_t end);

/* The producer's push into a full ring: grows it under the consumer's
 * lock (wrlog.c); the slot of count r->ptail, or NULL + ENOMEM. */
void *wrlog_ring_grow_excl (struct wrlog_ring *r);

/* The producer takes the slot of count ptail, not yet published; NULL +
 * ENOMEM. */
static inline void *wrlog_ring_reserve (struct wrlog_ring *r)
{
    void *e;
    if (__builtin_expect (r->ptail - __atomic_load_n (&r->head, __ATOMIC_ACQUIRE) == r->cap, 0)) {
        e = wrlog_ring_grow_excl (r);
        if (!e)
            return NULL;
    } else {
        e = wrlog_ring_slot (r, r->ptail);
    }
    r->ptail++;
    return e;
}

/* Make the entries before count pos visible to the consumer: each one
 * before its real post (its completion may be polled at once), and none
 * earlier than needed (an error completion is matched by wr_id). */
static inline void wrlog_ring_publish_to (struct wrlog_ring *r, size_t pos)
{
    __atomic_store_n (&r->tail, pos, __ATOMIC_RELEASE);
}

/* The producer drops its newest n entries (wrlog.c). */
void wrlog_ring_unpush (struct wrlog_ring *r, size_t n);

/* The consumer's view: the oldest published entry, or NULL. */
static inline void *wrlog_ring_head (struct wrlog_ring *r)
{
    size_t h = r->head;
    if (h == __atomic_load_n (&r->tail, __ATOMIC_ACQUIRE))
        return NULL;
    return wrlog_ring_slot (r, h);
}

/* The consumer removes the oldest entry (its completion came), after
 * reading it; the ring is not empty. */
static inline void wrlog_ring_pop_head (struct wrlog_ring *r)
{
    __atomic_store_n (&r->head, r->head + 1, __ATOMIC_RELEASE);
}

static inline bool wrlog_needs_recv (enum ibv_wr_opcode op)
{
    /* One test of a bit for the four opcodes. */
    const uint32_t m = 1u << IBV_WR_SEND | 1u << IBV_WR_SEND_WITH_IMM
        | 1u << IBV_WR_RDMA_WRITE_WITH_IMM | 1u << IBV_WR_SEND_WITH_INV;
    /* An opcode past 31 (no verbs opcode is) gets the bit its low five
     * bits name: the backend refuses it, and the unpush reads the same
     * flag back. */
    return m >> ((unsigned)op & 31) & 1;
}

/* The opcodes whose log entries keep remote fields (wrlog_sq_push_as,
 * send_real in post.c): one test of a bit, as above. */
#define WRLOG_RDMA_OPS                                                                             \
    (1u << IBV_WR_RDMA_WRITE | 1u << IBV_WR_RDMA_WRITE_WITH_IMM | 1u << IBV_WR_RDMA_READ)
#define WRLOG_ATOMIC_OPS (1u << IBV_WR_ATOMIC_CMP_AND_SWP | 1u << IBV_WR_ATOMIC_FETCH_AND_ADD)

_Static_assert(IBV_SEND_SIGNALED == 2, "wrlog_sq_push_as shifts sig_all into IBV_SEND_SIGNALED");

/* Does the application expect a completion of this entry? */
static inline bool wrlog_app_signaled (const struct wrlog_send *e)
{
    return e->send_flags & IBV_SEND_SIGNALED;
}

/* Append a copy of wr (inline data copied from its sges).  NULL + errno:
 * EINVAL (more sges or inline bytes than the QP was created for), ENOMEM.
 * 'built': wr comes from libibcr's ibv_wr_* builder with at most one sge
 * and no inline data (qpx.c, post.h), so the checks and the
 * inline copy are left out (a constant: each caller gets its own code). */
static inline __attribute__ ((always_inline)) struct wrlog_send *
wrlog_sq_push_as (struct wrlog_sq *q, const struct ibv_send_wr *wr, bool sig_all, bool built)
{
    size_t inl = 0;
    /* max_sge is at least 1: one unsigned compare also refuses < 0. */
    if (!built && (unsigned)wr->num_sge > (unsigned)q->max_sge) {
        errno = EINVAL;
        return NULL;
    }
    if (!built && (wr->send_flags & IBV_SEND_INLINE)) {
        for (int i = 0; i < wr->num_sge; i++)
            inl += wr->sg_list[i].length;
        if (inl > q->max_inline) {
            errno = EINVAL;
            return NULL;
        }
    }
    struct wrlog_send *e = wrlog_ring_reserve (&q->r);
    if (!e)
        return NULL;
    e->wr_id = wr->wr_id;
    e->opcode = wr->opcode;
    e->send_flags = wr->send_flags | (unsigned)sig_all << 1;
    bool needs_recv = wrlog_needs_recv (wr->opcode);
    e->needs_recv = needs_recv;
    e->imm_data = wr->imm_data;
    /* Fields only some opcodes have are written for those only, and read
     * for those only (post.c, send_real); the UD ones by the caller. */
    if ((unsigned)wr->opcode < 32 && ((WRLOG_RDMA_OPS | WRLOG_ATOMIC_OPS) >> wr->opcode & 1)) {
        if (WRLOG_RDMA_OPS >> wr->opcode & 1) {
            e->remote_addr = wr->wr.rdma.remote_addr;
            e->rkey = wr->wr.rdma.rkey;
        } else {
            e->remote_addr = wr->wr.atomic.remote_addr;
            e->rkey = wr->wr.atomic.rkey;
            e->compare_add = wr->wr.atomic.compare_add;
            e->swap = wr->wr.atomic.swap;
        }
    }
    /* UD fields are read by the caller, which knows the QP type: for RC
     * the wr.ud union member aliases wr.rdma. */
    e->num_sge = wr->num_sge;
    if (wr->num_sge == 1)
        e->sge[0] = wr->sg_list[0];
    else if (!built)
        memcpy (e->sge, wr->sg_list, wr->num_sge * sizeof (struct ibv_sge));
    e->inl_len = 0;
    if (!built && (wr->send_flags & IBV_SEND_INLINE)) {
        /* The application may reuse an inline buffer as soon as the post
         * returns: keep the bytes to repost them. */
        unsigned char *p = wrlog_inl (e);
        for (int i = 0; i < wr->num_sge; i++) {
            memcpy (p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
            p += wr->sg_list[i].length;
        }
        e->inl_len = inl;
    }
    q->posted++;
    q->rmsg_posted += needs_recv;
    return e;
}

/* Publish every entry pushed so far (wrlog_ring_publish_to). */
static inline void wrlog_sq_publish (struct wrlog_sq *q)
{
    wrlog_ring_publish_to (&q->r, q->r.ptail);
}

/* Push and publish (unit tests, and callers with nothing to add). */
static inline struct wrlog_send *wrlog_sq_push (struct wrlog_sq *q, const struct ibv_send_wr *wr,
                                                bool sig_all)
{
    struct wrlog_send *e = wrlog_sq_push_as (q, wr, sig_all, false);
    wrlog_sq_publish (q);
    return e;
}

/* Entry i from the oldest, or NULL: for the producer, or the checkpoint
 * thread (the gate closed). */
static inline struct wrlog_send *wrlog_sq_at (struct wrlog_sq *q, size_t i)
{
    return i < wrlog_sq_len (q) ? wrlog_ring_at (&q->r, i) : NULL;
}

/* The entry of count pos (the producer's, pushed and not unpushed). */
static inline struct wrlog_send *wrlog_sq_slot (struct wrlog_sq *q, size_t pos)
{
    return wrlog_ring_slot (&q->r, pos);
}

/* The consumer's view: the oldest published entry, or NULL. */
static inline struct wrlog_send *wrlog_sq_head (struct wrlog_sq *q)
{
    return wrlog_ring_head (&q->r);
}

/* The consumer removes the oldest entry (its completion came), after
 * reading it; the log is not empty. */
static inline void wrlog_sq_pop_head (struct wrlog_sq *q)
{
    wrlog_ring_pop_head (&q->r);
}

/* Remove the oldest entry, if any (consumer). */
static inline void wrlog_sq_pop (struct wrlog_sq *q)
{
    if (wrlog_sq_head (q))
        wrlog_sq_pop_head (q);
}

/* WRs completed (popped) since the log began, all and those that consume
 * a peer receive: read at a checkpoint. */
static inline uint64_t wrlog_sq_done (const struct wrlog_sq *q)
{
    return q->posted - wrlog_sq_len (q);
}
uint64_t wrlog_sq_rmsg_done (struct wrlog_sq *q);
/* The counts start again: only the entries in the log count as posted
 * (none as done); for the producer, or the gate closed. */
void wrlog_sq_recount (struct wrlog_sq *q);

/* Append a copy of wr, not yet published (wrlog_rq_publish); NULL +
 * errno: EINVAL (more sges than the queue was created for), ENOMEM. */
static inline struct wrlog_recv *wrlog_rq_push_as (struct wrlog_rq *q, const struct ibv_recv_wr *wr)
{
    if ((unsigned)wr->num_sge > (unsigned)q->max_sge) { /* max_sge >= 1 */
        errno = EINVAL;
        return NULL;
    }
    struct wrlog_recv *e = wrlog_ring_reserve (&q->r);
    if (!e)
        return NULL;
    e->wr_id = wr->wr_id;
    e->num_sge = wr->num_sge;
    e->gone = 0;
    /* The common one-sge receive without a call to memcpy. */
    if (wr->num_sge == 1)
        e->sge[0] = wr->sg_list[0];
    else
        memcpy (e->sge, wr->sg_list, wr->num_sge * sizeof (struct ibv_sge));
    return e;
}

/* Publish every entry pushed so far (wrlog_ring_publish_to). */
static inline void wrlog_rq_publish (struct wrlog_rq *q)
{
    wrlog_ring_publish_to (&q->r, q->r.ptail);
}

/* Push and publish (unit tests). */
static inline struct wrlog_recv *wrlog_rq_push (struct wrlog_rq *q, const struct ibv_recv_wr *wr)
{
    struct wrlog_recv *e = wrlog_rq_push_as (q, wr);
    wrlog_rq_publish (q);
    return e;
}

/* Entry i from the oldest, or NULL: for the producer, or the checkpoint
 * thread (the gate closed). */
static inline struct wrlog_recv *wrlog_rq_at (struct wrlog_rq *q, size_t i)
{
    return i < wrlog_rq_len (q) ? wrlog_ring_at (&q->r, i) : NULL;
}

/* The entry of count pos (the producer's, pushed and not unpushed). */
static inline struct wrlog_recv *wrlog_rq_slot (struct wrlog_rq *q, size_t pos)
{
    return wrlog_ring_slot (&q->r, pos);
}

#endif
