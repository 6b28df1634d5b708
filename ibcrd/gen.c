/* gen.c - see gen.h.  The leader's side of a generation: each phase runs
 * on this node's tasks (gen_local.c) and on every member node (through its
 * generation worker, gen_member.c, over the MUNGE-authenticated peer
 * protocol) at the same time: the members are asked first (fanout.h),
 * this node does its part while they do theirs, then their answers are
 * awaited together.  gen_run() strings the phases together in protocol
 * order and is the only place that decides to abort, everywhere at once. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/store.h"
#include "gen.h"
#include "ibcr/drain.h"
#include "fanout.h"

#define DRAIN_MAX_ROUNDS 100000

/* This node's part of a phase, in its timeline. */
static int local_part (struct gen *g, enum gen_phase phase, int (*fn) (struct gen *))
{
    double t = mono_ms_f ();
    int rc;

    timeline_open (g->span, phase, t);
    rc = fn (g);
    timeline_close (g->span, phase, mono_ms_f (), mono_ms_f () - t, rc < 0);
    return rc;
}

/* One phase on every node at once: the members' requests go out first,
 * this node's part (local, if any) runs while they work, then their
 * replies are awaited together; replies[i] (if not NULL) gets member i's
 * (fan_put them, also on failure).  -1 with g->err naming the node on the
 * first failure. */
static int phase_all (struct gen *g, enum gen_phase phase, int (*local) (struct gen *),
                      json_object *extra, json_object **replies, uint64_t timeout_ms)
{
    for (int i = 0; replies && i < g->nmembers; i++)
        replies[i] = NULL;
    if (fan_send (g, phase, extra) < 0 || (local && local_part (g, phase, local) < 0))
        return -1;
    return fan_wait (g, phase, replies, timeout_ms);
}

/* Append every element of member replies' array 'key' to out. */
static void gather (struct gen *g, json_object **replies, const char *key, json_object *out)
{
    for (int i = 0; i < g->nmembers; i++) {
        json_object *a;
        if (replies[i] && json_object_object_get_ex (replies[i], key, &a))
            for (size_t k = 0; k < json_object_array_length (a); k++)
                json_object_array_add (out, json_object_get (json_object_array_get_idx (a, k)));
        json_object_put (replies[i]);
        replies[i] = NULL;
    }
}

/* --- phases, job-wide ----------------------------------------------- */

/* Begin: every member starts a worker for this generation and tells us
 * its port and its tasks' manifest entries. */
static int gen_begin (struct gen *g)
{
    gen_enter (g, PHASE_BEGIN);
    return fan_begin (g, g->conf->timeout_request);
}

/* A phase that asks every process for one thing and gathers nothing, on
 * every node at once; its duration into *took. */
static int gen_step (struct gen *g, enum gen_phase phase, int (*local) (struct gen *),
                     uint64_t timeout_ms, double *took)
{
    double t0 = mono_ms_f ();

    gen_enter (g, phase);
    gen_progress (g, phase, 0, 0, 1);
    if (phase_all (g, phase, local, NULL, NULL, timeout_ms) < 0)
        return -1;
    *took = mono_ms_f () - t0;
    return 0;
}

static int gen_quiesce (struct gen *g)
{
    return gen_step (g, PHASE_QUIESCE, genl_quiesce, g->conf->timeout_quiesce, &g->t_quiesce);
}

/* Rounds of reports from every process until every connection of the job
 * is drained exactly (lib/ibcr/drain.h: delivered == acknowledged). */
static int gen_drain (struct gen *g)
{
    double t0 = mono_ms_f (), deadline = t0 + g->conf->timeout_drain;
    json_object *rep[g->nmembers + 1];
    char why[512] = "", err[700];

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
        gather (g, rep, "reports", all);
        int n = (int)json_object_array_length (all);
        if (n == 0) {
            json_object_put (all);
            break;      /* no task uses verbs: nothing to drain */
        }
        json_object *arr[n];
        for (int i = 0; i < n; i++)
            arr[i] = json_object_array_get_idx (all, i);
        done = drain_done (arr, n, why, sizeof (why));
        json_object_put (all);
        if (done < 0)
            return gen_fail (g, PHASE_DRAIN, "malformed drain report from libibcr");
        g->drain_rounds = round + 1;
        if (done)
            break;
        if (mono_ms_f () > deadline || round >= DRAIN_MAX_ROUNDS) {
            snprintf (err, sizeof (err), "not drained after %d rounds (%s); raise "
                      "timeout_drain if the job's messages are very large", round + 1, why);
            return gen_fail (g, PHASE_DRAIN, err);
        }
        usleep (round < 10 ? 100 : 1000);
    }
    g->t_drain = mono_ms_f () - t0;
    return 0;
}

static int gen_release (struct gen *g)
{
    return gen_step (g, PHASE_RELEASE, genl_release, g->conf->timeout_quiesce, &g->t_release);
}

/* This node's dump counts only if the ibcrd that asked for it outlived it. */
static int gen_dump_here (struct gen *g)
{
    return genl_dump (g) < 0 || gen_daemon_gone (g, PHASE_DUMP) ? -1 : 0;
}

static int gen_dump (struct gen *g)
{
    return gen_step (g, PHASE_DUMP, gen_dump_here, g->conf->timeout_dump, &g->t_dump);
}

/* Rebuild: ids of every process gathered, handed to every process. */
static int gen_rebuild (struct gen *g)
{
    json_object *rep[g->nmembers + 1], *procs = json_object_new_array (), *x;
    double t0 = mono_ms_f ();
    int rc;

    gen_enter (g, PHASE_REBUILD);
    gen_progress (g, PHASE_REBUILD, 0, 0, 1);
    for (int i = 0; i < g->nmembers; i++)
        rep[i] = NULL;
    if ((rc = fan_send (g, PHASE_REBUILD, NULL)) == 0) {
        double tl = mono_ms_f ();
        timeline_open (g->span, PHASE_REBUILD, tl);
        rc = genl_rebuild_ids (g, procs);
        timeline_close (g->span, PHASE_REBUILD, mono_ms_f (), mono_ms_f () - tl, rc < 0);
    }
    if (rc < 0 || fan_wait (g, PHASE_REBUILD, rep, g->conf->timeout_rebuild) < 0) {
        fan_put (g, rep);
        json_object_put (procs);
        return -1;
    }
    gather (g, rep, "ids", procs);
    x = json_object_new_object ();
    json_object_object_add (x, "procs", json_object_get (procs));
    /* Everyone's ids first, then everyone connects: the connect phase's
     * requests carry the whole table, so they go before our own. */
    gen_enter (g, PHASE_CONNECT);
    if ((rc = fan_send (g, PHASE_CONNECT, x)) == 0) {
        double tl = mono_ms_f ();
        timeline_open (g->span, PHASE_CONNECT, tl);
        rc = genl_connect (g, procs);
        timeline_close (g->span, PHASE_CONNECT, mono_ms_f (), mono_ms_f () - tl, rc < 0);
    }
    if (rc == 0)
        rc = fan_wait (g, PHASE_CONNECT, NULL, g->conf->timeout_rebuild);
    json_object_put (x);
    json_object_put (procs);
    g->t_rebuild = mono_ms_f () - t0;
    return rc;
}

static int gen_resume (struct gen *g)
{
    return gen_step (g, PHASE_RESUME, genl_resume, g->conf->timeout_quiesce, &g->t_resume);
}

static json_object *manifest_meta (struct gen *g, json_object *tasks)
{
    json_object *m = json_object_new_object (), *times = json_object_new_object ();
    json_object *engine = json_object_new_object ();

    json_object_object_add (m, "trigger", json_object_new_string (g->trigger));
    json_object_object_add (m, "size", json_object_new_int (g->size));
    json_object_object_add (m, "leave_running", json_object_new_boolean (g->leave_running));
    json_object_object_add (m, "tasks", tasks);
    json_object_object_add (engine, "ibcr", json_object_new_string (PACKAGE_VERSION));
    json_object_object_add (engine, "criu", json_object_new_string (g->conf->criu));
    json_object_object_add (m, "engine", engine);
    json_object_object_add (times, "quiesce_ms", json_object_new_double (g->t_quiesce));
    json_object_object_add (times, "drain_ms", json_object_new_double (g->t_drain));
    json_object_object_add (times, "release_ms", json_object_new_double (g->t_release));
    json_object_object_add (times, "dump_ms", json_object_new_double (g->t_dump));
    json_object_object_add (times, "rebuild_ms", json_object_new_double (g->t_rebuild));
    json_object_object_add (times, "resume_ms", json_object_new_double (g->t_resume));
    json_object_object_add (times, "copy_ms", json_object_new_double (g->t_commit));
    json_object_object_add (m, "times", times);
    json_object_object_add (m, "timeline", timeline_json (g));
    return m;
}

/* Commit: every node copies its images to storage, durably; then the
 * manifest, renamed into place last; then retention. */
static int gen_commit (struct gen *g, json_object *tasks)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char err[1536];
    double t0 = mono_ms_f ();
    json_object *meta, *rep[g->nmembers + 1], *nodes;
    int rc;

    gen_enter (g, PHASE_COPY);
    if (phase_all (g, PHASE_COPY, genl_copy, NULL, rep, g->conf->timeout_commit) < 0) {
        fan_put (g, rep);
        return -1;
    }
    for (int i = 0; i < g->nmembers; i++)
        g->bytes += (uint64_t)proto_get_int (rep[i], "bytes", 0);
    fan_put (g, rep);
    g->t_commit = mono_ms_f () - t0;
    if (gen_daemon_gone (g, PHASE_COPY))
        return -1;
    gen_enter (g, PHASE_COMMIT);
    gen_progress (g, PHASE_COMMIT, g->bytes, g->bytes, 1);
    meta = manifest_meta (g, json_object_get (tasks));
    nodes = json_object_new_array ();
    json_object_array_add (nodes, json_object_new_string (g->conf->node));
    for (int i = 0; i < g->nmembers; i++)
        json_object_array_add (nodes, json_object_new_string (g->members[i].node));
    json_object_object_add (meta, "nodes", nodes);
    rc = store_gen_commit (&st, g->job, g->gen, g->uid, g->gid, meta, err, sizeof (err));
    json_object_put (meta);
    if (rc < 0)
        return gen_fail (g, PHASE_COMMIT, err);
    g->t_commit = mono_ms_f () - t0;
    json_object *removed = json_object_new_array ();
    if (store_prune (&st, g->job, g->conf->retention, removed, err, sizeof (err)) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: retention: %s", g->job, g->gen, err);
    for (size_t i = 0; i < json_object_array_length (removed); i++)
        log_msg (LOG_INFO, "job %s: retention %d: removed generation %d", g->job,
                 g->conf->retention, json_object_get_int (json_object_array_get_idx (removed, i)));
    json_object_put (removed);
    return 0;
}

/* --- the generation ------------------------------------------------- */

/* Undo everywhere: members undo their part (rebuild if released, resume)
 * when told to abort; the storage folder, shared, goes last. */
static void gen_abort (struct gen *g)
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
        log_msg (LOG_ERR, "job %s gen %d: abort: cannot remove the partial generation: %s",
                 g->job, g->gen, strerror (errno));
}

/* The timeline's origin (timeline.h), and the tree's shape (fanout.h). */
static void gen_start_clock (struct gen *g)
{
    struct timespec ts;

    fan_shape (g);
    g->levels = g->height;
    g->t0 = mono_ms_f ();
    clock_gettime (CLOCK_REALTIME, &ts);
    g->t0_wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int gen_restored (struct gen *g)
{
    /* The restored libibcr waits where the dump left it: released, its
     * application threads at the gate. */
    g->released = 1;
    g->quiesced = 1;
    g->gen = 0;
    gen_start_clock (g);
    fan_init (g);
    if (g->restore_t1 > 0) {
        /* This node's own restore, before the generation began. */
        struct gen_span *r = &g->span[PHASE_RESTORE];
        *r = (struct gen_span){ .start = g->restore_t0, .end = g->restore_t1,
                                .node_ms = g->restore_t1 - g->restore_t0, .n = 1 };
    }
    if (gen_begin (g) < 0 || gen_rebuild (g) < 0 || gen_resume (g) < 0) {
        log_msg (LOG_ERR, "job %s: restored tasks not resumed: %s", g->job, g->err);
        fan_fini (g);
        timeline_save (g, 0);
        return -1;
    }
    gen_enter (g, PHASE_END);
    if (fan_send (g, PHASE_END, NULL) < 0
        || fan_wait (g, PHASE_END, NULL, g->conf->timeout_request) < 0)
        log_msg (LOG_WARNING, "job %s: end: %s", g->job, g->err);
    fan_fini (g);
    timeline_save (g, 1);
    log_msg (LOG_INFO, "job %s: restored tasks rebuilt and resumed (rebuild %.1f ms)", g->job,
             g->t_rebuild);
    return 0;
}

int gen_run (struct gen *g)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char dir[PATH_MAX], err[1024];
    json_object *tasks = NULL;
    double t0 = mono_ms_f ();
    int rc = -1;

    if (g->kind == GEN_RESTORED)
        return gen_restored (g);
    gen_start_clock (g);
    fan_init (g);
    if (store_gen_begin (&st, g->job, g->uid, g->gid, &g->gen, dir, sizeof (dir), err,
                         sizeof (err)) < 0) {
        gen_fail (g, PHASE_BEGIN, err);
        goto abort;
    }
    snprintf (g->staging, sizeof (g->staging), "%s/%s/gen-%d", g->conf->staging, g->job,
              g->gen);
    store_rmtree (g->staging);  /* a leftover of a killed daemon */
    log_msg (LOG_INFO, "job %s gen %d: begin (%s, %d task%s here, %d other node%s)", g->job,
             g->gen, g->trigger, g->ntasks, g->ntasks == 1 ? "" : "s", g->nmembers,
             g->nmembers == 1 ? "" : "s");
    if (gen_begin (g) < 0)
        goto abort;
    tasks = genl_tasks_json (g);
    for (int i = 0; i < g->nmembers; i++)
        for (size_t k = 0; g->members[i].tasks && k < json_object_array_length (g->members[i].tasks); k++)
            json_object_array_add (tasks, json_object_get (json_object_array_get_idx (g->members[i].tasks, k)));
    if (gen_quiesce (g) < 0 || gen_drain (g) < 0 || gen_release (g) < 0 || gen_dump (g) < 0)
        goto abort;
    if (g->leave_running && (gen_rebuild (g) < 0 || gen_resume (g) < 0))
        goto abort;
    log_msg (LOG_INFO, "job %s gen %d: dumped and resumed in %.1f ms (quiesce %.1f, drain "
             "%.1f in %d rounds, release %.1f, dump %.1f, rebuild %.1f, resume %.1f)",
             g->job, g->gen, mono_ms_f () - t0, g->t_quiesce, g->t_drain, g->drain_rounds,
             g->t_release, g->t_dump, g->t_rebuild, g->t_resume);
    if (gen_commit (g, tasks) < 0)
        goto abort;
    gen_enter (g, PHASE_END);
    if (fan_send (g, PHASE_END, NULL) < 0
        || fan_wait (g, PHASE_END, NULL, g->conf->timeout_request) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: end: %s", g->job, g->gen, g->err);
    genl_cleanup (g, 1);
    log_msg (LOG_INFO, "job %s gen %d: committed, %llu bytes, copy %.1f ms", g->job, g->gen,
             (unsigned long long)g->bytes, g->t_commit);
    rc = 0;
    goto out;
abort:
    log_msg (LOG_ERR, "job %s gen %d: aborted: %s", g->job, g->gen, g->err);
    gen_abort (g);
out:
    fan_fini (g);
    if (g->gen > 0)
        timeline_save (g, rc == 0);
    json_object_put (tasks);
    for (int i = 0; i < g->nmembers; i++) {
        json_object_put (g->members[i].tasks);
        g->members[i].tasks = NULL;
    }
    return rc;
}

json_object *gen_reply (const struct gen *g, int rc)
{
    json_object *o;

    if (rc < 0) {
        if (g->kind == GEN_RESTORED)
            return proto_error ("restore", EIO, "job %s: the restored tasks could not be "
                                "resumed: %s", g->job, g->err);
        return proto_error ("checkpoint", EIO, "job %s: generation %d aborted in %s; the job "
                            "runs on and its last committed generation stays", g->job,
                            g->gen, g->err);
    }
    if (!(o = proto_new ("ok")))
        return NULL;
    proto_set_str (o, "request", g->kind == GEN_RESTORED ? "resume-restored" : "checkpoint");
    proto_set_str (o, "job", g->job);
    if (g->kind == GEN_CHECKPOINT) {
        proto_set_int (o, "generation", g->gen);
        proto_set_int (o, "bytes", (int64_t)g->bytes);
        json_object_object_add (o, "dump_ms", json_object_new_double (g->t_dump));
        json_object_object_add (o, "copy_ms", json_object_new_double (g->t_commit));
        proto_set_int (o, "drain_rounds", g->drain_rounds);
    }
    json_object_object_add (o, "rebuild_ms", json_object_new_double (g->t_rebuild));
    return o;
}

void gen_report_end (struct gen *g, int rc)
{
    json_object *o;

    if (g->report_fd < 0 || !(o = proto_new ("worker-end")))
        return;
    proto_set_str (o, "job", g->job);
    proto_set_int (o, "gen", g->gen);
    proto_set_str (o, "result", rc < 0 ? "aborted" : g->kind == GEN_RESTORED ? "resumed"
                   : "committed");
    if (rc < 0) {
        proto_set_str (o, "phase", phase_name (g->err_phase));
        /* g->err is under 2 KiB: the frame stays under GEN_REPORT_CAP. */
        proto_set_str (o, "error", g->err[0] ? g->err : "(no reason recorded)");
    }
    if (proto_send (g->report_fd, o) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: cannot tell ibcrd how the generation ended: %s",
                 g->job, g->gen, strerror (errno));
    json_object_put (o);
}
