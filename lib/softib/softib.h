/*
 * softib.h - softib's internal types, limits and hidden functions.
 *
 * softib is a user-space verbs device built as a drop-in libibverbs.so.1.
 * Everything declared here is internal (hidden visibility): softib never
 * calls its own exported ibv_* entry points, so an LD_PRELOADed wrapper
 * (libibcr) on top of it is never re-entered from inside.  All state hangs
 * off a context (struct sib_ctx); there are no process-wide singletons, so
 * two copies of the library loaded from two paths never share anything,
 * and after the last ibv_close_device nothing (thread, fd, socket, mapping)
 * is left behind.
 *
 * Addressing (see softib(7)):
 *   host address  first non-loopback IPv4 (SOFTIB_ADDR / SOFTIB_IFACE)
 *   LID           low 16 bits of that address
 *   GID[0]        ::ffff:a.b.c.d
 *   endpoint      one TCP listener per context on port_base + slot
 *   QPN           slot << 12 | qp index
 * so a peer reaches a QP knowing only (LID or GID, QPN).
 */
#ifndef SOFTIB_SOFTIB_H
#define SOFTIB_SOFTIB_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <pthread.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "wire.h"

#define SIB_HIDDEN __attribute__ ((visibility ("hidden")))
#define SIB_EXPORT __attribute__ ((visibility ("default")))
/* Names exported under both IBVERBS_1.0 and 1.1: the definition becomes
 * the default 1.1 version only (misc.c defines the 1.0 ones). */
#define SIB_V11(name) __asm__(".symver " #name ", " #name "@@@IBVERBS_1.1")

#define SIB_DEV_NAME "softib0"
#define SIB_PORT_BASE 24576 /* default; SOFTIB_PORT_BASE overrides */
#define SIB_SLOTS 4096      /* slot 0 unused: QPN 0/1 are special */
#define SIB_QP_IDX_BITS 12
#define SIB_MAX_QP (1 << SIB_QP_IDX_BITS)
#define SIB_MAX_SGE 16
#define SIB_MAX_INLINE 1024
#define SIB_MAX_WR 16384
#define SIB_MAX_CQE (1 << 22)
#define SIB_MAX_RD_ATOM 16
#define SIB_MTU_BYTES 4096
#define SIB_GRH_BYTES 40
#define SIB_VENDOR_ID 0x5342 /* "SB": matches no real vendor */
#define SIB_VENDOR_PART 0x0001

struct sib_ctx;
struct sib_qp;
struct sib_conn;

/* ---- device (device.c) ---- */
struct sib_dev {
    struct ibv_device ibdev;
    int refs; /* list + open contexts */
    uint64_t guid;
};

struct sib_addr {
    uint32_t ip; /* network order */
    uint16_t lid;
    union ibv_gid gid;
};

SIB_HIDDEN int sib_host_addr (struct sib_addr *a);
SIB_HIDDEN uint32_t sib_lid_to_ip (const struct sib_ctx *ctx, uint16_t lid);
SIB_HIDDEN bool sib_gid_to_ip (const union ibv_gid *gid, uint32_t *ip);
SIB_HIDDEN void sib_ip_to_gid (uint32_t ip, union ibv_gid *gid);
SIB_HIDDEN uint16_t sib_port_of_qpn (const struct sib_ctx *ctx, uint32_t qpn);
SIB_HIDDEN void sib_dev_put (struct sib_dev *dev);

/* ---- strings (strings.c) ---- */
SIB_HIDDEN const char *sib_wc_status_str (enum ibv_wc_status st);
SIB_HIDDEN const char *sib_event_str (enum ibv_event_type ev);

/* ---- logging (log.c): SOFTIB_LOG=stderr|quiet|syslog ---- */
SIB_HIDDEN void sib_log (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* -1/EINVAL (with a line on stderr) if SOFTIB_LOG is not a known mode */
SIB_HIDDEN int sib_log_check (void);

/* ---- async events (device.c) ---- */
SIB_HIDDEN void sib_async_event (struct sib_ctx *ctx, enum ibv_event_type type, void *obj);

/* ---- PD / MR (mr.c) ---- */
struct sib_pd {
    struct ibv_pd pd;
};

struct sib_mr {
    struct ibv_mr mr;
    uint64_t iova;
    int access;
    uint32_t idx;
};

SIB_HIDDEN struct sib_mr *sib_mr_lookup (struct sib_ctx *ctx, uint32_t key);
/* Checks [addr, addr+len) against key's MR; returns the local pointer or
 * NULL with *status set (IBV_WC_LOC_PROT_ERR or IBV_WC_REM_ACCESS_ERR). */
struct sib_qp;
/* Checks that key names an MR of qp's PD with `need` access covering
 * [addr, addr + len) and returns where those bytes are, or NULL with
 * *status = fail.  Caller holds qp->lock (the QP's cache of MRs). */
SIB_HIDDEN void *sib_mr_check_slow (struct sib_qp *qp, uint32_t key, uint64_t addr, uint64_t len,
                                    int need, enum ibv_wc_status fail, enum ibv_wc_status *status);
/* mr.c: moves whenever what a key means changes */
SIB_HIDDEN extern uint64_t sib_mr_epoch;
/* What the data path's checks of one MR need, copied under ctx->lock;
 * valid while the epoch (sib_mr_changed) has not moved (mr.c). */
struct sib_mr_cache {
    const struct sib_ctx *ctx;
    uint64_t epoch;
    uint32_t key;
    int access;
    const struct ibv_pd *pd;
    uint64_t iova, length;
    char *addr;
};
#define SIB_MR_CACHE 4
SIB_HIDDEN void sib_mr_table_free (struct sib_ctx *ctx);
/* What a key means changed (data-path caches are invalid: mr.c). */
SIB_HIDDEN void sib_mr_changed (void);
SIB_HIDDEN void sib_mr_keys_seed (struct sib_ctx *ctx);

/* ---- a light lock for the data path (QPs and CQs) ----
 * A pthread mutex costs two atomic read-modify-writes (its unlock checks
 * for sleepers), and an 8-byte message took eight of them
 * (doc/softib-shm.md); even one atomic exchange per take (5-12 ns on the
 * benchmark machine) was the largest cost of a post left.  So the lock
 * is biased to the application thread that uses it, as libibcr's are:
 * that thread takes it with a plain store of bias_in and two loads, and
 * releases it with a store.  Any other thread (the progress thread, a
 * second application thread) takes `v` by an atomic exchange, then runs
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which puts a fence into
 * the owner's store-then-load, and waits until the owner is not inside.
 * Those takes cost microseconds; more than SIB_LOCK_FOREIGN of them in
 * 100 ms (so at most about 0.5% of a CPU) end the bias: every take is
 * then the exchange, as where the progress thread does the work (TCP,
 * an application sleeping on a completion channel).  The bias comes back
 * once its owner took the lock SIB_LOCK_REBIAS times in a row (the
 * progress thread serving a ring before the application polls it, then
 * leaving it to the application, does that), twice as many after each
 * further revocation, so a lock cannot flip back and forth often.  It
 * only ever returns to the same thread: another one could find bias_in
 * set by the old owner's fast take that is backing off.
 * The owner is the first application thread that takes it on the data
 * path (sib_lock_app: post, poll); a context whose process could not
 * register for membarrier has no bias at all.
 * What is done under these locks is short and never waits (non-blocking
 * sockets and rings), so a waiter spins briefly and then gives its CPU
 * away until the lock is free, instead of sleeping in the kernel. */
typedef struct {
    int v;            /* taken by the exchange (slow path) */
    int bias_in;      /* the owner holds it by the fast path */
    uintptr_t owner;  /* sib_self () of the owner, 0 none yet */
    uint32_t foreign; /* (under v) fenced takes in this window */
    uint64_t window;  /* (under v) start of the window, ns */
    uintptr_t biased; /* the first owner (set once, under v), if any */
    uint32_t run;     /* (under v, revoked) that owner's takes in a row */
    uint32_t rebias;  /* (under v) takes in a row that restore the bias */
} sib_lock_t;
#define SIB_LOCK_PLAIN ((uintptr_t)1)   /* owner: no bias, ever */
#define SIB_LOCK_REVOKED ((uintptr_t)2) /* owner: no bias for now */
#define SIB_LOCK_FOREIGN 100
#define SIB_LOCK_REBIAS 65536

static inline void sib_lock_init (sib_lock_t *l, bool bias)
{
    l->bias_in = 0;
    l->owner = bias ? 0 : SIB_LOCK_PLAIN;
    l->foreign = 0;
    l->window = 0;
    l->biased = 0;
    l->run = 0;
    l->rebias = SIB_LOCK_REBIAS;
    __atomic_store_n (&l->v, 0, __ATOMIC_RELEASE);
}

/* The calling thread's identity for the locks: its thread pointer, one
 * register read, where pthread_self () is a call through the PLT (four
 * calls per message on each side of a same-host stream).  Any value
 * unique among live threads does: it is only compared with itself. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer) && (defined(__x86_64__) || defined(__aarch64__))
#define SIB_SELF_TP 1
#endif
#endif
static inline uintptr_t sib_self (void)
{
#ifdef SIB_SELF_TP
    return (uintptr_t)__builtin_thread_pointer ();
#else
    return (uintptr_t)pthread_self ();
#endif
}

/* The owner's take: store, compiler barrier (another taker's membarrier
 * supplies the fence), load.  Seeing `v` free and the bias still its own
 * after its store means no other taker is inside, nor will be until
 * bias_in is 0 again. */
static inline bool sib_lock_fast (sib_lock_t *l)
{
    uintptr_t self = sib_self ();

    if (__atomic_load_n (&l->owner, __ATOMIC_RELAXED) != self)
        return false;
    __atomic_store_n (&l->bias_in, 1, __ATOMIC_RELAXED);
    __atomic_signal_fence (__ATOMIC_SEQ_CST);
    if (__builtin_expect (__atomic_load_n (&l->v, __ATOMIC_ACQUIRE) == 0
                              && __atomic_load_n (&l->owner, __ATOMIC_ACQUIRE) == self,
                          1))
        return true;
    __atomic_store_n (&l->bias_in, 0, __ATOMIC_RELEASE);
    return false;
}

/* misc.c: the exchange, then the handshake with the owner; `claim`
 * makes the caller the owner of a lock that has none yet. */
SIB_HIDDEN void sib_lock_slow (sib_lock_t *l, bool claim);
SIB_HIDDEN bool sib_trylock_slow (sib_lock_t *l, bool claim);

/* control path and progress thread */
static inline void sib_lock (sib_lock_t *l)
{
    if (!sib_lock_fast (l))
        sib_lock_slow (l, false);
}

/* an application thread's data path (post, poll) */
static inline void sib_lock_app (sib_lock_t *l)
{
    if (!sib_lock_fast (l))
        sib_lock_slow (l, true);
}

static inline bool sib_trylock_app (sib_lock_t *l)
{
    return sib_lock_fast (l) || sib_trylock_slow (l, true);
}

static inline void sib_unlock (sib_lock_t *l)
{
    /* bias_in is only ever set by the thread the lock is biased to, for
	 * itself; `owner` may have been revoked meanwhile (the revoker then
	 * waits for this store), `biased` never changes once set */
    if (__atomic_load_n (&l->bias_in, __ATOMIC_RELAXED)
        && __atomic_load_n (&l->biased, __ATOMIC_RELAXED) == sib_self ())
        __atomic_store_n (&l->bias_in, 0, __ATOMIC_RELEASE);
    else
        __atomic_store_n (&l->v, 0, __ATOMIC_RELEASE);
}

/* Copies n <= 16 bytes inline: two overlapping 8- or 4-byte copies, where
 * memcpy with a run-time size is a library call. */
static inline void sib_copy_small (void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *p = src;

    if (n >= 8) {
        memcpy (d, p, 8);
        memcpy (d + n - 8, p + n - 8, 8);
    } else if (n >= 4) {
        memcpy (d, p, 4);
        memcpy (d + n - 4, p + n - 4, 4);
    } else {
        for (size_t i = 0; i < n; i++)
            d[i] = p[i];
    }
}

/* Copies n sges field by field.  Not memcpy: with a size known only at
 * run time gcc emits `rep movsq`, whose start-up alone cost more than the
 * rest of an ibv_post_send on the project machine; and not as whole
 * structs, which gcc copies with one 16-byte load that cannot take its
 * bytes from the caller's separate, still pending stores of addr and
 * length (a store-forwarding stall, 60% of sib_post_send's samples;
 * doc/softib-shm.md). */
static inline void sib_sge_copy (struct ibv_sge *dst, const struct ibv_sge *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i].addr = src[i].addr;
        dst[i].length = src[i].length;
        dst[i].lkey = src[i].lkey;
    }
}

/* membarrier's REGISTER command REG, unless the variable ENV is "0" or
 * the kernel lacks the commands in NEED: true if it was made (misc.c). */
SIB_HIDDEN bool sib_membarrier_register (const char *env, long need, int reg);

/* Registers the process for MEMBARRIER_CMD_PRIVATE_EXPEDITED (unless
 * SOFTIB_LOCK_BIAS=0): true if the locks of a new context may be biased. */
SIB_HIDDEN bool sib_lock_bias_ok (void);

/* ---- CQ and completion channels (cq.c) ---- */
struct sib_chan_ev {
    struct sib_chan_ev *next;
    struct ibv_cq *cq;
};

struct sib_chan {
    struct ibv_comp_channel ch;
    pthread_mutex_t lock;
    struct sib_chan_ev *head, *tail;
    uint32_t stale; /* fd counts of events dropped by destroy_cq */
};

struct sib_cq {
    struct ibv_cq_ex cqx; /* ibv_cq is its prefix */
    sib_lock_t lock;
    struct ibv_wc *ring;
    uint32_t size, head, tail; /* entries = head - tail */
    bool armed, solicited_only, overflowed;
    uint64_t *ts;      /* completion times (ns), if asked for */
    struct ibv_wc cur; /* ibv_cq_ex polling: current entry */
    /* ibv_cq_ex polling: held from start_poll to end_poll, as a
     * provider's CQ lock (one poller at a time reads 'cur'); not 'lock',
     * which completions are pushed under (under a QP's lock, by the
     * progress thread): an application that posts in its poll window, as
     * rc_pingpong -t does, takes a QP's lock there, and a post to a QP in
     * ERR or on UD pushes a completion to this CQ itself. */
    sib_lock_t xlock;
    uint64_t cur_ts;
    uint64_t wc_flags_ex;
    int users; /* QPs using it: destroy gives EBUSY */
    /* QPs completing here, for progress driven by a polling thread */
    sib_lock_t qlock; /* order: qlock, then qp->lock (trylock) */
    struct sib_qp **qps;
    uint32_t nqps, qcap;
};

SIB_HIDDEN void sib_cq_push (struct sib_cq *cq, const struct ibv_wc *wc, bool solicited);
SIB_HIDDEN struct ibv_wc *sib_cq_full (struct sib_cq *cq);
SIB_HIDDEN void sib_cq_commit_slow (struct sib_cq *cq, bool solicited);

/* The CQ's next entry, for the caller to fill in place, with cq->lock
 * held until sib_cq_commit; NULL (lock released, overflow reported) if
 * the CQ is full.  Inline: once per completion. */
static inline struct ibv_wc *sib_cq_slot (struct sib_cq *cq)
{
    sib_lock (&cq->lock);
    if (__builtin_expect (cq->head - cq->tail < cq->size, 1))
        return &cq->ring[cq->head & (cq->size - 1)];
    return sib_cq_full (cq);
}

/* Publishes the entry sib_cq_slot gave and releases the lock; a CQ that
 * keeps times or is armed for an event goes out of line. */
static inline void sib_cq_commit (struct sib_cq *cq, bool solicited)
{
    if (__builtin_expect (cq->ts != NULL || cq->armed, 0)) {
        sib_cq_commit_slow (cq, solicited);
        return;
    }
    cq->head++;
    sib_unlock (&cq->lock);
}
/* A QP completing into cq joins / leaves its list (0 or -1 ENOMEM). */
SIB_HIDDEN int sib_cq_attach (struct sib_cq *cq, struct sib_qp *qp);
SIB_HIDDEN void sib_cq_detach (struct sib_cq *cq, struct sib_qp *qp);

/* ---- SRQ and receive queues (srq.c) ---- */
struct sib_rwqe {
    uint64_t wr_id;
    uint32_t nsge;
    struct ibv_sge sge[SIB_MAX_SGE];
};

/* A receive ring's entry: its max_sge sges only. */
struct sib_rwqe_e {
    uint64_t wr_id;
    uint32_t nsge;
    struct ibv_sge sge[];
};
_Static_assert(offsetof (struct sib_rwqe_e, sge) == offsetof (struct sib_rwqe, sge),
               "a ring entry is a WQE cut after its sges");

struct sib_rq {
    /* cap entries of `stride` bytes: a WQE and max_sge sges, not all 16
     * (one sge: 32 bytes, not 272, so a deep queue stays in the cache) */
    unsigned char *ring;
    uint32_t cap, head, tail; /* entries = head - tail */
    uint32_t max_sge, stride;
};

/* Entry i (a count, masked here) of a receive ring: its sges past
 * max_sge are not there. */
static inline struct sib_rwqe_e *sib_rq_slot (const struct sib_rq *rq, uint32_t i)
{
    return (struct sib_rwqe_e *)(rq->ring + (size_t)(i & (rq->cap - 1)) * rq->stride);
}

struct sib_srq {
    struct ibv_srq srq;
    pthread_mutex_t lock;
    struct sib_rq rq;
    uint32_t limit; /* armed when non-zero */
    int users;      /* QPs using it: destroy gives EBUSY */
};

SIB_HIDDEN int sib_rq_init (struct sib_rq *rq, uint32_t max_wr, uint32_t max_sge);
/* Appends a list of receive WRs (inline: once per message in a receive
 * loop).  0, or EINVAL / ENOMEM with *bad set. */
static inline int sib_rq_post (struct sib_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    for (; wr; wr = wr->next) {
        struct sib_rwqe_e *w;

        if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
            *bad = wr;
            return EINVAL;
        }
        if (rq->head - rq->tail >= rq->cap) {
            *bad = wr;
            return ENOMEM;
        }
        w = sib_rq_slot (rq, rq->head);
        w->wr_id = wr->wr_id;
        w->nsge = (uint32_t)wr->num_sge;
        sib_sge_copy (w->sge, wr->sg_list, (size_t)wr->num_sge);
        rq->head++;
    }
    return 0;
}
SIB_HIDDEN bool sib_rq_pop (struct sib_rq *rq, struct sib_rwqe *out);
/* Takes one receive WQE for qp from its SRQ or RQ; false if none. */
SIB_HIDDEN bool sib_take_recv (struct sib_qp *qp, struct sib_rwqe *out);

/* ---- AH (ah.c) ---- */
struct sib_ah {
    struct ibv_ah ah;
    struct ibv_ah_attr attr;
    uint32_t ip;
};

/* ---- QP (qp.c, post.c) ---- */
struct sib_swqe {
    /* What every post writes and every completion reads first, then the
     * header (hdr.op marks a local error), then the first sge: a post of
     * one sge touches two cache lines of the WQE, not four. */
    uint64_t wr_id;
    uint32_t seq;
    uint8_t op; /* SIB_OP_* */
    uint8_t signaled, solicited, sent;
    uint32_t imm; /* raw __be32 */
    uint32_t len;
    uint32_t nsge;
    uint32_t rkey;
    uint64_t raddr;
    uint64_t cmp, swp;
    struct sib_hdr hdr; /* wire header, built at transmit */
    struct ibv_sge sge[SIB_MAX_SGE];
    uint8_t *inl; /* inline copy (points into qp->inl_pool) */
    /* UD */
    uint32_t ud_ip, rqpn, qkey;
    uint16_t ud_port;
    uint8_t ud_grh;
} __attribute__ ((aligned (64)));

enum sib_conn_kind {
    SIB_CONN_PENDING, /* accepted, HELLO not read yet */
    SIB_CONN_RC_REQ,  /* our QP is the requester */
    SIB_CONN_RC_RESP, /* our QP is the responder */
    SIB_CONN_UD_TX,   /* UD datagrams to a peer endpoint */
    SIB_CONN_UD_RX,   /* UD datagrams from a peer endpoint */
};

struct sib_qp {
    struct ibv_qp_ex qpx; /* ibv_qp is its prefix */
    struct sib_ctx *ctx;
    uint32_t idx;
    sib_lock_t lock;
    /* the MRs this QP's checks found last (under lock) */
    struct sib_mr_cache mrc[SIB_MR_CACHE];
    enum ibv_qp_state state;
    struct ibv_qp_attr attr; /* attributes last set */
    struct ibv_qp_cap cap;
    bool sq_sig_all;
    struct sib_cq *scq, *rcq;
    struct sib_srq *srq;

    /* send queue: done <= tx <= head (free-running counters) */
    struct sib_swqe *sq;
    uint32_t sq_cap, sq_head, sq_tx, sq_done;
    size_t tx_off; /* bytes of WQE sq_tx already written */
    uint32_t next_seq;
    uint8_t *inl_pool;
    int rnr_left;
    uint64_t rnr_until; /* monotonic ns; 0 = not waiting */
    bool rnr_rewind;    /* rewind to sq_done after the partial WQE */
    /* responder gone (connection closed, refused, unreachable): like an
	 * HCA whose packets go unanswered, outstanding WQEs fail with
	 * RETRY_EXC_ERR only after the transport timeout x (retry_cnt + 1) */
    const char *gone_why; /* non-NULL once the responder is gone */
    uint64_t gone_at;     /* monotonic ns; 0 = no deadline armed */

    struct sib_rq rq;

    /* RC transport */
    struct sib_conn *req;  /* requester connection (we send) */
    struct sib_conn *resp; /* responder connection (we receive) */
    uint32_t peer_ip;
    uint16_t peer_port;
    uint32_t resp_expect; /* next request seq the responder takes */
    uint32_t resp_acked;  /* highest seq acknowledged + 1 */
    bool resp_rnr_drop;   /* discarding until seq == resp_expect */
    bool close_conns;     /* progress thread must drop connections */

    /* ibv_wr_* API */
    bool wr_err;
    uint32_t wr_first;
};

/* qp.c */
SIB_HIDDEN struct sib_qp *sib_qp_lookup (struct sib_ctx *ctx, uint32_t qpn);
SIB_HIDDEN void sib_qp_error (struct sib_qp *qp, const char *why);
SIB_HIDDEN void sib_qp_flush (struct sib_qp *qp);
SIB_HIDDEN uint64_t sib_now_ns (void);
SIB_HIDDEN uint64_t sib_rnr_ns (uint8_t timer);

/* post.c */
SIB_HIDDEN int sib_post_send (struct ibv_qp *ibqp, struct ibv_send_wr *wr,
                              struct ibv_send_wr **bad);
SIB_HIDDEN int sib_post_recv (struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
                              struct ibv_recv_wr **bad);
/* The wire opcode of a verbs opcode on a QP type; *err EINVAL (not for
 * this QP type) or EOPNOTSUPP (memory windows, TSO, ...). */
SIB_HIDDEN uint8_t sib_wr_op (enum ibv_wr_opcode op, enum ibv_qp_type t, int *err);
/* Validates a WQE built at sq_head (inline copy, lkeys to pointers):
 * an errno for the post, or 0 with *err_status set for a completion
 * error. */
SIB_HIDDEN int sib_wqe_prepare (struct sib_qp *qp, struct sib_swqe *w, bool inl,
                                uint32_t *err_status);
SIB_HIDDEN bool sib_send_state_ok (struct sib_qp *qp);
/* After WQEs were added at sq_head (qp->lock held): send them. */
SIB_HIDDEN void sib_post_kick (struct sib_qp *qp);
/* wr.c */
SIB_HIDDEN void sib_qp_ex_init (struct sib_qp *qp);
/* tx.c */
SIB_HIDDEN void sib_tx_progress (struct sib_qp *qp);
SIB_HIDDEN void sib_send_complete (struct sib_qp *qp, struct sib_swqe *w, enum ibv_wc_status st);
SIB_HIDDEN void sib_sq_ack (struct sib_qp *qp, uint32_t seq_excl);

/* ---- connections and progress thread (conn.c, progress.c) ---- */
struct sib_conn {
    int fd;
    enum sib_conn_kind kind;
    struct sib_ctx *ctx;
    struct sib_qp *qp;     /* RC: owner (locks with qp->lock) */
    struct sib_conn *next; /* ctx->conns */
    pthread_mutex_t lock;  /* UD_TX: obuf, shared by UD QPs */
    uint32_t peer_ip;
    uint16_t peer_port;
    bool connecting, dead, out_armed, parked;
    /* PENDING became RC_RESP: the unlocked receive stops right after the
	 * HELLO and goes on under the QP's lock (handoff); only then may a
	 * polling application thread read it too (pollable) */
    bool handoff, pollable;
    uint64_t retry_at, give_up_at;

    /* receive side */
    uint8_t *stage;
    uint32_t st_len, st_off;
    struct sib_hdr rh;
    uint32_t rh_have;
    bool in_payload;
    struct iovec riov[SIB_MAX_SGE + 1];
    int riovcnt;
    uint64_t rleft;       /* payload bytes still to place */
    uint64_t rdiscard;    /* payload bytes still to drop */
    uint8_t small[64];    /* small payloads: HELLO, atomic result */
    struct sib_rwqe rwqe; /* receive WQE consumed by this message */
    bool have_rwqe;
    enum ibv_wc_status rstatus;
    uint32_t rx_key; /* rkey being written into, 0 if none */

    /* same host: the stream goes through shared rings (shm.c); fd is
	 * then a unix socket kept for the peer's end of life */
    struct sib_shm *shm;
    bool is_unix;   /* accepted on the unix listener */
    bool peer_gone; /* its socket hung up: EOF after the ring */
    uint8_t *rbuf;  /* what consume() reads: stage or ring */

    /* send side byte queue (responses, UD datagrams) */
    uint8_t *obuf;
    size_t olen, ooff, ocap;
};

/* shm.c: the same-host transport (rings in a memfd shared with the peer) */
/* One direction's indices and flags in the shared control page, each on
 * a cache line of its own (shm.c). */
struct sib_ring_ctl {
    uint64_t head __attribute__ ((aligned (64)));       /* producer */
    uint64_t tail __attribute__ ((aligned (64)));       /* consumer */
    uint32_t armed __attribute__ ((aligned (64)));      /* consumer sets */
    uint32_t want_space __attribute__ ((aligned (64))); /* producer sets */
};
struct sib_shm {
    void *map;
    struct sib_ring_ctl *tx, *rx;
    uint8_t *txd, *rxd;
    uint32_t size;             /* bytes per ring, a power of two */
    uint64_t tx_head, tx_tail; /* ours; tx_tail a cached copy */
    uint64_t rx_tail;
    int memfd;              /* connector, until the HELLO carried it */
    int efd_self, efd_peer; /* wakes us / wakes the peer */
    uint32_t hello_left;    /* connector: HELLO bytes still to send */
    bool watched;           /* efd_self is in the epoll set */
    /* an application thread polling a CQ reads the ring itself; while
	 * it does, the progress thread is not woken per message (app_polls
	 * moves) and only looks again every SIB_SHM_LAZY_NS */
    uint32_t app_polls, seen_polls;
    uint64_t lazy_until; /* progress thread: look again then; 0 = armed */
    /* wake-up fences (shm.c, shm_fast): we use membarrier when we
	 * sleep (mb_self), the peer says it does too (peer_mb), and we
	 * have seen that (mb_fast: no fence on our data path) */
    const uint32_t *peer_mb;
    bool mb_self, mb_fast;
};

#define SIB_SHM_LAZY_NS 1000000ull
#define SIB_SHM_SPIN_NS 50000ull /* progress thread: wait before sleep */
#define SIB_SHM_SPIN_ROUNDS 256

SIB_HIDDEN bool sib_shm_wanted (void);
/* Registers the process for MEMBARRIER_CMD_GLOBAL_EXPEDITED (unless
 * SOFTIB_SHM_MEMBARRIER=0); true if it is. */
SIB_HIDDEN bool sib_shm_membarrier (void);
SIB_HIDDEN int sib_shm_listen (struct sib_ctx *ctx);
SIB_HIDDEN int sib_shm_connect (struct sib_conn *c);
SIB_HIDDEN ssize_t sib_shm_recv_hello (struct sib_conn *c, void *buf, size_t len);
SIB_HIDDEN int sib_shm_watch (struct sib_conn *c);
SIB_HIDDEN void sib_shm_unwatch (struct sib_conn *c);
SIB_HIDDEN void sib_shm_free (struct sib_conn *c);
SIB_HIDDEN void sib_shm_kick_self (struct sib_conn *c);
SIB_HIDDEN void sib_shm_drain_wake (struct sib_conn *c);
SIB_HIDDEN ssize_t sib_shm_writev (struct sib_conn *c, const struct iovec *iov, int cnt);
SIB_HIDDEN bool sib_shm_put (struct sib_conn *c, const void *h, size_t hlen, const void *pay,
                             size_t plen);
SIB_HIDDEN bool sib_shm_want_space (struct sib_conn *c, bool on);
/* The consumer asked to be woken (armed): clear it and poke it. */
SIB_HIDDEN void sib_shm_wake_armed (struct sib_shm *s);

/* sib_shm_put of a tiny or short header (hlen, a constant at each call)
 * and at most 16 bytes of payload, inline (once per small SEND): while
 * the ring has room before its end, the cached tail says so and no fence
 * is needed (shm.c, shm_fast); anything else goes to sib_shm_put. */
static inline __attribute__ ((always_inline)) bool
sib_shm_put_small (struct sib_conn *c, const void *h, uint32_t hlen, const void *pay, uint32_t plen)
{
    struct sib_shm *s = c->shm;
    uint64_t head = s->tx_head;
    uint32_t off = (uint32_t)(head & (s->size - 1)), n = hlen + plen;

    if (__builtin_expect (plen > 16 || s->hello_left || !s->mb_fast || n > s->size - off
                              || s->size - (head - s->tx_tail) < n,
                          0))
        return sib_shm_put (c, h, hlen, pay, plen);
    memcpy (s->txd + off, h, hlen);
    sib_copy_small (s->txd + off + hlen, pay, plen);
    s->tx_head = head + n;
    __atomic_store_n (&s->tx->head, head + n, __ATOMIC_RELEASE);
    __atomic_signal_fence (__ATOMIC_SEQ_CST); /* mb_fast: the peer's membarrier */
    if (__atomic_load_n (&s->tx->armed, __ATOMIC_RELAXED))
        sib_shm_wake_armed (s);
    return true;
}
SIB_HIDDEN int64_t sib_shm_peek (struct sib_conn *c, uint8_t **p);
SIB_HIDDEN void sib_shm_consumed (struct sib_conn *c, uint32_t n);
SIB_HIDDEN bool sib_shm_arm (struct sib_conn *c);
SIB_HIDDEN void sib_shm_disarm (struct sib_conn *c);
/* Unlocked: disarms and waits up to SIB_SHM_SPIN_NS for bytes (or room
 * the connection waits for); true if some came. */
SIB_HIDDEN bool sib_shm_spin (struct sib_conn *c);
/* An application thread arms a CQ (it may block): every lazy ring of the
 * context is armed by the progress thread at once. */
SIB_HIDDEN void sib_shm_app_sleeps (struct sib_ctx *ctx);

struct sib_cmd {
    struct sib_cmd *next;
    int type;
    void *arg;
    bool done;
};

enum { SIB_CMD_DESTROY_QP = 1, SIB_CMD_DEREG_MR, SIB_CMD_RESET_QP, SIB_CMD_KICK };

struct sib_ctx {
    struct verbs_context vctx; /* ibv_context is its last member */
    struct sib_dev *dev;
    struct sib_addr addr;
    uint16_t port_base, slot, port;
    pthread_mutex_t lock; /* tables below */
    struct sib_qp *qps[SIB_MAX_QP];
    uint32_t qp_next;
    struct sib_mr **mrs;
    uint32_t nmrs;
    uint32_t mr_gen;        /* low key byte: a stale key misses */
    uint32_t key_mask;      /* 24 random bits: keys differ per open */
    struct sib_conn *conns; /* all connections (progress thread frees) */

    /* progress thread */
    int epfd, listen_fd, wake_fd;
    int ulisten_fd;    /* same-host endpoint (shm.c), -1 if none */
    bool shm_on;       /* SOFTIB_SHM is not 0 */
    bool shm_mb;       /* registered for membarrier (shm.c) */
    bool lock_bias;    /* QP and CQ locks may be biased (misc.c) */
    bool shm_wake_all; /* sib_shm_app_sleeps: arm every lazy ring */
    pthread_t thread;
    void *stack;
    bool stop;
    pthread_mutex_t cmd_lock;
    pthread_cond_t cmd_cond;
    struct sib_cmd *cmds;

    /* async events */
    pthread_mutex_t ev_lock;
    struct sib_async {
        struct sib_async *next;
        struct ibv_async_event ev;
    } * ev_head, *ev_tail;
};

/* sib_mr_check_slow's hit in the QP's copies, inline: it runs for every
 * sge posted and every message received. */
static inline void *sib_mr_check (struct sib_qp *qp, uint32_t key, uint64_t addr, uint64_t len,
                                  int need, enum ibv_wc_status fail, enum ibv_wc_status *status)
{
    const struct sib_mr_cache *e = &qp->mrc[key & (SIB_MR_CACHE - 1)];

    if (__builtin_expect (e->ctx == qp->ctx && e->key == key
                              && e->epoch == __atomic_load_n (&sib_mr_epoch, __ATOMIC_ACQUIRE)
                              && e->pd == qp->qpx.qp_base.pd && (e->access & need) == need
                              && addr >= e->iova && len <= e->length
                              && addr - e->iova <= e->length - len,
                          1))
        return e->addr + (addr - e->iova);
    return sib_mr_check_slow (qp, key, addr, len, need, fail, status);
}

static inline struct sib_ctx *sib_ctx_of (struct ibv_context *c)
{
    return (struct sib_ctx *)((char *)c - offsetof (struct sib_ctx, vctx)
                              - offsetof (struct verbs_context, context));
}

/* progress.c */
SIB_HIDDEN int sib_progress_start (struct sib_ctx *ctx);
SIB_HIDDEN void sib_progress_stop (struct sib_ctx *ctx);
SIB_HIDDEN void sib_progress_cmd (struct sib_ctx *ctx, int type, void *arg);
SIB_HIDDEN void sib_progress_kick (struct sib_ctx *ctx);

/* conn.c */
SIB_HIDDEN struct sib_conn *sib_conn_new (struct sib_ctx *ctx, int fd, enum sib_conn_kind kind);
SIB_HIDDEN int sib_conn_connect (struct sib_conn *c, uint32_t ip, uint16_t port);
SIB_HIDDEN void sib_conn_kill (struct sib_conn *c, const char *why);
SIB_HIDDEN void sib_conn_want_out (struct sib_conn *c, bool on);
SIB_HIDDEN int sib_conn_flush (struct sib_conn *c);
/* Writes iov to the connection's stream (socket or rings) without
 * blocking: bytes taken, or -1 with errno (EAGAIN: full). */
SIB_HIDDEN ssize_t sib_conn_writev (struct sib_conn *c, struct iovec *iov, int cnt);
SIB_HIDDEN int sib_conn_queue (struct sib_conn *c, const void *a, size_t alen, const void *b,
                               size_t blen);
SIB_HIDDEN void sib_conn_event (struct sib_conn *c, uint32_t events);
SIB_HIDDEN void sib_conn_timer (struct sib_conn *c, uint64_t now);
SIB_HIDDEN void sib_conn_free (struct sib_conn *c);
SIB_HIDDEN void sib_conn_resume (struct sib_conn *c);
/* Reads and handles what already arrived on an RC connection, from an
 * application thread that polls a CQ (owner qp->lock held). */
SIB_HIDDEN void sib_conn_poll (struct sib_conn *c);
/* Progress thread: lazy same-host rings whose time came (or all, after
 * sib_shm_app_sleeps); returns the next such time, 0 if none. */
SIB_HIDDEN uint64_t sib_conn_shm_timers (struct sib_ctx *ctx, uint64_t now, bool all);
/* Ends a connection that sent something invalid (and its RC QP). */
SIB_HIDDEN void sib_conn_garbage (struct sib_conn *c, const char *why);
SIB_HIDDEN bool sib_hello_matches (struct sib_conn *c, struct sib_qp *qp);
SIB_HIDDEN bool sib_sink_rwqe (struct sib_conn *c, struct sib_qp *qp, uint32_t skip, uint64_t len);

/* ud.c */
SIB_HIDDEN int sib_ud_send (struct sib_qp *qp, struct sib_swqe *w);
SIB_HIDDEN void sib_ud_rx_header (struct sib_conn *c);
SIB_HIDDEN void sib_ud_rx_done (struct sib_conn *c);

/* resp.c: responder side of RC */
SIB_HIDDEN void sib_resp_header (struct sib_conn *c);
SIB_HIDDEN uint32_t sib_resp_fast_send (struct sib_conn *c, const uint8_t *p, uint32_t n);
SIB_HIDDEN void sib_resp_done (struct sib_conn *c);
SIB_HIDDEN void sib_resp_batch_end (struct sib_conn *c);
/* req.c: requester side of RC (responses arriving) */
SIB_HIDDEN void sib_req_header (struct sib_conn *c);
SIB_HIDDEN void sib_req_done (struct sib_conn *c);
SIB_HIDDEN void sib_req_lost (struct sib_qp *qp, const char *why);
/* Arms the transport deadline of a QP whose responder is gone, if it has
 * outstanding WQEs (qp->lock held). */
SIB_HIDDEN void sib_req_gone_arm (struct sib_qp *qp);
/* Fails the head WQE once the deadline passed; returns the deadline still
 * pending (0 if none). */
SIB_HIDDEN uint64_t sib_req_gone_timer (struct sib_qp *qp, uint64_t now);

#endif
