/* latemr.c - RDMA and atomics to an MR registered before a rebuild, over
 * QPs created after it.
 *
 *   latemr READY_FILE GO_FILE
 *
 * One process under libibcr with a coordinator.  It registers an MR with
 * remote rights and creates READY_FILE; the test runs a checkpoint cycle
 * while no QP exists (the MR gets a new real rkey; its virtual one, the
 * one the application holds, now needs translating), then creates
 * GO_FILE.  Only then two RC QPs are created and connected to each other,
 * so the id table of that rebuild does not know them.  A then does an
 * RDMA WRITE, an RDMA READ, a fetch-and-add and a compare-and-swap to the
 * MR with the rkey the application was given: each must succeed and move
 * exactly the bytes asked for.  TAP on stdout.
 */
#include "config.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

static double now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One signaled WR on qp, its completion from cq within 10 s: the
 * completion's status, or -1 if none came. */
static int post_wait (struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    struct ibv_wc wc;
    double end = now () + 10;

    if (ibv_post_send (qp, wr, &bad)) {
        diag ("ibv_post_send: %s", strerror (errno));
        return -1;
    }
    while (now () < end) {
        int n = ibv_poll_cq (cq, 1, &wc);
        if (n < 0)
            return -1;
        if (n == 0) {
            usleep (100);
            continue;
        }
        if (wc.wr_id != wr->wr_id) {
            diag ("completion of wr_id %llu, expected %llu", (unsigned long long)wc.wr_id,
                  (unsigned long long)wr->wr_id);
            return -1;
        }
        if (wc.status != IBV_WC_SUCCESS)
            diag ("wr_id %llu: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str (wc.status));
        return wc.status;
    }
    diag ("no completion of wr_id %llu in 10 s", (unsigned long long)wr->wr_id);
    return -1;
}

int main (int argc, char **argv)
{
    /* the target: 8 atomic words, then 64 bytes for WRITE and READ */
    static uint64_t target[16] __attribute__ ((aligned (64)));
    static uint64_t local[16] __attribute__ ((aligned (64)));
    struct ibv_port_attr pa;
    struct ibv_device **l;
    unsigned rights = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

    if (argc != 3) {
        fprintf (stderr, "usage: latemr READY_FILE GO_FILE\n");
        return 2;
    }
    plan (8);
    struct ibv_context *ctx = selfqp_open (&l, &pa);
    struct ibv_pd *pd = ibv_alloc_pd (ctx);
    struct ibv_mr *tmr =
        pd ? ibv_reg_mr (pd, target, sizeof (target), IBV_ACCESS_LOCAL_WRITE | (int)rights) : NULL;
    struct ibv_mr *lmr = pd ? ibv_reg_mr (pd, local, sizeof (local), IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!tmr || !lmr)
        BAIL_OUT ("pd/mr: %s", strerror (errno));
    uint32_t rkey = tmr->rkey;

    /* the cycle: the MRs are registered again, no QP exists */
    selfqp_handshake (argv[1], argv[2]);

    struct ibv_cq *cq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    if (!cq)
        BAIL_OUT ("cq: %s", strerror (errno));
    struct ibv_qp_init_attr ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *a = ibv_create_qp (pd, &ia);
    struct ibv_qp *b = ibv_create_qp (pd, &ia);
    if (!a || !b || selfqp_connect (a, pa.lid, b->qp_num, rights)
        || selfqp_connect (b, pa.lid, a->qp_num, rights))
        BAIL_OUT ("QPs: %s", strerror (errno));
    ok (tmr->rkey == rkey, "the application's rkey is the one it was given (0x%x)", rkey);

    for (int i = 0; i < 8; i++)
        local[8 + i] = 0x1111111111111111ull * (uint64_t)(i + 1);
    struct ibv_sge sg = { .addr = (uintptr_t)&local[8], .length = 64, .lkey = lmr->lkey };
    struct ibv_send_wr wr = { .wr_id = 1,
                              .sg_list = &sg,
                              .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE,
                              .send_flags = IBV_SEND_SIGNALED };
    wr.wr.rdma.remote_addr = (uintptr_t)&target[8];
    wr.wr.rdma.rkey = rkey;
    ok (post_wait (a, cq, &wr) == IBV_WC_SUCCESS && memcmp (&target[8], &local[8], 64) == 0,
        "RDMA WRITE to the MR succeeds and places its 64 bytes");

    target[9] = 0x0123456789abcdefull;
    memset (&local[8], 0, 64);
    wr.wr_id = 2;
    wr.opcode = IBV_WR_RDMA_READ;
    ok (post_wait (a, cq, &wr) == IBV_WC_SUCCESS && memcmp (&target[8], &local[8], 64) == 0,
        "RDMA READ from the MR succeeds and reads its 64 bytes");

    target[0] = 1000;
    local[0] = 0;
    sg.addr = (uintptr_t)&local[0];
    sg.length = 8;
    wr.wr_id = 3;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.wr.atomic.remote_addr = (uintptr_t)&target[0];
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 42;
    ok (post_wait (a, cq, &wr) == IBV_WC_SUCCESS, "fetch-and-add on the MR succeeds");
    ok (local[0] == 1000 && target[0] == 1042, "it returned 1000 (got %llu) and left 1042 (%llu)",
        (unsigned long long)local[0], (unsigned long long)target[0]);

    target[1] = 7;
    local[0] = 0;
    wr.wr_id = 4;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.remote_addr = (uintptr_t)&target[1];
    wr.wr.atomic.compare_add = 7;
    wr.wr.atomic.swap = 99;
    ok (post_wait (a, cq, &wr) == IBV_WC_SUCCESS, "compare-and-swap on the MR succeeds");
    ok (local[0] == 7 && target[1] == 99, "it returned 7 (got %llu) and swapped in 99 (%llu)",
        (unsigned long long)local[0], (unsigned long long)target[1]);

    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    ok (ibv_query_qp (a, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS,
        "QP A is still in RTS");

    ibv_destroy_qp (a);
    ibv_destroy_qp (b);
    ibv_destroy_cq (cq);
    ibv_dereg_mr (tmr);
    ibv_dereg_mr (lmr);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    return exit_status ();
}
