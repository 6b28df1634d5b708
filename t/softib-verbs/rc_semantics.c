/* rc_semantics.c - RC timing and send-queue rules a real HCA keeps.
 *
 * - RNR: the requester waits the responder's min_rnr_timer (IB spec
 *   table) between retries, rnr_retry times, then RNR_RETRY_EXC_ERR; a
 *   timer changed in RTS->RTS takes effect; a SEND completes only after
 *   the late receive took it.
 * - A responder that vanished fails outstanding WQEs with RETRY_EXC_ERR
 *   only after the local ACK timeout x (retry_cnt + 1).
 * - sq_sig_all makes every WR signaled; without it unsignaled WRs give no
 *   completion (both post APIs).
 * - Inline data: up to the QP's max_inline_data, from unregistered
 *   memory, copied at post time; one byte more is refused at post.
 * - Local access rights: receive buffers, READ and atomic targets need
 *   IBV_ACCESS_LOCAL_WRITE; a responder's unwritable receive buffer
 *   gives it LOC_PROT_ERR and the requester REM_OP_ERR.
 * Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv.h"

#define ALL_RIGHTS                                                                                 \
    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ                     \
     | IBV_ACCESS_REMOTE_ATOMIC)

static struct sv_dev dev;
static struct ibv_mr *mr; /* all rights, 64 KiB */
static uint8_t *buf;

/* IB spec: RNR NAK timer codes to microseconds (the ones used here) */
static uint64_t rnr_us (int code)
{
    switch (code) {
    case 20:
        return 10240;
    case 22:
        return 20480;
    case 24:
        return 40960;
    default:
        BAIL_OUT ("rnr_us(%d): add it to the table", code);
    }
}

static void rnr_case (int timer, int retry, int change_to)
{
    struct sv_params p0, p1;
    struct sv_pair p;
    struct ibv_wc wc;
    uint64_t t0, dt, want;
    int got;

    sv_params_default (&p0);
    p0.rnr_retry = (uint8_t)retry;
    p1 = p0;
    p1.min_rnr_timer = (uint8_t)timer;
    sv_pair_create (&dev, &p, IBV_QPT_RC, NULL, 64);
    if (sv_pair_connect (&dev, &p, &p0, &p1))
        BAIL_OUT ("connect");
    if (change_to >= 0) {
        struct ibv_qp_attr a = { .min_rnr_timer = (uint8_t)change_to };

        if (ibv_modify_qp (p.qp[1], &a, IBV_QP_MIN_RNR_TIMER))
            BAIL_OUT ("RTS->RTS min_rnr_timer");
        timer = change_to;
    }
    t0 = sv_now_us ();
    if (sv_send (p.qp[0], IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED))
        BAIL_OUT ("post_send");
    got = sv_wait (p.cq[0], &wc, 5000);
    dt = sv_now_us () - t0;
    want = rnr_us (timer) * (uint64_t)retry;
    ok (got == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR,
        "min_rnr_timer %d%s, rnr_retry %d: SEND ends RNR_RETRY_EXC_ERR (%s)", timer,
        change_to >= 0 ? " (set in RTS->RTS)" : "", retry,
        got == 1 ? ibv_wc_status_str (wc.status) : "no completion");
    ok (dt >= want && dt < want + want / 2 + 100000,
        "... after %llu us: %d waits of %llu us (want %llu..%llu)", (unsigned long long)dt, retry,
        (unsigned long long)rnr_us (timer), (unsigned long long)want,
        (unsigned long long)(want + want / 2 + 100000));
    sv_pair_destroy (&p);
}

static void rnr_late_receive (void)
{
    struct sv_params p1;
    struct sv_pair p;
    struct ibv_wc wc;
    uint64_t t0, tr, dt;
    int got;

    sv_params_default (&p1);
    p1.min_rnr_timer = 20;
    sv_pair_create (&dev, &p, IBV_QPT_RC, NULL, 64);
    if (sv_pair_connect (&dev, &p, NULL, &p1))
        BAIL_OUT ("connect");
    memcpy (buf, "late-receive", 12);
    t0 = sv_now_us ();
    if (sv_send (p.qp[0], IBV_WR_SEND, 2, buf, 12, mr->lkey, 0, 0, IBV_SEND_SIGNALED))
        BAIL_OUT ("post_send");
    ok (sv_none (p.cq[0], 30) == 0,
        "no SEND completion while the peer "
        "has no receive posted");
    tr = sv_now_us ();
    if (sv_recv (p.qp[1], 3, buf + 4096, 64, mr->lkey))
        BAIL_OUT ("post_recv");
    got = sv_wait (p.cq[0], &wc, 3000);
    dt = sv_now_us () - t0;
    ok (got == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && sv_now_us () >= tr,
        "SEND completes after the late receive (%llu us after posting)", (unsigned long long)dt);
    got = sv_wait (p.cq[1], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 12
            && memcmp (buf + 4096, "late-receive", 12) == 0,
        "the late receive holds the message");
    sv_pair_destroy (&p);
}

static void gone_responder (void)
{
    struct sv_params p0;
    struct sv_pair p;
    struct ibv_wc wc;
    uint64_t t0, dt, want;
    int got;

    sv_params_default (&p0);
    p0.timeout = 12; /* 4.096 us << 12 = 16.8 ms */
    p0.retry_cnt = 3;
    want = (4096ull << 12) * 4 / 1000;
    sv_pair_create (&dev, &p, IBV_QPT_RC, NULL, 64);
    if (sv_pair_connect (&dev, &p, &p0, NULL))
        BAIL_OUT ("connect");
    /* a working exchange first, so the connection exists */
    if (sv_recv (p.qp[1], 1, buf + 4096, 64, mr->lkey)
        || sv_send (p.qp[0], IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED))
        BAIL_OUT ("post");
    got = sv_wait (p.cq[0], &wc, 3000);
    if (got != 1 || wc.status != IBV_WC_SUCCESS)
        BAIL_OUT ("first SEND failed");
    ibv_destroy_qp (p.qp[1]);
    p.qp[1] = NULL;
    usleep (20000);
    t0 = sv_now_us ();
    if (sv_send (p.qp[0], IBV_WR_SEND, 9, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED))
        BAIL_OUT ("post_send after the peer left");
    got = sv_wait (p.cq[0], &wc, 5000);
    dt = sv_now_us () - t0;
    ok (got == 1 && wc.status == IBV_WC_RETRY_EXC_ERR && wc.wr_id == 9,
        "SEND to a destroyed peer QP ends RETRY_EXC_ERR (%s)",
        got == 1 ? ibv_wc_status_str (wc.status) : "no completion");
    ok (dt >= want && dt < want + 1000000,
        "... after %llu us, not before timeout x (retry_cnt+1) = %llu us", (unsigned long long)dt,
        (unsigned long long)want);
    ok (sv_state (p.qp[0]) == IBV_QPS_ERR, "the requester is in ERR");
    sv_pair_destroy (&p);
}

static int count_sig (struct ibv_cq *cq, uint64_t *last)
{
    struct ibv_wc wc;
    int n = 0;

    while (sv_wait (cq, &wc, 100) == 1) {
        if (wc.status == IBV_WC_SUCCESS)
            n++;
        *last = wc.wr_id;
    }
    return n;
}

static void signaling (int sig_all, int wr_api)
{
    struct ibv_qp_init_attr ia;
    struct sv_pair p;
    uint64_t last = 0;
    int n, want;

    memset (&ia, 0, sizeof (ia));
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.sq_sig_all = sig_all;
    sv_pair_create (&dev, &p, IBV_QPT_RC, &ia, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("connect");
    for (int i = 0; i < 5; i++) {
        unsigned int fl = i == 4 ? IBV_SEND_SIGNALED : 0;

        if (wr_api) {
            struct ibv_qp_ex *qx = ibv_qp_to_qp_ex (p.qp[0]);

            ibv_wr_start (qx);
            qx->wr_id = 100 + (uint64_t)i;
            qx->wr_flags = fl;
            ibv_wr_rdma_write (qx, mr->rkey, (uintptr_t)buf + 8192 + 8 * i);
            ibv_wr_set_sge (qx, mr->lkey, (uintptr_t)buf, 8);
            if (ibv_wr_complete (qx))
                BAIL_OUT ("ibv_wr_complete");
        } else if (sv_send (p.qp[0], IBV_WR_RDMA_WRITE, 100 + (uint64_t)i, buf, 8, mr->lkey,
                            (uintptr_t)buf + 8192 + 8 * i, mr->rkey, fl)) {
            BAIL_OUT ("post_send");
        }
    }
    n = count_sig (p.cq[0], &last);
    want = sig_all ? 5 : 1;
    ok (n == want && last == 104,
        "sq_sig_all=%d, %s: 4 unsignaled + 1 "
        "signaled WRITE give %d completions (%d, last wr_id %llu)",
        sig_all, wr_api ? "ibv_wr_*" : "ibv_post_send", want, n, (unsigned long long)last);
    sv_pair_destroy (&p);
}

static void inline_limits (void)
{
    struct ibv_qp_init_attr ia;
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;
    struct sv_pair p;
    struct ibv_wc wc;
    uint8_t local[300];
    uint32_t cap;
    struct ibv_qp *big;
    int rc, got;

    memset (&ia, 0, sizeof (ia));
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
    ia.cap.max_inline_data = 200;
    sv_pair_create (&dev, &p, IBV_QPT_RC, &ia, 64);
    {
        struct ibv_qp_attr qa;
        struct ibv_qp_init_attr qi;

        ibv_query_qp (p.qp[0], &qa, IBV_QP_CAP, &qi);
        cap = qi.cap.max_inline_data;
    }
    ok (cap >= 200 && cap < sizeof (local),
        "max_inline_data 200 asked, %u "
        "granted",
        cap);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("connect");
    for (uint32_t i = 0; i < cap; i++)
        local[i] = (uint8_t)(i * 7 + 1);
    if (sv_recv (p.qp[1], 1, buf + 4096, 4096, mr->lkey))
        BAIL_OUT ("post_recv");
    /* unregistered stack memory, lkey 0: inline needs no MR */
    sge = (struct ibv_sge){ (uintptr_t)local, cap, 0 };
    memset (&wr, 0, sizeof (wr));
    wr.wr_id = 7;
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    rc = ibv_post_send (p.qp[0], &wr, &bad);
    memset (local, 0xee, sizeof (local)); /* copied at post time */
    got = sv_wait (p.cq[1], &wc, 3000);
    {
        int same = 1;

        for (uint32_t i = 0; i < cap; i++)
            if (buf[4096 + i] != (uint8_t)(i * 7 + 1))
                same = 0;
        ok (rc == 0 && got == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == cap && same,
            "inline SEND of max_inline_data bytes from unregistered "
            "memory arrives as it was at post time");
    }
    sv_wait (p.cq[0], &wc, 1000);
    sge.length = cap + 1;
    bad = NULL;
    rc = ibv_post_send (p.qp[0], &wr, &bad);
    ok (rc == EINVAL && bad == &wr,
        "inline of max_inline_data + 1 bytes "
        "is refused at post (%s)",
        strerror (rc));
    {
        struct ibv_qp_ex *qx = ibv_qp_to_qp_ex (p.qp[0]);

        ibv_wr_start (qx);
        qx->wr_id = 8;
        qx->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_send (qx);
        ibv_wr_set_inline_data (qx, local, cap + 1);
        rc = ibv_wr_complete (qx);
        ok (rc != 0,
            "ibv_wr_set_inline_data beyond the limit fails "
            "ibv_wr_complete (%s)",
            strerror (rc));
    }
    sge.length = 8;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = (uintptr_t)buf;
    wr.wr.rdma.rkey = mr->rkey;
    rc = ibv_post_send (p.qp[0], &wr, &bad);
    ok (rc == EINVAL, "inline RDMA READ is refused (%s)", strerror (rc));
    ok (sv_none (p.cq[0], 50) == 0 && sv_state (p.qp[0]) == IBV_QPS_RTS,
        "refused posts leave no completion and the QP in RTS");
    sv_pair_destroy (&p);

    memset (&ia, 0, sizeof (ia));
    ia.send_cq = ia.recv_cq = p.cq[0] = ibv_create_cq (dev.ctx, 4, NULL, NULL, 0);
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 1u << 20;
    big = ibv_create_qp (dev.pd, &ia);
    ok (!big && errno == EINVAL,
        "create_qp with max_inline_data 1 MiB "
        "fails with EINVAL (%s)",
        big ? "created" : strerror (errno));
    if (big)
        ibv_destroy_qp (big);
    ibv_destroy_cq (p.cq[0]);
}

static void local_access (void)
{
    struct ibv_mr *ro = sv_mr (&dev, 4096, 0); /* no local write */
    struct sv_pair p;
    struct ibv_wc wc;
    struct ibv_mr *bad;
    int got, got1;

    bad = ibv_reg_mr (dev.pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE);
    ok (!bad && errno == EINVAL,
        "reg_mr REMOTE_WRITE without LOCAL_WRITE "
        "fails with EINVAL");
    if (bad)
        ibv_dereg_mr (bad);
    bad = ibv_reg_mr (dev.pd, buf, 4096, IBV_ACCESS_REMOTE_ATOMIC);
    ok (!bad && errno == EINVAL,
        "reg_mr REMOTE_ATOMIC without LOCAL_WRITE "
        "fails with EINVAL");
    if (bad)
        ibv_dereg_mr (bad);

    /* sending from memory without local write is fine */
    sv_pair_create (&dev, &p, IBV_QPT_RC, NULL, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("connect");
    memcpy (ro->addr, "readonly", 8);
    sv_recv (p.qp[1], 1, buf + 4096, 64, mr->lkey);
    sv_send (p.qp[0], IBV_WR_SEND, 2, ro->addr, 8, ro->lkey, 0, 0, IBV_SEND_SIGNALED);
    got = sv_wait (p.cq[0], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_SUCCESS && sv_wait (p.cq[1], &wc, 3000) == 1
            && wc.status == IBV_WC_SUCCESS && memcmp (buf + 4096, "readonly", 8) == 0,
        "SEND from an MR without LOCAL_WRITE works");

    /* READ into it: local protection error at the requester */
    sv_send (p.qp[0], IBV_WR_RDMA_READ, 3, ro->addr, 8, ro->lkey, (uintptr_t)buf, mr->rkey,
             IBV_SEND_SIGNALED);
    got = sv_wait (p.cq[0], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 3,
        "RDMA READ into an MR without LOCAL_WRITE: LOC_PROT_ERR (%s)",
        got == 1 ? ibv_wc_status_str (wc.status) : "no completion");
    ok (sv_state (p.qp[0]) == IBV_QPS_ERR, "... and the QP goes to ERR");
    sv_pair_destroy (&p);

    sv_pair_create (&dev, &p, IBV_QPT_RC, NULL, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("connect");
    sv_send (p.qp[0], IBV_WR_ATOMIC_FETCH_AND_ADD, 4, ro->addr, 8, ro->lkey, (uintptr_t)buf,
             mr->rkey, IBV_SEND_SIGNALED);
    got = sv_wait (p.cq[0], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_LOC_PROT_ERR,
        "atomic result into an MR without LOCAL_WRITE: LOC_PROT_ERR (%s)",
        got == 1 ? ibv_wc_status_str (wc.status) : "no completion");
    sv_pair_destroy (&p);

    sv_pair_create (&dev, &p, IBV_QPT_RC, NULL, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("connect");
    sv_send (p.qp[0], IBV_WR_SEND, 5, buf, 8, mr->lkey + 0x100000, 0, 0, IBV_SEND_SIGNALED);
    got = sv_wait (p.cq[0], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_LOC_PROT_ERR,
        "SEND with an unknown lkey: LOC_PROT_ERR (%s)",
        got == 1 ? ibv_wc_status_str (wc.status) : "no completion");
    sv_pair_destroy (&p);

    /* the responder's receive buffer is not writable */
    sv_pair_create (&dev, &p, IBV_QPT_RC, NULL, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("connect");
    sv_recv (p.qp[1], 6, ro->addr, 64, ro->lkey);
    sv_send (p.qp[0], IBV_WR_SEND, 7, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    got1 = sv_wait (p.cq[1], &wc, 3000);
    ok (got1 == 1 && wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 6,
        "receive into an MR without LOCAL_WRITE: responder LOC_PROT_ERR "
        "(%s)",
        got1 == 1 ? ibv_wc_status_str (wc.status) : "none");
    got = sv_wait (p.cq[0], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_REM_OP_ERR && wc.wr_id == 7,
        "... and the requester REM_OP_ERR (%s)",
        got == 1 ? ibv_wc_status_str (wc.status) : "no completion");
    ok (memcmp (ro->addr, "readonly", 8) == 0, "... the buffer is untouched");
    sv_pair_destroy (&p);
    sv_mr_free (ro);
}

static void uc_no_rnr (void)
{
    struct sv_pair p;
    struct ibv_wc wc;
    int got;

    sv_pair_create (&dev, &p, IBV_QPT_UC, NULL, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("UC connect");
    memcpy (buf, "first", 5);
    sv_send (p.qp[0], IBV_WR_SEND, 1, buf, 5, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    got = sv_wait (p.cq[0], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_SUCCESS,
        "UC SEND with no "
        "receive posted completes (the message is lost, no RNR)");
    usleep (20000);
    sv_recv (p.qp[1], 2, buf + 4096, 64, mr->lkey);
    memcpy (buf + 16, "second", 6);
    sv_send (p.qp[0], IBV_WR_SEND, 3, buf + 16, 6, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    got = sv_wait (p.cq[1], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 6
            && memcmp (buf + 4096, "second", 6) == 0,
        "the next UC SEND lands in the receive posted later");
    sv_pair_destroy (&p);
}

int main (void)
{
    plan (NO_PLAN);
    sv_open (&dev);
    mr = sv_mr (&dev, 65536, ALL_RIGHTS);
    buf = mr->addr;
    rnr_case (20, 3, -1);
    rnr_case (24, 2, -1);
    rnr_case (24, 3, 22);
    rnr_late_receive ();
    gone_responder ();
    signaling (1, 0);
    signaling (0, 0);
    signaling (1, 1);
    signaling (0, 1);
    inline_limits ();
    local_access ();
    uc_no_rnr ();
    sv_mr_free (mr);
    sv_close (&dev);
    done_testing ();
    return exit_status ();
}
