/* unit.c - unit tests of libibcr's pure parts: the id map, the WR logs and
 * the drain condition (compiled from lib/ibcr's sources; no device).
 */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <json-c/json.h>
#include "tap.h"
#include "ibcr/map.h"
#include "ibcr/idtab.h"
#include "ibcr/wrlog.h"
#include "ibcr/drain.h"
#include "ibcr/nsheap.h"

static void test_map (void)
{
    struct ibcr_map m;
    int bad = 0;
    map_init (&m);
    for (uint64_t i = 0; i < 5000; i++)
        if (map_put (&m, i * 7919, (void *)(uintptr_t)(i + 1)) < 0)
            bad++;
    ok (bad == 0 && m.len == 5000, "5000 keys stored");
    for (uint64_t i = 0; i < 5000; i += 2)
        map_del (&m, i * 7919);
    bad = 0;
    for (uint64_t i = 0; i < 5000; i++) {
        uintptr_t v = (uintptr_t)map_get (&m, i * 7919);
        if ((i % 2 == 0 && v != 0) || (i % 2 == 1 && v != i + 1))
            bad++;
    }
    ok (bad == 0, "deleted keys gone, others intact");
    map_add (&m, 42, 3);
    map_add (&m, 42, 4);
    ok (map_count (&m, 42) == 7, "counters add up");
    map_fini (&m);
}

/* idtab: ids spread over all three levels, including 0 and 2^32-1. */
static void test_idtab (void)
{
    static const uint32_t ids[] = { 0, 1, 1023, 1024, 0xfffff, 0x100000, 0x12345678, 0xffffffff };
    const int n = sizeof (ids) / sizeof (ids[0]);
    struct idtab t;
    int bad = 0;
    idtab_init (&t);
    ok (idtab_get (&t, 7) == NULL, "idtab: an empty table has nothing");
    for (int i = 0; i < n; i++)
        if (idtab_put (&t, ids[i], (void *)(uintptr_t)(i + 1)) < 0)
            bad++;
    for (int i = 0; i < n; i++)
        if (idtab_get (&t, ids[i]) != (void *)(uintptr_t)(i + 1))
            bad++;
    ok (bad == 0, "idtab: %d ids across the levels found", n);
    ok (idtab_get (&t, 2) == NULL && idtab_get (&t, 0x12345679) == NULL
            && idtab_get (&t, 0xfffffffe) == NULL,
        "idtab: neighbours not put are absent");
    idtab_del (&t, 0x12345678);
    idtab_del (&t, 99); /* absent: no-op */
    ok (idtab_get (&t, 0x12345678) == NULL && idtab_get (&t, 0xffffffff) == (void *)(uintptr_t)n,
        "idtab: del removes only its id");
    idtab_put (&t, 1, (void *)(uintptr_t)77);
    ok (idtab_get (&t, 1) == (void *)(uintptr_t)77, "idtab: put replaces");
    idtab_clear (&t);
    ok (idtab_get (&t, 0) == NULL && idtab_get (&t, 0xffffffff) == NULL, "idtab: clear empties");
    ok (idtab_put (&t, 5, &t) == 0 && idtab_get (&t, 5) == &t, "idtab: usable after clear");
    idtab_fini (&t);
}

/* The consumer's lock of a send log, as the unit tests see it: how many
 * takes, and whether every release got back what its take returned. */
struct excl {
    int takes, held, bad_how;
};

static int excl_lock (void *arg)
{
    struct excl *x = arg;
    x->takes++;
    x->held++;
    return 7 + x->takes;
}

static void excl_unlock (void *arg, int how)
{
    struct excl *x = arg;
    if (how != 7 + x->takes || x->held != 1)
        x->bad_how++;
    x->held--;
}

static void test_wrlog (void)
{
    struct wrlog_sq sq;
    struct wrlog_rq rq;
    char buf[64] = "inline payload";
    struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 15, .lkey = 9 };
    struct ibv_send_wr wr = { .wr_id = 1,
                              .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_INLINE };
    ok (wrlog_sq_init (&sq, 2, 2, 64) == 0, "send log made");
    int bad = 0;
    for (int i = 0; i < 10; i++) {
        wr.wr_id = i;
        wr.opcode = i % 2 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
        wr.send_flags = i == 3 ? IBV_SEND_SIGNALED : IBV_SEND_INLINE;
        if (!wrlog_sq_push (&sq, &wr, false))
            bad++;
    }
    ok (bad == 0 && wrlog_sq_len (&sq) == 10, "log grows past its capacity");
    ok (sq.posted == 10 && sq.rmsg_posted == 5, "posted and receive-consuming counts");
    memset (buf, 'X', sizeof (buf));
    struct wrlog_send *e = wrlog_sq_at (&sq, 0);
    ok (e->inl_len == 15 && memcmp (wrlog_inl (e), "inline payload", 15) == 0,
        "inline bytes kept although the buffer was reused");
    ok (wrlog_app_signaled (wrlog_sq_at (&sq, 3)) && !wrlog_app_signaled (wrlog_sq_at (&sq, 2)),
        "signaled flag kept per WR");
    wrlog_sq_unpush (&sq, 2);
    ok (sq.posted == 8 && wrlog_sq_len (&sq) == 8, "unpush drops the newest");
    wrlog_sq_pop (&sq);
    wrlog_sq_pop (&sq);
    ok (wrlog_sq_done (&sq) == 2 && wrlog_sq_rmsg_done (&sq) == 1
            && wrlog_sq_at (&sq, 0)->wr_id == 2,
        "pop completes in order and counts");
    wr.num_sge = 3;
    ok (!wrlog_sq_push (&sq, &wr, false), "more sges than the QP has is refused");
    wrlog_sq_fini (&sq);

    /* A grow while the ring has wrapped keeps every entry at its count,
     * under the consumer's lock; unpublished entries stay hidden. */
    struct excl x = { 0 };
    ok (wrlog_sq_init (&sq, 3, 1, 0) == 0 && sq.r.cap == 4, "send log of 4 slots made");
    sq.r.excl_lock = excl_lock;
    sq.r.excl_unlock = excl_unlock;
    sq.r.excl_arg = &x;
    wr.num_sge = 1;
    wr.send_flags = 0;
    uint64_t next = 0, popped = 0;
    int order = 1;
    /* one in and out first: the grow below finds head at slot 1, and the
     * entries wrapped past the old ring's end */
    wr.wr_id = next++;
    wrlog_sq_push (&sq, &wr, false);
    order &= wrlog_sq_head (&sq) && wrlog_sq_head (&sq)->wr_id == popped++;
    wrlog_sq_pop_head (&sq);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            wr.wr_id = next++;
            if (!wrlog_sq_push (&sq, &wr, false))
                order = 0;
        }
        for (int i = 0; i < 2; i++) {
            struct wrlog_send *h = wrlog_sq_head (&sq);
            if (!h || h->wr_id != popped++)
                order = 0;
            wrlog_sq_pop_head (&sq);
        }
    }
    ok (order && x.takes == 1 && !x.bad_how && !x.held && sq.r.cap == 8 && wrlog_sq_len (&sq) == 3,
        "grown once with the ring wrapped, under the consumer's lock, in order");
    wr.wr_id = next++;
    wrlog_sq_push_as (&sq, &wr, false, false);
    ok (wrlog_sq_len (&sq) == 4 && sq.r.tail - sq.r.head == 3,
        "a pushed entry is the consumer's only once published");
    wrlog_sq_publish (&sq);
    for (int i = 0; i < 4; i++) {
        struct wrlog_send *h = wrlog_sq_head (&sq);
        if (!h || h->wr_id != popped++)
            order = 0;
        wrlog_sq_pop_head (&sq);
    }
    ok (order && !wrlog_sq_head (&sq) && popped == next, "the rest pops in order");

    /* A refused post: its entry was published, and the consumer popped it
     * (a wr_id match); the unpush takes it back under the consumer's lock
     * and puts head back too. */
    wr.wr_id = next++;
    wrlog_sq_push (&sq, &wr, false);
    wrlog_sq_pop_head (&sq);
    uint64_t posted = sq.posted;
    wrlog_sq_unpush (&sq, 1);
    ok (x.takes == 2 && !x.bad_how && !x.held && sq.posted == posted - 1 && sq.r.head == sq.r.ptail
            && sq.r.tail == sq.r.ptail && wrlog_sq_len (&sq) == 0 && !wrlog_sq_head (&sq),
        "a refused entry the consumer popped is taken back, head with it");
    wr.wr_id = next++;
    wrlog_sq_push_as (&sq, &wr, false, false);
    wrlog_sq_unpush (&sq, 1);
    ok (x.takes == 2 && sq.posted == posted - 1 && wrlog_sq_len (&sq) == 0,
        "an entry never published is dropped without the consumer's lock");
    wrlog_sq_fini (&sq);

    struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 };
    ok (wrlog_rq_init (&rq, 4, 1) == 0, "receive log made");
    for (int i = 0; i < 6; i++) {
        rw.wr_id = 100 + i;
        wrlog_rq_push (&rq, &rw);
    }
    ok (wrlog_rq_complete (&rq, 103, false) == 0 && wrlog_rq_len (&rq) == 5,
        "an SRQ completion out of order removes its own entry");
    ok (wrlog_rq_at (&rq, 0)->wr_id == 100 && wrlog_rq_at (&rq, 3)->wr_id == 104,
        "others keep their order");
    ok (wrlog_rq_complete (&rq, 999, false) < 0, "unknown wr_id reported");
    wrlog_rq_fini (&rq);

    /* A QP's receive log: its producer (posters) and consumer (pollers of
     * the receive CQ) take different locks, as a send log's do. */
    struct excl rx = { 0 };
    ok (wrlog_rq_init (&rq, 3, 1) == 0 && rq.r.cap == 4, "receive log of 4 slots made");
    rq.r.excl_lock = excl_lock;
    rq.r.excl_unlock = excl_unlock;
    rq.r.excl_arg = &rx;
    next = 200;
    popped = 200;
    order = 1;
    rw.wr_id = next++;
    wrlog_rq_push (&rq, &rw);
    order &= wrlog_rq_complete (&rq, popped++, true) == 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            rw.wr_id = next++;
            if (!wrlog_rq_push (&rq, &rw))
                order = 0;
        }
        for (int i = 0; i < 2; i++) {
            const struct wrlog_recv *h = wrlog_ring_head (&rq.r);
            if (!h || h->wr_id != popped++)
                order = 0;
            wrlog_ring_pop_head (&rq.r);
        }
    }
    ok (order && rx.takes == 1 && !rx.bad_how && !rx.held && rq.r.cap == 8
            && wrlog_rq_len (&rq) == 3,
        "receive log grown once with the ring wrapped, under the consumer's lock, in order");
    rw.wr_id = next++;
    wrlog_rq_push_as (&rq, &rw);
    ok (wrlog_rq_len (&rq) == 4 && rq.r.tail - rq.r.head == 3
            && wrlog_rq_complete (&rq, next - 1, true) < 0,
        "a pushed receive is the consumer's only once published");
    wrlog_rq_unpush (&rq, 1);
    ok (rx.takes == 1 && wrlog_rq_len (&rq) == 3,
        "a receive never published is dropped without the consumer's lock");
    /* A refused receive post whose published entry an out-of-order
     * completion took (a wr_id shared with another WR): in a QP's log it
     * is only marked gone, the older entries stay in their places, and
     * the producer takes it back under the consumer's lock. */
    rw.wr_id = 999;
    wrlog_rq_push (&rq, &rw);
    ok (wrlog_rq_complete (&rq, 999, true) == 0 && wrlog_rq_len (&rq) == 4
            && wrlog_rq_at (&rq, 3)->gone && !wrlog_rq_at (&rq, 2)->gone
            && wrlog_rq_at (&rq, 2)->wr_id == next - 2,
        "a receive that is not the oldest is marked gone in place");
    wrlog_rq_unpush (&rq, 1);
    ok (rx.takes == 2 && !rx.bad_how && !rx.held && rq.r.tail == rq.r.ptail
            && wrlog_rq_len (&rq) == 3 && wrlog_rq_at (&rq, 2)->wr_id == next - 2
            && !wrlog_rq_at (&rq, 2)->gone,
        "a refused published receive is taken back under the consumer's lock, the older kept");
    /* Gone entries leave with the next live one past them, and a
     * compaction (the checkpoint thread) drops them. */
    uint64_t a = wrlog_rq_at (&rq, 0)->wr_id, b = wrlog_rq_at (&rq, 1)->wr_id,
             c = wrlog_rq_at (&rq, 2)->wr_id;
    ok (wrlog_rq_complete (&rq, b, true) == 0 && wrlog_rq_len (&rq) == 3
            && wrlog_rq_complete (&rq, b, true) < 0,
        "a gone receive is not taken twice");
    ok (wrlog_rq_complete (&rq, a, true) == 0 && wrlog_rq_len (&rq) == 2
            && wrlog_rq_at (&rq, 0)->gone,
        "the oldest receive leaves; the gone one is at the head now");
    ok (wrlog_rq_complete (&rq, c, true) == 0 && wrlog_rq_len (&rq) == 0,
        "the next live receive leaves with the gone one before it");
    for (int i = 0; i < 3; i++) {
        rw.wr_id = 300 + i;
        wrlog_rq_push (&rq, &rw);
    }
    wrlog_rq_complete (&rq, 301, true);
    wrlog_rq_compact (&rq);
    ok (wrlog_rq_len (&rq) == 2 && wrlog_rq_at (&rq, 0)->wr_id == 300
            && wrlog_rq_at (&rq, 1)->wr_id == 302 && rq.r.tail == rq.r.ptail,
        "a compaction drops the gone receives and keeps the order");
    /* A refused receive the consumer took as the oldest puts head back
     * with it. */
    while (wrlog_rq_len (&rq))
        wrlog_rq_complete (&rq, wrlog_rq_at (&rq, 0)->wr_id, true);
    rw.wr_id = 999;
    wrlog_rq_push (&rq, &rw);
    ok (wrlog_rq_complete (&rq, 999, true) == 0, "the oldest receive is the consumer's");
    wrlog_rq_unpush (&rq, 1);
    ok (rx.takes == 3 && !rx.bad_how && !rx.held && rq.r.head == rq.r.ptail
            && rq.r.tail == rq.r.ptail && wrlog_rq_len (&rq) == 0,
        "a refused receive the consumer took is taken back, head with it");
    wrlog_rq_fini (&rq);
}

static json_object *qp (int lid, int qpn, int plid, int pqpn, int posted, int done, int rmsg_done,
                        int recv_done, int rq_avail, int head_recv)
{
    char s[512];
    snprintf (s, sizeof (s),
              "{\"vlid\":%d,\"vqpn\":%d,\"type\":\"rc\",\"has_peer\":1,\"peer_vlid\":%d,"
              "\"peer_vqpn\":%d,\"sq_posted\":%d,\"sq_done\":%d,\"rmsg_done\":%d,"
              "\"recv_done\":%d,\"rq_avail\":%d,\"head_needs_recv\":%d}",
              lid, qpn, plid, pqpn, posted, done, rmsg_done, recv_done, rq_avail, head_recv);
    return json_tokener_parse (s);
}

/* An RC QP moved to RESET and not connected since: no peer, counts 0. */
static json_object *reset_qp (int lid, int qpn, int rq_avail)
{
    json_object *o = qp (lid, qpn, 0, 0, 0, 0, 0, 0, rq_avail, 0);
    json_object_object_add (o, "has_peer", json_object_new_int (0));
    json_object_object_add (o, "reset", json_object_new_int (1));
    return o;
}

/* o, reported in the error state. */
static json_object *in_err (json_object *o)
{
    json_object_object_add (o, "err", json_object_new_int (1));
    return o;
}

/* A UD QP that sent 'sent' datagrams to 2:20 (if it is 1:10) and received
 * 'got' from 1:10 (if it is 2:20). */
static json_object *ud_qp (int lid, int qpn, int sent, int got, int rq_avail)
{
    char s[512];
    snprintf (s, sizeof (s),
              "{\"vlid\":%d,\"vqpn\":%d,\"type\":\"ud\",\"sq_posted\":%d,\"sq_done\":%d,"
              "\"rq_avail\":%d,\"ud_sent\":[{\"lid\":2,\"qpn\":20,\"n\":%d}],"
              "\"ud_recv\":[{\"lid\":1,\"qpn\":10,\"n\":%d}]}",
              lid, qpn, sent, sent, rq_avail, sent, got);
    return json_tokener_parse (s);
}

/* Reports of a and a2 (rank 0) and b and b2 (rank 1; a2 and b2 may be
 * NULL), into r[2], which takes them over. */
static void reports (json_object *r[2], json_object *a, json_object *a2, json_object *b,
                     json_object *b2)
{
    for (int i = 0; i < 2; i++) {
        r[i] = json_object_new_object ();
        json_object *arr = json_object_new_array ();
        json_object_array_add (arr, i ? b : a);
        if (i ? b2 : a2)
            json_object_array_add (arr, i ? b2 : a2);
        json_object_object_add (r[i], "qps", arr);
    }
}

/* drain_round over reports (above) at time t. */
static int round_at4 (struct drain_state *ds, json_object *a, json_object *a2, json_object *b,
                      json_object *b2, double t)
{
    json_object *r[2];
    char why[256] = "";
    reports (r, a, a2, b, b2);
    int rc = drain_round (ds, r, 2, t, why, sizeof (why));
    if (rc == 1 && ds->ud_lost)
        diag ("taken as lost: %s", why);
    json_object_put (r[0]);
    json_object_put (r[1]);
    return rc;
}

static int round_at (struct drain_state *ds, json_object *a, json_object *b, double t)
{
    return round_at4 (ds, a, NULL, b, NULL, t);
}

static void test_drain_ud_lost (void)
{
    struct drain_state ds;
    drain_state_init (&ds);
    /* 1:10 sent 3 datagrams to 2:20, which received 2 and has receives. */
    int r0 = round_at (&ds, ud_qp (1, 10, 3, 0, 0), ud_qp (2, 20, 0, 2, 4), 1000);
    int r1 = round_at (&ds, ud_qp (1, 10, 3, 0, 0), ud_qp (2, 20, 0, 2, 4),
                       1000 + DRAIN_UD_SETTLE_MS - 1);
    ok (r0 == 0 && r1 == 0 && !ds.ud_lost, "a datagram missing: the drain waits for it a while");
    ok (round_at (&ds, ud_qp (1, 10, 3, 0, 0), ud_qp (2, 20, 0, 2, 4), 1000 + DRAIN_UD_SETTLE_MS)
                == 1
            && ds.ud_lost,
        "then, nothing received for %d ms, takes it as lost", DRAIN_UD_SETTLE_MS);
    drain_state_init (&ds);
    r0 = round_at (&ds, ud_qp (1, 10, 4, 0, 0), ud_qp (2, 20, 0, 2, 4), 1000);
    r1 = round_at (&ds, ud_qp (1, 10, 4, 0, 0), ud_qp (2, 20, 0, 3, 4), 1150);
    int r2 = round_at (&ds, ud_qp (1, 10, 4, 0, 0), ud_qp (2, 20, 0, 3, 4), 1300);
    int r3 = round_at (&ds, ud_qp (1, 10, 4, 0, 0), ud_qp (2, 20, 0, 4, 4), 1310);
    ok (r0 == 0 && r1 == 0 && r2 == 0 && r3 == 1 && !ds.ud_lost,
        "a datagram arriving starts the wait again; all of them arrived: drained exactly");
    /* The same datagram missing, and an RC send in flight from 1:11 to
     * 2:21, which has receives. */
    drain_state_init (&ds);
    for (int i = 0; i < 2; i++)
        r0 = round_at4 (&ds, ud_qp (1, 10, 3, 0, 0), qp (1, 11, 2, 21, 6, 5, 5, 3, 4, 1),
                        ud_qp (2, 20, 0, 2, 4), qp (2, 21, 1, 11, 3, 3, 3, 5, 4, 0),
                        1000 + i * 10 * DRAIN_UD_SETTLE_MS);
    ok (r0 == 0 && !ds.ud_lost, "nothing is taken as lost while an RC send is in flight");
}

static int eval (json_object *a, json_object *b)
{
    json_object *r[2];
    char why[256] = "";
    reports (r, a, NULL, b, NULL);
    int rc = drain_done (r, 2, why, sizeof (why));
    if (rc == 0)
        diag ("waits: %s", why);
    json_object_put (r[0]);
    json_object_put (r[1]);
    return rc;
}

static void test_drain (void)
{
    ok (eval (qp (1, 10, 2, 20, 5, 5, 5, 3, 4, 0), qp (2, 20, 1, 10, 3, 3, 3, 5, 4, 0)) == 1,
        "all acknowledged: drained");
    ok (eval (qp (1, 10, 2, 20, 5, 4, 4, 3, 4, 0), qp (2, 20, 1, 10, 3, 3, 3, 5, 4, 0)) == 0,
        "delivered but not yet acknowledged: another round");
    ok (eval (qp (1, 10, 2, 20, 6, 5, 5, 3, 4, 1), qp (2, 20, 1, 10, 3, 3, 3, 5, 4, 0)) == 0,
        "undelivered send while the peer has receives: in flight");
    ok (eval (qp (1, 10, 2, 20, 6, 5, 5, 3, 4, 1), qp (2, 20, 1, 10, 3, 3, 3, 5, 0, 0)) == 1,
        "undelivered send and no receive at the peer: RNR, kept for repost");
    ok (eval (qp (1, 10, 2, 20, 6, 5, 5, 3, 4, 0), qp (2, 20, 1, 10, 3, 3, 3, 5, 0, 0)) == 0,
        "pending RDMA op is never left behind");
    /* B (2:20) still names A, which was reset and connected to 3:30
     * (not in the job): B's counts no longer meet A's. */
    ok (eval (qp (1, 10, 3, 30, 2, 2, 2, 0, 4, 0), qp (2, 20, 1, 10, 3, 3, 3, 5, 4, 0)) == 1,
        "a peer connected elsewhere since: its counts are not compared");
    ok (eval (qp (1, 10, 3, 30, 2, 2, 2, 0, 4, 0), qp (2, 20, 1, 10, 4, 3, 3, 5, 0, 1)) == 0,
        "a peer connected elsewhere since: the sends to it must complete");
    /* A (1:10) names B, which was reset and is not connected since. */
    ok (eval (qp (1, 10, 2, 20, 3, 3, 3, 0, 4, 0), reset_qp (2, 20, 0)) == 1,
        "a peer reset since: the messages it had received are not waited for");
    ok (eval (qp (1, 10, 2, 20, 4, 3, 3, 0, 4, 1), reset_qp (2, 20, 1)) == 0,
        "a peer reset since, with a receive posted again: a send to it is in flight");
    ok (eval (qp (1, 10, 2, 20, 4, 3, 3, 0, 4, 1), reset_qp (2, 20, 0)) == 1,
        "a peer reset since, with no receive: a send to it waits in RNR");
    /* 1:10 in error: 3 messages acknowledged (those that failed are not
     * counted), all WRs done. */
    ok (eval (in_err (qp (1, 10, 2, 20, 5, 5, 3, 0, 4, 0)), qp (2, 20, 1, 10, 0, 0, 0, 2, 4, 0))
            == 0,
        "an end in error: a message acknowledged and not yet received is waited for");
    ok (eval (in_err (qp (1, 10, 2, 20, 5, 5, 3, 0, 4, 0)), qp (2, 20, 1, 10, 0, 0, 0, 4, 4, 0))
            == 1,
        "an end in error: one received more than acknowledged (a failed send delivered) drains");
    ok (eval (qp (1, 10, 2, 20, 5, 5, 3, 0, 4, 0), qp (2, 20, 1, 10, 0, 0, 0, 4, 4, 0)) == 0,
        "no end in error: the counts must meet exactly");
    json_object *bad[1] = { json_object_new_object () };
    char why[64];
    ok (drain_done (bad, 1, why, sizeof (why)) < 0, "a report without qps is malformed");
    json_object_put (bad[0]);
}

/* nsheap: the backend namespace's allocator (lib/ibcr/nsheap.c). */
static void test_nsheap (void)
{
    enum { N = 1000 };
    static void *p[N];
    static size_t len[N];
    int misaligned = 0, short_usable = 0, corrupt = 0;
    for (int i = 0; i < N; i++) {
        len[i] = (size_t)(i * 37) % 70000 + (i % 7 == 0 ? 200000 : 0);
        p[i] = nsheap_malloc (len[i]);
        if (!p[i])
            break;
        if ((uintptr_t)p[i] % 16)
            misaligned++;
        if (nsheap_usable (p[i]) < len[i])
            short_usable++;
        memset (p[i], i & 0xff, len[i]);
    }
    for (int i = 0; i < N; i += 2) { /* free half, reallocate it */
        nsheap_free (p[i]);
        p[i] = nsheap_malloc (len[i]);
        if (p[i])
            memset (p[i], i & 0xff, len[i]);
    }
    for (int i = 0; i < N; i++)
        for (size_t k = 0; p[i] && k < len[i]; k += 997)
            if (((unsigned char *)p[i])[k] != (unsigned char)(i & 0xff)) {
                corrupt++;
                break;
            }
    ok (misaligned == 0 && short_usable == 0,
        "nsheap: %d blocks of 0..270000 bytes, "
        "16-byte aligned, usable size at least asked",
        N);
    ok (corrupt == 0, "nsheap: no block overlaps another after frees and reuse");
    void *a = NULL;
    int rc = nsheap_memalign (&a, 4096, 100);
    ok (rc == 0 && (uintptr_t)a % 4096 == 0 && nsheap_usable (a) >= 100,
        "nsheap: 4096-aligned block");
    nsheap_free (a);
    unsigned char *r = nsheap_malloc (10);
    memcpy (r, "0123456789", 10);
    r = nsheap_realloc (r, 100000);
    ok (r && memcmp (r, "0123456789", 10) == 0, "nsheap: realloc keeps the contents");
    nsheap_free (r);
    unsigned char *dirty = nsheap_malloc (8000);
    memset (dirty, 0xff, 8000);
    nsheap_free (dirty);
    unsigned char *z = nsheap_calloc (1000, 8);
    int nonzero = 0;
    for (int i = 0; z && i < 8000; i++)
        nonzero += z[i] != 0;
    ok (z && nonzero == 0, "nsheap: calloc zeroes a recycled block");
    nsheap_release ();
    void *after = nsheap_malloc (64);
    ok (after != NULL, "nsheap: allocates again after a release");
    nsheap_release ();
}

int main (void)
{
    plan (NO_PLAN);
    test_map ();
    test_idtab ();
    test_wrlog ();
    test_drain ();
    test_drain_ud_lost ();
    test_nsheap ();
    done_testing ();
    return exit_status ();
}
