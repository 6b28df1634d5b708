/* mt_post.c - several threads post to one QP and poll one CQ at once.
 *
 * Verbs calls are thread-safe: T threads each post N SENDs to the same RC
 * QP, concurrently, and all of them poll the same send CQ.  Every send
 * must complete exactly once, every message must arrive exactly once,
 * intact, and each thread's messages in that thread's posting order (one
 * QP keeps the order of each poster).  The receiver refills its queue
 * while the senders run.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "vw_pair.h"
#include "vw_pattern.h"

#define NTHREAD 4
#define NMSG 2000
#define MSG_LEN 256
#define PER_THREAD_SQ 12 /* each thread's share of the send queue */
#define NRECV 48

static struct vw_dev dev;
static struct vw_pair p;
static uint8_t *buf;
static struct ibv_mr *mr;
static uint8_t *seen;          /* [thread][msg] completions seen */
static int completed[NTHREAD]; /* atomic */
static int errors;             /* atomic */
static int send_fail_status = -1;

static uint8_t *send_slot (int t, int slot)
{
    return buf + ((size_t)t * PER_THREAD_SQ + (size_t)slot) * MSG_LEN;
}

static uint8_t *recv_slot (int i)
{
    return buf + ((size_t)NTHREAD * PER_THREAD_SQ + (size_t)i) * MSG_LEN;
}

/* Poll the shared send CQ; any thread may reap any thread's WR. */
static void reap (void)
{
    struct ibv_wc wc[8];
    int n = ibv_poll_cq (p.cq[0], 8, wc);

    for (int i = 0; i < n; i++) {
        int t = (int)(wc[i].wr_id >> 32), m = (int)(wc[i].wr_id & 0xffffffff);
        if (wc[i].status != IBV_WC_SUCCESS || t >= NTHREAD || m >= NMSG
            || __atomic_fetch_add (&seen[t * NMSG + m], 1, __ATOMIC_SEQ_CST) != 0) {
            __atomic_store_n (&send_fail_status, (int)wc[i].status, __ATOMIC_SEQ_CST);
            __atomic_add_fetch (&errors, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        __atomic_add_fetch (&completed[t], 1, __ATOMIC_SEQ_CST);
    }
    if (n < 0)
        __atomic_add_fetch (&errors, 1, __ATOMIC_SEQ_CST);
}

static void *sender (void *arg)
{
    int t = (int)(intptr_t)arg;

    for (int m = 0; m < NMSG; m++) {
        /* Slot m % share is free once this thread's m - share completed. */
        while (m - __atomic_load_n (&completed[t], __ATOMIC_SEQ_CST) >= PER_THREAD_SQ) {
            if (__atomic_load_n (&errors, __ATOMIC_SEQ_CST))
                return NULL;
            reap ();
        }
        uint8_t *s = send_slot (t, m % PER_THREAD_SQ);
        vw_pattern_fill (s, MSG_LEN, (uint32_t)t, (uint64_t)m);
        int rc = vw_post1 (p.qp[0], IBV_WR_SEND, ((uint64_t)t << 32) | (uint64_t)m, s, MSG_LEN,
                           mr->lkey, 0, 0, IBV_SEND_SIGNALED);
        if (rc) {
            diag ("thread %d: ibv_post_send: %s", t, strerror (rc));
            __atomic_add_fetch (&errors, 1, __ATOMIC_SEQ_CST);
            return NULL;
        }
    }
    while (__atomic_load_n (&completed[t], __ATOMIC_SEQ_CST) < NMSG
           && !__atomic_load_n (&errors, __ATOMIC_SEQ_CST))
        reap ();
    return NULL;
}

int main (void)
{
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr qa;
    pthread_t tid[NTHREAD];
    uint64_t next[NTHREAD] = { 0 };
    int got = 0, bad_order = 0, bad_data = 0, all_done = 1;
    struct timespec t0, t1;
    char err[256];

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    if (posix_memalign ((void **)&buf, 4096, (NTHREAD * PER_THREAD_SQ + NRECV) * MSG_LEN) != 0
        || !(mr = ibv_reg_mr (dev.pd, buf, (NTHREAD * PER_THREAD_SQ + NRECV) * MSG_LEN,
                              IBV_ACCESS_LOCAL_WRITE))
        || !(seen = calloc (NTHREAD * NMSG, 1)))
        BAIL_OUT ("memory: %s", strerror (errno));
    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    ibv_query_qp (p.qp[0], &qa, IBV_QP_CAP, &ia);
    if (ia.cap.max_send_wr < NTHREAD * PER_THREAD_SQ)
        BAIL_OUT ("send queue of %u < %d", ia.cap.max_send_wr, NTHREAD * PER_THREAD_SQ);
    for (int i = 0; i < NRECV; i++)
        if (vw_recv1 (p.qp[1], (uint64_t)i, recv_slot (i), MSG_LEN, mr->lkey))
            BAIL_OUT ("post_recv");
    clock_gettime (CLOCK_MONOTONIC, &t0);
    for (int t = 0; t < NTHREAD; t++)
        pthread_create (&tid[t], NULL, sender, (void *)(intptr_t)t);
    /* The receiver checks and refills while the senders run. */
    while (got < NTHREAD * NMSG && !__atomic_load_n (&errors, __ATOMIC_SEQ_CST)) {
        struct ibv_wc wc;
        uint32_t qp;
        uint64_t seq;
        if (vw_cq_wait (p.cq[1], &wc, 10000) != 1) {
            diag ("no receive completion for 10 s after %d messages", got);
            break;
        }
        uint8_t *r = recv_slot ((int)wc.wr_id);
        if (wc.status != IBV_WC_SUCCESS || wc.byte_len != MSG_LEN
            || vw_pattern_tag (r, MSG_LEN, &qp, &seq) < 0 || qp >= NTHREAD) {
            diag ("receive %d: status %s len %u", got, ibv_wc_status_str (wc.status), wc.byte_len);
            bad_data++;
            break;
        }
        if (seq != next[qp]) {
            if (bad_order++ < 5)
                diag ("thread %u: message %llu arrived where %llu was next", qp,
                      (unsigned long long)seq, (unsigned long long)next[qp]);
        }
        if (vw_pattern_check (r, MSG_LEN, qp, seq, NULL) >= 0)
            bad_data++;
        next[qp] = seq + 1;
        got++;
        if (vw_recv1 (p.qp[1], wc.wr_id, r, MSG_LEN, mr->lkey))
            BAIL_OUT ("post_recv");
    }
    for (int t = 0; t < NTHREAD; t++)
        pthread_join (tid[t], NULL);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    diag ("%d threads x %d SENDs in %.3f s", NTHREAD, NMSG,
          (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    ok (errors == 0,
        "no failed, duplicate or stray send completion (last bad "
        "status %d)",
        send_fail_status);
    for (int t = 0; t < NTHREAD; t++)
        if (completed[t] != NMSG)
            all_done = 0;
    ok (all_done, "every SEND of every thread completed exactly once");
    ok (got == NTHREAD * NMSG, "all %d messages arrived (%d)", NTHREAD * NMSG, got);
    ok (bad_data == 0, "every message arrived intact (%d bad)", bad_data);
    ok (bad_order == 0, "each thread's messages arrived in its posting order (%d out of order)",
        bad_order);
    vw_pair_destroy (&p);
    ibv_dereg_mr (mr);
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
