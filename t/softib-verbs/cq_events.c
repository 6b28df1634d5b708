/* cq_events.c - completion channels, resize_cq and async events.
 *
 * - Two CQs on one completion channel and a third on another: an armed
 *   CQ fires once per arming, on its own channel, naming itself and its
 *   cq_context; an unarmed one never fires; poll(2) on the channel fd
 *   tells readiness; a non-blocking fd gives EAGAIN when empty; a
 *   solicited-only arming ignores unsolicited receives but not solicited
 *   ones or errors; destroying a CQ drops its unread events.
 * - resize_cq keeps unpolled completions in order and takes more after;
 *   shrinking below what is queued is refused.
 * - Async events: SRQ limit (once per arming, limit reads 0 after),
 *   QP_LAST_WQE_REACHED for a QP of an SRQ moved to ERR, CQ overrun.
 * - Destroying a CQ or SRQ a QP still uses gives EBUSY.
 * Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv.h"

static struct sv_dev dev;
static struct ibv_mr *mr;
static uint8_t *buf;

static int readable (int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    return poll (&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* QP pair whose receive side (qp[1]) completes into rcq */
static void pair_on (struct sv_pair *p, struct ibv_cq *rcq)
{
    struct ibv_qp_init_attr ia;

    sv_pair_create (&dev, p, IBV_QPT_RC, NULL, 64);
    ibv_destroy_qp (p->qp[1]);
    memset (&ia, 0, sizeof (ia));
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = p->cq[1];
    ia.recv_cq = rcq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    p->qp[1] = ibv_create_qp (dev.pd, &ia);
    if (!p->qp[1] || sv_pair_connect (&dev, p, NULL, NULL))
        BAIL_OUT ("pair_on");
}

static void deliver (struct sv_pair *p, uint64_t id, unsigned int flags)
{
    struct ibv_wc wc;

    if (sv_recv (p->qp[1], id, buf + 4096, 64, mr->lkey)
        || sv_send (p->qp[0], IBV_WR_SEND, id, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED | flags))
        BAIL_OUT ("deliver");
    if (sv_wait (p->cq[0], &wc, 3000) != 1 || wc.status != IBV_WC_SUCCESS)
        BAIL_OUT ("deliver: send did not complete");
}

static void channels (void)
{
    struct ibv_comp_channel *ch1, *ch2;
    struct ibv_cq *a, *b, *c, *ev_cq;
    struct sv_pair pa, pb, pc;
    struct ibv_wc wc;
    void *ctxp;
    int tags[3], rc, fl;

    ch1 = ibv_create_comp_channel (dev.ctx);
    ch2 = ibv_create_comp_channel (dev.ctx);
    if (!ch1 || !ch2)
        BAIL_OUT ("ibv_create_comp_channel: %s", strerror (errno));
    a = ibv_create_cq (dev.ctx, 16, &tags[0], ch1, 0);
    b = ibv_create_cq (dev.ctx, 16, &tags[1], ch1, 0);
    c = ibv_create_cq (dev.ctx, 16, &tags[2], ch2, 0);
    if (!a || !b || !c)
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
    ok (ibv_destroy_comp_channel (ch1) == EBUSY, "a channel with CQs cannot be destroyed (EBUSY)");
    pair_on (&pa, a);
    pair_on (&pb, b);
    pair_on (&pc, c);

    ibv_req_notify_cq (a, 0);
    ibv_req_notify_cq (b, 0);
    ok (!readable (ch1->fd, 0) && !readable (ch2->fd, 0), "no event before any completion");
    deliver (&pb, 1, 0);
    deliver (&pa, 2, 0);
    deliver (&pc, 3, 0); /* c is not armed */
    ok (readable (ch1->fd, 1000), "poll(2): channel 1 readable");
    rc = ibv_get_cq_event (ch1, &ev_cq, &ctxp);
    ok (rc == 0 && ev_cq == b && ctxp == &tags[1], "first event names CQ b and its cq_context");
    rc = ibv_get_cq_event (ch1, &ev_cq, &ctxp);
    ok (rc == 0 && ev_cq == a && ctxp == &tags[0], "second event names CQ a");
    ibv_ack_cq_events (a, 1);
    ibv_ack_cq_events (b, 1);
    ok (!readable (ch1->fd, 50) && !readable (ch2->fd, 50),
        "one event per arming; the unarmed CQ c fired nothing");
    ok (ibv_poll_cq (a, 1, &wc) == 1 && wc.wr_id == 2 && ibv_poll_cq (b, 1, &wc) == 1
            && wc.wr_id == 1 && ibv_poll_cq (c, 1, &wc) == 1 && wc.wr_id == 3,
        "each completion is on its own CQ");
    deliver (&pa, 4, 0);
    ok (!readable (ch1->fd, 50),
        "not re-armed: no event for a new "
        "completion");
    ibv_poll_cq (a, 1, &wc);

    /* non-blocking channel */
    fl = fcntl (ch2->fd, F_GETFL);
    fcntl (ch2->fd, F_SETFL, fl | O_NONBLOCK);
    errno = 0;
    rc = ibv_get_cq_event (ch2, &ev_cq, &ctxp);
    ok (rc == -1 && errno == EAGAIN,
        "non-blocking empty channel: -1 "
        "EAGAIN");
    ibv_req_notify_cq (c, 0);
    deliver (&pc, 5, 0);
    rc = ibv_get_cq_event (ch2, &ev_cq, &ctxp);
    ok (rc == 0 && ev_cq == c,
        "non-blocking channel delivers CQ c's "
        "event");
    ibv_ack_cq_events (c, 1);
    ibv_poll_cq (c, 1, &wc);

    /* solicited only */
    ibv_req_notify_cq (c, 1);
    deliver (&pc, 6, 0);
    ok (!readable (ch2->fd, 50),
        "solicited-only arming: an unsolicited "
        "receive fires nothing");
    deliver (&pc, 7, IBV_SEND_SOLICITED);
    rc = ibv_get_cq_event (ch2, &ev_cq, &ctxp);
    ok (rc == 0 && ev_cq == c, "... a solicited one fires");
    ibv_ack_cq_events (c, 1);
    ok (ibv_poll_cq (c, 1, &wc) == 1 && wc.wr_id == 6 && ibv_poll_cq (c, 1, &wc) == 1
            && wc.wr_id == 7,
        "both receives are on the CQ");

    /* destroying a CQ drops its unread event */
    ibv_req_notify_cq (b, 0);
    deliver (&pb, 8, 0);
    if (!readable (ch1->fd, 1000))
        BAIL_OUT ("no event for CQ b");
    ibv_destroy_qp (pb.qp[1]);
    pb.qp[1] = NULL;
    ok (ibv_destroy_cq (b) == 0, "destroy CQ b with an unread event");
    fl = fcntl (ch1->fd, F_GETFL);
    fcntl (ch1->fd, F_SETFL, fl | O_NONBLOCK);
    errno = 0;
    rc = ibv_get_cq_event (ch1, &ev_cq, &ctxp);
    ok (rc == -1 && errno == EAGAIN, "its event is gone (EAGAIN)");
    fcntl (ch1->fd, F_SETFL, fl);
    ibv_req_notify_cq (a, 0);
    deliver (&pa, 9, 0);
    rc = ibv_get_cq_event (ch1, &ev_cq, &ctxp); /* blocking */
    ok (rc == 0 && ev_cq == a,
        "a blocking get_cq_event then returns CQ "
        "a's next event");
    ibv_ack_cq_events (a, 1);

    sv_pair_destroy (&pa);
    sv_pair_destroy (&pb);
    sv_pair_destroy (&pc);
    ibv_destroy_cq (a);
    ibv_destroy_cq (c);
    ok (ibv_destroy_comp_channel (ch1) == 0 && ibv_destroy_comp_channel (ch2) == 0,
        "channels are destroyed once their CQs are");
}

static void resize (void)
{
    struct ibv_cq *cq = ibv_create_cq (dev.ctx, 4, NULL, NULL, 0);
    struct ibv_qp_init_attr ia;
    struct sv_pair p;
    struct ibv_wc wc[16];
    int rc, n, inorder = 1;

    if (!cq)
        BAIL_OUT ("ibv_create_cq");
    ok (cq->cqe >= 4, "create_cq(4): cqe %d", cq->cqe);
    memset (&ia, 0, sizeof (ia));
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    sv_pair_create (&dev, &p, IBV_QPT_RC, &ia, 64);
    ibv_destroy_qp (p.qp[0]);
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = ia.recv_cq = cq;
    p.qp[0] = ibv_create_qp (dev.pd, &ia);
    if (!p.qp[0] || sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("resize: pair");
    for (int i = 0; i < 3; i++)
        sv_send (p.qp[0], IBV_WR_RDMA_WRITE, 10 + (uint64_t)i, buf, 8, mr->lkey,
                 (uintptr_t)buf + 1024, mr->rkey, IBV_SEND_SIGNALED);
    usleep (100000);
    rc = ibv_resize_cq (cq, 1);
    ok (rc != 0, "resize below the 3 queued completions is refused (%s)", strerror (rc));
    rc = ibv_resize_cq (cq, 64);
    ok (rc == 0 && cq->cqe >= 64, "resize_cq(64): cqe %d", cq->cqe);
    for (int i = 0; i < 10; i++)
        sv_send (p.qp[0], IBV_WR_RDMA_WRITE, 13 + (uint64_t)i, buf, 8, mr->lkey,
                 (uintptr_t)buf + 1024, mr->rkey, IBV_SEND_SIGNALED);
    usleep (100000);
    n = 0;
    while (n < 16) {
        struct ibv_wc one;

        if (sv_wait (cq, &one, 200) != 1)
            break;
        wc[n++] = one;
    }
    for (int i = 0; i < n; i++)
        if (wc[i].wr_id != 10 + (uint64_t)i || wc[i].status != IBV_WC_SUCCESS)
            inorder = 0;
    ok (n == 13 && inorder,
        "all 13 completions (3 from before the "
        "resize) come out in order (%d)",
        n);
    sv_pair_destroy (&p);
    ok (ibv_destroy_cq (cq) == 0, "destroy the resized CQ");
}

static int async_wait (struct ibv_async_event *ev, int ms)
{
    int fl = fcntl (dev.ctx->async_fd, F_GETFL);
    int rc = -1;

    if (readable (dev.ctx->async_fd, ms)) {
        fcntl (dev.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
        rc = ibv_get_async_event (dev.ctx, ev);
        fcntl (dev.ctx->async_fd, F_SETFL, fl);
        if (rc == 0)
            ibv_ack_async_event (ev);
    }
    return rc;
}

static void async_events (void)
{
    struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
    struct ibv_srq_attr at;
    struct ibv_async_event ev;
    struct ibv_qp_init_attr ia;
    struct ibv_srq *srq;
    struct sv_pair p;
    struct ibv_cq *tiny;
    struct ibv_wc wc;
    int rc, n;

    srq = ibv_create_srq (dev.pd, &sa);
    if (!srq)
        BAIL_OUT ("ibv_create_srq: %s", strerror (errno));
    memset (&ia, 0, sizeof (ia));
    ia.srq = srq;
    ia.cap.max_send_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    sv_pair_create (&dev, &p, IBV_QPT_RC, &ia, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("SRQ pair");
    for (int i = 0; i < 8; i++) {
        struct ibv_sge s = { (uintptr_t)buf + 4096 + 64 * i, 64, mr->lkey };
        struct ibv_recv_wr wr = { .wr_id = 50 + (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;

        if (ibv_post_srq_recv (srq, &wr, &bad))
            BAIL_OUT ("post_srq_recv");
    }
    at.srq_limit = 5;
    rc = ibv_modify_srq (srq, &at, IBV_SRQ_LIMIT);
    ok (rc == 0, "arm the SRQ limit at 5 with 8 receives posted");
    for (int i = 0; i < 3; i++) {
        sv_send (p.qp[0], IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
        sv_wait (p.cq[0], &wc, 3000);
    }
    ok (async_wait (&ev, 50) != 0, "no limit event at 5 left");
    sv_send (p.qp[0], IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    sv_wait (p.cq[0], &wc, 3000);
    rc = async_wait (&ev, 2000);
    ok (rc == 0 && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq,
        "below the limit: SRQ_LIMIT_REACHED "
        "naming the SRQ");
    ibv_query_srq (srq, &at);
    ok (at.srq_limit == 0, "the limit reads 0 once fired (%u)", at.srq_limit);
    sv_send (p.qp[0], IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    sv_wait (p.cq[0], &wc, 3000);
    ok (async_wait (&ev, 50) != 0, "fires once per arming");
    ok (ibv_destroy_srq (srq) == EBUSY, "destroying an SRQ QPs use: EBUSY");
    {
        struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

        ibv_modify_qp (p.qp[1], &a, IBV_QP_STATE);
    }
    rc = async_wait (&ev, 2000);
    ok (rc == 0 && ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == p.qp[1],
        "an SRQ QP moved to ERR raises "
        "QP_LAST_WQE_REACHED");
    while (ibv_poll_cq (p.cq[1], 1, &wc) == 1)
        ;
    sv_pair_destroy (&p);
    ok (ibv_destroy_srq (srq) == 0, "the SRQ is destroyed once unused");

    /* CQ overrun */
    tiny = ibv_create_cq (dev.ctx, 1, NULL, NULL, 0);
    memset (&ia, 0, sizeof (ia));
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    sv_pair_create (&dev, &p, IBV_QPT_RC, &ia, 64);
    ibv_destroy_qp (p.qp[0]);
    ia.qp_type = IBV_QPT_RC;
    ia.send_cq = ia.recv_cq = tiny;
    p.qp[0] = ibv_create_qp (dev.pd, &ia);
    if (!tiny || !p.qp[0] || sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("overrun pair");
    ok (ibv_destroy_cq (tiny) == EBUSY, "destroying a CQ a QP uses: EBUSY");
    n = tiny->cqe + 2;
    for (int i = 0; i < n; i++)
        sv_send (p.qp[0], IBV_WR_RDMA_WRITE, 1, buf, 8, mr->lkey, (uintptr_t)buf + 1024, mr->rkey,
                 IBV_SEND_SIGNALED);
    rc = async_wait (&ev, 2000);
    ok (rc == 0 && ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == tiny,
        "%d completions into a CQ of %d: CQ_ERR naming it", n, tiny->cqe);
    sv_pair_destroy (&p);
    ibv_destroy_cq (tiny);
}

int main (void)
{
    plan (NO_PLAN);
    sv_open (&dev);
    mr = sv_mr (&dev, 65536,
                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    buf = mr->addr;
    channels ();
    resize ();
    async_events ();
    sv_mr_free (mr);
    sv_close (&dev);
    done_testing ();
    return exit_status ();
}
