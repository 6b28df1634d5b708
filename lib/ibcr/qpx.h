/* qpx.h - the state of a QP's ibv_wr_* builder (qpx.c), kept in the QP
 * itself: the builder's calls find it without a pointer to follow or test.
 *
 * Only qpx.c reads or writes it; the application serializes
 * wr_start..wr_complete per QP (verbs' rule), so it has no lock.
 */
#ifndef IBCR_QPX_H
#define IBCR_QPX_H

#include <stdbool.h>
#include <stddef.h>
#include <infiniband/verbs.h>

/* One WR being built.  Its data is either the one sge of wr_set_sge
 * (sge1), sges sge[sge0 .. sge0+nsge) of the builder (wr_set_sge_list), or
 * inline bytes inl[inl0 .. inl0+ninl).
 *
 * The common batch (WRs of at most one sge each, no inline data, a QP
 * that is not UD) is linked while it is built: each new WR is its
 * predecessor's next, and wr_set_sge points sg_list at sge1, so that
 * wr_complete hands the list as it is to the send path, without the
 * checks the builder has made (post_send_as with 'built').  Anything else
 * (an sge list, inline data or IBV_SEND_INLINE, entries that moved when
 * the batch grew, a UD QP) sets 'slow' or is tested at wr_complete, which
 * then links the batch afresh and posts it through ibcr_post_send with
 * all its checks. */
enum { WRB_NODATA, WRB_SGE1, WRB_SGES, WRB_INL };

struct wrb_ent {
    struct ibv_send_wr wr;
    struct ibv_sge sge1;
    int kind;
    size_t sge0, nsge, inl0, ninl;
};

struct ibcr_wrb {
    struct wrb_ent *e;
    size_t n, cap;
    struct ibv_sge *sge;
    size_t nsge, sgecap;
    unsigned char *inl;
    size_t ninl, inlcap;
    struct ibv_sge *isg; /* one sge per inline WR, built at wr_complete */
    size_t isgcap;
    int err;   /* first error since wr_start: wr_complete's */
    bool slow; /* the batch needs complete_slow */
};

#endif
