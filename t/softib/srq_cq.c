/* srq_cq.c - SRQ limit events, CQ resize and solicited-only notification.
 *
 * SRQ: ibv_modify_srq(IBV_SRQ_LIMIT) arms a limit; when the posted
 * receives drop below it, IBV_EVENT_SRQ_LIMIT_REACHED names the SRQ once
 * and the limit disarms (ibv_query_srq reads 0).  CQ: ibv_resize_cq keeps
 * the completions already queued, in order, and the bigger CQ holds more.
 * Notification: a CQ armed solicited-only fires for a SEND with
 * IBV_SEND_SOLICITED and not for one without.  Signaling: with
 * sq_sig_all every send completes, without it only IBV_SEND_SIGNALED
 * ones do.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "vw_pair.h"

static struct vw_dev dev;
static uint8_t *buf;
static struct ibv_mr *mr;

static int post_srq (struct ibv_srq *srq, uint64_t id)
{
    struct ibv_sge sge = { (uintptr_t)(buf + 64 * (id % 32)), 64, mr->lkey };
    struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

    return ibv_post_srq_recv (srq, &wr, &bad);
}

static int async_event (enum ibv_event_type *type, void **obj, int ms)
{
    struct pollfd pfd = { .fd = dev.ctx->async_fd, .events = POLLIN };
    struct ibv_async_event ev;

    if (poll (&pfd, 1, ms) != 1 || ibv_get_async_event (dev.ctx, &ev) != 0)
        return -1;
    *type = ev.event_type;
    *obj = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED ? (void *)ev.element.srq
                                                        : (void *)ev.element.qp;
    ibv_ack_async_event (&ev);
    return 0;
}

static void srq_limit (void)
{
    struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
    struct ibv_srq *srq = ibv_create_srq (dev.pd, &sa);
    struct ibv_srq_attr at;
    struct vw_pair p;
    struct ibv_wc wc;
    enum ibv_event_type type;
    void *obj;
    char err[256];
    int n = 0, rc;

    if (!srq)
        BAIL_OUT ("ibv_create_srq: %s", strerror (errno));
    rc = ibv_query_srq (srq, &at);
    ok (rc == 0 && at.max_wr >= 16 && at.srq_limit == 0,
        "ibv_query_srq: max_wr %u >= 16, no limit armed", at.max_wr);
    for (int i = 0; i < 8; i++)
        if (post_srq (srq, (uint64_t)i))
            BAIL_OUT ("post_srq_recv");
    at.srq_limit = 5;
    ok (ibv_modify_srq (srq, &at, IBV_SRQ_LIMIT) == 0, "arm the SRQ limit at 5");
    at.srq_limit = 0;
    ok (ibv_query_srq (srq, &at) == 0 && at.srq_limit == 5, "query reads limit 5");
    at.srq_limit = at.max_wr + 1;
    ok (ibv_modify_srq (srq, &at, IBV_SRQ_LIMIT) == EINVAL,
        "a limit above max_wr is refused with EINVAL");
    if (vw_pair_create (&p, &dev, IBV_QPT_RC, srq, err, sizeof (err)) < 0
        || vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    /* 8 posted: after 3 SENDs 5 remain (not below), the 4th leaves 4. */
    for (int i = 0; i < 3; i++)
        vw_post1 (p.qp[0], IBV_WR_SEND, 100 + (uint64_t)i, buf + 1024, 16, mr->lkey, 0, 0,
                  IBV_SEND_SIGNALED);
    while (n < 3 && vw_cq_wait (p.cq[1], &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS)
        n++;
    ok (n == 3, "3 SENDs consume 3 SRQ receives");
    ok (async_event (&type, &obj, 200) < 0, "no limit event while 5 remain");
    vw_post1 (p.qp[0], IBV_WR_SEND, 103, buf + 1024, 16, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    ok (vw_cq_wait (p.cq[1], &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS,
        "a 4th SEND leaves 4 receives");
    ok (async_event (&type, &obj, 2000) == 0 && type == IBV_EVENT_SRQ_LIMIT_REACHED && obj == srq,
        "IBV_EVENT_SRQ_LIMIT_REACHED names the SRQ");
    rc = ibv_query_srq (srq, &at);
    ok (rc == 0 && at.srq_limit == 0, "the limit disarmed itself (query reads %u)", at.srq_limit);
    vw_post1 (p.qp[0], IBV_WR_SEND, 104, buf + 1024, 16, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    vw_cq_wait (p.cq[1], &wc, 5000);
    ok (async_event (&type, &obj, 200) < 0, "no second event once disarmed");
    vw_pair_destroy (&p);
    ok (ibv_destroy_srq (srq) == 0, "destroy the SRQ");
}

static void cq_resize (void)
{
    struct ibv_cq *cq = ibv_create_cq (dev.ctx, 4, NULL, NULL, 0);
    struct ibv_qp_init_attr ia;
    struct ibv_qp *qp[2];
    struct vw_ep ep[2];
    struct ibv_wc wc;
    char err[256];
    int in_order = 1, n = 0, ns = 0, nr = 0, rc;

    if (!cq)
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
    ok (cq->cqe >= 4, "a CQ of 4 has cqe %d >= 4", cq->cqe);
    /* Both QPs complete on this one CQ: sends and receives queue up. */
    for (int i = 0; i < 2; i++) {
        memset (&ia, 0, sizeof (ia));
        ia.send_cq = ia.recv_cq = cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap = (struct ibv_qp_cap){ 16, 16, 1, 1, 0 };
        if (!(qp[i] = ibv_create_qp (dev.pd, &ia)))
            BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
        vw_ep_local (&dev, &ep[i]);
        ep[i].qpn = qp[i]->qp_num;
        ep[i].psn = 1000 * (uint32_t)(i + 1);
    }
    for (int i = 0; i < 2; i++)
        if (vw_qp_rc_connect (qp[i], &dev, &ep[i], &ep[1 - i], 1, err, sizeof (err)) < 0)
            BAIL_OUT ("%s", err);
    for (int i = 0; i < 2; i++)
        vw_recv1 (qp[1], 200 + (uint64_t)i, buf + 64 * i, 64, mr->lkey);
    for (int i = 0; i < 2; i++)
        vw_post1 (qp[0], IBV_WR_SEND, 300 + (uint64_t)i, buf + 1024, 8, mr->lkey, 0, 0,
                  IBV_SEND_SIGNALED);
    usleep (200000); /* let all 4 completions queue up */
    rc = ibv_resize_cq (cq, 64);
    ok (rc == 0 && cq->cqe >= 64, "ibv_resize_cq to 64 with completions queued (cqe %d)", cq->cqe);
    while (vw_cq_wait (cq, &wc, 1000) == 1) {
        int send = wc.opcode == IBV_WC_SEND;
        if (wc.status != IBV_WC_SUCCESS
            || wc.wr_id != (send ? 300u + (uint64_t)ns++ : 200u + (uint64_t)nr++))
            in_order = 0;
        n++;
        if (n == 4)
            break;
    }
    ok (n == 4, "the 4 completions queued before the resize are all there (%d)", n);
    ok (in_order, "successful, and in posting order per queue");
    for (int i = 0; i < 16; i++)
        vw_recv1 (qp[1], 400 + (uint64_t)i, buf + 64 * (i % 16), 64, mr->lkey);
    for (int i = 0; i < 16; i++)
        vw_post1 (qp[0], IBV_WR_SEND, 500 + (uint64_t)i, buf + 1024, 8, mr->lkey, 0, 0,
                  IBV_SEND_SIGNALED);
    usleep (300000);
    n = 0;
    while (ibv_poll_cq (cq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS)
        n++;
    ok (n == 32, "the resized CQ holds 32 completions at once (%d)", n);
    ibv_destroy_qp (qp[0]);
    ibv_destroy_qp (qp[1]);
    ok (ibv_destroy_cq (cq) == 0, "destroy the resized CQ");
}

static void solicited (void)
{
    struct ibv_comp_channel *ch = ibv_create_comp_channel (dev.ctx);
    struct ibv_cq *scq, *rcq, *evcq;
    struct ibv_qp_init_attr ia;
    struct ibv_qp *qp[2];
    struct vw_ep ep[2];
    struct pollfd pfd;
    struct ibv_wc wc;
    void *ctx;
    char err[256];

    if (!ch || !(scq = ibv_create_cq (dev.ctx, 16, NULL, NULL, 0))
        || !(rcq = ibv_create_cq (dev.ctx, 16, NULL, ch, 0)))
        BAIL_OUT ("channel/CQ: %s", strerror (errno));
    for (int i = 0; i < 2; i++) {
        memset (&ia, 0, sizeof (ia));
        ia.send_cq = scq;
        ia.recv_cq = rcq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap = (struct ibv_qp_cap){ 8, 8, 1, 1, 0 };
        if (!(qp[i] = ibv_create_qp (dev.pd, &ia)))
            BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
        vw_ep_local (&dev, &ep[i]);
        ep[i].qpn = qp[i]->qp_num;
        ep[i].psn = 77 * (uint32_t)(i + 1);
    }
    for (int i = 0; i < 2; i++)
        if (vw_qp_rc_connect (qp[i], &dev, &ep[i], &ep[1 - i], 1, err, sizeof (err)) < 0)
            BAIL_OUT ("%s", err);
    for (int i = 0; i < 2; i++)
        vw_recv1 (qp[1], (uint64_t)i, buf + 64 * i, 64, mr->lkey);
    ok (ibv_req_notify_cq (rcq, 1) == 0, "arm the receive CQ solicited-only");
    vw_post1 (qp[0], IBV_WR_SEND, 1, buf + 1024, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    ok (vw_cq_wait (scq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS,
        "an unsolicited SEND completes");
    pfd = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
    ok (poll (&pfd, 1, 300) == 0, "and does not fire the solicited-only channel");
    vw_post1 (qp[0], IBV_WR_SEND, 2, buf + 1024, 8, mr->lkey, 0, 0,
              IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
    ok (poll (&pfd, 1, 5000) == 1 && ibv_get_cq_event (ch, &evcq, &ctx) == 0 && evcq == rcq,
        "a solicited SEND fires it, naming the receive CQ");
    ibv_ack_cq_events (rcq, 1);
    ok (ibv_poll_cq (rcq, 1, &wc) == 1 && wc.wr_id == 0 && ibv_poll_cq (rcq, 1, &wc) == 1
            && wc.wr_id == 1 && (wc.wc_flags & IBV_WC_WITH_IMM) == 0,
        "both receives are in the CQ, in order");
    ibv_destroy_qp (qp[0]);
    ibv_destroy_qp (qp[1]);
    ibv_destroy_cq (scq);
    ok (ibv_destroy_cq (rcq) == 0 && ibv_destroy_comp_channel (ch) == 0,
        "destroy the CQ, then its channel (all events acked)");
}

/* sq_sig_all 1: every WR completes; 0: only the signaled ones. */
static void sig_all (int all)
{
    struct ibv_cq *cq = ibv_create_cq (dev.ctx, 32, NULL, NULL, 0);
    struct ibv_qp_init_attr ia;
    struct ibv_qp *qp[2];
    struct vw_ep ep[2];
    struct ibv_wc wc;
    char err[256];
    int sends = 0, recvs = 0, signaled_ids = 1;

    if (!cq)
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
    for (int i = 0; i < 2; i++) {
        memset (&ia, 0, sizeof (ia));
        ia.send_cq = ia.recv_cq = cq;
        ia.qp_type = IBV_QPT_RC;
        ia.sq_sig_all = all;
        ia.cap = (struct ibv_qp_cap){ 8, 8, 1, 1, 0 };
        if (!(qp[i] = ibv_create_qp (dev.pd, &ia)))
            BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
        vw_ep_local (&dev, &ep[i]);
        ep[i].qpn = qp[i]->qp_num;
        ep[i].psn = 5 * (uint32_t)(i + 1);
    }
    for (int i = 0; i < 2; i++)
        if (vw_qp_rc_connect (qp[i], &dev, &ep[i], &ep[1 - i], 1, err, sizeof (err)) < 0)
            BAIL_OUT ("%s", err);
    for (int i = 0; i < 4; i++)
        vw_recv1 (qp[1], 10 + (uint64_t)i, buf + 64 * i, 64, mr->lkey);
    /* Only WR 3 asks for a completion. */
    for (int i = 0; i < 4; i++)
        vw_post1 (qp[0], IBV_WR_SEND, (uint64_t)i, buf + 1024, 8, mr->lkey, 0, 0,
                  i == 3 ? IBV_SEND_SIGNALED : 0);
    while (vw_cq_wait (cq, &wc, 300) == 1) {
        if (wc.opcode == IBV_WC_SEND) {
            if (!all && wc.wr_id != 3)
                signaled_ids = 0;
            sends++;
        } else {
            recvs++;
        }
    }
    ok (recvs == 4, "sq_sig_all %d: all 4 SENDs arrive (%d)", all, recvs);
    if (all)
        ok (sends == 4, "sq_sig_all 1: all 4 SENDs complete, signaled or not (%d)", sends);
    else
        ok (sends == 1 && signaled_ids, "sq_sig_all 0: only the one signaled SEND completes (%d)",
            sends);
    ibv_destroy_qp (qp[0]);
    ibv_destroy_qp (qp[1]);
    ibv_destroy_cq (cq);
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
    srq_limit ();
    cq_resize ();
    solicited ();
    sig_all (1);
    sig_all (0);
    ibv_dereg_mr (mr);
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
