/* vw_stream.h - state shared by verbs_stream's requester and responder.
 *
 * verbs_stream runs one workload between two processes: the client is the
 * requester (it posts the opcode under test), the server the responder (it
 * receives, or owns the memory that RDMA/atomics target).  Both verify.
 *
 * Flow control is explicit and the same for every opcode, so that RC and UD
 * behave alike and nothing relies on RNR retries: per QP a window of W
 * message slots; the server grants credits ("you may use seq < N") with
 * small control SENDs, and for RDMA WRITE/READ the client rings a doorbell
 * SEND after each batch ("seq < N are in place / have been read"), which RC
 * ordering makes a fence: the server sees the doorbell only after the
 * writes before it landed.
 *
 * With -C the server ends each QP with a FIN control SEND carrying its
 * count and checksum: the client compares them with its own, and does not
 * destroy its QP before the server's last SEND arrived (the out-of-band
 * connection, which does this by default, is gone).
 */
#ifndef VW_STREAM_H
#define VW_STREAM_H

#include <pthread.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "vw_opts.h"
#include "vw_verbs.h"

#define VW_CTL_MAGIC 0x76774354u /* "vwCT" */
#define VW_CTL_LEN 32            /* bytes of a control message */
#define VW_CTL_STRIDE 128        /* room per control buffer (GRH too) */
#define VW_CTL_EXTRA 8           /* control receives beyond the window */

enum vw_ctl_type {
    VW_CTL_CREDIT = 1,   /* server -> client: may post seq < ctl.seq */
    VW_CTL_DOORBELL = 2, /* client -> server: seq < ctl.seq done */
    VW_CTL_FIN = 3,      /* server -> client (-C): all ctl.seq messages
                             * verified, ctl.pad = the server's hash */
};

struct vw_ctl {
    uint32_t magic;
    uint32_t type;
    uint64_t seq;
    uint64_t qp;
    uint64_t pad;
};

/* wr_id = kind << 60 | qp index << 48 | value */
enum vw_wr_kind {
    VW_WR_DATA = 1,  /* SQ: data operation, value = WR counter */
    VW_WR_CTL = 2,   /* SQ: control send, value = WR counter */
    VW_WR_RDATA = 3, /* RQ: data receive, value = slot, qp = buffer owner */
    VW_WR_RCTL = 4,  /* RQ: control receive, value = slot */
    VW_WR_RIMM = 5,  /* RQ: receive for WRITE_WITH_IMM (no buffer) */
};

#define VW_WRID(kind, qp, v)                                                                       \
    (((uint64_t)(kind) << 60) | ((uint64_t)(qp) << 48) | ((v) & ((1ULL << 48) - 1)))
#define VW_WRID_KIND(id) ((int)((id) >> 60))
#define VW_WRID_QP(id) ((int)(((id) >> 48) & 0xfff))
#define VW_WRID_VAL(id) ((id) & ((1ULL << 48) - 1))

struct vw_thread;
struct vw_run;

struct vw_qp {
    int idx;
    struct vw_thread *thr;
    struct ibv_qp *qp;
    struct ibv_cq *scq, *rcq;
    struct ibv_srq *srq;   /* the thread's, or NULL */
    struct ibv_ah *ah;     /* UD: towards the peer's QP */
    struct ibv_qp_ex *qpx; /* -X: posts go through ibv_wr_* */
    struct ibv_mr *mr;
    uint8_t *buf;
    size_t buf_len;
    struct vw_ep local, remote;

    /* memory layout inside buf */
    size_t data_off, data_stride; /* W data slots */
    size_t ctl_off;               /* NCTL control receive buffers */
    size_t ctls_off;              /* sq_depth control send buffers */
    size_t remote_stride;         /* stride of the peer's data slots */

    uint32_t sq_depth, rq_depth;
    uint64_t *wr_seq; /* per SQ slot: data seq, or UINT64_MAX */
    uint64_t *wr_tmp; /* sq_depth entries of scratch */

    /* progress (client: requester; server: responder) */
    uint64_t posted;   /* client: data seqs posted */
    uint64_t done;     /* data seqs completed and verified */
    uint64_t credit;   /* client: may post seq < credit */
    uint64_t doorbell; /* client: last doorbell value sent */
    uint64_t wr_posted, wr_done;
    uint64_t hash, bytes;
    int finished;
    int fin;                     /* -C: server posted / client received FIN */
    uint64_t fin_done, fin_hash; /* client: what the server's FIN said */
    double pace_t;               /* client -r: the pacing clock's origin ... */
    uint64_t pace_seq;           /* ... and the seq it stood at then */
};

struct vw_thread {
    int idx;
    struct vw_run *run;
    pthread_t tid;
    struct vw_qp **qps;
    int nqp;
    struct ibv_cq **cqs;
    struct ibv_cq_ex **cqxs; /* -X: polled with ibv_start_poll */
    int ncq;
    struct ibv_comp_channel *ch;
    struct ibv_srq *srq;
    struct vw_waiter waiter;
    uint8_t *scratch; /* one message, for gather/generate */
    int throttled;    /* client: -r held back a post this round */
    int nfinished;
};

struct vw_run {
    struct vw_opts o;
    const char *role; /* "client" or "server" */
    int server;
    struct vw_dev dev;
    struct vw_qp *qps;
    struct vw_thread *thr;
    struct ibv_cq **cqs;
    int rd_atomic;
    uint32_t window, batch, nctl;
    int threads_done;     /* atomic */
    double t_end;         /* when the last worker finished */
    double t_start;       /* when the workers started (pacing) */
    uint64_t corrupt_seq; /* VW_CORRUPT_SEQ: flip a byte of qp 0's
                                 * message seq, to prove the checks fail */
};

/* Fail the run: print "verbs_stream: ROLE: message" and exit 1 at once
 * (other threads may be inside verbs calls; nothing is torn down). */
void vw_die (struct vw_run *r, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3), noreturn));

/* Post helpers shared by both sides. */
void vw_post_recv (struct vw_run *r, struct vw_qp *q, int kind, uint64_t slot);
void vw_post_ctl (struct vw_run *r, struct vw_qp *q, uint32_t type, uint64_t seq);
/* The same with ctl.pad = val (FIN's checksum). */
void vw_post_ctl_val (struct vw_run *r, struct vw_qp *q, uint32_t type, uint64_t seq, uint64_t val);
/* Post one send WR, reserving an SQ slot; seq = data seq or UINT64_MAX. */
void vw_post_sq (struct vw_run *r, struct vw_qp *q, struct ibv_send_wr *wr, int kind, uint64_t seq);
/* Find the QP a completion belongs to. */
struct vw_qp *vw_qp_of_wc (struct vw_run *r, struct vw_thread *t, const struct ibv_wc *wc);
/* Fail the run when a completion is not a success, naming it. */
/* Dies on an error completion, or on a receive from another source
 * than the QP's peer. */
void vw_check_wc (struct vw_run *r, const struct vw_qp *q, const struct ibv_wc *wc);

/* Requester and responder: one step of thread t (post what may be posted,
 * handle one completion); see vw_client.c and vw_server.c. */
int vw_client_post (struct vw_run *r, struct vw_qp *q);
void vw_client_wc (struct vw_run *r, struct vw_thread *t, const struct ibv_wc *wc);
int vw_client_finished (struct vw_run *r, struct vw_qp *q);
void vw_client_start (struct vw_run *r, struct vw_qp *q);

void vw_server_start (struct vw_run *r, struct vw_qp *q);
void vw_server_wc (struct vw_run *r, struct vw_thread *t, const struct ibv_wc *wc);
int vw_server_finished (struct vw_run *r, struct vw_qp *q);

/* Resources of a run (vw_setup.c): create all after the device is open,
 * run one thread per -t, destroy all (every destroy must succeed). */
void vw_setup (struct vw_run *r);
void vw_teardown (struct vw_run *r);
void vw_threads_start (struct vw_run *r);
void vw_threads_join (struct vw_run *r);

/* Atomics: the value the counter of QP qp holds after k operations. */
uint64_t vw_atomic_value (enum vw_op op, int qp, uint64_t k);
/* CMP_AND_SWP: does op seq deliberately fail its compare? */
int vw_cswap_fails (uint64_t seq);

#endif
