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
 */
#ifndef IBCR_WRLOG_H
#define IBCR_WRLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct ibcr_ah;

struct wrlog_send {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    unsigned int send_flags;    /* as posted */
    bool app_signaled;          /* the application expects a completion */
    bool needs_recv;            /* consumes a receive at the peer */
    __be32 imm_data;
    uint64_t remote_addr;
    uint32_t rkey;
    uint64_t compare_add, swap;
    struct ibcr_ah *vah;        /* UD */
    uint32_t remote_qpn, remote_qkey;
    int num_sge;
    uint32_t inl_len;           /* IBV_SEND_INLINE: bytes copied below */
    struct ibv_sge sge[];       /* num_sge, then inline bytes */
};

struct wrlog_recv {
    uint64_t wr_id;
    int num_sge;
    struct ibv_sge sge[];
};

struct wrlog_ring {
    unsigned char *buf;
    size_t stride, cap, head, len;
};

struct wrlog_sq {
    struct wrlog_ring r;
    int max_sge;
    uint32_t max_inline;
    uint64_t posted, done;          /* all WRs */
    uint64_t rmsg_posted, rmsg_done;/* WRs that consume a peer receive */
};

struct wrlog_rq {
    struct wrlog_ring r;
    int max_sge;
    uint64_t posted, done;
};

int wrlog_sq_init (struct wrlog_sq *q, size_t cap, int max_sge, uint32_t max_inline);
void wrlog_sq_fini (struct wrlog_sq *q);
/* Append a copy of wr (inline data copied from its sges).  NULL + errno:
 * EINVAL (more sges or inline bytes than the QP was created for), ENOMEM. */
struct wrlog_send *wrlog_sq_push (struct wrlog_sq *q, const struct ibv_send_wr *wr,
                                  bool sig_all);
/* Drop the newest n entries (a post that the backend refused). */
void wrlog_sq_unpush (struct wrlog_sq *q, size_t n);
struct wrlog_send *wrlog_sq_at (struct wrlog_sq *q, size_t i);
/* Remove the oldest entry (its completion came). */
void wrlog_sq_pop (struct wrlog_sq *q);
static inline size_t wrlog_sq_len (const struct wrlog_sq *q) { return q->r.len; }
/* Inline bytes of an entry. */
static inline unsigned char *wrlog_inl (struct wrlog_send *e)
{
    return (unsigned char *)&e->sge[e->num_sge];
}

int wrlog_rq_init (struct wrlog_rq *q, size_t cap, int max_sge);
void wrlog_rq_fini (struct wrlog_rq *q);
struct wrlog_recv *wrlog_rq_push (struct wrlog_rq *q, const struct ibv_recv_wr *wr);
void wrlog_rq_unpush (struct wrlog_rq *q, size_t n);
struct wrlog_recv *wrlog_rq_at (struct wrlog_rq *q, size_t i);
/* Remove the oldest entry with this wr_id (receives are consumed in order,
 * but an SRQ's completions can be polled from several CQs out of order).
 * 0, or -1 when none matches. */
int wrlog_rq_complete (struct wrlog_rq *q, uint64_t wr_id);
static inline size_t wrlog_rq_len (const struct wrlog_rq *q) { return q->r.len; }

#endif
