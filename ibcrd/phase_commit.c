/* phase_commit.c - the copy and commit phases: every node copies its images
 * from staging to the generation's storage folder, durably (genl_copy);
 * then the leader writes the manifest, renamed into place last, which
 * alone commits, and applies retention (gen_commit). */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <syslog.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/store.h"
#include "gen_int.h"
#include "fanout.h"
#include "imgcopy.h"

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
int gen_commit (struct gen *g, json_object *tasks)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char err[1536];
    double t0 = mono_ms_f ();
    json_object *meta, *rep[g->nmembers + 1], *nodes;
    int rc;

    gen_enter (g, PHASE_COPY);
    if (gen_phase_all (g, PHASE_COPY, genl_copy, NULL, rep, g->conf->timeout_commit) < 0) {
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
    /* Never waits for a user's prune of the job: the next commit prunes. */
    if (store_prune_wait (&st, g->job, g->conf->retention, 0, removed, err, sizeof (err)) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: retention: %s", g->job, g->gen, err);
    for (size_t i = 0; i < json_object_array_length (removed); i++)
        log_msg (LOG_INFO, "job %s: retention %d: removed generation %d", g->job,
                 g->conf->retention, json_object_get_int (json_object_array_get_idx (removed, i)));
    json_object_put (removed);
    return 0;
}

/* Copy: this node's images into the generation's storage folder (which
 * the leader created), durably. */
static void copy_progress (void *arg, uint64_t more)
{
    struct gen *g = arg;

    g->copy_done += more;
    gen_progress (g, PHASE_COPY, g->copy_done, g->copy_total, 0);
}

int genl_copy (struct gen *g)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char gdir[PATH_MAX], err[1536];
    double t0 = mono_ms_f ();

    if (store_gen_path (&st, g->job, g->gen, gdir, sizeof (gdir)) < 0)
        return gen_fail (g, PHASE_COPY, "bad job name");
    g->copy_done = g->copy_total = 0;
    for (int i = 0; i < g->ntasks && g->progress_fd >= 0; i++) {
        char src[PATH_MAX + 32];
        snprintf (src, sizeof (src), "%s/task-%d", g->staging, g->tasks[i].rank);
        g->copy_total += imgcopy_dir_size (src);
    }
    gen_progress (g, PHASE_COPY, 0, g->copy_total, 1);
    for (int i = 0; i < g->ntasks; i++) {
        char src[PATH_MAX + 32], dst[PATH_MAX + 32];
        uint64_t bytes;

        snprintf (src, sizeof (src), "%s/task-%d", g->staging, g->tasks[i].rank);
        snprintf (dst, sizeof (dst), "%s/task-%d", gdir, g->tasks[i].rank);
        if (imgcopy_dir (src, dst, g->conf->compression, &bytes, err, sizeof (err), copy_progress,
                         g)
            < 0)
            return gen_fail (g, PHASE_COPY, err);
        g->bytes += bytes;
    }
    g->t_commit = mono_ms_f () - t0;
    return 0;
}
