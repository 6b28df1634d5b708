/* gate.c - the quiesce gate (see gate.h).
 *
 * Each thread that ever entered the gate has a slot on a list that only
 * grows (a slot whose thread exited is reused by the next new thread).
 * The slow path sleeps on a condition variable so quiesced threads cost no
 * CPU during a long dump.
 */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>
#include "gate.h"
#include "block.h"
#include "ibcr.h"

atomic_int gate_closed;
atomic_bool gate_fence;
atomic_int gate_word;
__thread struct gate_slot *gate_self __attribute__ ((tls_model ("initial-exec")));
static struct gate_slot *_Atomic slots;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static pthread_key_t gate_key;

static int membarrier (int cmd)
{
    return (int)syscall (__NR_membarrier, cmd, 0, 0);
}

static void slot_release (void *p)
{
    struct gate_slot *s = p;
    pthread_mutex_lock (&gate_lock);
    s->owned = false;
    pthread_mutex_unlock (&gate_lock);
}

/* From now on every entry and every biased lock's owner fences: set the
 * flag, the fast path's word and every slot's copy (new slots copy
 * gate_fence under gate_lock). */
static void fence_on (void)
{
    pthread_mutex_lock (&gate_lock);
    atomic_store (&gate_fence, true);
    atomic_fetch_or (&gate_word, GATE_FENCE);
    for (struct gate_slot *s = atomic_load (&slots); s; s = s->next)
        atomic_store_explicit (&s->fence, true, memory_order_relaxed);
    pthread_mutex_unlock (&gate_lock);
}

static void gate_init (void)
{
    pthread_key_create (&gate_key, slot_release);
    if (membarrier (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        fence_on ();
}

struct gate_slot *gate_slot_new (void)
{
    pthread_once (&gate_once, gate_init);
    pthread_mutex_lock (&gate_lock);
    struct gate_slot *s;
    for (s = atomic_load (&slots); s; s = s->next)
        if (!s->owned)
            break;
    if (!s) {
        s = aligned_alloc (64, sizeof (*s));
        if (!s)
            abort (); /* cannot pass the gate without a slot */
        atomic_init (&s->inside, 0);
        s->next = atomic_load (&slots);
        atomic_store (&slots, s);
    }
    s->owned = true;
    atomic_store_explicit (&s->fence, atomic_load (&gate_fence), memory_order_relaxed);
    pthread_mutex_unlock (&gate_lock);
    /* A thread exiting returns the slot (its depth is 0 then). */
    pthread_setspecific (gate_key, s);
    gate_self = s;
    return s;
}

void gate_enter_slow (struct gate_slot *s, int d)
{
    for (;;) {
        if (atomic_load_explicit (&gate_word, memory_order_relaxed) & GATE_FENCE)
            atomic_thread_fence (memory_order_seq_cst);
        if (!(atomic_load_explicit (&gate_word, memory_order_acquire) & GATE_CLOSED))
            return;
        atomic_store_explicit (&s->inside, d, memory_order_release);
        gate_wait_open ();
        atomic_store_explicit (&s->inside, d + 1, memory_order_relaxed);
    }
}

void gate_wait_open (void)
{
    pthread_mutex_lock (&gate_lock);
    while (atomic_load (&gate_closed))
        pthread_cond_wait (&gate_cond, &gate_lock);
    pthread_mutex_unlock (&gate_lock);
}

/* Every thread of the process executes a full barrier: after it, a thread
 * either shows its slot's store or sees gate_closed. */
static void barrier_all (void)
{
    if (atomic_load (&gate_fence))
        return; /* gate_enter fences itself */
    if (membarrier (MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    /* The registration is state of the process in the kernel: a process
     * restored by CRIU may have lost it. */
    if (membarrier (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
        && membarrier (MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    if (membarrier (MEMBARRIER_CMD_GLOBAL) == 0)
        return;
    /* No membarrier at all: make the entries fence from now on and wait
     * long enough for any thread between its store and its load (a few
     * instructions) to have left that window. */
    ibcr_log ("membarrier failed (%m): the gate fences on every verb from now on");
    fence_on ();
    atomic_thread_fence (memory_order_seq_cst);
    nanosleep (&(struct timespec){ 0, 10000000 }, NULL);
}

static bool anyone_inside (void)
{
    for (struct gate_slot *s = atomic_load (&slots); s; s = s->next)
        if (atomic_load_explicit (&s->inside, memory_order_acquire) != 0)
            return true;
    return false;
}

void gate_close (void)
{
    pthread_once (&gate_once, gate_init);
    pthread_mutex_lock (&gate_lock);
    atomic_store (&gate_closed, 1);
    atomic_fetch_or (&gate_word, GATE_CLOSED);
    pthread_mutex_unlock (&gate_lock);
    barrier_all ();
    /* Threads inside finish their verb; none of them blocks there (blocking
     * waits are outside the gate), so this ends quickly. */
    for (int spins = 0; anyone_inside (); spins++) {
        if (spins < 100)
            sched_yield ();
        else
            nanosleep (&(struct timespec){ 0, 50000 }, NULL);
    }
}

void gate_open (void)
{
    pthread_mutex_lock (&gate_lock);
    atomic_store (&gate_closed, 0);
    atomic_fetch_and (&gate_word, ~GATE_CLOSED);
    pthread_cond_broadcast (&gate_cond);
    pthread_mutex_unlock (&gate_lock);
}

/* ---- block.h's slow path ---- */

int block_lock_owner_slow (struct ibcr_block *l, struct gate_slot *s)
{
    if (atomic_load_explicit (&s->fence, memory_order_relaxed)) {
        atomic_thread_fence (memory_order_seq_cst);
        if (!atomic_load_explicit (&l->revoked, memory_order_acquire))
            return BLOCK_FAST;
    }
    atomic_store_explicit (&l->owner_in, 0, memory_order_release);
    return block_lock_slow (l);
}

int block_lock_slow (struct ibcr_block *l)
{
    struct gate_slot *s = gate_self;
    if (!s) {
        /* libibcr's own thread: with the gate closed no application thread
         * is inside a verb, so it needs no lock (and keeps the bias). */
        if (atomic_load (&gate_closed))
            return BLOCK_NONE;
    } else {
        struct gate_slot *none = NULL;
        if (atomic_compare_exchange_strong (&l->owner, &none, s))
            return block_lock (l); /* the first thread: biased to it */
    }
    plock_lock (&l->pl);
    if (!atomic_load (&l->revoked)) {
        atomic_store (&l->revoked, 1);
        barrier_all ();
        /* The owner either saw 'revoked' or shows it is inside: wait for it
         * to leave.  It holds the lock for one verb at most. */
        for (int spins = 0; atomic_load_explicit (&l->owner_in, memory_order_acquire); spins++)
            if (spins > 64)
                sched_yield ();
    }
    return BLOCK_PL;
}
