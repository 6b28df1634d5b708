/* async.c - async events reach the application through libibcr, across a
 * checkpoint.
 *
 *   async ARMED_FILE GO_FILE
 *
 * One process under libibcr with a coordinator: an RC QP A sends to QP B,
 * whose receives come from an SRQ with 4 receives posted and its limit
 * armed at 2.  The program creates ARMED_FILE (the test runs a checkpoint
 * cycle then: the SRQ is rebuilt and its limit armed again) and waits for
 * GO_FILE.  Then A sends 3 messages: the SRQ drops below its limit and the
 * application must get exactly one IBV_EVENT_SRQ_LIMIT_REACHED naming the
 * SRQ it holds, through its async fd (poll) and ibv_get_async_event.
 * TAP on stdout.
 */
#include "config.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

int main (int argc, char **argv)
{
    static char buf[8 * 64];
    struct ibv_port_attr pa;

    if (argc != 3) {
        fprintf (stderr, "usage: async ARMED_FILE GO_FILE\n");
        return 2;
    }
    plan (6);
    struct ibv_device **l;
    struct ibv_context *ctx = selfqp_open (&l, &pa);
    struct ibv_pd *pd = ibv_alloc_pd (ctx);
    struct ibv_mr *mr = pd ? ibv_reg_mr (pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq *cq = ibv_create_cq (ctx, 32, NULL, NULL, 0);
    struct ibv_srq_init_attr sia = { .attr = { .max_wr = 8, .max_sge = 1 } };
    struct ibv_srq *srq = pd ? ibv_create_srq (pd, &sia) : NULL;
    if (!mr || !cq || !srq)
        BAIL_OUT ("mr/cq/srq: %s", strerror (errno));
    struct ibv_qp_init_attr ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *a = ibv_create_qp (pd, &ia);
    ia.srq = srq;
    struct ibv_qp *b = ibv_create_qp (pd, &ia);
    if (!a || !b || selfqp_connect (a, pa.lid, b->qp_num, 0)
        || selfqp_connect (b, pa.lid, a->qp_num, 0))
        BAIL_OUT ("QPs: %s", strerror (errno));
    for (int i = 0; i < 4; i++) {
        struct ibv_sge sg = { .addr = (uintptr_t)(buf + 64 * (i + 4)),
                              .length = 64,
                              .lkey = mr->lkey };
        struct ibv_recv_wr rw = { .wr_id = 100 + i, .sg_list = &sg, .num_sge = 1 }, *bad;
        if (ibv_post_srq_recv (srq, &rw, &bad))
            BAIL_OUT ("post_srq_recv");
    }
    struct ibv_srq_attr lim = { .srq_limit = 2 };
    ok (ibv_modify_srq (srq, &lim, IBV_SRQ_LIMIT) == 0, "SRQ limit armed at 2 with 4 receives");

    selfqp_handshake (argv[1], argv[2]);

    for (int i = 0; i < 3; i++) {
        struct ibv_sge sg = { .addr = (uintptr_t)(buf + 64 * i), .length = 64, .lkey = mr->lkey };
        struct ibv_send_wr sw = { .wr_id = i,
                                  .sg_list = &sg,
                                  .num_sge = 1,
                                  .opcode = IBV_WR_SEND,
                                  .send_flags = IBV_SEND_SIGNALED },
                           *bad;
        if (ibv_post_send (a, &sw, &bad))
            BAIL_OUT ("post_send");
    }
    int got = 0, bad = 0;
    for (int i = 0; i < 5000 && got < 6; i++) {
        struct ibv_wc wc;
        int r = ibv_poll_cq (cq, 1, &wc);
        if (r > 0) {
            got++;
            bad += wc.status != IBV_WC_SUCCESS;
        } else
            usleep (1000);
    }
    ok (got == 6 && bad == 0, "3 sends and 3 receives complete (%d completions, %d bad)", got, bad);

    struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
    ok (poll (&pfd, 1, 5000) == 1, "the async fd becomes readable");
    struct ibv_async_event ev;
    int rc = ibv_get_async_event (ctx, &ev);
    ok (rc == 0 && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED,
        "ibv_get_async_event: SRQ_LIMIT_REACHED (rc %d, type %d)", rc,
        rc == 0 ? (int)ev.event_type : -1);
    ok (rc == 0 && ev.element.srq == srq, "the event names the SRQ the application holds");
    if (rc == 0)
        ibv_ack_async_event (&ev);
    ok (poll (&pfd, 1, 300) == 0, "no second event");

    ibv_destroy_qp (a);
    ibv_destroy_qp (b);
    ibv_destroy_srq (srq);
    ibv_destroy_cq (cq);
    ibv_dereg_mr (mr);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    return exit_status ();
}
