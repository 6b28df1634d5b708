/* gate.h - the quiesce gate every application verbs call passes through.
 *
 * gate_enter/gate_leave bracket each verb.  gate_close (checkpoint
 * thread) stops new entries and waits until no application thread is
 * inside a verb; those arriving later wait inside gate_enter, without error
 * and without losing their call, until gate_open.  Blocking waits that
 * must not hold the gate (ibv_get_cq_event, ibv_get_async_event) wait
 * outside it and only enter to consume what they got.
 *
 * The checkpoint thread itself never passes the gate (it calls the
 * internal functions), so it cannot deadlock on it.
 *
 * The fast path touches only the calling thread's own slot (its own cache
 * line): a plain store of its nesting depth, then a load of gate_closed,
 * which only the checkpoint thread writes.  No atomic read-modify-write,
 * no line shared by writers.  What orders the store before the load is
 * paid by gate_close: membarrier(2) (MEMBARRIER_CMD_PRIVATE_EXPEDITED)
 * runs a full barrier on every thread of the process between its store
 * of gate_closed and its reading of the slots (an asymmetric Dekker
 * handshake).  Where membarrier is unavailable, gate_enter issues the
 * fence itself (gate_fence).
 *
 * The fast path loads one word, gate_word: GATE_CLOSED while the gate is
 * closed, GATE_FENCE for good once entries must fence.  Either sends the
 * entry out of line (gate_enter_slow), so an open gate costs one load and
 * one test, and the fence mode none.  Each slot has its own copy of the
 * fence mode ('fence') for the biased locks (block.h), read from the
 * thread's own line.
 */
#ifndef IBCR_GATE_H
#define IBCR_GATE_H

#include <stdatomic.h>
#include <stdbool.h>

struct gate_slot {
    _Alignas(64) atomic_int inside; /* verbs this thread is in (nesting) */
    bool owned;                     /* a live thread has it */
    atomic_bool fence;              /* gate_fence, for block.h: fence too */
    struct gate_slot *next;
};

enum { GATE_CLOSED = 1, GATE_FENCE = 2 };

/* Hidden: libibcr's own, so its code loads them directly (one
 * RIP-relative load) instead of through the GOT. */
#define GATE_HIDDEN __attribute__ ((visibility ("hidden")))
extern atomic_int gate_closed GATE_HIDDEN;
extern atomic_bool gate_fence GATE_HIDDEN;
extern atomic_int gate_word GATE_HIDDEN; /* GATE_CLOSED | GATE_FENCE, for gate_enter */
extern __thread struct gate_slot *gate_self
    __attribute__ ((tls_model ("initial-exec"), visibility ("hidden")));
struct gate_slot *gate_slot_new (void) __attribute__ ((returns_nonnull));
void gate_wait_open (void);
/* gate_enter when gate_word is not 0: fence, wait while closed. */
void gate_enter_slow (struct gate_slot *s, int d);

/* Returns the calling thread's slot, for gate_leave_as and block_lock_as:
 * the data path passes it on instead of reading the thread-local pointer
 * again (two loads each time). */
static inline struct gate_slot *gate_enter (void)
{
    struct gate_slot *s = gate_self;
    if (__builtin_expect (!s, 0))
        s = gate_slot_new ();
    int d = atomic_load_explicit (&s->inside, memory_order_relaxed);
    atomic_store_explicit (&s->inside, d + 1, memory_order_relaxed);
    atomic_signal_fence (memory_order_seq_cst);
    /* Nothing of the verb may be done before the check: an acquire load
     * (on x86 the same plain load as a relaxed one), which also lets
     * ThreadSanitizer see that what a rebuild wrote before gate_open
     * happens before this verb.  In fence mode gate_word is never 0. */
    if (__builtin_expect (atomic_load_explicit (&gate_word, memory_order_acquire) != 0, 0))
        gate_enter_slow (s, d);
    return s;
}

static inline void gate_leave_as (struct gate_slot *s)
{
    atomic_store_explicit (&s->inside, atomic_load_explicit (&s->inside, memory_order_relaxed) - 1,
                           memory_order_release);
}

static inline void gate_leave (void)
{
    gate_leave_as (gate_self);
}

/* Close the gate and wait until no thread is inside.  Only the checkpoint
 * thread calls it. */
void gate_close (void);
void gate_open (void);

#endif
