/*
 * misc.c - the rest of the exported ABI: fork helpers, sysfs helpers,
 * kernel-ABI copy helpers, import/ECE/multicast verbs softib refuses, and
 * the IBVERBS_1.0 compatibility symbols.
 *
 * Refusals are explicit (EOPNOTSUPP), never silent success.  The 1.0
 * symbols served binaries linked against libibverbs 1.0 (2006) with
 * other struct layouts; softib does not emulate that ABI, so each fails
 * cleanly instead of corrupting memory.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "softib.h"

SIB_EXPORT int ibv_fork_init (void)
{
    return 0; /* no pinned pages: fork is always safe */
}

SIB_EXPORT enum ibv_fork_status ibv_is_fork_initialized (void)
{
    return IBV_FORK_UNNEEDED;
}

/* driver.h prototypes (not installed by libibverbs-dev) */
SIB_EXPORT int ibv_dontfork_range (void *base, size_t size);
SIB_EXPORT int ibv_dofork_range (void *base, size_t size);
SIB_EXPORT const char *ibv_get_sysfs_path (void);
SIB_EXPORT int ibv_read_sysfs_file (const char *dir, const char *file, char *buf, size_t size);
SIB_EXPORT void ibv_copy_qp_attr_from_kern (void *dst, void *src);
SIB_EXPORT void ibv_copy_ah_attr_from_kern (void *dst, void *src);
SIB_EXPORT void ibv_copy_path_rec_from_kern (void *dst, void *src);
SIB_EXPORT void ibv_copy_path_rec_to_kern (void *dst, void *src);
SIB_EXPORT void sib_compat_register_driver (const char *name, void *init);

int ibv_dontfork_range (void *base, size_t size)
{
    return 0;
}

int ibv_dofork_range (void *base, size_t size)
{
    return 0;
}

const char *ibv_get_sysfs_path (void)
{
    return "/sys";
}

int ibv_read_sysfs_file (const char *dir, const char *file, char *buf, size_t size)
{
    errno = ENOENT; /* softib has no sysfs presence */
    return -1;
}

/* kernel uverbs structures never reach softib: nothing to convert */
void ibv_copy_qp_attr_from_kern (void *dst, void *src)
{
}

void ibv_copy_ah_attr_from_kern (void *dst, void *src)
{
}

void ibv_copy_path_rec_from_kern (void *dst, void *src)
{
}

void ibv_copy_path_rec_to_kern (void *dst, void *src)
{
}

/* ibv_register_driver@IBVERBS_1.1: old providers register here */
__attribute__ ((symver ("ibv_register_driver@IBVERBS_1.1"))) void
sib_compat_register_driver (const char *name, void *init)
{
    sib_log ("provider '%s' ignored: softib is the only device", name ? name : "?");
}

SIB_EXPORT int ibv_attach_mcast (struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    return EOPNOTSUPP; /* multicast */
}

SIB_EXPORT int ibv_detach_mcast (struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
    return EOPNOTSUPP;
}

SIB_EXPORT int ibv_resolve_eth_l2_from_gid (struct ibv_context *c, struct ibv_ah_attr *attr,
                                            uint8_t eth_mac[6], uint16_t *vid)
{
    return EOPNOTSUPP; /* the port is InfiniBand, not Ethernet */
}

SIB_EXPORT struct ibv_context *ibv_import_device (int cmd_fd)
{
    errno = EOPNOTSUPP;
    return NULL;
}

SIB_EXPORT struct ibv_pd *ibv_import_pd (struct ibv_context *c, uint32_t h)
{
    errno = EOPNOTSUPP;
    return NULL;
}

SIB_EXPORT void ibv_unimport_pd (struct ibv_pd *pd)
{
}

SIB_EXPORT struct ibv_mr *ibv_import_mr (struct ibv_pd *pd, uint32_t h)
{
    errno = EOPNOTSUPP;
    return NULL;
}

SIB_EXPORT void ibv_unimport_mr (struct ibv_mr *mr)
{
}

SIB_EXPORT struct ibv_dm *ibv_import_dm (struct ibv_context *c, uint32_t h)
{
    errno = EOPNOTSUPP;
    return NULL;
}

SIB_EXPORT void ibv_unimport_dm (struct ibv_dm *dm)
{
}

SIB_EXPORT int ibv_set_ece (struct ibv_qp *qp, struct ibv_ece *ece)
{
    return EOPNOTSUPP;
}

SIB_EXPORT int ibv_query_ece (struct ibv_qp *qp, struct ibv_ece *ece)
{
    return EOPNOTSUPP;
}

/* ---- IBVERBS_1.0 ---- */

#define COMPAT_PTR(name)                                                                           \
    SIB_EXPORT void *sib_compat10_##name (void);                                                   \
    __attribute__ ((symver ("ibv_" #name "@IBVERBS_1.0"))) void *sib_compat10_##name (void)        \
    {                                                                                              \
        sib_log ("ibv_" #name "@IBVERBS_1.0: the libibverbs 1.0 ABI "                              \
                 "is not supported; rebuild the program");                                         \
        errno = EOPNOTSUPP;                                                                        \
        return NULL;                                                                               \
    }
#define COMPAT_INT(name)                                                                           \
    SIB_EXPORT int sib_compat10_##name (void);                                                     \
    __attribute__ ((symver ("ibv_" #name "@IBVERBS_1.0"))) int sib_compat10_##name (void)          \
    {                                                                                              \
        sib_log ("ibv_" #name "@IBVERBS_1.0: the libibverbs 1.0 ABI "                              \
                 "is not supported; rebuild the program");                                         \
        errno = EOPNOTSUPP;                                                                        \
        return EOPNOTSUPP;                                                                         \
    }
#define COMPAT_VOID(name)                                                                          \
    SIB_EXPORT void sib_compat10_##name (void);                                                    \
    __attribute__ ((symver ("ibv_" #name "@IBVERBS_1.0"))) void sib_compat10_##name (void)         \
    {                                                                                              \
    }

COMPAT_VOID (ack_async_event)
COMPAT_VOID (ack_cq_events)
COMPAT_PTR (alloc_pd)
COMPAT_INT (attach_mcast)
COMPAT_INT (close_device)
COMPAT_PTR (create_ah)
COMPAT_PTR (create_cq)
COMPAT_PTR (create_qp)
COMPAT_PTR (create_srq)
COMPAT_INT (dealloc_pd)
COMPAT_INT (dereg_mr)
COMPAT_INT (destroy_ah)
COMPAT_INT (destroy_cq)
COMPAT_INT (destroy_qp)
COMPAT_INT (destroy_srq)
COMPAT_INT (detach_mcast)
COMPAT_VOID (free_device_list)
COMPAT_INT (get_async_event)
COMPAT_INT (get_cq_event)
COMPAT_INT (get_device_guid)
COMPAT_PTR (get_device_list)
COMPAT_PTR (get_device_name)
COMPAT_INT (modify_qp)
COMPAT_INT (modify_srq)
COMPAT_PTR (open_device)
COMPAT_INT (query_device)
COMPAT_INT (query_gid)
COMPAT_INT (query_pkey)
COMPAT_INT (query_port)
COMPAT_INT (query_qp)
COMPAT_INT (query_srq)
COMPAT_PTR (reg_mr)
COMPAT_INT (resize_cq)

/* default versions; IBVERBS_1.0 ones are in misc.c */
SIB_V11 (ibv_attach_mcast);
SIB_V11 (ibv_detach_mcast);

static void relax (int k)
{
    if (k < 100) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause ();
#endif
    } else {
        sched_yield ();
    }
}

/* The exchange: spin a little (the holder is on the other CPU and about
 * to store 0), then give the CPU away until it is free (the holder may be
 * waiting for it). */
static void xchg_wait (sib_lock_t *l)
{
    for (int k = 0;; k++) {
        if (__atomic_load_n (&l->v, __ATOMIC_RELAXED) == 0
            && __atomic_exchange_n (&l->v, 1, __ATOMIC_ACQUIRE) == 0)
            return;
        relax (k);
    }
}

/* Holding v: makes the owner's store of bias_in visible (its fast path
 * has no fence of its own), then says whether it is inside.  Counts the
 * takes that needed it: too many end the bias. */
static bool owner_inside (sib_lock_t *l)
{
    uint64_t now = sib_now_ns ();

    if (syscall (SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) < 0) {
        /* registered, so this does not happen; end the bias rather
		 * than trust a flag we cannot order */
        sib_log ("membarrier: %s", strerror (errno));
        __atomic_store_n (&l->owner, SIB_LOCK_PLAIN, __ATOMIC_RELEASE);
        __atomic_thread_fence (__ATOMIC_SEQ_CST);
        return __atomic_load_n (&l->bias_in, __ATOMIC_ACQUIRE) != 0;
    }
    if (now - l->window > 100000000ull) {
        l->window = now;
        l->foreign = 0;
    }
    if (++l->foreign > SIB_LOCK_FOREIGN) {
        __atomic_store_n (&l->owner, SIB_LOCK_REVOKED, __ATOMIC_RELEASE);
        l->run = 0;
    }
    return __atomic_load_n (&l->bias_in, __ATOMIC_ACQUIRE) != 0;
}

/* Holding v of a revoked lock: gives the bias back to its owner once it
 * took it l->rebias times in a row (twice as many the next time).
 * Nobody is inside by the fast path (owner is not a thread), so no
 * handshake is needed. */
static void revoked_take (sib_lock_t *l, uintptr_t self, bool claim)
{
    if (self != l->biased) {
        l->run = 0;
        return;
    }
    if (++l->run >= l->rebias && claim) {
        if (l->rebias < (1u << 30))
            l->rebias *= 2;
        l->foreign = 0;
        l->window = sib_now_ns ();
        __atomic_store_n (&l->owner, self, __ATOMIC_RELEASE);
    }
}

void sib_lock_slow (sib_lock_t *l, bool claim)
{
    uintptr_t self = sib_self (), o;

    xchg_wait (l);
    o = __atomic_load_n (&l->owner, __ATOMIC_RELAXED);
    if (o == 0) {
        if (claim) {
            __atomic_store_n (&l->biased, self, __ATOMIC_RELAXED);
            __atomic_store_n (&l->owner, self, __ATOMIC_RELEASE);
        }
        return;
    }
    if (o == self)
        return;
    if (o == SIB_LOCK_PLAIN || o == SIB_LOCK_REVOKED) {
        /* The bias ended (owner_inside): its last owner may still be
         * inside by the fast path, where the taker that ended it saw it
         * and left.  Its store is visible (that taker's membarrier), and
         * it cannot enter by the fast path again. */
        for (int k = 0; __atomic_load_n (&l->bias_in, __ATOMIC_ACQUIRE); k++)
            relax (k);
        if (o == SIB_LOCK_REVOKED)
            revoked_take (l, self, claim);
        return;
    }
    /* another thread's lock: wait until it is not inside (new fast
	 * takes see v and back off) */
    if (owner_inside (l))
        for (int k = 0; __atomic_load_n (&l->bias_in, __ATOMIC_ACQUIRE); k++)
            relax (k);
}

bool sib_trylock_slow (sib_lock_t *l, bool claim)
{
    uintptr_t self = sib_self (), o;

    if (__atomic_load_n (&l->v, __ATOMIC_RELAXED) != 0
        || __atomic_exchange_n (&l->v, 1, __ATOMIC_ACQUIRE) != 0)
        return false;
    o = __atomic_load_n (&l->owner, __ATOMIC_RELAXED);
    if (o == 0) {
        if (claim) {
            __atomic_store_n (&l->biased, self, __ATOMIC_RELAXED);
            __atomic_store_n (&l->owner, self, __ATOMIC_RELEASE);
        }
        return true;
    }
    if (o == SIB_LOCK_PLAIN || o == SIB_LOCK_REVOKED) {
        /* as in sib_lock_slow: the last owner may still be inside */
        if (__atomic_load_n (&l->bias_in, __ATOMIC_ACQUIRE)) {
            __atomic_store_n (&l->v, 0, __ATOMIC_RELEASE);
            return false;
        }
        if (o == SIB_LOCK_REVOKED)
            revoked_take (l, self, claim);
        return true;
    }
    if (o == self || !owner_inside (l))
        return true;
    __atomic_store_n (&l->v, 0, __ATOMIC_RELEASE);
    return false;
}

/* Register this process for membarrier's REGISTER command, unless the
 * variable ENV is "0" or the kernel lacks the commands in NEED: whether
 * the caller may rely on the matching membarrier from now on.  Per
 * process and idempotent; CRIU restores it with the process. */
bool sib_membarrier_register (const char *env, long need, int reg)
{
    const char *s = getenv (env);
    long q;

    if (s && strcmp (s, "0") == 0)
        return false;
    q = syscall (SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (q < 0 || (q & need) != need)
        return false;
    return syscall (SYS_membarrier, reg, 0, 0) == 0;
}

bool sib_lock_bias_ok (void)
{
    return sib_membarrier_register ("SOFTIB_LOCK_BIAS", MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                                    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
}
