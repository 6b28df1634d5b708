/* rnr.c - a SEND stuck in RNR across a checkpoint is delivered exactly once.
 *
 *   rnr STUCK_FILE GO_FILE
 *
 * One process, two RC QPs connected to each other (A sends, B receives),
 * run under libibcr with a coordinator.  A posts one checksummed SEND while
 * B has no receive posted: with rnr_retry 7 it stays in RNR, undelivered.
 * The program then creates STUCK_FILE (the test starts a checkpoint cycle
 * then) and waits for GO_FILE (the test creates it once the cycle is over).
 * Only then B posts a receive: the message, reposted by libibcr after the
 * rebuild, must arrive exactly once, intact, and A's SEND complete once;
 * a second receive stays empty.  TAP on stdout.
 */
#include "config.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

#define MSG 256

static double now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Poll cq for up to 'secs'; count completions per QP; stop early once
 * 'want' arrived in total.  Returns the total. */
static int poll_for (struct ibv_cq *cq, double secs, int want, struct ibv_wc *last, int *bad_status)
{
    int n = 0;
    double end = now () + secs;
    while (now () < end && n < want) {
        struct ibv_wc wc;
        int r = ibv_poll_cq (cq, 1, &wc);
        if (r < 0)
            return -1;
        if (r == 0) {
            usleep (200);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS) {
            diag ("completion wr_id %llu: %s", (unsigned long long)wc.wr_id,
                  ibv_wc_status_str (wc.status));
            (*bad_status)++;
        }
        *last = wc;
        n++;
    }
    return n;
}

int main (int argc, char **argv)
{
    struct ibv_device **l;
    struct ibv_port_attr pa;
    struct ibv_wc wc;
    static unsigned char sbuf[MSG], rbuf[2 * MSG];
    int bad = 0, n;

    if (argc != 3) {
        fprintf (stderr, "usage: rnr STUCK_FILE GO_FILE\n");
        return 2;
    }
    plan (8);
    struct ibv_context *ctx = selfqp_open (&l, &pa);
    struct ibv_pd *pd = ibv_alloc_pd (ctx);
    struct ibv_mr *smr = pd ? ibv_reg_mr (pd, sbuf, sizeof (sbuf), 0) : NULL;
    struct ibv_mr *rmr = pd ? ibv_reg_mr (pd, rbuf, sizeof (rbuf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq *scq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    struct ibv_cq *rcq = ibv_create_cq (ctx, 16, NULL, NULL, 0);
    if (!smr || !rmr || !scq || !rcq)
        BAIL_OUT ("pd/mr/cq: %s", strerror (errno));
    struct ibv_qp_init_attr ia = {
        .send_cq = scq,
        .recv_cq = scq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *a = ibv_create_qp (pd, &ia);
    ia.send_cq = rcq;
    ia.recv_cq = rcq;
    struct ibv_qp *b = ibv_create_qp (pd, &ia);
    if (!a || !b || selfqp_connect (a, pa.lid, b->qp_num, IBV_ACCESS_REMOTE_WRITE)
        || selfqp_connect (b, pa.lid, a->qp_num, IBV_ACCESS_REMOTE_WRITE))
        BAIL_OUT ("QPs: %s", strerror (errno));
    uint32_t qa = a->qp_num, qb = b->qp_num;

    for (int i = 0; i < MSG; i++)
        sbuf[i] = (unsigned char)(i * 31 + 7);
    struct ibv_sge sg = { .addr = (uintptr_t)sbuf, .length = MSG, .lkey = smr->lkey };
    struct ibv_send_wr swr = { .wr_id = 1,
                               .sg_list = &sg,
                               .num_sge = 1,
                               .opcode = IBV_WR_SEND,
                               .send_flags = IBV_SEND_SIGNALED },
                       *bs;
    ok (ibv_post_send (a, &swr, &bs) == 0, "A posts a SEND while B has no receive");
    ok (poll_for (scq, 0.3, 1, &wc, &bad) == 0, "it stays in RNR: no completion in 300 ms");

    selfqp_handshake (argv[1], argv[2]);

    memset (rbuf, 0, sizeof (rbuf));
    struct ibv_sge rsg = { .addr = (uintptr_t)rbuf, .length = MSG, .lkey = rmr->lkey };
    struct ibv_recv_wr rwr = { .wr_id = 10, .sg_list = &rsg, .num_sge = 1 }, *br;
    ok (ibv_post_recv (b, &rwr, &br) == 0, "B posts a receive after the rebuild");
    n = poll_for (rcq, 10, 1, &wc, &bad);
    ok (n == 1 && wc.wr_id == 10 && wc.byte_len == MSG && wc.qp_num == qb
            && wc.status == IBV_WC_SUCCESS,
        "B receives the message (%d completions, %u bytes, qp %u, the app's %u)", n,
        n ? wc.byte_len : 0, n ? wc.qp_num : 0, qb);
    ok (memcmp (rbuf, sbuf, MSG) == 0, "its %d bytes are intact", MSG);
    n = poll_for (scq, 10, 1, &wc, &bad);
    ok (n == 1 && wc.wr_id == 1 && wc.qp_num == qa && wc.status == IBV_WC_SUCCESS,
        "A's SEND completes once, with the app's QPN %u", qa);

    rsg.addr = (uintptr_t)(rbuf + MSG);
    rwr.wr_id = 11;
    ibv_post_recv (b, &rwr, &br);
    ok (poll_for (rcq, 0.5, 1, &wc, &bad) == 0 && poll_for (scq, 0.1, 1, &wc, &bad) == 0,
        "no second delivery and no second send completion in 500 ms");
    ok (bad == 0, "no error completion");

    ibv_destroy_qp (a);
    ibv_destroy_qp (b);
    ibv_destroy_cq (scq);
    ibv_destroy_cq (rcq);
    ibv_dereg_mr (smr);
    ibv_dereg_mr (rmr);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    return exit_status ();
}
