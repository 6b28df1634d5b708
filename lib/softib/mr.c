/*
 * mr.c - protection domains and memory regions.
 *
 * An MR's lkey and rkey are the same 32-bit key: table index << 8 | a
 * generation byte, so a stale key from a deregistered region misses
 * instead of hitting its successor.  Remote access (WRITE, READ, atomics)
 * is checked against the MR's access flags, its PD and its bounds; a
 * failed check is reported by the caller as the IB status it passes in.
 * Deregistration goes through the progress thread so no incoming RDMA
 * WRITE is still placing bytes into the region when it returns.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include "softib.h"

SIB_EXPORT struct ibv_pd *ibv_alloc_pd (struct ibv_context *c)
{
    struct sib_pd *pd = calloc (1, sizeof (*pd));

    if (!pd) {
        errno = ENOMEM;
        return NULL;
    }
    pd->pd.context = c;
    pd->pd.handle = 0;
    return &pd->pd;
}

SIB_EXPORT int ibv_dealloc_pd (struct ibv_pd *pd)
{
    if (!pd)
        return EINVAL;
    free (pd);
    return 0;
}

static int table_insert (struct sib_ctx *ctx, struct sib_mr *mr)
{
    uint32_t i;

    pthread_mutex_lock (&ctx->lock);
    for (i = 1; i < ctx->nmrs; i++)
        if (!ctx->mrs[i])
            break;
    if (i >= ctx->nmrs) {
        uint32_t n = ctx->nmrs ? ctx->nmrs * 2 : 64;
        struct sib_mr **t;

        if (n > (1u << 24)) {
            pthread_mutex_unlock (&ctx->lock);
            errno = ENOMEM;
            return -1;
        }
        t = realloc (ctx->mrs, n * sizeof (*t));
        if (!t) {
            pthread_mutex_unlock (&ctx->lock);
            errno = ENOMEM;
            return -1;
        }
        memset (t + ctx->nmrs, 0, (n - ctx->nmrs) * sizeof (*t));
        ctx->mrs = t;
        i = ctx->nmrs ? ctx->nmrs : 1;
        ctx->nmrs = n;
    }
    ctx->mrs[i] = mr;
    mr->idx = i;
    do { /* key 0 means "no key" inside softib */
        ctx->mr_gen++;
        mr->mr.lkey = mr->mr.rkey = ((i ^ ctx->key_mask) << 8) | (ctx->mr_gen & 0xff);
    } while (!mr->mr.lkey);
    pthread_mutex_unlock (&ctx->lock);
    return 0;
}

struct sib_mr *sib_mr_lookup (struct sib_ctx *ctx, uint32_t key)
{
    uint32_t i = ((key >> 8) ^ ctx->key_mask) & 0xffffff;

    if (i == 0 || i >= ctx->nmrs || !ctx->mrs[i] || ctx->mrs[i]->mr.lkey != key)
        return NULL;
    return ctx->mrs[i];
}

/* Every change to what a key means (deregistration, re-registration, a
 * context closed) moves this counter, under the context's lock. */
uint64_t sib_mr_epoch = 1;

void sib_mr_changed (void)
{
    __atomic_add_fetch (&sib_mr_epoch, 1, __ATOMIC_SEQ_CST);
}

/* Each QP keeps copies of the MRs its checks found last: a data-path
 * check (every post, every received message, every RDMA access) then
 * takes no lock.  It took ctx->lock, the context's, shared with the
 * progress thread and every other QP: a quarter of an 8-byte message's
 * time (doc/softib-shm.md).  A copy, filled under ctx->lock, is valid
 * while sib_mr_epoch has not moved since.  A deregistration that starts after
 * the epoch was read is, as before, ordered after this check (the bytes
 * are copied after it either way).  The copies live in the QP, under its
 * lock, not in thread-local storage: libibcr loads softib with dlmopen at
 * every rebuild, and each load's thread-local blocks stay allocated in
 * every thread that touched them. */
void *sib_mr_check_slow (struct sib_qp *qp, uint32_t key, uint64_t addr, uint64_t len, int need,
                         enum ibv_wc_status fail, enum ibv_wc_status *status)
{
    struct sib_ctx *ctx = qp->ctx;
    struct ibv_pd *pd = qp->qpx.qp_base.pd;
    struct sib_mr_cache *e = &qp->mrc[key & (SIB_MR_CACHE - 1)];
    uint64_t epoch = __atomic_load_n (&sib_mr_epoch, __ATOMIC_ACQUIRE);
    struct sib_mr *mr;

    if (e->ctx != ctx || e->key != key || e->epoch != epoch) {
        pthread_mutex_lock (&ctx->lock);
        mr = sib_mr_lookup (ctx, key);
        if (mr) {
            e->ctx = ctx;
            e->key = key;
            e->epoch = __atomic_load_n (&sib_mr_epoch, __ATOMIC_RELAXED);
            e->access = mr->access;
            e->pd = mr->mr.pd;
            e->iova = mr->iova;
            e->length = mr->mr.length;
            e->addr = mr->mr.addr;
        }
        pthread_mutex_unlock (&ctx->lock);
        if (!mr) {
            *status = fail;
            return NULL;
        }
    }
    if (e->pd != pd || (e->access & need) != need || addr < e->iova || len > e->length
        || addr - e->iova > e->length - len) {
        *status = fail;
        return NULL;
    }
    return e->addr + (addr - e->iova);
}

/* As an HCA's keys, ours differ from one ibv_open_device to the next, so
 * that a checkpoint library that re-registers memory (libibcr) really
 * gets new keys and must translate them. */
void sib_mr_keys_seed (struct sib_ctx *ctx)
{
    uint32_t r[2] = { 0, 0 };

    if (getrandom (r, sizeof (r), GRND_NONBLOCK) != sizeof (r)) {
        r[0] = (uint32_t)sib_now_ns () ^ ((uint32_t)getpid () << 12);
        r[1] = (uint32_t)(sib_now_ns () >> 17) * 2654435761u;
    }
    ctx->key_mask = r[0] & 0xffffff;
    ctx->mr_gen = r[1];
}

void sib_mr_table_free (struct sib_ctx *ctx)
{
    sib_mr_changed ();
    free (ctx->mrs);
    ctx->mrs = NULL;
    ctx->nmrs = 0;
}

static const int sib_mr_known_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
    | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;

static struct ibv_mr *mr_register (struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                   unsigned int access)
{
    struct sib_ctx *ctx;
    struct sib_mr *mr;

    if (!pd) {
        errno = EINVAL;
        return NULL;
    }
    if (access & IBV_ACCESS_ON_DEMAND) {
        errno = EOPNOTSUPP; /* ODP is not emulated */
        return NULL;
    }
    if (access & ~(unsigned int)sib_mr_known_access) {
        errno = EINVAL;
        return NULL;
    }
    /* IB spec: remote write or atomic requires local write */
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC))
        && !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return NULL;
    }
    if (!addr && len) {
        errno = EINVAL;
        return NULL;
    }
    ctx = sib_ctx_of (pd->context);
    mr = calloc (1, sizeof (*mr));
    if (!mr) {
        errno = ENOMEM;
        return NULL;
    }
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = addr;
    mr->mr.length = len;
    mr->iova = iova;
    mr->access = (int)access;
    if (table_insert (ctx, mr) < 0) {
        free (mr);
        return NULL;
    }
    return &mr->mr;
}

#undef ibv_reg_mr
#undef ibv_reg_mr_iova
SIB_EXPORT struct ibv_mr *ibv_reg_mr (struct ibv_pd *pd, void *addr, size_t length, int access)
{
    return mr_register (pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

SIB_EXPORT struct ibv_mr *ibv_reg_mr_iova (struct ibv_pd *pd, void *addr, size_t length,
                                           uint64_t iova, int access)
{
    return mr_register (pd, addr, length, iova, (unsigned int)access);
}

SIB_EXPORT struct ibv_mr *ibv_reg_mr_iova2 (struct ibv_pd *pd, void *addr, size_t length,
                                            uint64_t iova, unsigned int access)
{
    return mr_register (pd, addr, length, iova, access);
}

SIB_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr (struct ibv_pd *pd, uint64_t offset, size_t length,
                                             uint64_t iova, int fd, int access)
{
    errno = EOPNOTSUPP; /* no device memory behind softib */
    return NULL;
}

SIB_EXPORT int ibv_dereg_mr (struct ibv_mr *ibmr)
{
    struct sib_mr *mr = (struct sib_mr *)ibmr;
    struct sib_ctx *ctx;

    if (!ibmr)
        return EINVAL;
    ctx = sib_ctx_of (ibmr->context);
    pthread_mutex_lock (&ctx->lock);
    if (mr->idx < ctx->nmrs && ctx->mrs[mr->idx] == mr)
        ctx->mrs[mr->idx] = NULL;
    sib_mr_changed ();
    pthread_mutex_unlock (&ctx->lock);
    /* wait until no connection is still placing data into it */
    sib_progress_cmd (ctx, SIB_CMD_DEREG_MR, mr);
    free (mr);
    return 0;
}

SIB_EXPORT int ibv_rereg_mr (struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr,
                             size_t length, int access)
{
    struct sib_mr *mr = (struct sib_mr *)ibmr;
    struct sib_ctx *ctx;

    if (!ibmr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
        return IBV_REREG_MR_ERR_INPUT;
    if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && (access & ~sib_mr_known_access))
        return IBV_REREG_MR_ERR_INPUT;
    ctx = sib_ctx_of (ibmr->context);
    sib_progress_cmd (ctx, SIB_CMD_DEREG_MR, mr);
    pthread_mutex_lock (&ctx->lock);
    if (flags & IBV_REREG_MR_CHANGE_PD)
        mr->mr.pd = pd;
    if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        mr->mr.addr = addr;
        mr->mr.length = length;
        mr->iova = (uintptr_t)addr;
    }
    if (flags & IBV_REREG_MR_CHANGE_ACCESS)
        mr->access = access;
    sib_mr_changed ();
    pthread_mutex_unlock (&ctx->lock);
    return 0;
}

/* default versions; IBVERBS_1.0 ones are in misc.c */
SIB_V11 (ibv_alloc_pd);
SIB_V11 (ibv_dealloc_pd);
SIB_V11 (ibv_reg_mr);
SIB_V11 (ibv_dereg_mr);
