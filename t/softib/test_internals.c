/* test_internals - unit test of softib's biased lock (lib/softib/misc.c)
 * and of its send queue's acknowledgement (lib/softib/tx.c), linked with
 * those files and stand-ins for what they call of the rest of softib.
 *
 * - The lock: a thread that holds it by its fast path (the bias) while
 *   another thread's try-locks end the bias must still exclude every
 *   other taker until it unlocks: the take that ended the bias backed
 *   off because the owner was inside, and the takes after it must too.
 * - The ACK: the send queue's counters run free and wrap; an ACK that
 *   covers WQEs on both sides of 2^32 completes each one once, and the
 *   count of WQEs sent does not go back (which sent WQEs again).
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "softib.h"
#include "tap.h"

/* ---- stand-ins for the rest of softib ---- */
void sib_log (const char *fmt, ...)
{
    va_list a;
    va_start (a, fmt);
    vfprintf (stderr, fmt, a);
    va_end (a);
    fputc ('\n', stderr);
}

uint64_t sib_now_ns (void)
{
    struct timespec t;
    clock_gettime (CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct ibv_wc *sib_cq_full (struct sib_cq *cq)
{
    sib_unlock (&cq->lock);
    return NULL;
}

void sib_cq_commit_slow (struct sib_cq *cq, bool solicited)
{
    (void)solicited;
    cq->head++;
    sib_unlock (&cq->lock);
}

void sib_qp_error (struct sib_qp *qp, const char *why)
{
    (void)qp;
    BAIL_OUT ("unexpected QP error: %s", why);
}

int sib_conn_flush (struct sib_conn *c)
{
    (void)c;
    return 0;
}

void sib_req_lost (struct sib_qp *qp, const char *why)
{
    (void)qp;
    BAIL_OUT ("unexpected lost request: %s", why);
}

bool sib_shm_put (struct sib_conn *c, const void *h, size_t hl, const void *p, size_t pl)
{
    (void)c, (void)h, (void)hl, (void)p, (void)pl;
    return false;
}

ssize_t sib_conn_writev (struct sib_conn *c, struct iovec *iov, int n)
{
    (void)c, (void)iov, (void)n;
    return -1;
}

void sib_conn_want_out (struct sib_conn *c, bool on)
{
    (void)c, (void)on;
}

/* ---- the lock ---- */
static sib_lock_t lk;
static volatile int inside, held;

static void *owner (void *arg)
{
    (void)arg;
    sib_lock_app (&lk); /* claims the bias */
    sib_unlock (&lk);
    sib_lock_app (&lk); /* by the fast path */
    inside = 1;
    held = 1;
    usleep (200000); /* a long critical section: preempted, say */
    inside = 0;
    sib_unlock (&lk);
    return NULL;
}

static void test_lock (void)
{
    pthread_t t;
    int wrong = 0, refused = 0;

    sib_lock_init (&lk, true);
    if (pthread_create (&t, NULL, owner, NULL))
        BAIL_OUT ("pthread_create");
    while (!held)
        usleep (100);
    /* More than SIB_LOCK_FOREIGN try-locks while the owner is inside:
     * the bias ends on the way. */
    for (int i = 0; i < 3 * SIB_LOCK_FOREIGN / 2; i++) {
        if (!sib_trylock_app (&lk)) {
            refused++;
            continue;
        }
        wrong += inside;
        sib_unlock (&lk);
    }
    ok (lk.owner == SIB_LOCK_REVOKED, "the try-locks ended the bias (owner %#lx)",
        (unsigned long)lk.owner);
    ok (wrong == 0, "no try-lock got in while the owner was inside (%d did, %d refused)", wrong,
        refused);
    sib_lock (&lk);
    ok (inside == 0, "a blocking take waits until the owner unlocks");
    sib_unlock (&lk);
    pthread_join (t, NULL);
}

/* ---- the ACK across the counters' wrap ---- */
static void test_ack_wrap (void)
{
    static struct sib_qp qp;
    static struct sib_cq cq;
    uint32_t seq = 100;

    cq.size = 16;
    cq.ring = calloc (16, sizeof (struct ibv_wc));
    sib_lock_init (&cq.lock, false);
    qp.scq = &cq;
    qp.sq_cap = 8;
    qp.sq = aligned_alloc (64, 8 * sizeof (struct sib_swqe));
    if (!cq.ring || !qp.sq)
        BAIL_OUT ("out of memory");
    sib_lock_init (&qp.lock, false);
    /* Four WQEs sent, two before the wrap and two after: sq_tx and
     * sq_head have wrapped, sq_done has not. */
    qp.sq_done = 0xfffffffeu;
    qp.sq_head = qp.sq_tx = 2u;
    for (uint32_t i = qp.sq_done; i != qp.sq_head; i++, seq++) {
        struct sib_swqe *w = &qp.sq[i & 7];
        w->seq = seq;
        w->signaled = 1;
        w->sent = 1;
        w->op = SIB_OP_SEND;
        w->wr_id = seq;
    }
    sib_sq_ack (&qp, seq); /* an ACK of the last: covers all four */
    ok (cq.head == 4 && qp.sq_done == 2u && qp.sq_tx == 2u,
        "an ACK across the wrap completes all four WQEs (%u), sq_done %#x, sq_tx %#x (want 2)",
        cq.head, qp.sq_done, qp.sq_tx);
    for (uint32_t k = 0; k < cq.head && k < 4; k++)
        if (cq.ring[k].wr_id != 100 + k)
            ok (0, "completion %u is of wr_id %llu, not %u", k,
                (unsigned long long)cq.ring[k].wr_id, 100 + k);
    free (cq.ring);
    free (qp.sq);
}

int main (void)
{
    plan (NO_PLAN);
    if (!sib_lock_bias_ok ())
        skip (3, "this kernel has no private expedited membarrier: the locks have no bias");
    else
        test_lock ();
    test_ack_wrap ();
    done_testing ();
    return exit_status ();
}
