/* phase_drain.c - the drain phase: rounds of reports from every process of
 * the job until every connection is drained exactly (lib/ibcr/drain.h).
 * The leader runs the rounds and decides when they are done (gen_drain);
 * each node gathers its own processes' reports for a round
 * (genl_drain_round); a member merges its subtree's (gen_member.c). */
#include "config.h"

#include <stdio.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"

#include "gen_int.h"
#include "ibcr/ckpt_proto.h"
#include "ibcr/drain.h"
#include "fanout.h"

#define DRAIN_MAX_ROUNDS 100000

/* Rounds of reports from every process until every connection of the job
 * is drained exactly (lib/ibcr/drain.h: delivered == acknowledged). */
int gen_drain (struct gen *g)
{
    double t0 = mono_ms_f (), deadline = t0 + g->conf->timeout_drain;
    json_object *rep[g->nmembers + 1];
    char why[512] = "", err[700];
    struct drain_state ds;

    drain_state_init (&ds);
    gen_enter (g, PHASE_DRAIN);
    gen_progress (g, PHASE_DRAIN, 0, 0, 1);
    for (int round = 0;; round++) {
        json_object *all = json_object_new_array (), *x = json_object_new_object ();
        int done;

        json_object_object_add (x, "round", json_object_new_int (round));
        for (int i = 0; i < g->nmembers; i++)
            rep[i] = NULL;
        double tl = mono_ms_f ();
        int lrc = -1;
        if (fan_send (g, PHASE_DRAIN, x) == 0) {
            timeline_open (g->span, PHASE_DRAIN, tl);
            lrc = genl_drain_round (g, round, all);
            timeline_close (g->span, PHASE_DRAIN, mono_ms_f (), mono_ms_f () - tl, lrc < 0);
        }
        if (lrc < 0 || fan_wait (g, PHASE_DRAIN, rep, g->conf->timeout_drain) < 0) {
            fan_put (g, rep);
            json_object_put (all);
            json_object_put (x);
            return -1;
        }
        json_object_put (x);
        gen_gather (g, rep, "reports", all);
        int n = (int)json_object_array_length (all);
        if (n == 0) {
            json_object_put (all);
            break; /* no task uses verbs: nothing to drain */
        }
        json_object *arr[n];
        for (int i = 0; i < n; i++)
            arr[i] = json_object_array_get_idx (all, i);
        done = drain_round (&ds, arr, n, mono_ms_f (), why, sizeof (why));
        json_object_put (all);
        if (done < 0)
            return gen_fail (g, PHASE_DRAIN, "malformed drain report from libibcr");
        g->drain_rounds = round + 1;
        if (done && ds.ud_lost) {
            snprintf (g->drain_ud_lost, sizeof (g->drain_ud_lost), "%s", why);
            log_msg (LOG_WARNING,
                     "job %s gen %d: drain: UD datagrams not received for %d ms are taken as "
                     "lost, as a fabric may drop them (%s)",
                     g->job, g->gen, DRAIN_UD_SETTLE_MS, why);
        }
        if (done)
            break;
        if (mono_ms_f () > deadline || round >= DRAIN_MAX_ROUNDS) {
            snprintf (err, sizeof (err),
                      "not drained after %d rounds (%s); raise "
                      "timeout_drain if the job's messages are very large",
                      round + 1, why);
            return gen_fail (g, PHASE_DRAIN, err);
        }
        usleep (round < 10 ? 100 : 1000);
    }
    g->t_drain = mono_ms_f () - t0;
    return 0;
}

/* One drain round: every process's report appended to reports. */
int genl_drain_round (struct gen *g, int round, json_object *reports)
{
    json_object *x = json_object_new_object ();
    int rc;

    json_object_object_add (x, "round", json_object_new_int (round));
    rc = ctl_gather (g, PHASE_DRAIN, CKPT_DRAIN, x, CKPT_DRAIN_REPORT, g->conf->timeout_drain,
                     reports);
    json_object_put (x);
    return rc;
}
