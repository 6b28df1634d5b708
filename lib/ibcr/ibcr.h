/* ibcr.h - libibcr's virtual verbs objects and the state shared by its
 * modules.
 *
 * Every object the application holds is one of the structs below: the
 * public verbs struct comes first (so the application's pointer is ours),
 * followed by the real object of the current backend and what is needed to
 * recreate it.  The real pointer changes at every rebuild; the public part
 * never does (QPN, lkey, rkey, channel fd keep the values first seen).
 *
 * Locking: ibcr_lock guards object creation/destruction and the object
 * lists; the checkpoint path runs only while the gate (gate.h) is closed,
 * so no application thread is inside a verb then.  Per-QP/SRQ locks
 * guard the WR logs against concurrent post and poll; they and the CQs'
 * poll locks are biased to the thread that uses them (block.h).
 *
 * Nothing here may call an ibv_* function on a real object other than
 * through ibcr_be (backend.h) or the header's inline ops calls: our own
 * exported ibv_* names would receive a real object.
 */
#ifndef IBCR_IBCR_H
#define IBCR_IBCR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdbool.h>
#include <infiniband/verbs.h>

#include "map.h"
#include "idtab.h"
#include "wrlog.h"
#include "block.h"
#include "qpx.h"

#define IBCR_EXPORT __attribute__ ((visibility ("default")))
#define IBCR_MAX_PORTS 4
#define IBCR_MAX_GIDS 8

struct ibcr_ctx;

/* Intrusive list in creation order: rebuild recreates objects in the same
 * order so dependencies (PD before MR, CQ before QP) hold. */
struct ibcr_link {
    struct ibcr_link *next, *prev;
};

struct ibcr_device {
    struct ibv_device dev; /* what the application sees */
    uint64_t guid;         /* network order, first seen */
    int index;
};

struct ibcr_port {
    bool known; /* virtual ids recorded */
    uint16_t vlid, rlid;
    int ngid;
    union ibv_gid vgid[IBCR_MAX_GIDS], rgid[IBCR_MAX_GIDS];
};

struct ibcr_pd {
    struct ibv_pd pd;
    struct ibv_pd *real;
    struct ibcr_ctx *ctx;
    struct ibcr_link link;
};

struct ibcr_mr {
    struct ibv_mr mr; /* lkey/rkey: virtual */
    struct ibv_mr *real;
    struct ibcr_pd *vpd;
    void *addr;
    size_t length;
    uint64_t iova;
    unsigned int access;
    bool iova_set;
    struct ibcr_link link;
};

struct ibcr_chan {
    struct ibv_comp_channel ch; /* ch.fd: our eventfd, stable for life */
    struct ibv_comp_channel *real;
    struct ibcr_ctx *ctx;
    pthread_mutex_t lock;
    struct ibcr_cq **evq; /* CQs with an event not yet read */
    size_t evq_head, evq_len, evq_cap;
    struct ibcr_link link;
};

struct ibcr_cq {
    struct ibv_cq_ex cqx; /* first fields are a struct ibv_cq */
    struct ibv_cq *real;
    int (*real_poll) (struct ibv_cq *, int, struct ibv_wc *); /* real's */
    struct ibcr_ctx *ctx;
    struct ibcr_chan *vchan;
    int cqe;      /* as asked */
    int real_cqe; /* what the real CQ got (may be bigger) */
    int comp_vector;
    int wr_load;   /* WRs of attached QPs: the real CQ's need */
    bool armed;    /* req_notify since the last event (vchan->lock) */
    unsigned arms; /* req_notify calls since the app's last get_cq_event */
    int solicited_only;
    struct ibcr_block plock; /* serializes polls of this CQ */
    /* The QP of the last completion polled here, to skip the qp_by_rqpn
     * walk when the next one is the same QP's (complete.h).  Under plock
     * (or the gate closed); hint_rqpn is CQ_NO_HINT when there is none. */
    uint32_t hint_rqpn;
    struct ibcr_qp *hint_qp;
    struct ibv_wc cur; /* ibv_cq_ex: the completion being read */
    /* ibv_cq_ex: held from a start_poll that found a completion to its
     * end_poll, as a provider holds its CQ lock, so that two threads'
     * polls do not share cur and cqx.wr_id (cqx.c); xhow: how. */
    struct ibcr_block xlock;
    int xhow;
    struct ibv_wc *pend; /* completions drained at checkpoint */
    size_t pend_head, pend_len, pend_cap;
    unsigned long events; /* events handed to the app */
    unsigned long acked;
    struct ibcr_link link;
};

struct ibcr_srq {
    struct ibv_srq srq;
    struct ibv_srq *real;
    struct ibcr_pd *vpd;
    struct ibv_srq_init_attr init;
    bool limit_set;
    struct ibv_srq_attr limit;
    struct ibcr_block lock;
    struct wrlog_rq rq;
    struct ibcr_link link;
};

/* One modify_qp call, kept to bring a rebuilt QP to the same state. */
struct ibcr_qp_mod {
    struct ibv_qp_attr attr;
    int mask;
};

struct ibcr_qp {
    struct ibv_qp_ex qpx; /* qpx.qp_base.qp_num: virtual, forever */
    struct ibv_qp *real;
    /* What ibv_post_send and ibv_post_recv would call on real, without
     * their two dependent loads per post (set with real). */
    int (*real_post_send) (struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
    int (*real_post_recv) (struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);
    struct ibcr_ctx *ctx;
    struct ibcr_pd *vpd;
    struct ibcr_cq *vscq, *vrcq;
    struct ibcr_srq *vsrq;
    struct ibv_qp_init_attr init; /* as asked (virtual pointers) */
    bool app_sig_all;
    uint32_t vqpn, rqpn;
    uint8_t port;
    struct ibcr_qp_mod hist[8]; /* one entry per state walked: qp.c */
    int nhist;
    /* Peer (RC/UC) in virtual ids, from the RTR modify. */
    bool has_peer;
    bool was_reset; /* RC/UC: moved to RESET, not connected since */
    uint16_t peer_vlid;
    uint32_t peer_vqpn;
    union ibv_gid peer_vgid;
    bool peer_global;
    int peer_rank;      /* owner of the peer, -1 unknown */
    uint32_t psn;       /* own sq_psn chosen at the last rebuild */
    bool psn_published; /* psn is in the job's table */
    /* Logs and counters for the exact drain.  slock: posters (the send
     * log's producer side, ah_cache); the send log's consumer is the send
     * CQ's poller, under that CQ's plock (wrlog.h), which also guards
     * ud_sent.  rlock: the receive log's producers; its consumer is the
     * receive CQ's poller, under that CQ's plock (wrlog.h), which also
     * guards recv_done, ud_recv and the rx_ fields. */
    struct ibcr_block slock, rlock;
    struct wrlog_sq sq;
    struct wrlog_rq rq;
    /* The receive CQ if a successful receive may take the inline path
     * (complete.h: no SRQ, not UD), else NULL: one compare there, on the
     * receive log's cache line, instead of three fields' tests. */
    struct ibcr_cq *rx_fast_cq;
    uint64_t recv_done; /* receive completions (messages from peer) */
    /* A WR of the queue completed in error (an RC or UC QP is in the
     * error state then): sq_err and rmsg_failed (the sends among them
     * that needed a receive) under the send CQ's plock, rq_err under the
     * receive CQ's; cleared by a move to RESET or RTS, and at release. */
    bool sq_err, rq_err;
    uint64_t rmsg_failed;
    /* The last receive's real source (xl_key of its slid and src_qp) and
     * what xlate_qp_rev made of it: an RC or UC QP hears one peer, so the
     * next receive's translation is one compare (complete.h).  Under the
     * receive CQ's plock (the checkpoint thread: with the gate closed);
     * RX_NO_SRC until a receive sets it, and again
     * from release on (a rebuild gives peers new real numbers). */
    uint64_t rx_src;
    uint16_t rx_vlid;
    uint32_t rx_vqpn;
    struct ibcr_map ud_sent;  /* UD: (vlid<<32|vqpn) of dest -> sends done
                               * (under the send CQ's plock) */
    struct ibcr_map ud_recv;  /* UD: (vlid<<32|vqpn) of source -> received */
    struct ibcr_map ah_cache; /* UD after a rebuild: real dest -> real AH,
                                 * under slock like every send (ah.c) */
    struct ibcr_wrb wrb;      /* ibv_wr_* batch being built (qpx.c) */
    /* The last virtual lkey a translated send looked up, and its real
     * one, valid while ibcr_mr_gen == lk_gen (post.c; under slock, or the
     * gate closed). */
    uint32_t lk_vlkey, lk_rlkey;
    unsigned lk_gen;
    struct ibcr_link link;
};

struct ibcr_ah {
    struct ibv_ah ah;
    struct ibv_ah *real;
    struct ibcr_pd *vpd;
    struct ibv_ah_attr attr; /* virtual destination */
    struct ibcr_link link;
};

struct ibcr_ctx {
    struct verbs_context vc; /* the application's ibv_context is vc.context */
    struct ibcr_device *vdev;
    struct ibv_context *real;
    int async_efd;              /* vc.context.async_fd: ours, one count per event */
    pthread_mutex_t alock;      /* guards aq */
    struct ibv_async_event *aq; /* translated events not yet read */
    size_t aq_head, aq_len, aq_cap;
    int nports;
    struct ibcr_port port[IBCR_MAX_PORTS + 1];
    struct ibcr_link pds, mrs, chans, cqs, srqs, qps, ahs;
    struct idtab qp_by_rqpn;  /* real QPN -> ibcr_qp (read unlocked: idtab.h) */
    struct idtab mr_by_vlkey; /* virtual lkey -> ibcr_mr (read unlocked) */
    struct ibcr_link link;
};

/* Global state. */
extern pthread_mutex_t ibcr_lock;
/* Changes whenever a virtual lkey may map to another real one: an MR
 * registered or deregistered (under ibcr_lock), a release or a rebuild
 * (gate closed).  Never 0, so a QP's zeroed lkey cache never hits. */
extern atomic_uint ibcr_mr_gen GATE_HIDDEN;
static inline void ibcr_mr_gen_bump (void)
{
    unsigned g = atomic_load_explicit (&ibcr_mr_gen, memory_order_relaxed) + 1;
    atomic_store_explicit (&ibcr_mr_gen, g ? g : 1, memory_order_release);
}
extern struct ibcr_link ibcr_ctxs;
/* Set by the first rebuild: from then on ids go through tables.  Before
 * it, virtual == real and this is the only test on the hot path. */
extern volatile int ibcr_xlate GATE_HIDDEN;
extern int ibcr_rank;
/* Mappings of a libibverbs before the backend was first loaded. */
extern int ibcr_base_maps;

/* list.c-style helpers (inline, tiny) */
static inline void ibcr_list_init (struct ibcr_link *h)
{
    h->next = h->prev = h;
}
static inline void ibcr_list_add (struct ibcr_link *h, struct ibcr_link *l)
{
    l->prev = h->prev;
    l->next = h;
    h->prev->next = l;
    h->prev = l;
}
static inline void ibcr_list_del (struct ibcr_link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->next = l->prev = l;
}
#define ibcr_container(ptr, type, member)                                                          \
    ((type *)((char *)(ptr) - __builtin_offsetof(type, member)))
#define ibcr_foreach(pos, head)                                                                    \
    for (struct ibcr_link *pos = (head)->next; pos != (head); pos = pos->next)
#define ibcr_foreach_safe(pos, nx, head)                                                           \
    for (struct ibcr_link *pos = (head)->next, *nx = pos->next; pos != (head);                     \
         pos = nx, nx = pos->next)

/* Casts from the application's pointers. */
static inline struct ibcr_ctx *vctx_of (struct ibv_context *c)
{
    return ibcr_container (c, struct ibcr_ctx, vc.context);
}
#define vpd_of(p) ((struct ibcr_pd *)(p))
#define vmr_of(p) ((struct ibcr_mr *)(p))
#define vcq_of(p) ((struct ibcr_cq *)(p))
#define vchan_of(p) ((struct ibcr_chan *)(p))
#define vsrq_of(p) ((struct ibcr_srq *)(p))
#define vqp_of(p) ((struct ibcr_qp *)(p))
#define vah_of(p) ((struct ibcr_ah *)(p))

/* Logging: one line, "libibcr[pid]: ...". */
void ibcr_log (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
void ibcr_debug (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* Refuse a feature libibcr cannot make survive a checkpoint: one log line
 * naming it and why; returns EOPNOTSUPP (and sets errno). */
int ibcr_refuse (const char *feature, const char *why);

/* Lazy start (first verbs call): backend, control channel.  0 or -1+errno. */
int ibcr_init (void);

/* Objects (device.c, mem.c, cq.c, qp.c, srq.c, ah.c) */
void ibcr_ctx_fill_ops (struct ibcr_ctx *vctx);
int ibcr_ctx_open_real (struct ibcr_ctx *vctx);
int ibcr_port_learn (struct ibcr_ctx *vctx, uint8_t port);
int ibcr_mr_open_real (struct ibcr_mr *vmr);
int ibcr_chan_open_real (struct ibcr_chan *vchan);
void ibcr_chan_push (struct ibcr_chan *vchan, struct ibcr_cq *vcq);
/* Translate one real async event to the application's objects and queue
 * it on the context (pump thread). */
void ibcr_ctx_async_push (struct ibcr_ctx *vctx, const struct ibv_async_event *real);
int ibcr_chan_pump (struct ibcr_chan *vchan);
int ibcr_cq_open_real (struct ibcr_cq *vcq);
int ibcr_cq_grow (struct ibcr_cq *vcq, int more);
void ibcr_cq_pend_push (struct ibcr_cq *vcq, const struct ibv_wc *wc);
/* Account every completion in the real CQ and move those the application
 * sees into 'pend' (*shown of them); the number accounted, or -1.  The
 * caller holds the CQ's plock, or is the checkpoint thread. */
int ibcr_cq_take_real (struct ibcr_cq *vcq, int *shown);
int ibcr_cq_drain (struct ibcr_cq *vcq);
int ibcr_srq_open_real (struct ibcr_srq *vsrq);
int ibcr_qp_open_real (struct ibcr_qp *vqp);
int ibcr_qp_connect_real (struct ibcr_qp *vqp);
int ibcr_qp_repost (struct ibcr_qp *vqp);
int ibcr_srq_repost (struct ibcr_srq *vsrq);
int ibcr_ah_open_real (struct ibcr_ah *vah);
struct ibv_ah *ibcr_ah_real_for (struct ibcr_qp *vqp, struct ibcr_ah *vah, uint16_t rlid, int rank);
void ibcr_ah_cache_clear (struct ibcr_qp *vqp);
/* Account one real completion: update logs and counters; translate it to
 * virtual ids; false when the application must not see it (a WR it posted
 * unsignaled, which libibcr signals to know exactly when it is done). */
/* A receive completion's accounting (complete.h does the rest). */
bool ibcr_qp_complete_recv (struct ibcr_cq *vcq, struct ibcr_qp *vqp, struct ibv_wc *wc);

/* The ibv_wr_* API of a QP (qpx.c) */
void ibcr_qpx_fill (struct ibcr_qp *vqp);
void ibcr_qpx_free (struct ibcr_qp *vqp);

/* Posting (post.c) */
int ibcr_post_send (struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int ibcr_post_recv (struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int ibcr_post_srq_recv (struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int ibcr_post_real_send (struct ibcr_qp *vqp, struct wrlog_send *e);
int ibcr_post_real_recv (struct ibcr_qp *vqp, struct ibcr_srq *vsrq, struct wrlog_recv *e);

#endif
