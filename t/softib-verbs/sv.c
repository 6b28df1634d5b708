/* sv.c - set-up for the verb-semantics tests (sv.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sv.h"

uint64_t sv_now_us (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void sv_open (struct sv_dev *d)
{
    struct ibv_device **list;
    struct ibv_port_attr pa;
    int n = 0;

    memset (d, 0, sizeof (*d));
    list = ibv_get_device_list (&n);
    if (!list || n < 1)
        BAIL_OUT ("no verbs device (is softib's libibverbs.so.1 in "
                  "LD_LIBRARY_PATH?)");
    d->ctx = ibv_open_device (list[0]);
    ibv_free_device_list (list);
    if (!d->ctx)
        BAIL_OUT ("ibv_open_device: %s", strerror (errno));
    d->pd = ibv_alloc_pd (d->ctx);
    if (!d->pd)
        BAIL_OUT ("ibv_alloc_pd: %s", strerror (errno));
    if (ibv_query_port (d->ctx, 1, &pa) != 0)
        BAIL_OUT ("ibv_query_port failed");
    d->lid = pa.lid;
    if (ibv_query_gid (d->ctx, 1, 0, &d->gid) != 0)
        BAIL_OUT ("ibv_query_gid failed");
}

void sv_close (struct sv_dev *d)
{
    ibv_dealloc_pd (d->pd);
    ibv_close_device (d->ctx);
}

struct ibv_mr *sv_mr (struct sv_dev *d, size_t len, int access)
{
    void *buf;
    struct ibv_mr *mr;

    if (posix_memalign (&buf, 4096, len) != 0)
        BAIL_OUT ("out of memory");
    memset (buf, 0, len);
    mr = ibv_reg_mr (d->pd, buf, len, access);
    if (!mr)
        BAIL_OUT ("ibv_reg_mr(access 0x%x): %s", access, strerror (errno));
    return mr;
}

void sv_mr_free (struct ibv_mr *mr)
{
    void *buf = mr->addr;

    ibv_dereg_mr (mr);
    free (buf);
}

void sv_params_default (struct sv_params *p)
{
    memset (p, 0, sizeof (*p));
    p->timeout = 14;
    p->retry_cnt = 7;
    p->rnr_retry = 7;
    p->min_rnr_timer = 1;
    p->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
        | IBV_ACCESS_REMOTE_ATOMIC;
}

void sv_pair_create (struct sv_dev *d, struct sv_pair *p, enum ibv_qp_type type,
                     const struct ibv_qp_init_attr *init, int cqe)
{
    memset (p, 0, sizeof (*p));
    for (int i = 0; i < 2; i++) {
        struct ibv_qp_init_attr ia;

        p->cq[i] = ibv_create_cq (d->ctx, cqe, NULL, NULL, 0);
        if (!p->cq[i])
            BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
        if (init) {
            ia = *init;
        } else {
            memset (&ia, 0, sizeof (ia));
            ia.cap.max_send_wr = 64;
            ia.cap.max_recv_wr = 64;
            ia.cap.max_send_sge = 4;
            ia.cap.max_recv_sge = 4;
        }
        ia.qp_type = type;
        ia.send_cq = p->cq[i];
        ia.recv_cq = p->cq[i];
        p->qp[i] = ibv_create_qp (d->pd, &ia);
        if (!p->qp[i])
            BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
        p->psn[i] = (uint32_t)(rand () & 0xffffff);
    }
}

static int to_init (struct ibv_qp *qp, const struct sv_params *par)
{
    struct ibv_qp_attr a;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    if (qp->qp_type == IBV_QPT_UD) {
        a.qkey = 0x11111111;
        mask |= IBV_QP_QKEY;
    } else {
        a.qp_access_flags = (unsigned int)par->access;
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    return ibv_modify_qp (qp, &a, mask);
}

int sv_pair_connect (struct sv_dev *d, struct sv_pair *p, const struct sv_params *p0,
                     const struct sv_params *p1)
{
    struct sv_params def;
    int rc;

    if (!p0) {
        sv_params_default (&def);
        p0 = &def;
    }
    if (!p1)
        p1 = p0;
    for (int i = 0; i < 2; i++) {
        const struct sv_params *par = i ? p1 : p0;
        struct ibv_qp *qp = p->qp[i];
        struct ibv_qp_attr a;
        int mask;

        if ((rc = to_init (qp, par)))
            return rc;
        memset (&a, 0, sizeof (a));
        a.qp_state = IBV_QPS_RTR;
        mask = IBV_QP_STATE;
        if (qp->qp_type != IBV_QPT_UD) {
            a.path_mtu = IBV_MTU_1024;
            a.dest_qp_num = p->qp[1 - i]->qp_num;
            a.rq_psn = p->psn[1 - i];
            a.ah_attr.port_num = 1;
            a.ah_attr.dlid = d->lid;
            if (par->gid) {
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid = d->gid;
                a.ah_attr.grh.hop_limit = 1;
            }
            mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
            if (qp->qp_type == IBV_QPT_RC) {
                a.max_dest_rd_atomic = 4;
                a.min_rnr_timer = par->min_rnr_timer;
                mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
            }
        }
        if ((rc = ibv_modify_qp (qp, &a, mask)))
            return rc;
    }
    for (int i = 0; i < 2; i++) {
        const struct sv_params *par = i ? p1 : p0;
        struct ibv_qp *qp = p->qp[i];
        struct ibv_qp_attr a;
        int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

        memset (&a, 0, sizeof (a));
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = p->psn[i];
        if (qp->qp_type == IBV_QPT_RC) {
            a.timeout = par->timeout;
            a.retry_cnt = par->retry_cnt;
            a.rnr_retry = par->rnr_retry;
            a.max_rd_atomic = 4;
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        if ((rc = ibv_modify_qp (qp, &a, mask)))
            return rc;
    }
    return 0;
}

void sv_pair_destroy (struct sv_pair *p)
{
    for (int i = 0; i < 2; i++) {
        if (p->qp[i])
            ibv_destroy_qp (p->qp[i]);
        if (p->cq[i])
            ibv_destroy_cq (p->cq[i]);
    }
    memset (p, 0, sizeof (*p));
}

int sv_wait (struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
    uint64_t end = sv_now_us () + (uint64_t)ms * 1000;

    for (;;) {
        int n = ibv_poll_cq (cq, 1, wc);

        if (n)
            return n < 0 ? -1 : 1;
        if (sv_now_us () >= end)
            return 0;
        usleep (100);
    }
}

int sv_none (struct ibv_cq *cq, int ms)
{
    struct ibv_wc wc;
    int n = 0;

    while (sv_wait (cq, &wc, ms) == 1)
        n++;
    return n;
}

int sv_send (struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf, uint32_t len,
             uint32_t lkey, uint64_t raddr, uint32_t rkey, unsigned int flags)
{
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
    struct ibv_send_wr wr, *bad = NULL;

    memset (&wr, 0, sizeof (wr));
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = buf ? 1 : 0;
    wr.send_flags = flags;
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = raddr;
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = 0;
        wr.wr.atomic.swap = 1;
    } else {
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey = rkey;
    }
    return ibv_post_send (qp, &wr, &bad);
}

int sv_recv (struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey)
{
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
    struct ibv_recv_wr wr, *bad = NULL;

    memset (&wr, 0, sizeof (wr));
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = buf ? 1 : 0;
    return ibv_post_recv (qp, &wr, &bad);
}

int sv_state (struct ibv_qp *qp)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;

    if (ibv_query_qp (qp, &a, IBV_QP_STATE, &ia) != 0)
        return -1;
    return (int)a.qp_state;
}
