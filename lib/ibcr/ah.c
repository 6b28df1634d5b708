/* ah.c - address handles, virtualized.
 *
 * An AH keeps its virtual destination.  Before the first rebuild its real
 * AH is used as is; after it, every UD send looks up the destination QP's
 * current real LID and QPN and uses a real AH from the context's cache
 * (post.c), because two QPs behind one old LID may now live on different
 * hosts.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "ibcr.h"
#include "backend.h"
#include "gate.h"
#include "xlate.h"
#include "exports.h"

int ibcr_ah_open_real (struct ibcr_ah *vah)
{
    struct ibv_ah_attr a = vah->attr;
    uint16_t rlid;
    if (ibcr_xlate && xlate_lid (a.dlid, &rlid))
        a.dlid = rlid;
    if (ibcr_xlate && a.is_global)
        xlate_gid (&a.grh.dgid, &a.grh.dgid);
    vah->real = ibcr_be.create_ah (vah->vpd->real, &a);
    if (!vah->real) {
        be_errno ();
        return -1;
    }
    return 0;
}

struct ibv_ah *ibcr_create_ah (struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    struct ibcr_pd *vpd = vpd_of (pd);
    struct ibcr_ah *vah = calloc (1, sizeof (*vah));
    if (!vah) {
        errno = ENOMEM;
        return NULL;
    }
    vah->vpd = vpd;
    vah->attr = *attr;
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    if (ibcr_ah_open_real (vah) < 0) {
        int saved = errno;
        pthread_mutex_unlock (&ibcr_lock);
        gate_leave ();
        free (vah);
        errno = saved;
        return NULL;
    }
    vah->ah.context = pd->context;
    vah->ah.pd = pd;
    vah->ah.handle = vah->real->handle;
    ibcr_list_add (&vpd->ctx->ahs, &vah->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return &vah->ah;
}

int ibcr_destroy_ah (struct ibv_ah *ah)
{
    struct ibcr_ah *vah = vah_of (ah);
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    int rc = ibcr_be.destroy_ah (vah->real);
    if (rc == 0)
        ibcr_list_del (&vah->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    if (rc == 0)
        free (vah);
    return rc;
}

/* The attributes to answer a UD completion with: the same as rdma-core's
 * ibv_init_ah_from_wc for a LID-routed fabric (what softib is); GRH-routed
 * replies are built from the GRH in the receive buffer. */
int ibcr_init_ah_from_wc (struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
                          struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
    memset (ah, 0, sizeof (*ah));
    ah->dlid = wc->slid;
    ah->sl = wc->sl;
    ah->src_path_bits = wc->dlid_path_bits;
    ah->port_num = port;
    if ((wc->wc_flags & IBV_WC_GRH) && grh) {
        ah->is_global = 1;
        ah->grh.dgid = grh->sgid;
        ah->grh.flow_label = be32toh (grh->version_tclass_flow) & 0xFFFFF;
        ah->grh.hop_limit = 0xFF;
        ah->grh.traffic_class = (be32toh (grh->version_tclass_flow) >> 20) & 0xFF;
    }
    return 0;
}

struct ibv_ah *ibcr_create_ah_from_wc (struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
                                       uint8_t port)
{
    struct ibv_ah_attr a;
    if (ibcr_init_ah_from_wc (pd->context, port, wc, grh, &a))
        return NULL;
    return ibcr_create_ah (pd, &a);
}

/* A real AH for a real destination LID (UD sends after a rebuild), cached
 * per QP: the caller holds the QP's send lock, as every poster and the
 * rebuild's replay (gate closed) do, so no lock is shared between threads
 * that send on different QPs.  The cache holds real AHs of the current
 * backend: emptied at release (ckpt.c) and when the QP is destroyed. */
struct ibv_ah *ibcr_ah_real_for (struct ibcr_qp *vqp, struct ibcr_ah *vah, uint16_t rlid, int rank)
{
    uint64_t key = ((uint64_t)(uintptr_t)vah->vpd << 16) ^ rlid;
    key = (key << 9) | ((uint64_t)vah->attr.is_global << 8) | vah->attr.sl;
    struct ibv_ah *r = map_get (&vqp->ah_cache, key);
    if (r)
        return r;
    struct ibv_ah_attr a = vah->attr;
    /* A real LID names one real port, hence its GIDs: the key holds. */
    a.dlid = rlid;
    if (a.is_global)
        xlate_gid_of (rank, &a.grh.dgid, &a.grh.dgid);
    r = ibcr_be.create_ah (vah->vpd->real, &a);
    if (!r) {
        be_errno ();
        return NULL;
    }
    if (map_put (&vqp->ah_cache, key, r) < 0) {
        ibcr_be.destroy_ah (r);
        errno = ENOMEM;
        return NULL;
    }
    return r;
}

/* Destroys the real AHs a QP cached (its real objects are going away). */
void ibcr_ah_cache_clear (struct ibcr_qp *vqp)
{
    for (long i = map_next (&vqp->ah_cache, 0); i >= 0; i = map_next (&vqp->ah_cache, i + 1))
        if (ibcr_be.destroy_ah (vqp->ah_cache.slot[i].val))
            ibcr_log ("destroying a cached AH of QP %u failed", vqp->vqpn);
    map_clear (&vqp->ah_cache);
}
