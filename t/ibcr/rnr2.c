/* rnr2.c - a SEND stuck in RNR across a checkpoint reaches a peer in
 * another process exactly once, however late that peer is connected.
 *
 *   rnr2 send DIR     (run with IBCR_RANK=0)
 *   rnr2 recv DIR     (run with IBCR_RANK=1)
 *
 * Two processes, one RC QP each, connected through files in DIR
 * (selfqp_write_addr).  The sender posts one checksummed SEND while the
 * receiver has no receive posted: it stays in RNR.  Once DIR/send-ready
 * and DIR/recv-ready exist the test runs a cycle whose coordinator (-K)
 * connects the receiver well after the sender; after it, the test
 * creates DIR/go.  The receiver then posts two receives: exactly one
 * message arrives, intact, and the sender's SEND completes once.  (An
 * HCA drops a request to a QP not in RTR yet, and retries it until
 * retry_cnt runs out; softib holds it until the QP reaches RTR.)  TAP on
 * stdout.
 */
#include "config.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

#define MSG 256

/* Poll cq until one completion or ms: 1 (in *wc) or 0. */
static int wait_one (struct ibv_cq *cq, int ms, struct ibv_wc *wc)
{
    for (int i = 0; i < ms / 2; i++) {
        int n = ibv_poll_cq (cq, 1, wc);
        if (n)
            return n;
        usleep (2000);
    }
    return 0;
}

int main (int argc, char **argv)
{
    static unsigned char buf[2 * MSG], want[MSG];
    struct ibv_device **l;
    struct ibv_port_attr pa;
    struct ibv_wc wc;
    unsigned plid, pqpn;
    char ready[4096], go[4096];

    if (argc != 3 || (strcmp (argv[1], "send") && strcmp (argv[1], "recv"))) {
        fprintf (stderr, "usage: rnr2 send|recv DIR\n");
        return 2;
    }
    const char *dir = argv[2];
    int sender = strcmp (argv[1], "send") == 0;
    plan (sender ? 2 : 3);

    struct ibv_context *ctx = selfqp_open (&l, &pa);
    struct ibv_pd *pd = ibv_alloc_pd (ctx);
    struct ibv_mr *mr = pd ? ibv_reg_mr (pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq *cq = ibv_create_cq (ctx, 4, NULL, NULL, 0);
    struct ibv_qp_init_attr qa = {
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 }
    };
    qa.send_cq = qa.recv_cq = cq;
    struct ibv_qp *qp = cq && mr ? ibv_create_qp (pd, &qa) : NULL;
    if (!qp)
        BAIL_OUT ("verbs setup: %s", strerror (errno));
    selfqp_write_addr (dir, argv[1], pa.lid, qp->qp_num);
    selfqp_read_addr (dir, sender ? "recv" : "send", &plid, &pqpn);
    if (selfqp_connect (qp, (uint16_t)plid, pqpn, 0))
        BAIL_OUT ("connect: %s", strerror (errno));
    for (int i = 0; i < MSG; i++)
        want[i] = (unsigned char)(i * 57 + 3);
    snprintf (ready, sizeof (ready), "%s/%s-ready", dir, argv[1]);
    snprintf (go, sizeof (go), "%s/go", dir);

    if (sender) {
        struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr->lkey };
        struct ibv_send_wr wr = { .wr_id = 7,
                                  .sg_list = &sge,
                                  .num_sge = 1,
                                  .opcode = IBV_WR_SEND,
                                  .send_flags = IBV_SEND_SIGNALED },
                           *bad;
        memcpy (buf, want, MSG);
        if (ibv_post_send (qp, &wr, &bad))
            BAIL_OUT ("post the SEND: %s", strerror (errno));
        ok (wait_one (cq, 300, &wc) == 0, "the SEND waits in RNR (no completion in 300 ms)");
        selfqp_handshake (ready, go);
        int n = wait_one (cq, 20000, &wc);
        ok (n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7,
            "after the cycle the SEND completes once (n %d, status %s)", n,
            n == 1 ? ibv_wc_status_str (wc.status) : "-");
    } else {
        selfqp_handshake (ready, go);
        memset (buf, 0, sizeof (buf));
        for (int i = 0; i < 2; i++) {
            struct ibv_sge sge = { .addr = (uintptr_t)(buf + i * MSG),
                                   .length = MSG,
                                   .lkey = mr->lkey };
            struct ibv_recv_wr rwr = { .wr_id = 9 + i, .sg_list = &sge, .num_sge = 1 }, *rbad;
            if (ibv_post_recv (qp, &rwr, &rbad))
                BAIL_OUT ("post a receive: %s", strerror (errno));
        }
        int n = wait_one (cq, 20000, &wc);
        ok (n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9 && wc.byte_len == MSG,
            "the message arrives (n %d)", n);
        ok (memcmp (buf, want, MSG) == 0, "intact");
        ok (wait_one (cq, 1000, &wc) == 0, "and only once");
    }
    ibv_destroy_qp (qp);
    ibv_destroy_cq (cq);
    ibv_dereg_mr (mr);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    return exit_status ();
}
