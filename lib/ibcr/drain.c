/* drain.c - the drain condition (see drain.h).
 *
 * Pure function of the reports: no I/O, no state, so ibcrd and the test
 * coordinator share it and it can be unit tested.
 */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "drain.h"

static int64_t geti (json_object *o, const char *k)
{
    json_object *v;
    if (!json_object_object_get_ex (o, k, &v))
        return -1;
    return json_object_get_int64 (v);
}

/* Every QP of every report by (virtual LID, QPN): an open-addressing table
 * built once per evaluation, so a job of N QPs costs O(N), not O(N^2). */
struct qp_index {
    uint64_t *key;
    json_object **qp;
    size_t mask;
};

static size_t mix (uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static int index_build (struct qp_index *x, json_object **reports, int n)
{
    size_t total = 0, cap = 16;
    for (int p = 0; p < n; p++) {
        json_object *qps;
        if (json_object_object_get_ex (reports[p], "qps", &qps)
            && json_object_is_type (qps, json_type_array))
            total += json_object_array_length (qps);
    }
    while (cap < 2 * total)
        cap *= 2;
    x->key = calloc (cap, sizeof (*x->key));
    x->qp = calloc (cap, sizeof (*x->qp));
    x->mask = cap - 1;
    if (!x->key || !x->qp) {
        free (x->key);
        free (x->qp);
        errno = ENOMEM;
        return -1;
    }
    for (int p = 0; p < n; p++) {
        json_object *qps;
        if (!json_object_object_get_ex (reports[p], "qps", &qps)
            || !json_object_is_type (qps, json_type_array))
            continue;
        for (size_t i = 0; i < json_object_array_length (qps); i++) {
            json_object *q = json_object_array_get_idx (qps, i);
            uint64_t k = ((uint64_t)geti (q, "vlid") << 32) | (uint32_t)geti (q, "vqpn");
            size_t h = mix (k) & x->mask;
            while (x->qp[h] && x->key[h] != k)
                h = (h + 1) & x->mask;
            x->key[h] = k;
            x->qp[h] = q;
        }
    }
    return 0;
}

static json_object *find_qp (const struct qp_index *x, int64_t lid, int64_t qpn)
{
    uint64_t k = ((uint64_t)lid << 32) | (uint32_t)qpn;
    for (size_t h = mix (k) & x->mask; x->qp[h]; h = (h + 1) & x->mask)
        if (x->key[h] == k)
            return x->qp[h];
    return NULL;
}

static int64_t ud_count (json_object *q, const char *list, int64_t lid, int64_t qpn)
{
    json_object *a;
    if (!json_object_object_get_ex (q, list, &a))
        return 0;
    for (size_t i = 0; i < json_object_array_length (a); i++) {
        json_object *e = json_object_array_get_idx (a, i);
        if (geti (e, "lid") == lid && geti (e, "qpn") == qpn)
            return geti (e, "n");
    }
    return 0;
}

/* ud_lossy: a UD destination's receives may fall short of the sends to it
 * (datagrams lost). */
static int check (const struct qp_index *x, json_object **reports, int n, bool ud_lossy, char *why,
                  size_t whylen)
{
    for (int p = 0; p < n; p++) {
        json_object *qps;
        if (!json_object_object_get_ex (reports[p], "qps", &qps)
            || !json_object_is_type (qps, json_type_array)) {
            errno = EPROTO;
            return -1;
        }
        for (size_t i = 0; i < json_object_array_length (qps); i++) {
            json_object *a = json_object_array_get_idx (qps, i);
            int64_t lid = geti (a, "vlid"), qpn = geti (a, "vqpn");
            int64_t posted = geti (a, "sq_posted"), done = geti (a, "sq_done");
            int64_t rmsg_done = geti (a, "rmsg_done");
            int head_recv = geti (a, "head_needs_recv") == 1;
            const char *type = json_object_get_string (json_object_object_get (a, "type"));
            if (lid < 0 || qpn < 0 || posted < 0 || done < 0 || !type) {
                errno = EPROTO;
                return -1;
            }
            if (strcmp (type, "ud") == 0) {
                if (done != posted) {
                    snprintf (why, whylen, "UD QP %ld:%ld: %ld sends pending", (long)lid, (long)qpn,
                              (long)(posted - done));
                    return 0;
                }
                json_object *sent;
                if (!json_object_object_get_ex (a, "ud_sent", &sent))
                    continue;
                for (size_t k = 0; k < json_object_array_length (sent); k++) {
                    json_object *s = json_object_array_get_idx (sent, k);
                    int64_t dl = geti (s, "lid"), dq = geti (s, "qpn"), cnt = geti (s, "n");
                    json_object *b = find_qp (x, dl, dq);
                    if (ud_lossy || !b || geti (b, "rq_avail") == 0)
                        continue;
                    int64_t got = ud_count (b, "ud_recv", lid, qpn);
                    if (got < cnt) {
                        snprintf (why, whylen, "UD %ld:%ld -> %ld:%ld: %ld sent, %ld received",
                                  (long)lid, (long)qpn, (long)dl, (long)dq, (long)cnt, (long)got);
                        return 0;
                    }
                }
                continue;
            }
            if (geti (a, "has_peer") != 1) {
                if (done != posted) {
                    snprintf (why, whylen, "QP %ld:%ld (unconnected): %ld WRs pending", (long)lid,
                              (long)qpn, (long)(posted - done));
                    return 0;
                }
                continue;
            }
            json_object *b = find_qp (x, geti (a, "peer_vlid"), geti (a, "peer_vqpn"));
            /* A peer connected to another QP since (it was reset and
             * connected again) is not this QP's any more. */
            if (b && geti (b, "has_peer") == 1
                && (geti (b, "peer_vlid") != lid || geti (b, "peer_vqpn") != qpn)) {
                if (done != posted) {
                    snprintf (why, whylen,
                              "QP %ld:%ld: its peer is connected to another QP now, %ld WRs "
                              "pending",
                              (long)lid, (long)qpn, (long)(posted - done));
                    return 0;
                }
                continue;
            }
            if (!b) {
                if (done != posted) {
                    snprintf (why, whylen, "QP %ld:%ld: peer not in the job, %ld WRs pending",
                              (long)lid, (long)qpn, (long)(posted - done));
                    return 0;
                }
                continue;
            }
            /* A peer reset and not connected since counts from 0 and
             * can get nothing: only what is in flight is waited for.  On
             * a connection with an end in error, a send that failed may
             * still have been delivered (its acknowledgement lost): the
             * peer must have received at least every message
             * acknowledged, not exactly as many. */
            int64_t b_recv = geti (b, "recv_done");
            bool exact = geti (a, "err") != 1 && geti (b, "err") != 1;
            if (geti (b, "reset") != 1 && (exact ? rmsg_done != b_recv : b_recv < rmsg_done)) {
                snprintf (why, whylen, "QP %ld:%ld: %ld messages acknowledged, peer received %ld",
                          (long)lid, (long)qpn, (long)rmsg_done, (long)b_recv);
                return 0;
            }
            if (done != posted && !(head_recv && geti (b, "rq_avail") == 0)) {
                snprintf (why, whylen, "QP %ld:%ld: %ld WRs in flight", (long)lid, (long)qpn,
                          (long)(posted - done));
                return 0;
            }
        }
    }
    return 1;
}

static int evaluate (json_object **reports, int n, bool ud_lossy, char *why, size_t whylen)
{
    struct qp_index x;
    if (index_build (&x, reports, n) < 0)
        return -1;
    int rc = check (&x, reports, n, ud_lossy, why, whylen);
    int saved = errno;
    free (x.key);
    free (x.qp);
    errno = saved;
    return rc;
}

int drain_done (json_object **reports, int n, char *why, size_t whylen)
{
    return evaluate (reports, n, false, why, whylen);
}

/* Datagrams received by every UD QP of the job: what moves while UD
 * datagrams are still on their way. */
static int64_t ud_received (json_object **reports, int n)
{
    int64_t sum = 0;
    for (int p = 0; p < n; p++) {
        json_object *qps, *l;
        if (!json_object_object_get_ex (reports[p], "qps", &qps))
            continue;
        for (size_t i = 0; i < json_object_array_length (qps); i++)
            if (json_object_object_get_ex (json_object_array_get_idx (qps, i), "ud_recv", &l))
                for (size_t k = 0; k < json_object_array_length (l); k++)
                    sum += geti (json_object_array_get_idx (l, k), "n");
    }
    return sum;
}

void drain_state_init (struct drain_state *s)
{
    s->ud_recv = -1;
    s->since_ms = 0;
    s->ud_lost = false;
}

int drain_round (struct drain_state *s, json_object **reports, int n, double now_ms, char *why,
                 size_t whylen)
{
    int rc = evaluate (reports, n, false, why, whylen);
    if (rc != 0)
        return rc;
    /* Would the job be drained if the missing datagrams were lost? */
    char other[64];
    if (evaluate (reports, n, true, other, sizeof (other)) != 1)
        return 0;
    int64_t got = ud_received (reports, n);
    if (got != s->ud_recv) {
        s->ud_recv = got;
        s->since_ms = now_ms;
        return 0;
    }
    if (now_ms - s->since_ms < DRAIN_UD_SETTLE_MS)
        return 0;
    s->ud_lost = true;
    return 1;
}
