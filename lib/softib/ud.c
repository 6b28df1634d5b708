/*
 * ud.c - unreliable datagrams.
 *
 * A UD send is copied, header and payload, into the byte queue of a
 * connection to the destination endpoint (one per peer endpoint, shared
 * by all UD QPs of this context) and completes at once, as a datagram
 * completes when it leaves the port.  On arrival the datagram goes to the
 * destination QP's next receive, after 40 bytes of GRH room (filled when
 * the sender used a GRH); with no receive posted, a wrong Q_Key or no
 * such QP it is dropped, as on a fabric.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <arpa/inet.h>

#include "softib.h"

#define SIB_UD_QUEUE_MAX (64u << 20) /* beyond this the "wire" drops */

static struct sib_conn *ud_conn_get (struct sib_ctx *ctx, uint32_t ip, uint16_t port)
{
    struct sib_conn *c;

    /* returns with c->lock held; ctx->lock orders against freeing */
    pthread_mutex_lock (&ctx->lock);
    for (c = ctx->conns; c; c = c->next)
        if (c->kind == SIB_CONN_UD_TX && !c->dead && c->peer_ip == ip && c->peer_port == port)
            break;
    if (c) {
        pthread_mutex_lock (&c->lock);
        pthread_mutex_unlock (&ctx->lock);
        return c;
    }
    pthread_mutex_unlock (&ctx->lock);
    c = sib_conn_new (ctx, -1, SIB_CONN_UD_TX);
    if (!c)
        return NULL;
    pthread_mutex_lock (&c->lock);
    {
        struct sib_hdr h;
        struct sib_hello hello;

        memset (&h, 0, sizeof (h));
        memset (&hello, 0, sizeof (hello));
        h.op = SIB_OP_HELLO;
        h.len = sizeof (hello);
        sib_hdr_to_wire (&h);
        hello.magic = htole32 (SIB_MAGIC);
        hello.version = htole16 (SIB_VERSION);
        hello.kind = htole16 (SIB_HELLO_UD);
        hello.src_ip = ctx->addr.ip;
        if (sib_conn_queue (c, &h, sizeof (h), &hello, sizeof (hello)) < 0
            || sib_conn_connect (c, ip, port) < 0) {
            sib_conn_kill (c, "cannot connect");
            pthread_mutex_unlock (&c->lock);
            return NULL;
        }
    }
    return c;
}

int sib_ud_send (struct sib_qp *qp, struct sib_swqe *w)
{
    struct sib_conn *c;
    struct sib_hdr h;
    uint8_t *dst;
    uint32_t i;

    if (qp->state != IBV_QPS_RTS)
        return -1;
    c = ud_conn_get (qp->ctx, w->ud_ip, w->ud_port);
    if (!c)
        return 0; /* unreachable: the datagram is lost */
    if (c->olen - c->ooff > SIB_UD_QUEUE_MAX) {
        pthread_mutex_unlock (&c->lock);
        return 0; /* congested: dropped like on a fabric */
    }
    memset (&h, 0, sizeof (h));
    h.op = SIB_OP_UD_SEND;
    h.flags = (w->cmp ? SIB_F_IMM : 0) | (w->ud_grh ? SIB_F_GRH : 0)
        | (w->solicited ? SIB_F_SOLICITED : 0);
    h.lid = qp->ctx->addr.lid;
    h.len = w->len;
    h.imm = w->imm;
    h.rkey = w->rqpn;
    h.rlen = qp->qpx.qp_base.qp_num;
    h.cmp = w->qkey;
    sib_hdr_to_wire (&h);
    if (sib_conn_queue (c, &h, sizeof (h), NULL, 0) < 0)
        goto out;
    if (w->nsge == 0) {
        if (sib_conn_queue (c, w->inl, w->len, NULL, 0) < 0)
            goto out;
    } else {
        if (sib_conn_queue (c, "", 0, NULL, 0) < 0)
            goto out;
        for (i = 0; i < w->nsge; i++) {
            dst = (uint8_t *)(uintptr_t)w->sge[i].addr;
            if (w->sge[i].length && sib_conn_queue (c, dst, w->sge[i].length, NULL, 0) < 0)
                goto out;
        }
    }
    if (!c->connecting && sib_conn_flush (c) < 0)
        sib_conn_kill (c, "write failed");
out:
    pthread_mutex_unlock (&c->lock);
    return 0;
}

void sib_ud_rx_header (struct sib_conn *c)
{
    struct sib_hdr *h = &c->rh;
    struct sib_qp *qp;

    c->rdiscard = h->len; /* default: drop */
    c->rstatus = IBV_WC_GENERAL_ERR;
    if (h->op != SIB_OP_UD_SEND || h->len > SIB_MTU_BYTES) {
        sib_conn_garbage (c, "not a UD datagram");
        return;
    }
    qp = sib_qp_lookup (c->ctx, h->rkey);
    c->qp = NULL;
    if (!qp || qp->qpx.qp_base.qp_type != IBV_QPT_UD)
        return;
    sib_lock (&qp->lock);
    if ((qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS) || (uint32_t)h->cmp != qp->attr.qkey
        || !sib_take_recv (qp, &c->rwqe)) {
        sib_unlock (&qp->lock);
        return;
    }
    c->have_rwqe = true;
    c->qp = qp;
    c->rstatus = IBV_WC_SUCCESS;
    if (sib_sink_rwqe (c, qp, SIB_GRH_BYTES, h->len)) {
        c->rdiscard = 0;
        c->rleft = h->len;
    }
    sib_unlock (&qp->lock);
}

static void fill_grh (struct sib_conn *c, struct sib_qp *qp)
{
    struct ibv_grh g;
    uint8_t *src = (uint8_t *)&g;
    size_t left = sizeof (g);

    memset (&g, 0, sizeof (g));
    g.version_tclass_flow = htobe32 (6u << 28);
    g.paylen = htobe16 ((uint16_t)c->rh.len);
    g.next_hdr = 0x1b;
    g.hop_limit = 0xff;
    sib_ip_to_gid (c->peer_ip, &g.sgid);
    g.dgid = qp->ctx->addr.gid;
    for (uint32_t i = 0; i < c->rwqe.nsge && left; i++) {
        struct ibv_sge *s = &c->rwqe.sge[i];
        enum ibv_wc_status st;
        size_t k = s->length < left ? s->length : left;
        uint8_t *p = sib_mr_check (qp, s->lkey, s->addr, k, IBV_ACCESS_LOCAL_WRITE,
                                   IBV_WC_LOC_PROT_ERR, &st);

        if (!p)
            return;
        memcpy (p, src, k);
        src += k;
        left -= k;
    }
}

void sib_ud_rx_done (struct sib_conn *c)
{
    struct sib_qp *qp = c->qp;
    struct ibv_wc wc;

    c->qp = NULL;
    if (!qp || !c->have_rwqe)
        return;
    sib_lock (&qp->lock);
    memset (&wc, 0, sizeof (wc));
    wc.wr_id = c->rwqe.wr_id;
    wc.status = c->rstatus;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = c->rh.len + SIB_GRH_BYTES;
    wc.qp_num = qp->qpx.qp_base.qp_num;
    wc.src_qp = c->rh.rlen;
    wc.slid = c->rh.lid;
    if (c->rh.flags & SIB_F_IMM) {
        wc.wc_flags |= IBV_WC_WITH_IMM;
        wc.imm_data = c->rh.imm;
    }
    if (c->rstatus == IBV_WC_SUCCESS && (c->rh.flags & SIB_F_GRH)) {
        fill_grh (c, qp);
        wc.wc_flags |= IBV_WC_GRH;
    }
    if (qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS)
        sib_cq_push (qp->rcq, &wc, (c->rh.flags & SIB_F_SOLICITED) != 0);
    sib_unlock (&qp->lock);
}
