/* err_rnr.c - Receiver Not Ready: retries, exhaustion, late receives.
 *
 * A SEND to a peer with no receive posted is retried rnr_retry times
 * (7 = for ever) and then completes with IBV_WC_RNR_RETRY_EXC_ERR, the
 * requester QP in ERR.  With rnr_retry 7 a receive posted late is used:
 * the SEND completes only after the peer accepted it (never before), and
 * the data arrives intact and in order.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "vw_pair.h"
#include "vw_pattern.h"

#define NMSG 4
#define MSG_LEN 1000

static struct vw_dev dev;
static uint8_t *buf;
static struct ibv_mr *mr;

static double now_ms (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void exhaust (uint8_t rnr_retry)
{
    struct vw_rc_params req, resp;
    struct vw_pair p;
    struct ibv_wc wc;
    char err[256];
    double t0;
    int rc, got, st;

    vw_rc_params_default (&req);
    vw_rc_params_default (&resp);
    req.rnr_retry = rnr_retry;
    resp.min_rnr_timer = 1; /* 0.01 ms: keep the test quick */
    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, &req, &resp, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    t0 = now_ms ();
    rc = vw_post1 (p.qp[0], IBV_WR_SEND, 1, buf, 64, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    got = rc == 0 ? vw_cq_wait (p.cq[0], &wc, 10000) : 0;
    if (!ok (got == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR && wc.wr_id == 1,
             "rnr_retry %u, no receive posted: SEND completes with "
             "RNR_RETRY_EXC_ERR",
             rnr_retry))
        diag ("post %d, completion %d, status %s", rc, got,
              got == 1 ? ibv_wc_status_str (wc.status) : "-");
    else
        diag ("rnr_retry %u exhausted after %.1f ms", rnr_retry, now_ms () - t0);
    st = vw_qp_state (p.qp[0]);
    ok (st == IBV_QPS_ERR, "rnr_retry %u: requester QP is in ERR (%s)", rnr_retry,
        st < 0 ? "?" : vw_qp_state_str ((enum ibv_qp_state)st));
    ok (vw_cq_wait (p.cq[1], &wc, 50) == 0, "rnr_retry %u: the responder saw no completion",
        rnr_retry);
    vw_pair_destroy (&p);
}

static void late_receive (void)
{
    struct vw_rc_params req, resp;
    struct vw_pair p;
    struct ibv_wc wc;
    char err[256], why[256];
    uint8_t *in = buf + NMSG * MSG_LEN;
    int rc = 0, early, nsend = 0, nrecv = 0, inorder = 1;

    vw_rc_params_default (&req);
    vw_rc_params_default (&resp);
    req.rnr_retry = 7;
    resp.min_rnr_timer = 1;
    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, &req, &resp, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    for (int i = 0; i < NMSG && rc == 0; i++) {
        vw_pattern_fill (buf + i * MSG_LEN, MSG_LEN, 7, (uint64_t)i);
        rc = vw_post1 (p.qp[0], IBV_WR_SEND, (uint64_t)i, buf + i * MSG_LEN, MSG_LEN, mr->lkey, 0,
                       0, IBV_SEND_SIGNALED);
    }
    ok (rc == 0, "post %d SENDs to a peer with no receive (rnr_retry 7)", NMSG);
    early = vw_cq_wait (p.cq[0], &wc, 300);
    if (!ok (early == 0, "no SEND completes while the peer has no receive (300 ms)"))
        diag ("completion status %s wr_id %llu", ibv_wc_status_str (wc.status),
              (unsigned long long)wc.wr_id);
    memset (in, 0, NMSG * MSG_LEN);
    for (int i = 0; i < NMSG; i++)
        if (vw_recv1 (p.qp[1], 100 + (uint64_t)i, in + i * MSG_LEN, MSG_LEN, mr->lkey))
            BAIL_OUT ("ibv_post_recv failed");
    for (double t0 = now_ms (); (nsend < NMSG || nrecv < NMSG) && now_ms () - t0 < 5000;) {
        if (ibv_poll_cq (p.cq[0], 1, &wc) == 1) {
            if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)nsend)
                inorder = 0;
            nsend++;
        }
        if (ibv_poll_cq (p.cq[1], 1, &wc) == 1) {
            if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 100 + (uint64_t)nrecv
                || wc.byte_len != MSG_LEN)
                inorder = 0;
            nrecv++;
        }
    }
    ok (nsend == NMSG && nrecv == NMSG,
        "after late receives all %d SENDs complete (%d) and arrive (%d)", NMSG, nsend, nrecv);
    ok (inorder, "every completion succeeded, in posting order, full length");
    for (int i = 0; i < NMSG; i++) {
        if (vw_pattern_check (in + i * MSG_LEN, MSG_LEN, 7, (uint64_t)i, NULL) >= 0) {
            vw_pattern_explain (in + i * MSG_LEN, MSG_LEN, 7, (uint64_t)i, why, sizeof (why));
            ok (0, "message %d intact: %s", i, why);
        } else {
            ok (1, "message %d arrived intact", i);
        }
    }
    vw_pair_destroy (&p);
}

int main (void)
{
    char err[256];

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    if (posix_memalign ((void **)&buf, 4096, 2 * NMSG * MSG_LEN) != 0
        || !(mr = ibv_reg_mr (dev.pd, buf, 2 * NMSG * MSG_LEN, IBV_ACCESS_LOCAL_WRITE)))
        BAIL_OUT ("MR: %s", strerror (errno));
    exhaust (0);
    exhaust (1);
    exhaust (3);
    late_receive ();
    ibv_dereg_mr (mr);
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
