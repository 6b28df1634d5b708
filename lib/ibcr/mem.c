/* mem.c - protection domains and memory regions, virtualized.
 *
 * An MR keeps the lkey and rkey first given to the application for its
 * whole life; after a rebuild the real keys differ and are found through
 * ctx->mr_by_vlkey (local) or the peers' rkey tables (xlate.c).  The
 * registered memory itself is the application's: CRIU restores it at the
 * same address, and rebuild registers it again.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "ibcr.h"
#include "backend.h"
#include "gate.h"
#include "exports.h"
#include "xlate.h"

struct ibv_pd *ibcr_alloc_pd (struct ibv_context *ctx)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    struct ibcr_pd *vpd = calloc (1, sizeof (*vpd));
    if (!vpd) {
        errno = ENOMEM;
        return NULL;
    }
    gate_enter ();
    vpd->real = ibcr_be.alloc_pd (vctx->real);
    if (!vpd->real) {
        be_errno ();
        gate_leave ();
        free (vpd);
        return NULL;
    }
    vpd->ctx = vctx;
    vpd->pd.context = ctx;
    vpd->pd.handle = vpd->real->handle;
    pthread_mutex_lock (&ibcr_lock);
    ibcr_list_add (&vctx->pds, &vpd->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return &vpd->pd;
}

int ibcr_dealloc_pd (struct ibv_pd *pd)
{
    struct ibcr_pd *vpd = vpd_of (pd);
    gate_enter ();
    int rc = ibcr_be.dealloc_pd (vpd->real);
    if (rc == 0) {
        pthread_mutex_lock (&ibcr_lock);
        ibcr_list_del (&vpd->link);
        pthread_mutex_unlock (&ibcr_lock);
    }
    gate_leave ();
    if (rc == 0)
        free (vpd);
    return rc;
}

int ibcr_mr_open_real (struct ibcr_mr *vmr)
{
    struct ibv_pd *rpd = vmr->vpd->real;
    if (vmr->iova_set)
        vmr->real = ibcr_be.reg_mr_iova2 (rpd, vmr->addr, vmr->length, vmr->iova, vmr->access);
    else
        vmr->real = ibcr_be.reg_mr (rpd, vmr->addr, vmr->length, (int)vmr->access);
    if (!vmr->real) {
        be_errno ();
        return -1;
    }
    return 0;
}

/* An MR registered after a rebuild keeps its real keys as virtual ones;
 * they must not be keys this process published as virtual at the last
 * rebuild (peers translate those), nor keys another process behind one of
 * our LIDs published (a peer that does not know yet which process its QP
 * reaches finds the MR by the key among those: xlate_rkey_peer), nor
 * another live MR's virtual lkey.  Register again for other keys then. */
static bool key_taken (struct ibcr_mr *vmr)
{
    struct ibcr_ctx *vctx = vmr->vpd->ctx;
    if (!ibcr_xlate)
        return false;
    if (xlate_has_rkey (ibcr_rank, vmr->real->rkey)
        || idtab_get (&vctx->mr_by_vlkey, vmr->real->lkey) != NULL)
        return true;
    for (int p = 1; p <= IBCR_MAX_PORTS && p <= vctx->nports; p++)
        if (vctx->port[p].known && xlate_lid_has_rkey (vctx->port[p].vlid, vmr->real->rkey))
            return true;
    return false;
}

static int mr_open_fresh (struct ibcr_mr *vmr)
{
    struct ibv_mr *spare[8];
    int nspare = 0, rc;
    pthread_mutex_lock (&ibcr_lock);
    for (;;) {
        if ((rc = ibcr_mr_open_real (vmr)) < 0 || !key_taken (vmr) || nspare == 8)
            break;
        spare[nspare++] = vmr->real;
    }
    if (rc == 0 && key_taken (vmr))
        ibcr_log ("MR key %u: already another MR's virtual key; RDMA to it may "
                  "reach the wrong MR until the next checkpoint",
                  vmr->real->rkey);
    pthread_mutex_unlock (&ibcr_lock);
    while (nspare > 0)
        ibcr_be.dereg_mr (spare[--nspare]);
    return rc;
}

static struct ibv_mr *reg (struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                           bool iova_set, unsigned int access)
{
    struct ibcr_pd *vpd = vpd_of (pd);
    struct ibcr_mr *vmr;

    if (access & IBV_ACCESS_ON_DEMAND) {
        ibcr_refuse ("on-demand paging MRs (IBV_ACCESS_ON_DEMAND)",
                     "ODP page state cannot be drained and rebuilt");
        return NULL;
    }
    vmr = calloc (1, sizeof (*vmr));
    if (!vmr) {
        errno = ENOMEM;
        return NULL;
    }
    vmr->vpd = vpd;
    vmr->addr = addr;
    vmr->length = length;
    vmr->iova = iova;
    vmr->iova_set = iova_set;
    vmr->access = access;
    gate_enter ();
    if (mr_open_fresh (vmr) < 0) {
        int saved = errno;
        gate_leave ();
        free (vmr);
        errno = saved;
        return NULL;
    }
    vmr->mr = *vmr->real;
    vmr->mr.context = pd->context;
    vmr->mr.pd = pd;
    pthread_mutex_lock (&ibcr_lock);
    if (idtab_put (&vpd->ctx->mr_by_vlkey, vmr->mr.lkey, vmr) < 0) {
        pthread_mutex_unlock (&ibcr_lock);
        ibcr_be.dereg_mr (vmr->real);
        gate_leave ();
        free (vmr);
        errno = ENOMEM;
        return NULL;
    }
    ibcr_list_add (&vpd->ctx->mrs, &vmr->link);
    ibcr_mr_gen_bump ();
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return &vmr->mr;
}

struct ibv_mr *ibcr_reg_mr (struct ibv_pd *pd, void *addr, size_t length, int access)
{
    return reg (pd, addr, length, (uintptr_t)addr, false, (unsigned int)access);
}

struct ibv_mr *ibcr_reg_mr_iova (struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                 int access)
{
    return reg (pd, addr, length, iova, true, (unsigned int)access);
}

struct ibv_mr *ibcr_reg_mr_iova2 (struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                  unsigned int access)
{
    return reg (pd, addr, length, iova, iova != (uintptr_t)addr, access);
}

int ibcr_dereg_mr (struct ibv_mr *mr)
{
    struct ibcr_mr *vmr = vmr_of (mr);
    gate_enter ();
    int rc = ibcr_be.dereg_mr (vmr->real);
    if (rc == 0) {
        pthread_mutex_lock (&ibcr_lock);
        if (idtab_get (&vmr->vpd->ctx->mr_by_vlkey, vmr->mr.lkey) == vmr)
            idtab_del (&vmr->vpd->ctx->mr_by_vlkey, vmr->mr.lkey);
        ibcr_list_del (&vmr->link);
        ibcr_mr_gen_bump ();
        pthread_mutex_unlock (&ibcr_lock);
    }
    gate_leave ();
    if (rc == 0)
        free (vmr);
    return rc;
}

int ibcr_rereg_mr (struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
                   int access)
{
    ibcr_refuse ("ibv_rereg_mr",
                 "re-registration is not replayed at rebuild; "
                 "deregister and register again");
    return IBV_REREG_MR_ERR_INPUT;
}

struct ibv_mr *ibcr_reg_dmabuf_mr (struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                   int fd, int access)
{
    ibcr_refuse ("dma-buf MRs (ibv_reg_dmabuf_mr)",
                 "device memory behind a dma-buf "
                 "cannot be saved by a checkpoint");
    return NULL;
}
