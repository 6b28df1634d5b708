/* conn_death.c - peers vanish while the application polls.
 *
 * softib lets a thread that polls an empty CQ read its QPs' connections
 * itself; when it finds one at end of stream it kills it, under the QP's
 * lock, while the progress thread frees dead connections.  The free once
 * came before the killer had let go of the connection, and
 * ibv_srq_pingpong's server died of SIGSEGV after its client had finished
 * (1 run in about 60 under load).  Here that moment comes many times per
 * round: NPAIR RC QP pairs of one context carry one message each way,
 * then a second thread destroys one side's QPs (which closes their
 * connections) while the main thread busy-polls the other side's CQs and
 * so meets the ends of stream itself.  Every message must arrive intact;
 * the process must survive every round.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

#define NPAIR 32
#define ROUNDS (getenv ("SV_ROUNDS") ? atoi (getenv ("SV_ROUNDS")) : 20)
#define MSGLEN 64

static struct sv_dev dev;
static struct ibv_mr *mr;
static uint8_t *buf; /* per pair: 2 send slots, 2 receive slots */
static struct sv_pair pair[NPAIR];
static volatile int killer_done;

static uint8_t *slot (int p, int k)
{
    return buf + ((size_t)p * 4 + (size_t)k) * MSGLEN;
}

static void fill (uint8_t *b, uint32_t round, int p, int side)
{
    for (int i = 0; i < MSGLEN; i++)
        b[i] = (uint8_t)(round * 131 + (uint32_t)p * 17 + (uint32_t)side * 7 + (uint32_t)i);
}

/* One SEND each way on pair p, every byte checked; 0 or -1. */
static int exchange (uint32_t round, int p)
{
    int got = 0, sent = 0;

    for (int s = 0; s < 2; s++) {
        fill (slot (p, s), round, p, s);
        memset (slot (p, 2 + s), 0, MSGLEN);
        if (sv_recv (pair[p].qp[s], 2 + s, slot (p, 2 + s), MSGLEN, mr->lkey))
            return -1;
    }
    for (int s = 0; s < 2; s++)
        if (sv_send (pair[p].qp[s], IBV_WR_SEND, s, slot (p, s), MSGLEN, mr->lkey, 0, 0,
                     IBV_SEND_SIGNALED))
            return -1;
    for (int s = 0; s < 2; s++) {
        struct ibv_wc wc;

        for (int n = 0; n < 2; n++) {
            if (sv_wait (pair[p].cq[s], &wc, 10000) != 1 || wc.status != IBV_WC_SUCCESS)
                return -1;
            if (wc.opcode == IBV_WC_RECV)
                got++;
            else
                sent++;
        }
    }
    if (got != 2 || sent != 2)
        return -1;
    for (int s = 0; s < 2; s++) {
        uint8_t want[MSGLEN];

        fill (want, round, p, 1 - s);
        if (memcmp (slot (p, 2 + s), want, MSGLEN))
            return -1;
    }
    return 0;
}

/* Destroys side 1 of every pair: its connections close under side 0. */
static void *killer (void *arg)
{
    for (int p = 0; p < NPAIR; p++) {
        ibv_destroy_qp (pair[p].qp[1]);
        pair[p].qp[1] = NULL;
    }
    __atomic_store_n (&killer_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main (void)
{
    int rounds = ROUNDS, bad_exchange = 0, bad_flush = 0;

    plan (2);
    sv_open (&dev);
    buf = NULL;
    mr = sv_mr (&dev, (size_t)NPAIR * 4 * MSGLEN, IBV_ACCESS_LOCAL_WRITE);
    buf = mr->addr;
    for (int r = 0; r < rounds; r++) {
        pthread_t t;
        uint64_t end;
        struct ibv_wc wc;

        for (int p = 0; p < NPAIR; p++) {
            sv_pair_create (&dev, &pair[p], IBV_QPT_RC, NULL, 16);
            if (sv_pair_connect (&dev, &pair[p], NULL, NULL))
                BAIL_OUT ("connecting pair %d failed", p);
        }
        for (int p = 0; p < NPAIR; p++)
            if (exchange ((uint32_t)r, p))
                bad_exchange++;
        killer_done = 0;
        if (pthread_create (&t, NULL, killer, NULL))
            BAIL_OUT ("pthread_create failed");
        /* busy polls until the killer is done and a little after, so
		 * that this thread meets the ends of stream */
        end = 0;
        while (!end || sv_now_us () < end) {
            for (int p = 0; p < NPAIR; p++)
                if (ibv_poll_cq (pair[p].cq[0], 1, &wc) != 0)
                    bad_flush++; /* nothing was posted */
            if (!end && __atomic_load_n (&killer_done, __ATOMIC_ACQUIRE))
                end = sv_now_us () + 20000;
        }
        pthread_join (t, NULL);
        for (int p = 0; p < NPAIR; p++)
            sv_pair_destroy (&pair[p]);
    }
    ok (bad_exchange == 0,
        "%d rounds of %d RC pairs: every message "
        "arrived intact (%d exchanges failed)",
        rounds, NPAIR, bad_exchange);
    ok (bad_flush == 0,
        "the surviving side saw no completion while its "
        "peers vanished (%d seen)",
        bad_flush);
    sv_mr_free (mr);
    sv_close (&dev);
    return exit_status ();
}
