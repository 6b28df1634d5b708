/* vw_verbs.h - verbs set-up shared by the verbs workload tools.
 *
 * Opening a device, describing a QP to its peer, walking a QP through
 * RESET->INIT->RTR->RTS, making address handles and waiting for
 * completions in the three ways an application can (spin, block on the
 * completion channel, poll() its fd).  Public <infiniband/verbs.h> only, so
 * the tools run unchanged on softib, a real HCA, or under libibcr.
 */
#ifndef VW_VERBS_H
#define VW_VERBS_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "vw_opts.h"

#define VW_QKEY 0x11111111u
#define VW_GRH_LEN 40

struct vw_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_device_attr attr;
    struct ibv_port_attr port_attr;
    int ib_port;
    int gid_index; /* -1: no GRH */
    union ibv_gid gid;
};

/* What a peer needs to know about one of our QPs (and its memory). */
struct vw_ep {
    uint16_t lid;
    uint8_t mtu; /* enum ibv_mtu */
    union ibv_gid gid;
    int use_gid;
    uint32_t qpn;
    uint32_t psn;
    uint32_t rkey;
    uint64_t addr;
    uint64_t len;
};

/* Open device name (NULL = first) and allocate a PD.  0 or -1 with err. */
int vw_dev_open (struct vw_dev *d, const char *name, int ib_port, int gid_index, char *err,
                 size_t errlen);
void vw_dev_close (struct vw_dev *d);

/* Fill the addressing part of ep from the device. */
void vw_ep_local (const struct vw_dev *d, struct vw_ep *ep);
/* One text line per endpoint, both ways. */
void vw_ep_format (const struct vw_ep *ep, char *buf, size_t len);
int vw_ep_parse (struct vw_ep *ep, const char *line);

/* Walk an RC QP to RTS towards remote.  rd_atomic: outstanding
 * reads/atomics allowed each way.  0 or -1 with err. */
int vw_qp_rc_connect (struct ibv_qp *qp, const struct vw_dev *d, const struct vw_ep *local,
                      const struct vw_ep *remote, int rd_atomic, char *err, size_t errlen);

/* The same with every knob an error test turns. */
struct vw_rc_params {
    int rd_atomic;
    int access;            /* qp_access_flags at RESET->INIT */
    uint8_t min_rnr_timer; /* responder: RNR NAK timer code */
    uint8_t rnr_retry;     /* requester: 7 = retry for ever */
    uint8_t timeout;
    uint8_t retry_cnt;
};
void vw_rc_params_default (struct vw_rc_params *p);
int vw_qp_rc_connect_ex (struct ibv_qp *qp, const struct vw_dev *d, const struct vw_ep *local,
                         const struct vw_ep *remote, const struct vw_rc_params *p, char *err,
                         size_t errlen);
/* Walk a UD QP to RTS.  0 or -1 with err. */
int vw_qp_ud_ready (struct ibv_qp *qp, const struct vw_dev *d, uint32_t psn, char *err,
                    size_t errlen);
/* Address handle towards remote.  NULL with err. */
struct ibv_ah *vw_ah_create (const struct vw_dev *d, const struct vw_ep *remote, char *err,
                             size_t errlen);

/* Name of a QP state, for messages. */
const char *vw_qp_state_str (enum ibv_qp_state s);
/* Current state of qp, or -1 when ibv_query_qp fails. */
int vw_qp_state (struct ibv_qp *qp);

/* Waiting for completions on a set of CQs that share one channel. */
struct vw_waiter {
    enum vw_wait mode;
    struct ibv_comp_channel *ch; /* NULL in busy mode */
    struct ibv_cq **cqs;
    int ncq;
    int armed;       /* CQs armed since the last event */
    uint64_t events; /* completion events taken */
};

/* Called when a poll found nothing: spin (busy), or arm every CQ, look once
 * more, and sleep until the channel fires.  Returns 0 (go poll again) or
 * -1 with err. */
int vw_waiter_idle (struct vw_waiter *w, char *err, size_t errlen);

#endif
