/* block.h - a lock biased to the one thread that uses it.
 *
 * Most verbs programs use a QP and its CQs from one thread (MPI's and
 * UCX's progress run in the thread that calls them).  For that thread,
 * taking a block is a plain store of its own flag, a compiler barrier and
 * a load of a flag nobody writes while the bias lasts; releasing it is a
 * store.  No atomic read-modify-write: on the benchmark machine an
 * uncontended one costs 11-12 ns, and a poll took two (doc/libibcr-ns.md).
 *
 * The first thread (gate slot) to take a block becomes its owner.  Any
 * other thread revokes the bias for good: under the fallback lock (a
 * plock) it sets 'revoked', runs a barrier on every thread of the process
 * (gate_barrier_all: membarrier, the same asymmetric handshake as the
 * gate's), then waits until the owner is not inside.  After it, every
 * thread, the owner too, takes the plock, as before this lock existed.
 *
 * The checkpoint thread (no gate slot) takes no lock while the gate is
 * closed: no application thread is inside a verb then, so the queues are
 * its alone; not revoking keeps the bias across checkpoints.
 *
 * block_lock returns how it was taken; block_unlock gets that back.
 */
#ifndef IBCR_BLOCK_H
#define IBCR_BLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include "gate.h"
#include "plock.h"

struct ibcr_block {
    struct gate_slot *_Atomic owner; /* biased to this thread, or NULL */
    atomic_int owner_in;             /* the owner holds it by the fast path */
    atomic_int revoked;              /* bias gone: everyone takes pl */
    struct ibcr_plock pl;
};

enum { BLOCK_FAST, BLOCK_PL, BLOCK_NONE };

static inline void block_init (struct ibcr_block *l)
{
    atomic_init (&l->owner, NULL);
    atomic_init (&l->owner_in, 0);
    atomic_init (&l->revoked, 0);
    plock_init (&l->pl);
}

int block_lock_slow (struct ibcr_block *l);
/* The owner found the fence mode on or the bias revoked (gate.c). */
int block_lock_owner_slow (struct ibcr_block *l, struct gate_slot *s);

/* s: the calling thread's gate slot (gate_enter's), or NULL. */
static inline int block_lock_as (struct ibcr_block *l, struct gate_slot *s)
{
    if (__builtin_expect (s && atomic_load_explicit (&l->owner, memory_order_relaxed) == s, 1)) {
        atomic_store_explicit (&l->owner_in, 1, memory_order_relaxed);
        atomic_signal_fence (memory_order_seq_cst);
        /* One test for both rare cases: the fence mode (the fence is
         * issued out of line, and 'revoked' read again after it) and a
         * revoked bias.  'revoked' is an acquire load, as the gate's
         * (ThreadSanitizer does not model a stand-alone acquire fence). */
        if (__builtin_expect (!(atomic_load_explicit (&s->fence, memory_order_relaxed)
                                | atomic_load_explicit (&l->revoked, memory_order_acquire)),
                              1))
            return BLOCK_FAST;
        return block_lock_owner_slow (l, s);
    }
    return block_lock_slow (l);
}

static inline int block_lock (struct ibcr_block *l)
{
    return block_lock_as (l, gate_self);
}

static inline void block_unlock (struct ibcr_block *l, int how)
{
    if (__builtin_expect (how == BLOCK_FAST, 1))
        atomic_store_explicit (&l->owner_in, 0, memory_order_release);
    else if (how == BLOCK_PL)
        plock_unlock (&l->pl);
}

#endif
