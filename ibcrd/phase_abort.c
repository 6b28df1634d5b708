/* phase_abort.c - the abort: a generation that failed anywhere is undone
 * everywhere, and the job runs on from where it was.  The leader alone
 * decides it (gen_abort, from gen_run): the nodes rebuild if they had
 * released, resume if quiesced, and remove their staging; the partial
 * storage folder goes last.  Each node undoes its own part (genl_undo);
 * a member passes the abort on to the nodes it leads (genm_abort), or
 * gives up by itself when its leader is gone or silent (genm_give_up).
 * The nodes below a lost child are told through their ibcrd (fanout.c's
 * fan_abort_orphans). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/store.h"
#include "gen_int.h"
#include "fanout.h"

/* Undo everywhere: members undo their part (rebuild if released, resume)
 * when told to abort; the storage folder, shared, goes last. */
void gen_abort (struct gen *g)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char first[sizeof (g->err)];
    enum gen_phase first_phase = g->err_phase;
    json_object *why = json_object_new_object ();

    memcpy (first, g->err, sizeof (first));
    /* The members hear why: each reports it as its own generation's end
     * (older members ignore the key). */
    json_object_object_add (why, "why", json_object_new_string (first));
    gen_enter (g, PHASE_ABORT);
    if (g->released) {
        /* The rebuild is job-wide: QPs reconnect across nodes. */
        if (gen_rebuild (g) < 0)
            log_msg (LOG_ERR, "job %s gen %d: abort: %s", g->job, g->gen, g->err);
    }
    /* Every member still reachable, at once; one that fails here is
     * logged and the others are still awaited.  The lost ones' sessions
     * are closed already, which is their abort. */
    gen_enter (g, PHASE_ABORT);
    fan_send (g, PHASE_ABORT, why);
    json_object_put (why);
    while (fan_wait (g, PHASE_ABORT, NULL, g->conf->timeout_rebuild) < 0)
        log_msg (LOG_ERR, "job %s gen %d: abort: %s", g->job, g->gen, g->err);
    fan_abort_orphans (g);
    g->released = 0;
    genl_undo (g);
    memcpy (g->err, first, sizeof (first));
    g->err_phase = first_phase;
    genl_cleanup (g, 0);
    if (g->gen > 0 && store_gen_abort (&st, g->job, g->gen) < 0)
        log_msg (LOG_ERR, "job %s gen %d: abort: cannot remove the partial generation: %s", g->job,
                 g->gen, strerror (errno));
}

/* Undo this node's part: rebuild if released, resume if quiesced. */
void genl_undo (struct gen *g)
{
    char first[sizeof (g->err)];

    memcpy (first, g->err, sizeof (first));
    if (g->released) {
        json_object *ids = json_object_new_array ();
        if (genl_rebuild_ids (g, ids) < 0 || genl_connect (g, ids) < 0)
            log_msg (LOG_ERR, "job %s gen %d: undo: %s", g->job, g->gen, g->err);
        json_object_put (ids);
    }
    if (g->quiesced && genl_resume (g) < 0)
        log_msg (LOG_ERR, "job %s gen %d: undo: %s", g->job, g->gen, g->err);
    memcpy (g->err, first, sizeof (first));
}

/* Member: the leader aborted.  Why is this node's outcome too (its own
 * failure, if it had one, was the leader's reason); the nodes it leads
 * are told with extra (the leader's request's keys). */
void genm_abort (struct gen *g, json_object *m, json_object *x, int *state)
{
    char why[sizeof (g->err)], first[sizeof (g->err)];
    snprintf (why, sizeof (why), "the leader aborted the generation: %s",
              proto_get_str (m, "why", "(no reason given)"));
    if (!g->err[0])
        gen_fail (g, PHASE_ABORT, why);
    memcpy (first, g->err, sizeof (first));
    fan_send (g, PHASE_ABORT, x);
    genl_undo (g);
    genl_cleanup (g, 0);
    while (fan_wait (g, PHASE_ABORT, NULL, genm_timeout (g, PHASE_ABORT)) < 0)
        log_msg (LOG_ERR, "job %s gen %d: abort: %s", g->job, g->gen, g->err);
    /* The nodes below a child this node lost: through their ibcrd. */
    fan_abort_orphans (g);
    memcpy (g->err, first, sizeof (first));
    *state = MEMBER_ABORTED;
}

/* Undo this node's part: the leader is gone, silent, or not to be
 * trusted any more. */
int genm_give_up (struct gen *g, const char *why)
{
    gen_fail (g, g->phase >= 0 ? (enum gen_phase)g->phase : PHASE_BEGIN, why);
    gen_enter (g, PHASE_ABORT);
    /* The nodes below: their sessions closed is their abort; those below
     * a child it lost are told through their ibcrd. */
    char first[sizeof (g->err)];
    memcpy (first, g->err, sizeof (first));
    fan_abort_orphans (g);
    memcpy (g->err, first, sizeof (first));
    fan_fini (g);
    log_msg (LOG_ERR, "job %s gen %d: %s", g->job, g->gen, g->err);
    genl_undo (g);
    genl_cleanup (g, 0);
    peerauth_session_wipe (&g->ses);
    return -1;
}
