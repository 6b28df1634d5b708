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
    r->head = r->len = 0;
    return 0;
}

static void ring_fini (struct wrlog_ring *r)
{
    free (r->buf);
    r->buf = NULL;
    r->cap = r->len = 0;
}

static void *ring_at (struct wrlog_ring *r, size_t i)
{
    return r->buf + ((r->head + i) & (r->cap - 1)) * r->stride;
}

static void *ring_push (struct wrlog_ring *r)
{
    if (r->len == r->cap) {
        size_t ncap = r->cap * 2;
        unsigned char *nb = malloc (ncap * r->stride);
        if (!nb) {
            errno = ENOMEM;
            return NULL;
        }
        for (size_t i = 0; i < r->len; i++)
            memcpy (nb + i * r->stride, ring_at (r, i), r->stride);
        free (r->buf);
        r->buf = nb;
        r->cap = ncap;
        r->head = 0;
    }
    r->len++;
    return ring_at (r, r->len - 1);
}

static void ring_pop (struct wrlog_ring *r)
{
    if (r->len) {
        r->head = (r->head + 1) & (r->cap - 1);
        r->len--;
    }
}

/* Remove entry i, keeping order (moves the older ones up by one). */
static void ring_remove (struct wrlog_ring *r, size_t i)
{
    for (size_t j = i; j > 0; j--)
        memcpy (ring_at (r, j), ring_at (r, j - 1), r->stride);
    ring_pop (r);
}

int wrlog_sq_init (struct wrlog_sq *q, size_t cap, int max_sge, uint32_t max_inline)
{
    memset (q, 0, sizeof (*q));
    if (max_sge < 1)
        max_sge = 1;
    q->max_sge = max_sge;
    q->max_inline = max_inline;
    return ring_init (&q->r, cap + 1, sizeof (struct wrlog_send)
                      + max_sge * sizeof (struct ibv_sge) + max_inline);
}

void wrlog_sq_fini (struct wrlog_sq *q)
{
    ring_fini (&q->r);
}

static bool needs_recv (enum ibv_wr_opcode op)
{
    return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM
           || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND_WITH_INV;
}

struct wrlog_send *wrlog_sq_push (struct wrlog_sq *q, const struct ibv_send_wr *wr,
                                  bool sig_all)
{
    size_t inl = 0;
    if (wr->num_sge < 0 || wr->num_sge > q->max_sge) {
        errno = EINVAL;
        return NULL;
    }
    if (wr->send_flags & IBV_SEND_INLINE) {
        for (int i = 0; i < wr->num_sge; i++)
            inl += wr->sg_list[i].length;
        if (inl > q->max_inline) {
            errno = EINVAL;
            return NULL;
        }
    }
    struct wrlog_send *e = ring_push (&q->r);
    if (!e)
        return NULL;
    e->wr_id = wr->wr_id;
    e->opcode = wr->opcode;
    e->send_flags = wr->send_flags;
    e->app_signaled = sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    e->needs_recv = needs_recv (wr->opcode);
    e->imm_data = wr->imm_data;
    /* Fields only some opcodes have are written for those only, and read
     * for those only (post.c, send_real); the UD ones by the caller. */
    switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
        e->remote_addr = wr->wr.rdma.remote_addr;
        e->rkey = wr->wr.rdma.rkey;
        break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        e->remote_addr = wr->wr.atomic.remote_addr;
        e->rkey = wr->wr.atomic.rkey;
        e->compare_add = wr->wr.atomic.compare_add;
        e->swap = wr->wr.atomic.swap;
        break;
    default:
        break;
    }
    /* UD fields are read by the caller, which knows the QP type: for RC
     * the wr.ud union member aliases wr.rdma. */
    e->num_sge = wr->num_sge;
    if (wr->num_sge == 1)
        e->sge[0] = wr->sg_list[0];
    else
        memcpy (e->sge, wr->sg_list, wr->num_sge * sizeof (struct ibv_sge));
    e->inl_len = 0;
    if (wr->send_flags & IBV_SEND_INLINE) {
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
    if (e->needs_recv)
        q->rmsg_posted++;
    return e;
}

struct wrlog_send *wrlog_sq_at (struct wrlog_sq *q, size_t i)
{
    return i < q->r.len ? ring_at (&q->r, i) : NULL;
}

void wrlog_sq_unpush (struct wrlog_sq *q, size_t n)
{
    while (n-- > 0 && q->r.len > 0) {
        struct wrlog_send *e = ring_at (&q->r, q->r.len - 1);
        q->posted--;
        if (e->needs_recv)
            q->rmsg_posted--;
        q->r.len--;
    }
}

void wrlog_sq_pop (struct wrlog_sq *q)
{
    struct wrlog_send *e = wrlog_sq_at (q, 0);
    if (!e)
        return;
    q->done++;
    if (e->needs_recv)
        q->rmsg_done++;
    ring_pop (&q->r);
}

int wrlog_rq_init (struct wrlog_rq *q, size_t cap, int max_sge)
{
    memset (q, 0, sizeof (*q));
    if (max_sge < 1)
        max_sge = 1;
    q->max_sge = max_sge;
    return ring_init (&q->r, cap + 1, sizeof (struct wrlog_recv)
                      + max_sge * sizeof (struct ibv_sge));
}

void wrlog_rq_fini (struct wrlog_rq *q)
{
    ring_fini (&q->r);
}

struct wrlog_recv *wrlog_rq_push (struct wrlog_rq *q, const struct ibv_recv_wr *wr)
{
    if (wr->num_sge < 0 || wr->num_sge > q->max_sge) {
        errno = EINVAL;
        return NULL;
    }
    struct wrlog_recv *e = ring_push (&q->r);
    if (!e)
        return NULL;
    e->wr_id = wr->wr_id;
    e->num_sge = wr->num_sge;
    memcpy (e->sge, wr->sg_list, wr->num_sge * sizeof (struct ibv_sge));
    q->posted++;
    return e;
}

void wrlog_rq_unpush (struct wrlog_rq *q, size_t n)
{
    while (n-- > 0 && q->r.len > 0) {
        q->r.len--;
        q->posted--;
    }
}

struct wrlog_recv *wrlog_rq_at (struct wrlog_rq *q, size_t i)
{
    return i < q->r.len ? ring_at (&q->r, i) : NULL;
}

int wrlog_rq_complete (struct wrlog_rq *q, uint64_t wr_id)
{
    for (size_t i = 0; i < q->r.len; i++) {
        struct wrlog_recv *e = ring_at (&q->r, i);
        if (e->wr_id == wr_id) {
            if (i == 0)
                ring_pop (&q->r);
            else
                ring_remove (&q->r, i);
            q->done++;
            return 0;
        }
    }
    return -1;
}
