/* vw_pair.h - two QPs of one process connected to each other.
 *
 * The error-case tests need a requester and a responder they fully
 * control; putting both in one process keeps each case a few lines and a
 * few milliseconds.  Each side has its own CQ, so a test can tell which
 * side a completion came from.  Also here: waiting for one completion with
 * a deadline, so that a device that never completes fails the test
 * instead of hanging it.
 */
#ifndef VW_PAIR_H
#define VW_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "vw_verbs.h"

struct vw_pair {
    struct vw_dev *dev;
    struct ibv_cq *cq[2];
    struct ibv_qp *qp[2];
    struct vw_ep ep[2];
};

/* Create two CQs and two QPs of type (RC or UD) in RESET.  srq may be
 * NULL.  0 or -1 with err. */
int vw_pair_create (struct vw_pair *p, struct vw_dev *d, enum ibv_qp_type type, struct ibv_srq *srq,
                    char *err, size_t errlen);
/* Connect qp[0] and qp[1] to each other (RC) or make both ready (UD).
 * par: NULL = defaults; par2 for qp[1] (NULL = same as par). */
int vw_pair_connect (struct vw_pair *p, const struct vw_rc_params *par,
                     const struct vw_rc_params *par2, char *err, size_t errlen);
void vw_pair_destroy (struct vw_pair *p);

/* Wait up to timeout_ms for one completion on cq.  1 = *wc filled,
 * 0 = timed out, -1 = ibv_poll_cq failed. */
int vw_cq_wait (struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);

/* Post one WR; returns ibv_post_send's value.  sge/len may be 0. */
int vw_post1 (struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf, uint32_t len,
              uint32_t lkey, uint64_t raddr, uint32_t rkey, int flags);
int vw_recv1 (struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey);

#endif
