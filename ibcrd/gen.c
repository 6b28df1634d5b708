/* gen.c - see gen.h.  The leader's side of a generation, as a sequence:
 * each phase runs on this node's tasks and on every member node (through
 * its generation worker, gen_member.c, over the MUNGE-authenticated peer
 * protocol) at the same time: the members are asked first (fanout.h),
 * this node does its part while they do theirs, then their answers are
 * awaited together.  gen_run() strings the phases together in protocol
 * order and is the only place that decides to abort, everywhere at once.
 *
 * Where each phase lives (phase.h names them; gen_int.h says what gen_X,
 * genl_X and genm_X are):
 *
 *   phase            file               leader      this node         member
 *   begin            phase_begin.c      gen_begin   genl_tasks_json   genm_begin
 *   quiesce          phase_quiesce.c    gen_quiesce genl_quiesce      (relays)
 *   drain            phase_drain.c      gen_drain   genl_drain_round  (merges reports)
 *   release          phase_release.c    gen_release genl_release      (relays)
 *   dump             phase_dump.c       gen_dump    genl_dump         (relays)
 *   rebuild, connect phase_rebuild.c    gen_rebuild genl_rebuild_ids, (merges ids)
 *                                                   genl_connect
 *   resume           phase_resume.c     gen_resume  genl_resume       (relays)
 *   copy, commit     phase_commit.c     gen_commit  genl_copy         (sums bytes)
 *   end              phase_end.c        gen_run     genl_cleanup      genm_end
 *   abort            phase_abort.c      gen_abort   genl_undo         genm_abort,
 *                                                                     genm_give_up
 *   restore          (the restarter: cli/ and spank/; its span: timeline.c)
 *
 * Around them: gen_common.c (errors, reports, the leader's one-phase-
 * everywhere and this node's requests to libibcr), gen_member.c (a
 * member's session with its parent and the relaying of every phase),
 * fanout.c (the requests down the tree: gen-begin and its session keys,
 * every phase's request and reply, gen-abort to the nodes below a lost
 * child), timeline.c (who took how long). */
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
#include "common/manifest.h"
#include "common/store.h"
#include "gen_int.h"
#include "fanout.h"

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

/* A rebuild resumes ranks restored from one generation only: ranks that
 * each picked their own (a generation committed while they were being
 * restored, one that a rank could not read for a moment) would run on
 * from different points of the job.  0, or -1 with the two named in err. */
static int restored_from_one (struct gen *g, char *err, size_t len)
{
    int r0 = -1, g0 = 0, r1 = -1, g1 = 0;

    /* This node's tasks (i < 0), then each member's begin answer. */
    for (int i = -1; i < g->nmembers && !g1; i++) {
        json_object *tasks = i < 0 ? NULL : g->members[i].tasks;
        size_t nt = i < 0 ? (size_t)g->ntasks : tasks ? json_object_array_length (tasks) : 0;
        for (size_t k = 0; k < nt && !g1; k++) {
            json_object *t = i < 0 ? NULL : json_object_array_get_idx (tasks, k);
            int r = t ? (int)proto_get_int (t, "rank", -1) : g->tasks[k].rank;
            int gen = t ? (int)proto_get_int (t, "restored_gen", 0) : g->tasks[k].restored_gen;
            if (gen <= 0)
                continue;
            if (!g0) {
                r0 = r;
                g0 = gen;
            } else if (gen != g0) {
                r1 = r;
                g1 = gen;
            }
        }
    }
    if (!g1)
        return 0;
    /* Each rank checks its own images only: one that found its images of
     * the newer generation damaged fell back, and marked it so, after the
     * other had picked it.  A restore of every rank now passes it by. */
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char what[512];
    int newer = g0 > g1 ? g0 : g1;
    if (store_gen_damaged (&st, g->job, newer, what, sizeof (what))) {
        g->requeue = g->slurm;
        snprintf (err, len,
                  "ranks were restored from different generations: rank %d from "
                  "generation %d, rank %d from generation %d, as generation %d was found "
                  "damaged (%.300s) after some ranks had picked it; not resumed, %s",
                  r0, g0, r1, g1, newer, what,
                  g->slurm ? "and the job is requeued: its next run restores every rank from "
                             "an older generation"
                           : "restart it: every rank passes that generation by now");
        return -1;
    }
    snprintf (err, len,
              "ranks were restored from different generations: rank %d from "
              "generation %d, rank %d from generation %d; not resumed (restart "
              "every rank from one generation, e.g. with --gen)",
              r0, g0, r1, g1);
    return -1;
}

static int gen_restored (struct gen *g)
{
    char err[1024];
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
        *r = (struct gen_span){ .start = g->restore_t0,
                                .end = g->restore_t1,
                                .node_ms = g->restore_t1 - g->restore_t0,
                                .n = 1 };
    }
    if (gen_begin (g) < 0
        || (restored_from_one (g, err, sizeof (err)) < 0 && gen_fail (g, PHASE_BEGIN, err) < 0)
        || gen_rebuild (g) < 0 || gen_resume (g) < 0) {
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
    if (store_gen_begin (&st, g->job, g->uid, g->gid, &g->gen, dir, sizeof (dir), err, sizeof (err))
        < 0) {
        gen_fail (g, PHASE_BEGIN, err);
        goto abort;
    }
    snprintf (g->staging, sizeof (g->staging), "%s/%s/gen-%d", g->conf->staging, g->job, g->gen);
    store_rmtree (g->staging); /* a leftover of a killed daemon */
    log_msg (LOG_INFO, "job %s gen %d: begin (%s, %d task%s here, %d other node%s)", g->job, g->gen,
             g->trigger, g->ntasks, g->ntasks == 1 ? "" : "s", g->nmembers,
             g->nmembers == 1 ? "" : "s");
    if (gen_begin (g) < 0)
        goto abort;
    tasks = genl_tasks_json (g);
    for (int i = 0; i < g->nmembers; i++)
        for (size_t k = 0;
             g->members[i].tasks && k < json_object_array_length (g->members[i].tasks); k++)
            json_object_array_add (
                tasks, json_object_get (json_object_array_get_idx (g->members[i].tasks, k)));
    /* Every rank's images, or no generation: a rank that left a member
     * node (its task ended) would leave a manifest no restore can use. */
    int miss = manifest_tasks_missing_rank (tasks, g->size);
    if (miss >= 0) {
        snprintf (err, sizeof (err),
                  "rank %d of the job's %d has no task on any of its nodes (it ended or "
                  "left): a generation without its images could not be restored; the "
                  "last good one stays",
                  miss, g->size);
        gen_fail (g, PHASE_BEGIN, err);
        goto abort;
    }
    if (gen_quiesce (g) < 0 || gen_drain (g) < 0 || gen_release (g) < 0 || gen_dump (g) < 0)
        goto abort;
    if (g->leave_running && (gen_rebuild (g) < 0 || gen_resume (g) < 0))
        goto abort;
    log_msg (LOG_INFO,
             "job %s gen %d: dumped and resumed in %.1f ms (quiesce %.1f, drain "
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
            return proto_error ("restore", EIO,
                                "job %s: the restored tasks could not be "
                                "resumed: %s",
                                g->job, g->err);
        return proto_error ("checkpoint", EIO,
                            "job %s: generation %d aborted in %s; the job "
                            "runs on and its last committed generation stays",
                            g->job, g->gen, g->err);
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
        if (g->drain_ud_lost[0])
            proto_set_str (o, "drain_ud_lost", g->drain_ud_lost);
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
    proto_set_str (o, "result",
                   rc < 0                        ? "aborted"
                       : g->kind == GEN_RESTORED ? "resumed"
                                                 : "committed");
    if (rc < 0) {
        if (g->requeue)
            proto_set_bool (o, "requeue", 1);
        proto_set_str (o, "phase", phase_name (g->err_phase));
        /* g->err is under 2 KiB: the frame stays under GEN_REPORT_CAP. */
        proto_set_str (o, "error", g->err[0] ? g->err : "(no reason recorded)");
    }
    if (proto_send (g->report_fd, o) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: cannot tell ibcrd how the generation ended: %s",
                 g->job, g->gen, strerror (errno));
    json_object_put (o);
}
