/* evwake.c - a thread asleep in ibv_get_cq_event across a checkpoint is
 * woken by a message that reaches its rebuilt CQ before its process
 * resumes.
 *
 *   evwake send DIR     (run with IBCR_RANK=0)
 *   evwake recv DIR     (run with IBCR_RANK=1)
 *
 * Two processes, one RC QP each, connected through files in DIR
 * (DIR/send.addr, DIR/recv.addr: "LID QPN").  The receiver posts a
 * receive, arms its CQ (completion channel), creates DIR/armed and sleeps
 * in ibv_get_cq_event.  The sender waits for DIR/go-send, then posts one
 * checksummed SEND: the test creates go-send while a checkpoint is between
 * release and rebuild, so the post waits in libibcr until the sender
 * resumes (the sender creates DIR/posting just before it posts, and the
 * test lets the rebuild go on once that thread sleeps in libibcr), and the coordinator (-k) resumes the sender well before the
 * receiver.  The message therefore lands in the receiver's rebuilt CQ
 * while the receiver is not resumed yet: the CQ must already be armed
 * then, or no event is ever raised and the receiver sleeps for good.
 * The receiver gives up after 30 s.  TAP on stdout.
 */
#include "config.h"
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

#define MSG 512

static void fill (unsigned char *b, uint32_t seed)
{
    for (int i = 0; i < MSG; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (unsigned char)(seed >> 16);
    }
}

int main (int argc, char **argv)
{
    static unsigned char buf[MSG], want[MSG];
    struct ibv_device **l;
    struct ibv_port_attr pa;
    unsigned plid, pqpn;

    if (argc != 3 || (strcmp (argv[1], "send") && strcmp (argv[1], "recv"))) {
        fprintf (stderr, "usage: evwake send|recv DIR\n");
        return 2;
    }
    const char *dir = argv[2];
    int sender = strcmp (argv[1], "send") == 0;
    plan (sender ? 2 : 4);

    struct ibv_context *ctx = selfqp_open (&l, &pa);
    struct ibv_comp_channel *ch = ibv_create_comp_channel (ctx);
    struct ibv_pd *pd = ibv_alloc_pd (ctx);
    struct ibv_mr *mr = pd ? ibv_reg_mr (pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq *cq = ch ? ibv_create_cq (ctx, 4, NULL, ch, 0) : NULL;
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
    fill (want, 0xe7a4e);
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr->lkey };

    if (sender) {
        struct ibv_send_wr wr = { .wr_id = 7,
                                  .sg_list = &sge,
                                  .num_sge = 1,
                                  .opcode = IBV_WR_SEND,
                                  .send_flags = IBV_SEND_SIGNALED },
                           *bad;
        struct ibv_wc wc;
        int n = 0;
        char ready[4096], go[4096];
        snprintf (ready, sizeof (ready), "%s/send-ready", dir);
        snprintf (go, sizeof (go), "%s/go-send", dir);
        memcpy (buf, want, MSG);
        selfqp_handshake (ready, go);
        /* DIR/posting tells the test this thread goes into the post now:
         * from then on, a futex it sleeps in is libibcr's gate. */
        selfqp_touch (dir, "posting");
        /* Waits inside libibcr while the checkpoint runs. */
        ok (ibv_post_send (qp, &wr, &bad) == 0, "SEND posted");
        for (int i = 0; i < 15000 && (n = ibv_poll_cq (cq, 1, &wc)) == 0; i++)
            usleep (2000);
        ok (n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7,
            "the SEND completed (n %d, status %s)", n,
            n == 1 ? ibv_wc_status_str (wc.status) : "-");
    } else {
        struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *rbad;
        struct ibv_wc wc;
        struct ibv_cq *ecq;
        void *ectx;
        memset (buf, 0, MSG);
        if (ibv_post_recv (qp, &rwr, &rbad) || ibv_req_notify_cq (cq, 0))
            BAIL_OUT ("post the receive, arm the CQ: %s", strerror (errno));
        selfqp_touch (dir, "armed");
        /* ibv_get_cq_event blocks for good when the event is lost: wait
         * on the channel's fd with a deadline first. */
        struct pollfd p = { .fd = ch->fd, .events = POLLIN };
        int r = poll (&p, 1, 30000);
        ok (r == 1, "a completion event came within 30 s (poll: %d)", r);
        if (r != 1)
            BAIL_OUT ("the completion event was lost");
        ok (ibv_get_cq_event (ch, &ecq, &ectx) == 0 && ecq == cq, "the event names our CQ");
        ibv_ack_cq_events (cq, 1);
        int n = ibv_poll_cq (cq, 1, &wc);
        ok (n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9 && wc.byte_len == MSG,
            "one receive completion (n %d)", n);
        ok (memcmp (buf, want, MSG) == 0, "the message arrived intact");
    }
    ibv_destroy_qp (qp);
    ibv_destroy_cq (cq);
    ibv_dereg_mr (mr);
    ibv_dealloc_pd (pd);
    ibv_destroy_comp_channel (ch);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    return exit_status ();
}
