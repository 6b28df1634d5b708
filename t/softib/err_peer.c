/* err_peer.c - a peer that sends garbage or vanishes mid-message hurts
 * only the QP it talks to.
 *
 * softib-specific (a real HCA has no TCP endpoint to abuse): an injector
 * socket in this process connects to softib's endpoint for a victim QP
 * (port and HELLO as lib/softib/wire.h and softib(7) define them), then
 * sends garbage, a truncated header, an impossible length, or half a
 * message before closing.  The victim must move to ERR with an
 * IBV_EVENT_QP_FATAL async event and its posted receive flushed; a
 * connection that never said HELLO must harm no QP; and throughout, a
 * healthy pair in the same process keeps delivering verified messages.
 * Prints TAP.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "softib/softib.h"
#include "softib/wire.h"
#include "tap.h"
#include "vw_pair.h"
#include "vw_pattern.h"

#define FAKE_QPN 0xfff0f1u /* no QP of this process has this number */
#define VICTIM_PSN 0x3a5a5au

static struct vw_dev dev;
static struct vw_pair healthy;
static uint8_t *buf;
static struct ibv_mr *mr;
static uint64_t healthy_seq;
static uint32_t host_ip; /* network order, from GID 0 */

/* The healthy pair carries one verified message: proof the process and
 * its other QPs live on. */
static int healthy_roundtrip (void)
{
    uint8_t *out = buf, *in = buf + 4096;
    struct ibv_wc wc;
    int got_s, got_r;

    vw_pattern_fill (out, 1000, 1, healthy_seq);
    memset (in, 0, 1000);
    if (vw_recv1 (healthy.qp[1], healthy_seq, in, 1000, mr->lkey)
        || vw_post1 (healthy.qp[0], IBV_WR_SEND, healthy_seq, out, 1000, mr->lkey, 0, 0,
                     IBV_SEND_SIGNALED))
        return 0;
    got_s = vw_cq_wait (healthy.cq[0], &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS;
    got_r = vw_cq_wait (healthy.cq[1], &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS
        && wc.byte_len == 1000;
    return got_s && got_r && vw_pattern_check (in, 1000, 1, healthy_seq++, NULL) < 0;
}

/* A victim QP in RTR, waiting for requests from FAKE_QPN, with one
 * receive posted (it must flush when the victim dies). */
static struct ibv_qp *make_victim (struct ibv_cq *cq)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = { 4, 4, 1, 1, 0 }
    };
    struct vw_ep me, fake;
    struct ibv_qp *qp = ibv_create_qp (dev.pd, &ia);
    struct ibv_qp_attr a;
    char err[256];

    if (!qp)
        BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
    vw_ep_local (&dev, &me);
    fake = me;
    fake.qpn = FAKE_QPN;
    fake.psn = VICTIM_PSN;
    me.qpn = qp->qp_num;
    if (vw_qp_rc_connect (qp, &dev, &me, &fake, 1, err, sizeof (err)) < 0)
        BAIL_OUT ("victim: %s", err);
    memset (&a, 0, sizeof (a));
    if (vw_recv1 (qp, 77, buf + 8192, 64, mr->lkey))
        BAIL_OUT ("victim post_recv");
    return qp;
}

static int inject_connect (struct ibv_qp *victim)
{
    const char *pb = getenv ("SOFTIB_PORT_BASE");
    struct sockaddr_in sa = { .sin_family = AF_INET };
    int fd = socket (AF_INET, SOCK_STREAM, 0);

    /* softib(7): one listener per context on port_base + (QPN >> 12). */
    sa.sin_port = htons (
        (uint16_t)((pb && *pb ? atoi (pb) : SIB_PORT_BASE) + (victim->qp_num >> SIB_QP_IDX_BITS)));
    sa.sin_addr.s_addr = host_ip;
    if (fd < 0 || connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        diag ("connect to softib endpoint %s:%u: %s", inet_ntoa (sa.sin_addr), ntohs (sa.sin_port),
              strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    return fd;
}

static void send_all (int fd, const void *p, size_t n)
{
    if (send (fd, p, n, MSG_NOSIGNAL) != (ssize_t)n)
        diag ("injector send: %s", strerror (errno));
}

static void send_hello (int fd, struct ibv_qp *victim, uint32_t magic)
{
    struct sib_hdr h;
    struct sib_hello hello;

    memset (&h, 0, sizeof (h));
    h.op = SIB_OP_HELLO;
    h.len = sizeof (hello);
    sib_hdr_to_wire (&h);
    memset (&hello, 0, sizeof (hello));
    hello.magic = htole32 (magic);
    hello.version = htole16 (SIB_VERSION);
    hello.kind = htole16 (SIB_HELLO_RC);
    hello.src_ip = host_ip;
    hello.src_qpn = htole32 (FAKE_QPN);
    hello.dst_qpn = htole32 (victim->qp_num);
    hello.psn = htole32 (VICTIM_PSN);
    send_all (fd, &h, sizeof (h));
    send_all (fd, &hello, sizeof (hello));
}

static int wait_state (struct ibv_qp *qp, int want, int ms)
{
    int st = -1;

    for (int i = 0; i < ms / 10; i++) {
        if ((st = vw_qp_state (qp)) == want)
            return st;
        usleep (10000);
    }
    return st;
}

/* The next async event within ms, or -1. */
static int next_async (struct ibv_qp **qp, int ms)
{
    struct pollfd pfd = { .fd = dev.ctx->async_fd, .events = POLLIN };
    struct ibv_async_event ev;
    int type;

    if (poll (&pfd, 1, ms) != 1 || ibv_get_async_event (dev.ctx, &ev) != 0)
        return -1;
    type = ev.event_type;
    *qp = ev.element.qp;
    ibv_ack_async_event (&ev);
    return type;
}

enum scenario { S_GARBAGE_HDR, S_BAD_LEN, S_HALF_PAYLOAD, S_HALF_HEADER, S_NO_HELLO, S_BAD_MAGIC };

static void run (enum scenario s, const char *name)
{
    struct ibv_cq *cq = ibv_create_cq (dev.ctx, 16, NULL, NULL, 0);
    struct ibv_qp *victim, *evqp = NULL;
    int harmful = s != S_NO_HELLO && s != S_BAD_MAGIC;
    struct ibv_wc wc;
    struct sib_hdr h;
    uint8_t junk[48];
    int fd, st, ev, got;

    if (!cq)
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
    victim = make_victim (cq);
    if ((fd = inject_connect (victim)) < 0) {
        ok (0, "%s: reach softib's endpoint for the victim QP", name);
        return;
    }
    memset (junk, 0xee, sizeof (junk));
    memset (&h, 0, sizeof (h));
    switch (s) {
    case S_GARBAGE_HDR:
        send_hello (fd, victim, SIB_MAGIC);
        send_all (fd, junk, sizeof (junk));
        break;
    case S_BAD_LEN:
        send_hello (fd, victim, SIB_MAGIC);
        h.op = SIB_OP_SEND;
        h.len = 0xffffffffu;
        sib_hdr_to_wire (&h);
        send_all (fd, &h, sizeof (h));
        break;
    case S_HALF_PAYLOAD:
        send_hello (fd, victim, SIB_MAGIC);
        h.op = SIB_OP_SEND;
        h.len = 40; /* fits the receive: only the cut-off is wrong */
        sib_hdr_to_wire (&h);
        send_all (fd, &h, sizeof (h));
        send_all (fd, junk, 10);
        break;
    case S_HALF_HEADER:
        send_hello (fd, victim, SIB_MAGIC);
        h.op = SIB_OP_SEND;
        h.len = 16;
        sib_hdr_to_wire (&h);
        send_all (fd, &h, 20);
        break;
    case S_NO_HELLO:
        send_all (fd, junk, sizeof (junk));
        break;
    case S_BAD_MAGIC:
        send_hello (fd, victim, 0x12345678u);
        break;
    }
    usleep (100000);
    close (fd);
    if (harmful) {
        st = wait_state (victim, IBV_QPS_ERR, 3000);
        ok (st == IBV_QPS_ERR, "%s: the victim QP moves to ERR (%s)", name,
            st < 0 ? "?" : vw_qp_state_str ((enum ibv_qp_state)st));
        ev = next_async (&evqp, 2000);
        ok (ev == IBV_EVENT_QP_FATAL && evqp == victim,
            "%s: IBV_EVENT_QP_FATAL names the victim (event %d)", name, ev);
        /* A receive that a half-arrived message already started to fill
         * may complete with another error than a flush; never success. */
        got = vw_cq_wait (cq, &wc, 3000);
        if (!ok (got == 1 && wc.wr_id == 77
                     && (wc.status == IBV_WC_WR_FLUSH_ERR
                         || (s == S_HALF_PAYLOAD && wc.status != IBV_WC_SUCCESS)),
                 "%s: the victim's receive completes in error", name))
            diag ("completion %d: status %s wr_id %llu", got,
                  got == 1 ? ibv_wc_status_str (wc.status) : "-", (unsigned long long)wc.wr_id);
        else
            diag ("%s: the receive completed with %s", name, ibv_wc_status_str (wc.status));
        ok (vw_cq_wait (cq, &wc, 100) == 0, "%s: and only once", name);
    } else {
        usleep (200000);
        st = vw_qp_state (victim);
        ok (st == IBV_QPS_RTS, "%s: the victim QP is unharmed (%s)", name,
            st < 0 ? "?" : vw_qp_state_str ((enum ibv_qp_state)st));
        ok (next_async (&evqp, 100) < 0, "%s: no async event", name);
        ok (vw_cq_wait (cq, &wc, 100) == 0, "%s: the victim's receive stays posted", name);
    }
    st = vw_qp_state (healthy.qp[0]);
    ok (st == IBV_QPS_RTS && vw_qp_state (healthy.qp[1]) == IBV_QPS_RTS,
        "%s: the healthy pair stays in RTS", name);
    ok (healthy_roundtrip (), "%s: and still delivers a verified message", name);
    ibv_destroy_qp (victim);
    ibv_destroy_cq (cq);
}

int main (void)
{
    char err[256];
    union ibv_gid gid;

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    if (strcmp (ibv_get_device_name (dev.ctx->device), SIB_DEV_NAME) != 0) {
        printf ("1..0 # SKIP device %s is not softib\n", ibv_get_device_name (dev.ctx->device));
        return 0;
    }
    if (ibv_query_gid (dev.ctx, 1, 0, &gid) != 0)
        BAIL_OUT ("ibv_query_gid: %s", strerror (errno));
    memcpy (&host_ip, gid.raw + 12, 4); /* ::ffff:a.b.c.d, softib(7) */
    if (posix_memalign ((void **)&buf, 4096, 16384) != 0
        || !(mr = ibv_reg_mr (dev.pd, buf, 16384, IBV_ACCESS_LOCAL_WRITE)))
        BAIL_OUT ("MR: %s", strerror (errno));
    if (vw_pair_create (&healthy, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&healthy, NULL, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("healthy pair: %s", err);
    ok (healthy_roundtrip (), "the healthy pair delivers a verified message");

    run (S_GARBAGE_HDR, "garbage header after HELLO");
    run (S_BAD_LEN, "header with a 4 GiB length");
    run (S_HALF_PAYLOAD, "disconnect 10 bytes into a 40-byte SEND");
    run (S_HALF_HEADER, "disconnect in the middle of a header");
    run (S_NO_HELLO, "garbage instead of HELLO");
    run (S_BAD_MAGIC, "HELLO with a wrong magic");

    vw_pair_destroy (&healthy);
    ibv_dereg_mr (mr);
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
