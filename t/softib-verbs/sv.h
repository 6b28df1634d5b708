/* sv.h - shared set-up for softib's verb-semantics test programs.
 *
 * Each program in t/softib-verbs/ checks one group of verbs against what
 * the IB spec (and so a real HCA) does; they run on whatever
 * libibverbs.so.1 the loader finds, softib's in the tests.  This file has
 * only set-up: opening the device, a registered buffer, two QPs of one
 * process connected to each other, and waiting for completions with a
 * deadline so that a device that never completes fails instead of hanging.
 */
#ifndef SV_H
#define SV_H

#include <stdint.h>
#include <stddef.h>
#include <infiniband/verbs.h>

#include "tap.h"

struct sv_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    uint16_t lid;
    union ibv_gid gid;
};

/* QP parameters for sv_pair_connect; sv_params_default fills sane ones */
struct sv_params {
    uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
    int access; /* qp_access_flags */
    int gid;    /* address by GID (GRH) instead of LID */
};

struct sv_pair {
    struct ibv_cq *cq[2];
    struct ibv_qp *qp[2];
    uint32_t psn[2];
};

/* Opens the first device (BAIL_OUT on failure). */
void sv_open (struct sv_dev *d);
void sv_close (struct sv_dev *d);
/* Page-aligned buffer registered with `access`; BAIL_OUT on failure. */
struct ibv_mr *sv_mr (struct sv_dev *d, size_t len, int access);
void sv_mr_free (struct ibv_mr *mr);

void sv_params_default (struct sv_params *p);
/* Two QPs of `type` with their own CQs (cqe entries), extra attributes
 * from init (may be NULL: 64 WRs, 4 SGEs); BAIL_OUT on failure. */
void sv_pair_create (struct sv_dev *d, struct sv_pair *p, enum ibv_qp_type type,
                     const struct ibv_qp_init_attr *init, int cqe);
/* RC/UC: connects qp[0] and qp[1] through RTS; UD: brings both to RTS
 * with Q_Key 0x11111111.  p1 applies to qp[1] (NULL = same as p0).
 * Returns 0 or the failing ibv_modify_qp value. */
int sv_pair_connect (struct sv_dev *d, struct sv_pair *p, const struct sv_params *p0,
                     const struct sv_params *p1);
void sv_pair_destroy (struct sv_pair *p);

/* Waits up to ms for one completion: 1 (wc filled), 0 (none), -1. */
int sv_wait (struct ibv_cq *cq, struct ibv_wc *wc, int ms);
/* Polls for ms and returns how many completions arrived (must be 0). */
int sv_none (struct ibv_cq *cq, int ms);

int sv_send (struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf, uint32_t len,
             uint32_t lkey, uint64_t raddr, uint32_t rkey, unsigned int flags);
int sv_recv (struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey);
int sv_state (struct ibv_qp *qp);
uint64_t sv_now_us (void);

#endif
