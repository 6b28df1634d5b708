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
 */
#ifndef IBCR_GATE_H
#define IBCR_GATE_H

#include <stdatomic.h>

extern atomic_int gate_inside;
extern atomic_int gate_closed;
void gate_wait_open (void);

static inline void gate_enter (void)
{
    for (;;) {
        atomic_fetch_add (&gate_inside, 1);
        if (__builtin_expect (!atomic_load (&gate_closed), 1))
            return;
        atomic_fetch_sub (&gate_inside, 1);
        gate_wait_open ();
    }
}

static inline void gate_leave (void)
{
    atomic_fetch_sub (&gate_inside, 1);
}

/* Close the gate and wait until no thread is inside.  Only the checkpoint
 * thread calls it. */
void gate_close (void);
void gate_open (void);

#endif
