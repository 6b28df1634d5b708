/* vw_verbs.c - verbs set-up shared by the workload tools (vw_verbs.h).
 *
 * The attribute masks below are exactly the required ones of the IB spec's
 * QP state table (the same ones ibv_rc_pingpong uses): a device that
 * accepts fewer or demands more is wrong, and these tools must not hide it.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "vw_verbs.h"

int vw_dev_open (struct vw_dev *d, const char *name, int ib_port, int gid_index, char *err,
                 size_t errlen)
{
    struct ibv_device **list;
    struct ibv_device *dev = NULL;
    int n = 0;

    memset (d, 0, sizeof (*d));
    d->ib_port = ib_port;
    d->gid_index = gid_index;
    list = ibv_get_device_list (&n);
    if (!list || n == 0) {
        snprintf (err, errlen,
                  "no verbs device found (for softib set "
                  "LD_LIBRARY_PATH to its folder)");
        goto error;
    }
    for (int i = 0; i < n; i++)
        if (!name || strcmp (ibv_get_device_name (list[i]), name) == 0) {
            dev = list[i];
            break;
        }
    if (!dev) {
        snprintf (err, errlen, "verbs device '%s' not found (first one is '%s')", name,
                  ibv_get_device_name (list[0]));
        goto error;
    }
    if (!(d->ctx = ibv_open_device (dev))) {
        snprintf (err, errlen, "ibv_open_device(%s): %s", ibv_get_device_name (dev),
                  strerror (errno));
        goto error;
    }
    ibv_free_device_list (list);
    list = NULL;
    if (ibv_query_device (d->ctx, &d->attr) != 0) {
        snprintf (err, errlen, "ibv_query_device: %s", strerror (errno));
        goto error;
    }
    if (ibv_query_port (d->ctx, (uint8_t)ib_port, &d->port_attr) != 0) {
        snprintf (err, errlen, "ibv_query_port(%d): %s (try another -i)", ib_port,
                  strerror (errno));
        goto error;
    }
    if (d->port_attr.state != IBV_PORT_ACTIVE) {
        snprintf (err, errlen, "port %d of %s is not active (state %d)", ib_port,
                  ibv_get_device_name (d->ctx->device), d->port_attr.state);
        goto error;
    }
    if (gid_index >= 0 && ibv_query_gid (d->ctx, (uint8_t)ib_port, gid_index, &d->gid) != 0) {
        snprintf (err, errlen, "ibv_query_gid(port %d, index %d): %s", ib_port, gid_index,
                  strerror (errno));
        goto error;
    }
    if (!(d->pd = ibv_alloc_pd (d->ctx))) {
        snprintf (err, errlen, "ibv_alloc_pd: %s", strerror (errno));
        goto error;
    }
    return 0;
error:
    if (list)
        ibv_free_device_list (list);
    vw_dev_close (d);
    return -1;
}

void vw_dev_close (struct vw_dev *d)
{
    if (d->pd)
        ibv_dealloc_pd (d->pd);
    if (d->ctx)
        ibv_close_device (d->ctx);
    d->pd = NULL;
    d->ctx = NULL;
}

void vw_ep_local (const struct vw_dev *d, struct vw_ep *ep)
{
    ep->lid = d->port_attr.lid;
    ep->mtu = (uint8_t)d->port_attr.active_mtu;
    ep->use_gid = d->gid_index >= 0;
    ep->gid = d->gid;
}

void vw_ep_format (const struct vw_ep *ep, char *buf, size_t len)
{
    char gid[33];

    for (int i = 0; i < 16; i++)
        snprintf (gid + 2 * i, 3, "%02x", ep->gid.raw[i]);
    snprintf (buf, len,
              "lid=%u mtu=%u gid=%s usegid=%d qpn=%u psn=%u rkey=%u "
              "addr=%" PRIx64 " len=%" PRIu64,
              ep->lid, ep->mtu, gid, ep->use_gid, ep->qpn, ep->psn, ep->rkey, ep->addr, ep->len);
}

int vw_ep_parse (struct vw_ep *ep, const char *line)
{
    char gid[33];
    unsigned lid, mtu;

    memset (ep, 0, sizeof (*ep));
    if (sscanf (line,
                "lid=%u mtu=%u gid=%32s usegid=%d qpn=%u psn=%u rkey=%u "
                "addr=%" SCNx64 " len=%" SCNu64,
                &lid, &mtu, gid, &ep->use_gid, &ep->qpn, &ep->psn, &ep->rkey, &ep->addr, &ep->len)
            != 9
        || strlen (gid) != 32) {
        errno = EPROTO;
        return -1;
    }
    ep->lid = (uint16_t)lid;
    ep->mtu = (uint8_t)mtu;
    for (int i = 0; i < 16; i++) {
        unsigned b;
        if (sscanf (gid + 2 * i, "%2x", &b) != 1) {
            errno = EPROTO;
            return -1;
        }
        ep->gid.raw[i] = (uint8_t)b;
    }
    return 0;
}

static void fill_ah_attr (struct ibv_ah_attr *ah, const struct vw_dev *d,
                          const struct vw_ep *remote)
{
    memset (ah, 0, sizeof (*ah));
    ah->dlid = remote->lid;
    ah->port_num = (uint8_t)d->ib_port;
    if (remote->use_gid && d->gid_index >= 0) {
        ah->is_global = 1;
        ah->grh.dgid = remote->gid;
        ah->grh.sgid_index = (uint8_t)d->gid_index;
        ah->grh.hop_limit = 1;
    }
}

void vw_rc_params_default (struct vw_rc_params *p)
{
    p->rd_atomic = 1;
    p->access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    p->min_rnr_timer = 12;
    p->rnr_retry = 7;
    p->timeout = 14;
    p->retry_cnt = 7;
}

int vw_qp_rc_connect (struct ibv_qp *qp, const struct vw_dev *d, const struct vw_ep *local,
                      const struct vw_ep *remote, int rd_atomic, char *err, size_t errlen)
{
    struct vw_rc_params p;

    vw_rc_params_default (&p);
    p.rd_atomic = rd_atomic;
    return vw_qp_rc_connect_ex (qp, d, local, remote, &p, err, errlen);
}

int vw_qp_rc_connect_ex (struct ibv_qp *qp, const struct vw_dev *d, const struct vw_ep *local,
                         const struct vw_ep *remote, const struct vw_rc_params *p, char *err,
                         size_t errlen)
{
    struct ibv_qp_attr a;
    int rc;

    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)d->ib_port;
    a.qp_access_flags = (unsigned)p->access;
    rc = ibv_modify_qp (qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) {
        snprintf (err, errlen, "qp %u RESET->INIT: %s", qp->qp_num, strerror (rc));
        return -1;
    }
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu) (local->mtu < remote->mtu ? local->mtu : remote->mtu);
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = (uint8_t)p->rd_atomic;
    a.min_rnr_timer = p->min_rnr_timer;
    fill_ah_attr (&a.ah_attr, d, remote);
    rc = ibv_modify_qp (qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
                            | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc) {
        snprintf (err, errlen, "qp %u INIT->RTR (to lid %u qpn %u): %s", qp->qp_num, remote->lid,
                  remote->qpn, strerror (rc));
        return -1;
    }
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = local->psn;
    a.timeout = p->timeout;
    a.retry_cnt = p->retry_cnt;
    a.rnr_retry = p->rnr_retry;
    a.max_rd_atomic = (uint8_t)p->rd_atomic;
    rc = ibv_modify_qp (qp, &a,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT
                            | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc) {
        snprintf (err, errlen, "qp %u RTR->RTS: %s", qp->qp_num, strerror (rc));
        return -1;
    }
    return 0;
}

int vw_qp_ud_ready (struct ibv_qp *qp, const struct vw_dev *d, uint32_t psn, char *err,
                    size_t errlen)
{
    struct ibv_qp_attr a;
    int rc;

    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)d->ib_port;
    a.qkey = VW_QKEY;
    rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc) {
        snprintf (err, errlen, "UD qp %u RESET->INIT: %s", qp->qp_num, strerror (rc));
        return -1;
    }
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTR;
    rc = ibv_modify_qp (qp, &a, IBV_QP_STATE);
    if (rc) {
        snprintf (err, errlen, "UD qp %u INIT->RTR: %s", qp->qp_num, strerror (rc));
        return -1;
    }
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn;
    rc = ibv_modify_qp (qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    if (rc) {
        snprintf (err, errlen, "UD qp %u RTR->RTS: %s", qp->qp_num, strerror (rc));
        return -1;
    }
    return 0;
}

struct ibv_ah *vw_ah_create (const struct vw_dev *d, const struct vw_ep *remote, char *err,
                             size_t errlen)
{
    struct ibv_ah_attr a;
    struct ibv_ah *ah;

    fill_ah_attr (&a, d, remote);
    if (!(ah = ibv_create_ah (d->pd, &a)))
        snprintf (err, errlen, "ibv_create_ah(lid %u): %s", remote->lid, strerror (errno));
    return ah;
}

const char *vw_qp_state_str (enum ibv_qp_state s)
{
    switch (s) {
    case IBV_QPS_RESET:
        return "RESET";
    case IBV_QPS_INIT:
        return "INIT";
    case IBV_QPS_RTR:
        return "RTR";
    case IBV_QPS_RTS:
        return "RTS";
    case IBV_QPS_SQD:
        return "SQD";
    case IBV_QPS_SQE:
        return "SQE";
    case IBV_QPS_ERR:
        return "ERR";
    default:
        return "?";
    }
}

int vw_qp_state (struct ibv_qp *qp)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;

    if (ibv_query_qp (qp, &a, IBV_QP_STATE, &ia) != 0)
        return -1;
    return (int)a.qp_state;
}

int vw_waiter_idle (struct vw_waiter *w, char *err, size_t errlen)
{
    struct ibv_cq *cq;
    void *cq_ctx;

    if (w->mode == VW_WAIT_BUSY) {
        /* Yield: on a 2-core box the device's own threads need the CPU. */
        sched_yield ();
        return 0;
    }
    /* Arm every CQ, then let the caller poll once more: a completion that
     * slipped in before arming is found by that poll, any later one fires
     * the channel.  Only when that poll also finds nothing do we sleep. */
    if (w->armed == 0) {
        for (int i = 0; i < w->ncq; i++) {
            int rc = ibv_req_notify_cq (w->cqs[i], 0);
            if (rc) {
                snprintf (err, errlen, "ibv_req_notify_cq: %s", strerror (rc));
                return -1;
            }
        }
        w->armed = 1;
        return 0;
    }
    if (w->mode == VW_WAIT_POLL) {
        struct pollfd pfd = { .fd = w->ch->fd, .events = POLLIN };
        int rc;
        while ((rc = poll (&pfd, 1, 1000)) == 0)
            ;
        if (rc < 0 && errno != EINTR) {
            snprintf (err, errlen, "poll(completion channel fd %d): %s", w->ch->fd,
                      strerror (errno));
            return -1;
        }
        if (rc < 0)
            return 0;
    }
    if (ibv_get_cq_event (w->ch, &cq, &cq_ctx) != 0) {
        snprintf (err, errlen, "ibv_get_cq_event: %s", strerror (errno));
        return -1;
    }
    ibv_ack_cq_events (cq, 1);
    w->events++;
    w->armed = 0;
    return 0;
}
