/* race.c - several threads on separate and shared QPs and CQs at once,
 * while another thread creates and destroys QPs: a data-race workload for
 * libibcr's completion path, run under ThreadSanitizer by t2009.
 *
 *   race [-n ROUNDS]
 *
 * All QPs are RC QPs on the first device, in the error state but rfp's:
 * every post completes at once with a flush completion, so no network is
 * involved and the threads spend their time in the verbs calls.  Threads:
 *   own0, own1  each its own CQ and QP: post sends and receives, poll
 *   snd         posts sends on the shared QP and polls its send CQ
 *   rcv         posts receives on the shared QP and polls its receive CQ
 *               (an error completion there makes libibcr look at the
 *               shared QP's send log, which snd changes meanwhile)
 *   churn       creates 40 QPs on a CQ of its own, destroys them, again
 *               (libibcr's real-QPN table changes under the pollers)
 *   pst, pol    one posts sends and receives on a QP, the other polls its
 *               CQ: the send and receive logs' producer and consumer on
 *               two threads, with no lock in common (lib/ibcr/wrlog.h).
 *               Before they start, pol polls that CQ for nothing (its
 *               lock is then biased to pol), then pst does (libibcr
 *               revokes the bias), and again after each post.
 *   rfp, spin   one posts receives on a QP in INIT until its receive
 *               queue is full and then REFUSED_POSTS more, each refused
 *               (libibcr takes the refused entry back from the receive
 *               log under the receive CQ's lock); the other polls that
 *               CQ, empty, in a loop meanwhile.  With a lock that served
 *               its takers in no order, the poller (softib yields inside
 *               an empty poll, holding it) kept it for seconds, or for
 *               good: the run ends by SIGALRM after 120 s, failing.
 *   cx0, cx1    each posts sends on a QP of its own, both QPs on one
 *               extended CQ, and polls that CQ with ibv_start_poll ..
 *               ibv_end_poll: each completion's QP (ibv_wc_read_qp_num)
 *               must be the one its wr_id names.  Two polls at once
 *               shared the completion being read (the provider's CQ lock
 *               held from start to end is what keeps them apart).
 * Every completion is checked: flush status, the QP it names, and its
 * wr_id, which carries the queue (send or receive) and a sequence number
 * that must come in posting order.  TAP on stdout.
 */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "selfqp.h"
#include "tap.h"

#define BATCH 16
#define SEND_TAG (1ULL << 62)
#define RECV_TAG (1ULL << 61)

static int rounds = 3000;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char buf[64];
static atomic_int stop, errors;

static void fail (const char *who, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static void fail (const char *who, const char *fmt, ...)
{
    if (atomic_fetch_add (&errors, 1) < 10) {
        char m[200];
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (m, sizeof (m), fmt, ap);
        va_end (ap);
        diag ("%s: %s", who, m);
    }
}

static struct ibv_cq *mkcq (void)
{
    struct ibv_cq *cq = ibv_create_cq (ctx, 8 * BATCH, NULL, NULL, 0);
    if (!cq)
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));
    return cq;
}

/* An RC QP in the error state. */
static struct ibv_qp *mkqp (struct ibv_cq *scq, struct ibv_cq *rcq, int err)
{
    struct ibv_qp_init_attr a = {
        .send_cq = scq,
        .recv_cq = rcq,
        .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = BATCH, .max_recv_wr = BATCH, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *qp = ibv_create_qp (pd, &a);
    if (!qp)
        return NULL;
    struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT,
                             .port_num = 1,
                             .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
    if (ibv_modify_qp (qp, &m,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        BAIL_OUT ("modify to INIT: %s", strerror (errno));
    m.qp_state = IBV_QPS_ERR;
    if (err && ibv_modify_qp (qp, &m, IBV_QP_STATE))
        BAIL_OUT ("modify to ERR: %s", strerror (errno));
    return qp;
}

static void post_sends (struct ibv_qp *qp, uint64_t *seq, int n)
{
    struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
    struct ibv_send_wr w = { .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED },
                       *bad;
    for (int i = 0; i < n; i++) {
        w.wr_id = SEND_TAG | (*seq)++;
        if (ibv_post_send (qp, &w, &bad))
            BAIL_OUT ("ibv_post_send: %s", strerror (errno));
    }
}

static void post_recvs (struct ibv_qp *qp, uint64_t *seq, int n)
{
    struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
    struct ibv_recv_wr w = { .sg_list = &sge, .num_sge = 1 }, *bad;
    for (int i = 0; i < n; i++) {
        w.wr_id = RECV_TAG | (*seq)++;
        if (ibv_post_recv (qp, &w, &bad))
            BAIL_OUT ("ibv_post_recv: %s", strerror (errno));
    }
}

/* Poll n completions from cq; each must be a flush of qp, of the queue
 * 'tag', in order (*next*: the sequence number expected next, per tag). */
static void poll_n (const char *who, struct ibv_cq *cq, struct ibv_qp *qp, int n,
                    uint64_t *next_send, uint64_t *next_recv)
{
    struct ibv_wc wc[4];
    for (int got = 0, idle = 0; got < n;) {
        int r = ibv_poll_cq (cq, 4 < n - got ? 4 : n - got, wc);
        if (r < 0)
            BAIL_OUT ("%s: ibv_poll_cq failed", who);
        if (r == 0 && ++idle > 2000000) {
            fail (who, "%d of %d completions never came", n - got, n);
            return;
        }
        for (int i = 0; i < r; i++) {
            uint64_t id = wc[i].wr_id;
            uint64_t *next = (id & SEND_TAG) ? next_send : (id & RECV_TAG) ? next_recv : NULL;
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
                fail (who, "status %d (wr_id %llx)", (int)wc[i].status, (unsigned long long)id);
            if (wc[i].qp_num != qp->qp_num)
                fail (who, "completion names QP %u, not %u", wc[i].qp_num, qp->qp_num);
            if (!next)
                fail (who, "wr_id %llx of no queue", (unsigned long long)id);
            else if ((id & ~(SEND_TAG | RECV_TAG)) != (*next)++)
                fail (who, "wr_id %llx out of order (expected %llu)", (unsigned long long)id,
                      (unsigned long long)(*next - 1));
        }
        got += r;
    }
}

static struct ibv_qp *sh_qp;
static struct ibv_cq *sh_scq, *sh_rcq;
static pthread_barrier_t bar;

static void *own (void *p)
{
    const char *who = p;
    struct ibv_cq *cq = mkcq ();
    struct ibv_qp *qp = mkqp (cq, cq, 1);
    uint64_t ps = 0, pr = 0, ns = 0, nr = 0;
    if (!qp)
        BAIL_OUT ("%s: ibv_create_qp: %s", who, strerror (errno));
    pthread_barrier_wait (&bar);
    for (int r = 0; r < rounds; r++) {
        post_sends (qp, &ps, BATCH / 2);
        post_recvs (qp, &pr, BATCH / 2);
        poll_n (who, cq, qp, BATCH, &ns, &nr);
    }
    if (ns != ps || nr != pr)
        fail (who, "completed %llu of %llu sends, %llu of %llu receives", (unsigned long long)ns,
              (unsigned long long)ps, (unsigned long long)nr, (unsigned long long)pr);
    ibv_destroy_qp (qp);
    ibv_destroy_cq (cq);
    return NULL;
}

static void *snd (void *p)
{
    uint64_t ps = 0, ns = 0, none = 0;
    pthread_barrier_wait (&bar);
    for (int r = 0; r < rounds; r++) {
        post_sends (sh_qp, &ps, BATCH);
        poll_n ("snd", sh_scq, sh_qp, BATCH, &ns, &none);
    }
    if (ns != ps)
        fail ("snd", "%llu of %llu sends completed", (unsigned long long)ns,
              (unsigned long long)ps);
    return NULL;
}

static void *rcv (void *p)
{
    uint64_t pr = 0, nr = 0, none = 0;
    pthread_barrier_wait (&bar);
    for (int r = 0; r < rounds; r++) {
        post_recvs (sh_qp, &pr, BATCH);
        poll_n ("rcv", sh_rcq, sh_qp, BATCH, &none, &nr);
    }
    if (nr != pr)
        fail ("rcv", "%llu of %llu receives completed", (unsigned long long)nr,
              (unsigned long long)pr);
    return NULL;
}

static struct ibv_qp *x_qp;
static struct ibv_cq *x_cq;
static atomic_ullong x_done;

static atomic_int pol_owns;

static void *pst (void *p)
{
    uint64_t ps = 0, pr = 0, total = (uint64_t)rounds * BATCH / 2;
    struct ibv_wc none;
    while (!atomic_load (&pol_owns))
        sched_yield ();
    if (ibv_poll_cq (x_cq, 0, &none) != 0)
        fail ("pst", "a poll for no completion did not return 0");
    pthread_barrier_wait (&bar);
    while (ps < total) {
        /* At most BATCH - 2 outstanding in all (a send and a receive a
         * step, completed in that order): each queue holds BATCH. */
        for (long idle = 0; ps + pr - atomic_load (&x_done) >= BATCH - 2; idle++)
            if (idle > 5000000 || atomic_load (&errors)) {
                fail ("pst", "the poller stopped at %llu of %llu",
                      (unsigned long long)atomic_load (&x_done), (unsigned long long)(ps + pr));
                return NULL;
            } else
                sched_yield ();
        post_sends (x_qp, &ps, 1);
        post_recvs (x_qp, &pr, 1);
        /* a second poller of pol's CQ, for nothing: the CQ's lock goes
         * back and forth between the two, served in order */
        if (ibv_poll_cq (x_cq, 0, &none) != 0)
            fail ("pst", "a poll for no completion did not return 0");
    }
    return NULL;
}

static void *pol (void *p)
{
    uint64_t ns = 0, nr = 0, total = (uint64_t)rounds * BATCH;
    struct ibv_wc w;
    if (ibv_poll_cq (x_cq, 0, &w) != 0)
        fail ("pol", "a poll for no completion did not return 0");
    atomic_store (&pol_owns, 1);
    pthread_barrier_wait (&bar);
    while (ns + nr < total && !atomic_load (&errors)) {
        poll_n ("pol", x_cq, x_qp, 1, &ns, &nr);
        atomic_store (&x_done, ns + nr);
    }
    return NULL;
}

#define REFUSED_POSTS 1000
static struct ibv_qp *rf_qp;
static struct ibv_cq *rf_cq;
static atomic_int rf_done, spin_owns;

static void *rfp (void *p)
{
    struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
    struct ibv_recv_wr w = { .sg_list = &sge, .num_sge = 1 }, *bad;
    int refused = 0, posted = 0;
    while (!atomic_load (&spin_owns))
        sched_yield ();
    pthread_barrier_wait (&bar);
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    while (refused < REFUSED_POSTS && !atomic_load (&errors)) {
        w.wr_id = RECV_TAG | posted;
        if (ibv_post_recv (rf_qp, &w, &bad) == 0)
            posted++;
        else
            refused++;
        clock_gettime (CLOCK_MONOTONIC, &t1);
        if (t1.tv_sec - t0.tv_sec > 30) {
            fail ("rfp", "%d refused receive posts took more than 30 s", refused);
            break;
        }
    }
    if (posted < BATCH)
        fail ("rfp", "only %d receives taken before the first refusal", posted);
    atomic_store (&rf_done, 1);
    return NULL;
}

static void *spin (void *p)
{
    struct ibv_wc w;
    if (ibv_poll_cq (rf_cq, 1, &w) != 0)
        fail ("spin", "a completion from a QP in INIT");
    atomic_store (&spin_owns, 1);
    pthread_barrier_wait (&bar);
    while (!atomic_load (&rf_done))
        if (ibv_poll_cq (rf_cq, 1, &w) != 0)
            fail ("spin", "a completion from a QP in INIT");
    return NULL;
}

static struct ibv_cq_ex *cx_cq;
static struct ibv_qp *cx_qp[2];
static atomic_ullong cx_posted[2], cx_seen[2];

/* One poll of cx_cq from start to end; the completions seen. */
static int cx_poll (const char *who)
{
    struct ibv_poll_cq_attr at = { 0 };
    int n = 0, rc = ibv_start_poll (cx_cq, &at);
    if (rc == ENOENT)
        return 0;
    if (rc)
        BAIL_OUT ("%s: ibv_start_poll: %d", who, rc);
    do {
        uint64_t id = cx_cq->wr_id;
        int q = (int)(id >> 40 & 1);
        uint32_t qpn = ibv_wc_read_qp_num (cx_cq);
        if (cx_cq->status != IBV_WC_WR_FLUSH_ERR || qpn != cx_qp[q]->qp_num)
            fail (who, "wr_id %llx of QP %u read with status %d and QP %u", (unsigned long long)id,
                  cx_qp[q]->qp_num, (int)cx_cq->status, qpn);
        atomic_fetch_add (&cx_seen[q], 1);
        n++;
    } while ((rc = ibv_next_poll (cx_cq)) == 0);
    ibv_end_poll (cx_cq);
    if (rc != ENOENT)
        BAIL_OUT ("%s: ibv_next_poll: %d", who, rc);
    return n;
}

static void *cx (void *p)
{
    int me = (int)(intptr_t)p;
    const char *who = me ? "cx1" : "cx0";
    struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
    struct ibv_send_wr w = { .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED },
                       *bad;
    uint64_t seq = 0;
    pthread_barrier_wait (&bar);
    for (int r = 0; r < rounds; r++) {
        /* At most BATCH of this QP's sends outstanding: the other
         * thread may be the one polling them. */
        while (seq - atomic_load (&cx_seen[me]) > BATCH / 2)
            cx_poll (who);
        w.wr_id = (uint64_t)me << 40 | seq++;
        if (ibv_post_send (cx_qp[me], &w, &bad))
            BAIL_OUT ("%s: ibv_post_send: %s", who, strerror (errno));
        atomic_fetch_add (&cx_posted[me], 1);
        cx_poll (who);
    }
    return NULL;
}

static void *churn (void *p)
{
    struct ibv_cq *cq = mkcq ();
    struct ibv_qp *q[40];
    long made = 0;
    pthread_barrier_wait (&bar);
    while (!atomic_load (&stop)) {
        int n = 0;
        while (n < 40 && (q[n] = mkqp (cq, cq, 0)))
            n++;
        made += n;
        while (n > 0)
            if (ibv_destroy_qp (q[--n]))
                fail ("churn", "ibv_destroy_qp: %s", strerror (errno));
    }
    ibv_destroy_cq (cq);
    *(long *)p = made;
    return NULL;
}

int main (int argc, char **argv)
{
    struct ibv_port_attr pa;
    struct ibv_device **list;
    int c;
    while ((c = getopt (argc, argv, "n:")) != -1) {
        if (c != 'n') {
            fprintf (stderr, "usage: race [-n ROUNDS]\n");
            return 2;
        }
        rounds = atoi (optarg);
    }
    /* A thread waiting for a lock for good cannot report it: end the
     * run instead (killed by SIGALRM: the test fails). */
    alarm (120);
    plan (2);
    /* Say which libibcr serves the verbs (the test checks it is the one
     * it preloaded, not that the run went without). */
    FILE *maps = fopen ("/proc/self/maps", "r");
    char line[512];
    while (maps && fgets (line, sizeof (line), maps)) {
        char *p = strchr (line, '/');
        if (p && strstr (p, "libibcr")) {
            diag ("libibcr: %s", strtok (p, "\n"));
            break;
        }
    }
    if (maps)
        fclose (maps);
    ctx = selfqp_open (&list, &pa);
    pd = ibv_alloc_pd (ctx);
    mr = pd ? ibv_reg_mr (pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!mr)
        BAIL_OUT ("PD/MR: %s", strerror (errno));
    sh_scq = mkcq ();
    sh_rcq = mkcq ();
    sh_qp = mkqp (sh_scq, sh_rcq, 1);
    if (!sh_qp)
        BAIL_OUT ("ibv_create_qp: %s", strerror (errno));

    x_cq = mkcq ();
    x_qp = mkqp (x_cq, x_cq, 1);
    if (!x_qp)
        BAIL_OUT ("ibv_create_qp: %s", strerror (errno));
    rf_cq = mkcq ();
    rf_qp = mkqp (rf_cq, rf_cq, 0);
    if (!rf_qp)
        BAIL_OUT ("ibv_create_qp: %s", strerror (errno));

    struct ibv_cq_init_attr_ex cxa = { .cqe = 8 * BATCH,
                                       .wc_flags = IBV_WC_EX_WITH_QP_NUM,
                                       .comp_mask = 0 };
    cx_cq = ibv_create_cq_ex (ctx, &cxa);
    if (!cx_cq)
        BAIL_OUT ("ibv_create_cq_ex: %s", strerror (errno));
    for (int i = 0; i < 2; i++)
        if (!(cx_qp[i] = mkqp (ibv_cq_ex_to_cq (cx_cq), ibv_cq_ex_to_cq (cx_cq), 1)))
            BAIL_OUT ("ibv_create_qp: %s", strerror (errno));

    pthread_t t[11];
    long made = 0;
    pthread_barrier_init (&bar, NULL, 11);
    pthread_create (&t[0], NULL, own, "own0");
    pthread_create (&t[1], NULL, own, "own1");
    pthread_create (&t[2], NULL, snd, NULL);
    pthread_create (&t[3], NULL, rcv, NULL);
    pthread_create (&t[5], NULL, pst, NULL);
    pthread_create (&t[6], NULL, pol, NULL);
    pthread_create (&t[7], NULL, rfp, NULL);
    pthread_create (&t[8], NULL, spin, NULL);
    pthread_create (&t[9], NULL, cx, (void *)(intptr_t)0);
    pthread_create (&t[10], NULL, cx, (void *)(intptr_t)1);
    pthread_create (&t[4], NULL, churn, &made);
    for (int i = 0; i < 11; i++)
        if (i != 4)
            pthread_join (t[i], NULL);
    atomic_store (&stop, 1);
    pthread_join (t[4], NULL);
    for (int idle = 0; idle < 100000
         && (atomic_load (&cx_seen[0]) < atomic_load (&cx_posted[0])
             || atomic_load (&cx_seen[1]) < atomic_load (&cx_posted[1]));)
        idle = cx_poll ("main") ? 0 : idle + 1;
    for (int i = 0; i < 2; i++)
        if (atomic_load (&cx_seen[i]) != atomic_load (&cx_posted[i]))
            fail ("cx", "QP %d: %llu of %llu sends completed", i,
                  (unsigned long long)atomic_load (&cx_seen[i]),
                  (unsigned long long)atomic_load (&cx_posted[i]));
    ok (atomic_load (&errors) == 0, "%d threads: every completion right (%d errors)", 10,
        atomic_load (&errors));
    ok (made >= 40, "meanwhile %ld QPs were created and destroyed", made);
    ibv_destroy_qp (sh_qp);
    ibv_destroy_qp (x_qp);
    ibv_destroy_cq (x_cq);
    ibv_destroy_qp (rf_qp);
    ibv_destroy_cq (rf_cq);
    ibv_destroy_qp (cx_qp[0]);
    ibv_destroy_qp (cx_qp[1]);
    ibv_destroy_cq (ibv_cq_ex_to_cq (cx_cq));
    ibv_destroy_cq (sh_scq);
    ibv_destroy_cq (sh_rcq);
    ibv_dereg_mr (mr);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (list);
    return exit_status ();
}
