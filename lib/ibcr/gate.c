/* gate.c - the quiesce gate (see gate.h).
 *
 * The fast path is two atomic operations and one load; the slow path
 * sleeps on a condition variable so quiesced threads cost no CPU during a
 * long dump.
 */
#include "config.h"
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include "gate.h"

atomic_int gate_inside;
atomic_int gate_closed;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;

void gate_wait_open (void)
{
    pthread_mutex_lock (&gate_lock);
    while (atomic_load (&gate_closed))
        pthread_cond_wait (&gate_cond, &gate_lock);
    pthread_mutex_unlock (&gate_lock);
}

void gate_close (void)
{
    pthread_mutex_lock (&gate_lock);
    atomic_store (&gate_closed, 1);
    pthread_mutex_unlock (&gate_lock);
    /* Threads inside finish their verb; none of them blocks there (blocking
     * waits are outside the gate), so this ends quickly. */
    for (int spins = 0; atomic_load (&gate_inside) != 0; spins++) {
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
    pthread_cond_broadcast (&gate_cond);
    pthread_mutex_unlock (&gate_lock);
}
