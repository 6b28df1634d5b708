/*
 * ah.c - address handles for UD, and building them from a received
 * completion (ibv_init_ah_from_wc / ibv_create_ah_from_wc).
 *
 * An AH resolves at creation to the peer host's IPv4 address: from the
 * GID when it carries a GRH (::ffff:a.b.c.d), otherwise from the LID
 * within our /16.  The endpoint port comes later from the remote QPN.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "softib.h"

static struct ibv_ah *ah_create (struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    struct sib_ctx *ctx;
    struct sib_ah *ah;
    uint32_t ip;

    if (!pd || !attr || attr->port_num != 1) {
        errno = EINVAL;
        return NULL;
    }
    ctx = sib_ctx_of (pd->context);
    if (attr->is_global) {
        if (attr->grh.sgid_index != 0 || !sib_gid_to_ip (&attr->grh.dgid, &ip)) {
            errno = EINVAL; /* only IPv4-mapped GIDs route */
            return NULL;
        }
    } else {
        if (attr->dlid == 0 || attr->dlid == 0xffff) {
            errno = EINVAL; /* no LID or the permissive LID */
            return NULL;
        }
        ip = sib_lid_to_ip (ctx, attr->dlid);
    }
    ah = calloc (1, sizeof (*ah));
    if (!ah) {
        errno = ENOMEM;
        return NULL;
    }
    ah->ah.context = pd->context;
    ah->ah.pd = pd;
    ah->attr = *attr;
    ah->ip = ip;
    return &ah->ah;
}

SIB_EXPORT struct ibv_ah *ibv_create_ah (struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    return ah_create (pd, attr);
}

SIB_EXPORT int ibv_destroy_ah (struct ibv_ah *ah)
{
    if (!ah)
        return EINVAL;
    free (ah);
    return 0;
}

static int ah_from_wc (uint8_t port, struct ibv_wc *wc, struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
    memset (ah, 0, sizeof (*ah));
    ah->dlid = wc->slid;
    ah->sl = wc->sl;
    ah->src_path_bits = wc->dlid_path_bits;
    ah->port_num = port;
    if (wc->wc_flags & IBV_WC_GRH) {
        if (!grh) {
            errno = EINVAL;
            return -1;
        }
        ah->is_global = 1;
        ah->grh.dgid = grh->sgid;
        ah->grh.sgid_index = 0;
        ah->grh.hop_limit = 0xff;
        ah->grh.traffic_class = (be32toh (grh->version_tclass_flow) >> 20) & 0xff;
        ah->grh.flow_label = be32toh (grh->version_tclass_flow) & 0xfffff;
    }
    return 0;
}

SIB_EXPORT int ibv_init_ah_from_wc (struct ibv_context *c, uint8_t port, struct ibv_wc *wc,
                                    struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
    return ah_from_wc (port, wc, grh, ah);
}

SIB_EXPORT struct ibv_ah *ibv_create_ah_from_wc (struct ibv_pd *pd, struct ibv_wc *wc,
                                                 struct ibv_grh *grh, uint8_t port)
{
    struct ibv_ah_attr a;

    if (ah_from_wc (port, wc, grh, &a) < 0)
        return NULL;
    return ah_create (pd, &a);
}

/* default versions; IBVERBS_1.0 ones are in misc.c */
SIB_V11 (ibv_create_ah);
SIB_V11 (ibv_destroy_ah);
