/* atomic_shared.c - one counter, many QPs and threads: atomics are atomic.
 *
 * NPAIR requester QPs, each driven by its own thread, FETCH_AND_ADD 1 to
 * the same 8-byte counter behind NPAIR different responder QPs.  If the
 * device applies atomics atomically across QPs, the values returned are
 * exactly init .. init+total-1, each once, and the counter ends at
 * init+total.  A lost or torn update shows as a duplicate or a gap.
 * Then the same with CMP_AND_SWP used as a lock-free increment.  TAP.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vw_pair.h"

#define NPAIR 4
#define NOPS 1500
#define INIT 0x100000000ULL
#define WINDOW 8

static struct vw_dev dev;
static struct vw_pair pairs[NPAIR];
static uint64_t *counter, *results;
static struct ibv_mr *cmr, *rmr;
static int failures; /* atomic */

struct job {
    int t;
    enum ibv_wr_opcode op;
    uint64_t cas_tries;
};

static int post_atomic (int t, enum ibv_wr_opcode op, uint64_t id, uint64_t *res, uint64_t cmp,
                        uint64_t swp)
{
    struct ibv_sge sge = { (uintptr_t)res, 8, rmr->lkey };
    struct ibv_send_wr wr, *bad;

    memset (&wr, 0, sizeof (wr));
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = (uintptr_t)counter;
    wr.wr.atomic.rkey = cmr->rkey;
    wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 1 : cmp;
    wr.wr.atomic.swap = swp;
    return ibv_post_send (pairs[t].qp[0], &wr, &bad);
}

static void *fadd_thread (void *arg)
{
    struct job *j = arg;
    uint64_t *res = results + (size_t)j->t * NOPS;
    struct ibv_wc wc;
    int posted = 0, done = 0;

    while (done < NOPS) {
        while (posted < NOPS && posted - done < WINDOW) {
            if (post_atomic (j->t, IBV_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)posted, &res[posted], 0,
                             0))
                goto fail;
            posted++;
        }
        if (vw_cq_wait (pairs[j->t].cq[0], &wc, 5000) != 1 || wc.status != IBV_WC_SUCCESS
            || wc.wr_id != (uint64_t)done) {
            diag ("thread %d: completion %d failed (%s)", j->t, done,
                  ibv_wc_status_str (wc.status));
            goto fail;
        }
        done++;
    }
    return NULL;
fail:
    __atomic_add_fetch (&failures, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* CAS increment: read (CAS with impossible compare), then CAS old->old+1
 * until it wins; every win's old value must be unique. */
static void *cas_thread (void *arg)
{
    struct job *j = arg;
    uint64_t *res = results + (size_t)j->t * NOPS;
    uint64_t guess = INIT, id = 0;
    struct ibv_wc wc;

    for (int won = 0; won < NOPS;) {
        uint64_t got;
        if (post_atomic (j->t, IBV_WR_ATOMIC_CMP_AND_SWP, id, &res[won], guess, guess + 1)
            || vw_cq_wait (pairs[j->t].cq[0], &wc, 5000) != 1 || wc.status != IBV_WC_SUCCESS
            || wc.wr_id != id) {
            __atomic_add_fetch (&failures, 1, __ATOMIC_SEQ_CST);
            return NULL;
        }
        id++;
        j->cas_tries++;
        got = res[won];
        if (got == guess) {
            won++;
            guess = got + 1;
        } else {
            guess = got; /* lost the race: retry from what is there */
        }
    }
    return NULL;
}

static void check (const char *what, uint64_t total)
{
    uint8_t *seen = calloc (total, 1);
    uint64_t dup = 0, out = 0, v = *(volatile uint64_t *)counter;

    for (uint64_t i = 0; i < total; i++) {
        uint64_t r = results[i] - INIT;
        if (results[i] < INIT || r >= total)
            out++;
        else if (seen[r]++)
            dup++;
    }
    ok (failures == 0, "%s: every operation completed successfully", what);
    ok (dup == 0 && out == 0,
        "%s: returned values are %llu distinct, in range "
        "(%llu duplicates, %llu out of range)",
        what, (unsigned long long)total, (unsigned long long)dup, (unsigned long long)out);
    ok (v == INIT + total, "%s: the counter ends at init + %llu (off by %lld)", what,
        (unsigned long long)total, (long long)(v - INIT - total));
    free (seen);
}

static void run (enum ibv_wr_opcode op)
{
    pthread_t tid[NPAIR];
    struct job jobs[NPAIR];
    uint64_t tries = 0;

    *counter = INIT;
    failures = 0;
    memset (results, 0, sizeof (uint64_t) * NPAIR * NOPS);
    for (int t = 0; t < NPAIR; t++) {
        jobs[t] = (struct job){ t, op, 0 };
        pthread_create (&tid[t], NULL, op == IBV_WR_ATOMIC_FETCH_AND_ADD ? fadd_thread : cas_thread,
                        &jobs[t]);
    }
    for (int t = 0; t < NPAIR; t++) {
        pthread_join (tid[t], NULL);
        tries += jobs[t].cas_tries;
    }
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP)
        diag ("%llu CMP_AND_SWP for %d increments (contention)", (unsigned long long)tries,
              NPAIR * NOPS);
    check (op == IBV_WR_ATOMIC_FETCH_AND_ADD ? "FETCH_AND_ADD from 4 QPs"
                                             : "CMP_AND_SWP increments from 4 QPs",
           (uint64_t)NPAIR * NOPS);
}

int main (void)
{
    char err[256];

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    if (dev.attr.atomic_cap == IBV_ATOMIC_NONE) {
        printf ("1..0 # SKIP the device has no atomics\n");
        return 0;
    }
    if (posix_memalign ((void **)&counter, 4096, 4096) != 0
        || posix_memalign ((void **)&results, 4096, sizeof (uint64_t) * NPAIR * NOPS) != 0
        || !(cmr = ibv_reg_mr (dev.pd, counter, 4096,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC))
        || !(rmr = ibv_reg_mr (dev.pd, results, sizeof (uint64_t) * NPAIR * NOPS,
                               IBV_ACCESS_LOCAL_WRITE)))
        BAIL_OUT ("memory: %s", strerror (errno));
    for (int t = 0; t < NPAIR; t++)
        if (vw_pair_create (&pairs[t], &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
            || vw_pair_connect (&pairs[t], NULL, NULL, err, sizeof (err)) < 0)
            BAIL_OUT ("pair %d: %s", t, err);
    run (IBV_WR_ATOMIC_FETCH_AND_ADD);
    run (IBV_WR_ATOMIC_CMP_AND_SWP);
    for (int t = 0; t < NPAIR; t++)
        vw_pair_destroy (&pairs[t]);
    ibv_dereg_mr (cmr);
    ibv_dereg_mr (rmr);
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
