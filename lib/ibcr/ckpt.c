/* ckpt.c - quiesce, drain, release, rebuild, connect, resume: one
 * process's part of a checkpoint generation (see ckpt.h, ckpt_proto.h).
 *
 * Invariants named here and kept nowhere else:
 *   - delivered == acknowledged before release (the coordinator runs drain
 *     rounds until drain_done() holds), so what is still in a send log was
 *     never delivered and reposting it cannot duplicate it;
 *   - receives are reposted at connect, sends at resume, which the
 *     coordinator sends once every process of the job is connected: a
 *     reposted send finds its peer's QP ready and its receives posted;
 *   - after release no real object, device fd or backend mapping is left.
 */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ibcr.h"
#include "complete.h"
#include "backend.h"
#include "ckpt.h"
#include "gate.h"
#include "pump.h"
#include "xlate.h"

static unsigned int cycles;
/* Rebuilt since the last resume: the next resume ends a cycle. */
static bool rebuilt;
/* Connected: the next resume reposts the logged sends. */
static bool sends_owed;
static unsigned int psn_seed;
/* Between a release and a successful connect the application's objects
 * have no real counterpart: it must not run. */
static bool released;

#define CTX_FOREACH(vctx)                                                                          \
    for (struct ibcr_link *_l = ibcr_ctxs.next; _l != &ibcr_ctxs; _l = _l->next)                   \
        for (struct ibcr_ctx *vctx = ibcr_container (_l, struct ibcr_ctx, link); vctx; vctx = NULL)
#define OBJ_FOREACH(type, v, head)                                                                 \
    for (struct ibcr_link *_o = (head)->next; _o != (head); _o = _o->next)                         \
        for (type *v = ibcr_container (_o, type, link); v; v = NULL)
#define OBJ_FOREACH_REV(type, v, head)                                                             \
    for (struct ibcr_link *_o = (head)->prev; _o != (head); _o = _o->prev)                         \
        for (type *v = ibcr_container (_o, type, link); v; v = NULL)

int ckpt_quiesce (void)
{
    gate_close ();
    return 0;
}

static int jadd (json_object *o, const char *k, int64_t v)
{
    return json_object_object_add (o, k, json_object_new_int64 (v));
}

static json_object *ud_list (struct ibcr_map *m)
{
    json_object *a = json_object_new_array ();
    for (long i = map_next (m, 0); i >= 0; i = map_next (m, i + 1)) {
        json_object *e = json_object_new_object ();
        jadd (e, "lid", m->slot[i].key >> 32);
        jadd (e, "qpn", (uint32_t)m->slot[i].key);
        jadd (e, "n", (int64_t)(uintptr_t)m->slot[i].val);
        json_object_array_add (a, e);
    }
    return a;
}

int ckpt_drain (json_object *report)
{
    json_object *qps = json_object_new_array ();
    pthread_mutex_lock (&ibcr_lock);
    CTX_FOREACH (vctx)
    {
        OBJ_FOREACH (struct ibcr_cq, vcq, &vctx->cqs)
        if (vcq->real && ibcr_cq_drain (vcq) < 0)
            ibcr_log ("drain: polling a CQ failed");
        OBJ_FOREACH (struct ibcr_qp, vqp, &vctx->qps)
        {
            json_object *q = json_object_new_object ();
            enum ibv_qp_type t = vqp->qpx.qp_base.qp_type;
            struct wrlog_send *head = wrlog_sq_at (&vqp->sq, 0);
            jadd (q, "vlid", vctx->port[vqp->port <= IBCR_MAX_PORTS ? vqp->port : 1].vlid);
            jadd (q, "vqpn", vqp->vqpn);
            jadd (q, "rqpn", vqp->rqpn);
            json_object_object_add (q, "type",
                                    json_object_new_string (t == IBV_QPT_UD       ? "ud"
                                                                : t == IBV_QPT_UC ? "uc"
                                                                                  : "rc"));
            jadd (q, "has_peer", vqp->has_peer);
            jadd (q, "reset", vqp->was_reset);
            jadd (q, "err", vqp->qpx.qp_base.state == IBV_QPS_ERR || vqp->sq_err || vqp->rq_err);
            jadd (q, "peer_vlid", vqp->peer_vlid);
            jadd (q, "peer_vqpn", vqp->peer_vqpn);
            jadd (q, "sq_posted", vqp->sq.posted);
            jadd (q, "sq_done", wrlog_sq_done (&vqp->sq));
            jadd (q, "rmsg_posted", vqp->sq.rmsg_posted);
            /* messages acknowledged: those that failed were not */
            jadd (q, "rmsg_done", wrlog_sq_rmsg_done (&vqp->sq) - vqp->rmsg_failed);
            jadd (q, "recv_done", vqp->recv_done);
            /* gone entries are not receives the peer may still use
             * (the gate is closed: a drain follows a quiesce) */
            if (!vqp->vsrq && atomic_load (&gate_closed))
                wrlog_rq_compact (&vqp->rq);
            jadd (q, "rq_avail",
                  vqp->vsrq ? wrlog_rq_len (&vqp->vsrq->rq) : wrlog_rq_len (&vqp->rq));
            jadd (q, "head_needs_recv", head && head->needs_recv);
            if (t == IBV_QPT_UD) {
                json_object_object_add (q, "ud_sent", ud_list (&vqp->ud_sent));
                json_object_object_add (q, "ud_recv", ud_list (&vqp->ud_recv));
            }
            json_object_array_add (qps, q);
        }
    }
    pthread_mutex_unlock (&ibcr_lock);
    json_object_object_add (report, "qps", qps);
    jadd (report, "rank", ibcr_rank);
    return 0;
}

static void release_ctx (struct ibcr_ctx *vctx)
{
    /* Events of objects being destroyed are not the application's. */
    pump_del_ctx (vctx);
    /* Reverse dependency order: nothing is destroyed while in use. */
    OBJ_FOREACH_REV (struct ibcr_qp, v, &vctx->qps)
    ibcr_ah_cache_clear (v);
    OBJ_FOREACH_REV (struct ibcr_ah, v, &vctx->ahs)
    {
        if (v->real && ibcr_be.destroy_ah (v->real))
            ibcr_log ("release: destroying an AH failed");
        v->real = NULL;
    }
    OBJ_FOREACH_REV (struct ibcr_qp, v, &vctx->qps)
    {
        if (v->real && ibcr_be.destroy_qp (v->real))
            ibcr_log ("release: destroying QP %u failed", v->vqpn);
        v->real = NULL;
        v->rx_src = RX_NO_SRC;
        /* Every datagram counted was received, dropped for want of a
         * receive, or taken as lost by the drain (drain.h), and none is
         * on its way now: the next drain compares only what comes after
         * this one. */
        map_clear (&v->ud_sent);
        map_clear (&v->ud_recv);
        /* Likewise for RC and UC: the drain held (what was acknowledged
         * was received), so both ends count again from 0; what is left
         * in the send log was never delivered and counts as posted. */
        wrlog_sq_recount (&v->sq);
        v->recv_done = 0;
        v->rmsg_failed = 0;
        v->sq_err = v->rq_err = false;
    }
    idtab_clear (&vctx->qp_by_rqpn);
    OBJ_FOREACH_REV (struct ibcr_srq, v, &vctx->srqs)
    {
        if (v->real && ibcr_be.destroy_srq (v->real))
            ibcr_log ("release: destroying an SRQ failed");
        v->real = NULL;
    }
    OBJ_FOREACH_REV (struct ibcr_cq, v, &vctx->cqs)
    {
        if (v->real && ibcr_be.destroy_cq (v->real))
            ibcr_log ("release: destroying a CQ failed");
        v->real = NULL;
        cq_hint_clear (v);
    }
    OBJ_FOREACH_REV (struct ibcr_chan, v, &vctx->chans)
    {
        pump_del (v);
        if (v->real && ibcr_be.destroy_comp_channel (v->real))
            ibcr_log ("release: destroying a completion channel failed");
        v->real = NULL;
    }
    ibcr_mr_gen_bump ();
    OBJ_FOREACH_REV (struct ibcr_mr, v, &vctx->mrs)
    {
        if (v->real && ibcr_be.dereg_mr (v->real))
            ibcr_log ("release: deregistering an MR failed");
        v->real = NULL;
    }
    OBJ_FOREACH_REV (struct ibcr_pd, v, &vctx->pds)
    {
        if (v->real && ibcr_be.dealloc_pd (v->real))
            ibcr_log ("release: deallocating a PD failed");
        v->real = NULL;
    }
    if (vctx->real && ibcr_be.close_device (vctx->real))
        ibcr_log ("release: closing the device failed");
    vctx->real = NULL;
}

int ckpt_release (void)
{
    pthread_mutex_lock (&ibcr_lock);
    CTX_FOREACH (vctx)
    release_ctx (vctx);
    backend_unload ();
    released = true;
    pthread_mutex_unlock (&ibcr_lock);
    return 0;
}

bool ckpt_is_released (void)
{
    return released;
}

static void gid_hex (const union ibv_gid *g, char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf (out + 2 * i, 3, "%02x", g->raw[i]);
}

/* Every port's virtual LID and GIDs (virtual and current real), for the
 * peers' tables: a peer whose QP reaches one of ours created after this
 * rebuild knows only the LID, and finds our MRs among those of the
 * processes behind it (xlate_rkey_peer). */
static void publish_port_ids (struct ibcr_ctx *vctx, json_object *lids, json_object *gids)
{
    static const union ibv_gid zero;
    char v[33], r[33];
    for (int port = 1; port <= IBCR_MAX_PORTS && port <= vctx->nports; port++) {
        struct ibcr_port *p = &vctx->port[port];
        if (p->known)
            json_object_array_add (lids, json_object_new_int (p->vlid));
        for (int i = 0; p->known && i < p->ngid; i++) {
            if (memcmp (&p->vgid[i], &zero, sizeof (zero)) == 0)
                continue;
            json_object *g = json_object_new_object ();
            gid_hex (&p->vgid[i], v);
            gid_hex (&p->rgid[i], r);
            json_object_object_add (g, "vgid", json_object_new_string (v));
            json_object_object_add (g, "rgid", json_object_new_string (r));
            json_object_array_add (gids, g);
        }
    }
}

static int rebuild_ctx (struct ibcr_ctx *vctx, json_object *qps, json_object *mrs,
                        json_object *lids, json_object *gids)
{
    if (ibcr_ctx_open_real (vctx) < 0 || pump_add_ctx (vctx) < 0)
        return -1;
    publish_port_ids (vctx, lids, gids);
    OBJ_FOREACH (struct ibcr_chan, v, &vctx->chans)
    if (ibcr_chan_open_real (v) < 0)
        return -1;
    OBJ_FOREACH (struct ibcr_pd, v, &vctx->pds)
    {
        v->real = ibcr_be.alloc_pd (vctx->real);
        if (!v->real)
            return -1 * (be_errno () != 0);
    }
    OBJ_FOREACH (struct ibcr_mr, v, &vctx->mrs)
    {
        if (ibcr_mr_open_real (v) < 0)
            return -1;
        json_object *m = json_object_new_object ();
        jadd (m, "vrkey", v->mr.rkey);
        jadd (m, "rrkey", v->real->rkey);
        json_object_array_add (mrs, m);
    }
    /* New real lkeys: every QP's lkey cache goes stale (post.c). */
    ibcr_mr_gen_bump ();
    OBJ_FOREACH (struct ibcr_cq, v, &vctx->cqs)
    {
        if (ibcr_cq_open_real (v) < 0)
            return -1;
        /* Armed now, before any QP exists: a peer that resumes first
         * sends at once, and a completion that
         * lands in a CQ armed only later raises no event, leaving a
         * thread in ibv_get_cq_event waiting for good. */
        if (!v->vchan)
            continue;
        pthread_mutex_lock (&v->vchan->lock);
        bool armed = v->armed;
        pthread_mutex_unlock (&v->vchan->lock);
        if (armed && ibv_req_notify_cq (v->real, v->solicited_only)) {
            ibcr_log ("rebuild: arming a CQ for its completion channel failed");
            return -1;
        }
    }
    OBJ_FOREACH (struct ibcr_srq, v, &vctx->srqs)
    if (ibcr_srq_open_real (v) < 0)
        return -1;
    OBJ_FOREACH (struct ibcr_qp, v, &vctx->qps)
    {
        if (ibcr_qp_open_real (v) < 0)
            return -1;
        /* PSNs are chosen afresh and exchanged, never assumed. */
        v->psn = rand_r (&psn_seed) & 0xffffff;
        v->psn_published = true;
        struct ibcr_port *p = &vctx->port[v->port <= IBCR_MAX_PORTS ? v->port : 1];
        json_object *q = json_object_new_object ();
        jadd (q, "vlid", p->vlid);
        jadd (q, "vqpn", v->vqpn);
        jadd (q, "rlid", p->rlid);
        jadd (q, "rqpn", v->rqpn);
        jadd (q, "psn", v->psn);
        json_object_array_add (qps, q);
    }
    return 0;
}

int ckpt_rebuild (const char *backend, json_object *ids)
{
    int rc = 0;
    if (!psn_seed)
        psn_seed = (unsigned int)time (NULL) ^ (unsigned int)getpid ();
    json_object *qps = json_object_new_array (), *mrs = json_object_new_array ();
    json_object *lids = json_object_new_array (), *gids = json_object_new_array ();
    pthread_mutex_lock (&ibcr_lock);
    /* A rebuild again, after this process connected (a generation
     * aborted on another node after that) or after a rebuild that failed
     * part way: the real objects made then go first, not leaked and not
     * left connected.  This process sent nothing on them: its sends are
     * reposted at resume. */
    bool stale = false;
    CTX_FOREACH (vctx)
    stale |= vctx->real != NULL;
    if (stale) {
        CTX_FOREACH (vctx)
        release_ctx (vctx);
        backend_unload ();
        released = true;
        sends_owed = false;
    }
    if (backend_load (backend) < 0) {
        rc = -1;
        goto out;
    }
    CTX_FOREACH (vctx)
    {
        if (rebuild_ctx (vctx, qps, mrs, lids, gids) < 0) {
            ibcr_log ("rebuild on backend %s failed: %m", ibcr_be.path);
            rc = -1;
            goto out;
        }
    }
out:
    pthread_mutex_unlock (&ibcr_lock);
    jadd (ids, "rank", ibcr_rank);
    json_object_object_add (ids, "qps", qps);
    json_object_object_add (ids, "mrs", mrs);
    json_object_object_add (ids, "lids", lids);
    json_object_object_add (ids, "gids", gids);
    return rc;
}

int ckpt_connect (json_object *procs)
{
    int rc = 0;
    pthread_mutex_lock (&ibcr_lock);
    if (xlate_load (procs) < 0) {
        rc = -1;
        goto out;
    }
    ibcr_xlate = 1;
    CTX_FOREACH (vctx)
    {
        OBJ_FOREACH (struct ibcr_qp, v, &vctx->qps)
        if (ibcr_qp_connect_real (v) < 0)
            rc = -1;
        OBJ_FOREACH (struct ibcr_ah, v, &vctx->ahs)
        if (ibcr_ah_open_real (v) < 0)
            rc = -1;
    }
    if (rc)
        goto out;
    /* Receives now; the sends that were never delivered at resume, once
     * every peer has its QPs connected and its receives posted (the
     * coordinator sends resume once every process answered connect): a
     * send reposted to a peer QP not ready yet would be dropped and
     * retried until it failed. */
    CTX_FOREACH (vctx)
    {
        OBJ_FOREACH (struct ibcr_srq, v, &vctx->srqs)
        {
            for (size_t i = 0; i < wrlog_rq_len (&v->rq); i++)
                if (ibcr_post_real_recv (NULL, v, wrlog_rq_at (&v->rq, i)))
                    rc = -1;
            if (v->limit_set && ibcr_be.modify_srq (v->real, &v->limit, IBV_SRQ_LIMIT))
                ibcr_log ("rebuild: re-arming an SRQ limit failed");
        }
        OBJ_FOREACH (struct ibcr_qp, v, &vctx->qps)
        if (!v->vsrq) {
            wrlog_rq_compact (&v->rq);
            for (size_t i = 0; i < wrlog_rq_len (&v->rq); i++)
                if (ibcr_post_real_recv (v, NULL, wrlog_rq_at (&v->rq, i)))
                    rc = -1;
        }
    }
    if (rc)
        ibcr_log ("rebuild: reposting logged receives failed");
    else {
        released = false;
        rebuilt = true;
        sends_owed = true;
    }
out:
    pthread_mutex_unlock (&ibcr_lock);
    return rc;
}

/* Repost the sends still in the logs (ibcr_lock held). */
static int repost_sends (void)
{
    int rc = 0;
    CTX_FOREACH (vctx)
    {
        OBJ_FOREACH (struct ibcr_qp, v, &vctx->qps)
        {
            for (size_t i = 0; i < wrlog_sq_len (&v->sq); i++)
                if (ibcr_post_real_send (v, wrlog_sq_at (&v->sq, i)))
                    rc = -1;
            ibcr_debug ("rebuild: QP %u is real QP %u now; reposted %zu receives, "
                        "%zu sends",
                        v->vqpn, v->rqpn, v->vsrq ? (size_t)0 : wrlog_rq_len (&v->rq),
                        wrlog_sq_len (&v->sq));
        }
    }
    return rc;
}

int ckpt_resume (void)
{
    pthread_mutex_lock (&ibcr_lock);
    /* Armed CQs were armed again at the rebuild (rebuild_ctx).  A cycle
     * is counted once rebuilt: a resume right after a quiesce (an abort,
     * or a quiesce refused in MPI_Init) is none. */
    if (rebuilt && backend_loaded ())
        cycles++;
    rebuilt = false;
    int rc = 0;
    if (sends_owed) {
        sends_owed = false;
        rc = repost_sends ();
        if (rc)
            ibcr_log ("resume: reposting logged sends failed: their messages are lost");
    }
    pthread_mutex_unlock (&ibcr_lock);
    gate_open ();
    return rc;
}

int ckpt_stat (json_object *out)
{
    json_object *qps = json_object_new_array (), *mrs = json_object_new_array ();
    pthread_mutex_lock (&ibcr_lock);
    CTX_FOREACH (vctx)
    {
        OBJ_FOREACH (struct ibcr_qp, v, &vctx->qps)
        {
            json_object *q = json_object_new_object ();
            jadd (q, "vqpn", v->vqpn);
            jadd (q, "rqpn", v->rqpn);
            json_object_array_add (qps, q);
        }
        OBJ_FOREACH (struct ibcr_mr, v, &vctx->mrs)
        {
            json_object *m = json_object_new_object ();
            jadd (m, "vrkey", v->mr.rkey);
            jadd (m, "rrkey", v->real ? v->real->rkey : 0);
            json_object_array_add (mrs, m);
        }
    }
    json_object_object_add (out, "backend", json_object_new_string (ibcr_be.path));
    pthread_mutex_unlock (&ibcr_lock);
    jadd (out, "rank", ibcr_rank);
    jadd (out, "cycles", cycles);
    json_object_object_add (out, "qps", qps);
    json_object_object_add (out, "mrs", mrs);
    return 0;
}

int ckpt_count_maps (const char *needle)
{
    char line[4096];
    int n = 0;
    FILE *f = fopen ("/proc/self/maps", "re");
    if (!f)
        return -1;
    while (fgets (line, sizeof (line), f))
        if (strstr (line, needle))
            n++;
    fclose (f);
    return n;
}

long ckpt_rss_kb (void)
{
    long pages = -1, rss = -1;
    FILE *f = fopen ("/proc/self/statm", "re");
    if (!f)
        return -1;
    if (fscanf (f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose (f);
    return rss < 0 ? -1 : rss * (sysconf (_SC_PAGESIZE) / 1024);
}

int ckpt_count_fds (void)
{
    int n = 0;
    DIR *d = opendir ("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir (d))
        n++;
    closedir (d);
    return n - 3; /* ".", ".." and the DIR's own fd */
}
