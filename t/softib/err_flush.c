/* err_flush.c - work requests of a QP in ERR complete with WR_FLUSH_ERR.
 *
 * Receives posted before a QP moved to ERR, receives and sends posted
 * after, and sends stuck waiting for the peer all complete with
 * IBV_WC_WR_FLUSH_ERR, each once, in posting order, naming the right QP.
 * Receives of a shared receive queue are not flushed with one of its QPs:
 * another QP still uses them.  A peer that sends to a QP in ERR gets an
 * error, never a success.  A post in the poll window of an extended CQ
 * (ibv_start_poll .. ibv_end_poll, as rc_pingpong -t does) whose flush
 * completes into that CQ is taken by the same window's next poll.
 * Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "vw_pair.h"

static struct vw_dev dev;
static uint8_t *buf;
static struct ibv_mr *mr;

static void to_err (struct ibv_qp *qp)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

    if (ibv_modify_qp (qp, &a, IBV_QP_STATE) != 0)
        BAIL_OUT ("modify to ERR failed");
}

/* Expect n completions on cq, wr_ids first..first+n-1, all flushed. */
static void expect_flush (struct ibv_cq *cq, struct ibv_qp *qp, uint64_t first, int n,
                          const char *what)
{
    struct ibv_wc wc;
    int got = 0, good = 0;

    while (got < n && vw_cq_wait (cq, &wc, 3000) == 1) {
        if (wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == first + (uint64_t)got
            && wc.qp_num == qp->qp_num)
            good++;
        else
            diag ("%s: completion %d: status %s wr_id %llu qpn %u", what, got,
                  ibv_wc_status_str (wc.status), (unsigned long long)wc.wr_id, wc.qp_num);
        got++;
    }
    ok (got == n && good == n, "%s: %d of %d flushed in order", what, good, n);
    ok (vw_cq_wait (cq, &wc, 100) == 0, "%s: nothing more completes", what);
}

static struct vw_pair make_pair (struct ibv_srq *srq, const struct vw_rc_params *req)
{
    struct vw_pair p;
    char err[256];

    if (vw_pair_create (&p, &dev, IBV_QPT_RC, srq, err, sizeof (err)) < 0
        || vw_pair_connect (&p, req, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    return p;
}

static void posted_receives (void)
{
    struct vw_pair p = make_pair (NULL, NULL);

    for (int i = 0; i < 5; i++)
        if (vw_recv1 (p.qp[1], 100 + (uint64_t)i, buf + 64 * i, 64, mr->lkey))
            BAIL_OUT ("post_recv");
    to_err (p.qp[1]);
    expect_flush (p.cq[1], p.qp[1], 100, 5, "5 receives posted before ERR");
    ok (vw_recv1 (p.qp[1], 200, buf, 64, mr->lkey) == 0,
        "ibv_post_recv on a QP in ERR is accepted");
    expect_flush (p.cq[1], p.qp[1], 200, 1, "a receive posted in ERR");
    ok (vw_post1 (p.qp[1], IBV_WR_SEND, 300, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED) == 0,
        "ibv_post_send on a QP in ERR is accepted");
    expect_flush (p.cq[1], p.qp[1], 300, 1, "a SEND posted in ERR");
    vw_pair_destroy (&p);
}

static void stuck_sends (void)
{
    struct vw_pair p = make_pair (NULL, NULL); /* rnr_retry 7 */
    struct ibv_wc wc;

    for (int i = 0; i < 3; i++)
        if (vw_post1 (p.qp[0], IBV_WR_SEND, 400 + (uint64_t)i, buf, 8, mr->lkey, 0, 0,
                      IBV_SEND_SIGNALED))
            BAIL_OUT ("post_send");
    ok (vw_cq_wait (p.cq[0], &wc, 200) == 0, "3 SENDs to a peer without receives stay outstanding");
    to_err (p.qp[0]);
    expect_flush (p.cq[0], p.qp[0], 400, 3, "3 outstanding SENDs when moved to ERR");
    vw_pair_destroy (&p);
}

static void send_to_err_peer (void)
{
    struct vw_rc_params req;
    struct vw_pair p;
    struct ibv_wc wc;
    int got, st;

    /* Short transport timeout and retries: the error must come quickly. */
    vw_rc_params_default (&req);
    req.timeout = 8;
    req.retry_cnt = 1;
    req.rnr_retry = 1;
    p = make_pair (NULL, &req);
    if (vw_recv1 (p.qp[1], 1, buf, 64, mr->lkey))
        BAIL_OUT ("post_recv");
    to_err (p.qp[1]);
    expect_flush (p.cq[1], p.qp[1], 1, 1, "the peer's receive");
    if (vw_post1 (p.qp[0], IBV_WR_SEND, 500, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED))
        BAIL_OUT ("post_send");
    got = vw_cq_wait (p.cq[0], &wc, 10000);
    ok (got == 1 && wc.status != IBV_WC_SUCCESS && wc.wr_id == 500,
        "a SEND to a peer QP in ERR fails (%s)",
        got == 1 ? ibv_wc_status_str (wc.status) : "no completion in 10 s");
    st = vw_qp_state (p.qp[0]);
    ok (st == IBV_QPS_ERR, "the sender's QP is in ERR afterwards (%s)",
        st < 0 ? "?" : vw_qp_state_str ((enum ibv_qp_state)st));
    vw_pair_destroy (&p);
}

static void srq_survives (void)
{
    struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
    struct ibv_srq *srq = ibv_create_srq (dev.pd, &sa);
    struct ibv_recv_wr wr, *bad;
    struct ibv_sge sge;
    struct ibv_wc wc;
    struct vw_pair a, b;
    int n = 0, good = 0;

    if (!srq)
        BAIL_OUT ("ibv_create_srq: %s", strerror (errno));
    a = make_pair (srq, NULL);
    b = make_pair (srq, NULL);
    for (int i = 0; i < 2; i++) {
        sge = (struct ibv_sge){ (uintptr_t)(buf + 64 * i), 64, mr->lkey };
        memset (&wr, 0, sizeof (wr));
        wr.wr_id = 600 + (uint64_t)i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        if (ibv_post_srq_recv (srq, &wr, &bad))
            BAIL_OUT ("ibv_post_srq_recv");
    }
    to_err (a.qp[1]);
    ok (vw_cq_wait (a.cq[1], &wc, 200) == 0,
        "an SRQ QP moved to ERR flushes none of the SRQ's receives");
    for (int i = 0; i < 2; i++)
        if (vw_post1 (b.qp[0], IBV_WR_SEND, 700 + (uint64_t)i, buf + 512, 16, mr->lkey, 0, 0,
                      IBV_SEND_SIGNALED))
            BAIL_OUT ("post_send");
    while (n < 2 && vw_cq_wait (b.cq[1], &wc, 5000) == 1) {
        if (wc.status == IBV_WC_SUCCESS && wc.wr_id == 600 + (uint64_t)n
            && wc.qp_num == b.qp[1]->qp_num && wc.byte_len == 16)
            good++;
        n++;
    }
    ok (n == 2 && good == 2, "another QP of the SRQ receives into both (%d of 2)", good);
    vw_pair_destroy (&a);
    vw_pair_destroy (&b);
    ok (ibv_destroy_srq (srq) == 0, "destroy the SRQ");
}

/* In a child with the locks' bias off (SOFTIB_LOCK_BIAS=0: a second take
 * of a lock by its holder then waits for good, where a biased one went
 * in unnoticed): an extended CQ holds a flush completion; in its poll
 * window a send is posted to the QP in ERR, which completes into the CQ
 * at once; the window's next poll takes it.  The child's exit status:
 * 0, or the number of the failed step; SIGALRM if it hung. */
static int poll_window_child (void)
{
    struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS };
    struct ibv_poll_cq_attr pa = { 0 };
    struct ibv_cq_ex *cx;
    struct ibv_qp *qp;
    struct vw_dev d;
    char err[256];
    struct ibv_sge sge;
    struct ibv_send_wr wr = { .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED },
                       *bad;
    uint64_t got[2];

    alarm (20);
    setenv ("SOFTIB_LOCK_BIAS", "0", 1);
    if (vw_dev_open (&d, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        return 1;
    struct ibv_mr *m = ibv_reg_mr (d.pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
    if (!m || !(cx = ibv_create_cq_ex (d.ctx, &ca)))
        return 2;
    struct ibv_qp_init_attr qa = {
        .send_cq = ibv_cq_ex_to_cq (cx),
        .recv_cq = ibv_cq_ex_to_cq (cx),
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC
    };
    if (!(qp = ibv_create_qp (d.pd, &qa)))
        return 3;
    to_err (qp);
    sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 8, .lkey = m->lkey };
    wr.wr_id = 1;
    if (ibv_post_send (qp, &wr, &bad))
        return 4;
    if (ibv_start_poll (cx, &pa))
        return 5;
    got[0] = cx->wr_id;
    wr.wr_id = 2;
    if (ibv_post_send (qp, &wr, &bad)) /* completes into cx at once */
        return 6;
    if (ibv_next_poll (cx))
        return 7;
    got[1] = cx->wr_id;
    ibv_end_poll (cx);
    if (got[0] != 1 || got[1] != 2 || cx->status != IBV_WC_WR_FLUSH_ERR)
        return 8;
    if (ibv_destroy_qp (qp) || ibv_destroy_cq (ibv_cq_ex_to_cq (cx)) || ibv_dereg_mr (m))
        return 9;
    vw_dev_close (&d);
    return 0;
}

static void post_in_poll_window (void)
{
    int st;
    pid_t pid = fork ();

    if (pid < 0)
        BAIL_OUT ("fork: %s", strerror (errno));
    if (pid == 0)
        _exit (poll_window_child ());
    if (waitpid (pid, &st, 0) != pid)
        BAIL_OUT ("waitpid: %s", strerror (errno));
    ok (WIFEXITED (st) && WEXITSTATUS (st) == 0,
        "a send posted in an extended CQ's poll window completes into it, taken by the next "
        "poll (%s %d)",
        WIFEXITED (st) ? "step" : "signal", WIFEXITED (st) ? WEXITSTATUS (st) : WTERMSIG (st));
}

int main (void)
{
    char err[256];

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    if (posix_memalign ((void **)&buf, 4096, 4096) != 0
        || !(mr = ibv_reg_mr (dev.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE)))
        BAIL_OUT ("MR: %s", strerror (errno));
    posted_receives ();
    stuck_sends ();
    send_to_err_peer ();
    srq_survives ();
    post_in_poll_window ();
    ibv_dereg_mr (mr);
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
