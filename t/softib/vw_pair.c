/* vw_pair.c - two connected QPs in one process (vw_pair.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vw_pair.h"

int vw_pair_create (struct vw_pair *p, struct vw_dev *d, enum ibv_qp_type type, struct ibv_srq *srq,
                    char *err, size_t errlen)
{
    memset (p, 0, sizeof (*p));
    p->dev = d;
    for (int i = 0; i < 2; i++) {
        struct ibv_qp_init_attr ia;

        if (!(p->cq[i] = ibv_create_cq (d->ctx, 256, NULL, NULL, 0))) {
            snprintf (err, errlen, "ibv_create_cq: %s", strerror (errno));
            goto error;
        }
        memset (&ia, 0, sizeof (ia));
        ia.send_cq = p->cq[i];
        ia.recv_cq = p->cq[i];
        ia.srq = srq;
        ia.qp_type = type;
        ia.cap.max_send_wr = 64;
        ia.cap.max_recv_wr = srq ? 0 : 64;
        ia.cap.max_send_sge = 2;
        ia.cap.max_recv_sge = 2;
        if (!(p->qp[i] = ibv_create_qp (d->pd, &ia))) {
            snprintf (err, errlen, "ibv_create_qp: %s", strerror (errno));
            goto error;
        }
        vw_ep_local (d, &p->ep[i]);
        p->ep[i].qpn = p->qp[i]->qp_num;
        p->ep[i].psn = (uint32_t)(random () & 0xffffff);
    }
    return 0;
error:
    vw_pair_destroy (p);
    return -1;
}

int vw_pair_connect (struct vw_pair *p, const struct vw_rc_params *par,
                     const struct vw_rc_params *par2, char *err, size_t errlen)
{
    struct vw_rc_params def;

    if (!par) {
        vw_rc_params_default (&def);
        par = &def;
    }
    if (!par2)
        par2 = par;
    for (int i = 0; i < 2; i++) {
        int rc;
        if (p->qp[i]->qp_type == IBV_QPT_UD)
            rc = vw_qp_ud_ready (p->qp[i], p->dev, p->ep[i].psn, err, errlen);
        else
            rc = vw_qp_rc_connect_ex (p->qp[i], p->dev, &p->ep[i], &p->ep[1 - i], i ? par2 : par,
                                      err, errlen);
        if (rc < 0)
            return -1;
    }
    return 0;
}

void vw_pair_destroy (struct vw_pair *p)
{
    for (int i = 0; i < 2; i++) {
        if (p->qp[i])
            ibv_destroy_qp (p->qp[i]);
        if (p->cq[i])
            ibv_destroy_cq (p->cq[i]);
        p->qp[i] = NULL;
        p->cq[i] = NULL;
    }
}

int vw_cq_wait (struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
    struct timespec t0, t;

    clock_gettime (CLOCK_MONOTONIC, &t0);
    for (;;) {
        int n = ibv_poll_cq (cq, 1, wc);
        if (n != 0)
            return n < 0 ? -1 : 1;
        clock_gettime (CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= timeout_ms)
            return 0;
        usleep (200);
    }
}

int vw_post1 (struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf, uint32_t len,
              uint32_t lkey, uint64_t raddr, uint32_t rkey, int flags)
{
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
    struct ibv_send_wr wr, *bad = NULL;

    memset (&wr, 0, sizeof (wr));
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg_list = buf ? &sge : NULL;
    wr.num_sge = buf ? 1 : 0;
    wr.send_flags = (unsigned)flags;
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
        wr.wr.atomic.remote_addr = raddr;
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = 1;
        wr.wr.atomic.swap = 2;
    } else {
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey = rkey;
    }
    return ibv_post_send (qp, &wr, &bad);
}

int vw_recv1 (struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey)
{
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
    struct ibv_recv_wr wr, *bad = NULL;

    memset (&wr, 0, sizeof (wr));
    wr.wr_id = wr_id;
    wr.sg_list = buf ? &sge : NULL;
    wr.num_sge = buf ? 1 : 0;
    return ibv_post_recv (qp, &wr, &bad);
}
