/* vw_ex.h - the extended verbs paths, behind the classic signatures.
 *
 * Applications reach a device two ways: ibv_post_send/ibv_poll_cq, or
 * ibv_create_qp_ex + ibv_wr_* and ibv_create_cq_ex + ibv_start_poll /
 * ibv_wc_read_* (perftest's default).  A device, and libibcr on top of
 * it, must serve both; these adapters let the workload tools drive the
 * extended path with exactly the same traffic and checks as the classic
 * one.
 */
#ifndef VW_EX_H
#define VW_EX_H

#include <infiniband/verbs.h>

/* ibv_create_cq_ex asking for every field struct ibv_wc has; *cqx gets
 * the extended CQ.  Returns its ibv_cq (for notify, QP creation and
 * destroy), or NULL with errno. */
struct ibv_cq *vw_ex_create_cq (struct ibv_context *ctx, int cqe, void *cq_ctx,
                                struct ibv_comp_channel *ch, struct ibv_cq_ex **cqx);

/* ibv_create_qp_ex with the send ops the workload tools use; *qpx gets
 * ibv_qp_to_qp_ex's answer.  NULL with errno. */
struct ibv_qp *vw_ex_create_qp (struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
                                struct ibv_qp_ex **qpx);

/* Post one (not a list) send WR through ibv_wr_start .. ibv_wr_complete.
 * Returns 0 or an errno value, as ibv_post_send does. */
int vw_ex_post_send (struct ibv_qp_ex *qpx, const struct ibv_send_wr *wr);

/* Poll up to n completions through ibv_start_poll/ibv_next_poll and the
 * ibv_wc_read_* accessors into classic ibv_wc.  Returns the count, or -1
 * (with a message on stderr) if the CQ reports an error. */
int vw_ex_poll (struct ibv_cq_ex *cqx, int n, struct ibv_wc *wc);

#endif
