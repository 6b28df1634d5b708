/* ud_ah.c - UD address handles, and answering a datagram with an AH
 * built from its completion.
 *
 * qp[0] sends to qp[1] through an AH (with a GRH, then LID only); qp[1]
 * checks the completion (src_qp, slid, IBV_WC_GRH and the GRH's source
 * GID in the first 40 bytes), builds an AH with ibv_create_ah_from_wc /
 * ibv_init_ah_from_wc and answers; qp[0] must get the answer intact.  A
 * completion flagged GRH without the GRH buffer is refused; a datagram
 * with the wrong Q_Key is dropped.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

#define QKEY 0x11111111
#define GRH 40

static struct sv_dev dev;
static struct ibv_mr *mr;
static uint8_t *buf;

static int ud_send (struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, void *data,
                    uint32_t len, uint64_t id)
{
    struct ibv_sge sge = { (uintptr_t)data, len, mr->lkey };
    struct ibv_send_wr wr, *bad;

    memset (&wr, 0, sizeof (wr));
    wr.wr_id = id;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htobe32 (0xabcd0000u | (uint32_t)id);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    return ibv_post_send (qp, &wr, &bad);
}

static void round_trip (struct sv_pair *p, int global)
{
    struct ibv_ah_attr aa;
    struct ibv_ah *ah, *back;
    struct ibv_wc wc, rwc;
    struct ibv_grh *grh = (struct ibv_grh *)(buf + 4096);
    const char *what = global ? "with a GRH" : "LID only";
    int got;

    memset (&aa, 0, sizeof (aa));
    aa.dlid = dev.lid;
    aa.port_num = 1;
    if (global) {
        aa.is_global = 1;
        aa.grh.dgid = dev.gid;
        aa.grh.hop_limit = 1;
    }
    ah = ibv_create_ah (dev.pd, &aa);
    if (!ah)
        BAIL_OUT ("ibv_create_ah: %s", strerror (errno));
    memset (buf + 4096, 0, 8192);
    sv_recv (p->qp[1], 1, buf + 4096, GRH + 256, mr->lkey);
    sv_recv (p->qp[0], 2, buf + 8192, GRH + 256, mr->lkey);
    memcpy (buf, "ping-datagram", 13);
    if (ud_send (p->qp[0], ah, p->qp[1]->qp_num, QKEY, buf, 13, 3))
        BAIL_OUT ("UD post_send");
    got = sv_wait (p->cq[1], &rwc, 3000);
    ok (got == 1 && rwc.status == IBV_WC_SUCCESS && rwc.opcode == IBV_WC_RECV
            && rwc.byte_len == GRH + 13 && rwc.src_qp == p->qp[0]->qp_num && rwc.slid == dev.lid
            && (rwc.wc_flags & IBV_WC_WITH_IMM) && be32toh (rwc.imm_data) == 0xabcd0003u
            && memcmp (buf + 4096 + GRH, "ping-datagram", 13) == 0,
        "%s: datagram, src_qp, slid and immediate arrive", what);
    if (global)
        ok ((rwc.wc_flags & IBV_WC_GRH) && memcmp (&grh->sgid, &dev.gid, sizeof (dev.gid)) == 0
                && memcmp (&grh->dgid, &dev.gid, sizeof (dev.gid)) == 0,
            "%s: IBV_WC_GRH set, the GRH names source and destination "
            "GIDs",
            what);
    else
        ok (!(rwc.wc_flags & IBV_WC_GRH), "%s: no IBV_WC_GRH", what);
    sv_wait (p->cq[0], &wc, 1000); /* the send's completion */

    memset (&aa, 0xee, sizeof (aa));
    ok (ibv_init_ah_from_wc (dev.ctx, 1, &rwc, grh, &aa) == 0 && aa.dlid == rwc.slid
            && aa.port_num == 1 && aa.is_global == (global ? 1 : 0)
            && (!global || memcmp (&aa.grh.dgid, &dev.gid, 16) == 0),
        "%s: init_ah_from_wc points back at the sender", what);
    back = ibv_create_ah_from_wc (dev.pd, &rwc, grh, 1);
    ok (back != NULL, "%s: create_ah_from_wc (%s)", what, back ? "ok" : strerror (errno));
    if (!back)
        return;
    memcpy (buf + 256, "pong-datagram", 13);
    if (ud_send (p->qp[1], back, rwc.src_qp, QKEY, buf + 256, 13, 4))
        BAIL_OUT ("UD post_send back");
    got = sv_wait (p->cq[0], &wc, 3000);
    if (got == 1 && wc.opcode == IBV_WC_SEND)
        got = sv_wait (p->cq[0], &wc, 3000);
    ok (got == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == 2
            && wc.src_qp == p->qp[1]->qp_num && memcmp (buf + 8192 + GRH, "pong-datagram", 13) == 0,
        "%s: the answer through the AH from the completion arrives", what);
    sv_none (p->cq[1], 20);
    ibv_destroy_ah (back);
    ibv_destroy_ah (ah);
}

int main (void)
{
    struct ibv_ah_attr aa;
    struct sv_pair p;
    struct ibv_wc wc;
    struct ibv_ah *ah;

    plan (NO_PLAN);
    sv_open (&dev);
    mr = sv_mr (&dev, 16384, IBV_ACCESS_LOCAL_WRITE);
    buf = mr->addr;
    sv_pair_create (&dev, &p, IBV_QPT_UD, NULL, 64);
    if (sv_pair_connect (&dev, &p, NULL, NULL))
        BAIL_OUT ("UD ready");
    round_trip (&p, 1);
    round_trip (&p, 0);

    memset (&wc, 0, sizeof (wc));
    wc.wc_flags = IBV_WC_GRH;
    wc.slid = dev.lid;
    errno = 0;
    ah = ibv_create_ah_from_wc (dev.pd, &wc, NULL, 1);
    ok (!ah,
        "create_ah_from_wc of a GRH completion without the GRH "
        "fails (%s)",
        strerror (errno));
    if (ah)
        ibv_destroy_ah (ah);

    memset (&aa, 0, sizeof (aa));
    aa.dlid = dev.lid;
    aa.port_num = 1;
    ah = ibv_create_ah (dev.pd, &aa);
    sv_recv (p.qp[1], 9, buf + 4096, GRH + 64, mr->lkey);
    ud_send (p.qp[0], ah, p.qp[1]->qp_num, QKEY + 1, buf, 8, 10);
    ok (sv_none (p.cq[1], 100) == 0,
        "a datagram with the wrong Q_Key is "
        "dropped");
    ud_send (p.qp[0], ah, p.qp[1]->qp_num, QKEY, buf, 8, 11);
    ok (sv_wait (p.cq[1], &wc, 3000) == 1 && wc.wr_id == 9 && wc.status == IBV_WC_SUCCESS,
        "the receive takes the next "
        "datagram with the right Q_Key");
    ibv_destroy_ah (ah);
    sv_pair_destroy (&p);
    sv_mr_free (mr);
    sv_close (&dev);
    done_testing ();
    return exit_status ();
}
