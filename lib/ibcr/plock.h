/* plock.h - the lock that serializes the polls of one CQ.
 *
 * Taken on every ibv_poll_cq once a CQ's biased lock (block.h) has been
 * revoked, and by a QP's poster that must exclude the consumer of one of
 * its logs (wrlog.h).  A ticket lock: taking it is one atomic add and a
 * load, releasing it a plain store (a mutex's unlock is a second atomic
 * read-modify-write, about 5 ns per poll on the benchmark machine; see
 * doc/libibcr-ns.md).  Tickets are served in order: a thread that polls
 * an empty CQ in a loop holds the lock nearly all the time (softib
 * yields inside its poll), and with a test-and-set lock another thread
 * could wait for it without end; here it waits for the takers ahead of
 * it (one poll, when one thread polls).  A
 * waiter spins briefly, then yields, so a holder that yields inside the
 * backend's poll is not starved by its waiters.
 */
#ifndef IBCR_PLOCK_H
#define IBCR_PLOCK_H

#include <sched.h>
#include <stdatomic.h>

struct ibcr_plock {
    atomic_uint next;    /* the next ticket to give */
    atomic_uint serving; /* the ticket that holds the lock */
};

static inline void plock_init (struct ibcr_plock *l)
{
    atomic_init (&l->next, 0);
    atomic_init (&l->serving, 0);
}

static inline void plock_lock (struct ibcr_plock *l)
{
    unsigned t = atomic_fetch_add_explicit (&l->next, 1, memory_order_relaxed);
    for (int spins = 0; atomic_load_explicit (&l->serving, memory_order_acquire) != t; spins++) {
        if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause ();
#endif
        } else
            sched_yield ();
    }
}

static inline void plock_unlock (struct ibcr_plock *l)
{
    /* Only the holder writes 'serving'. */
    atomic_store_explicit (&l->serving,
                           atomic_load_explicit (&l->serving, memory_order_relaxed) + 1,
                           memory_order_release);
}

#endif
