/* plock.h - the lock that serializes the polls of one CQ.
 *
 * Taken on every ibv_poll_cq, almost always free: taking it is one atomic
 * exchange and releasing it a plain store (a mutex's unlock is a second
 * atomic read-modify-write, about 5 ns per poll on the benchmark machine;
 * see doc/libibcr-ns.md).  A thread that finds it held spins briefly, then
 * yields, so a holder that yields inside the backend's poll (softib does on
 * an empty CQ) is not starved by its waiters.
 */
#ifndef IBCR_PLOCK_H
#define IBCR_PLOCK_H

#include <sched.h>
#include <stdatomic.h>

struct ibcr_plock {
    atomic_int held;
};

static inline void plock_init (struct ibcr_plock *l)
{
    atomic_init (&l->held, 0);
}

static inline void plock_lock (struct ibcr_plock *l)
{
    int spins = 0;
    while (atomic_exchange_explicit (&l->held, 1, memory_order_acquire)) {
        while (atomic_load_explicit (&l->held, memory_order_relaxed)) {
            if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause ();
#endif
            } else
                sched_yield ();
        }
    }
}

static inline void plock_unlock (struct ibcr_plock *l)
{
    atomic_store_explicit (&l->held, 0, memory_order_release);
}

#endif
