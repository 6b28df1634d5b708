/* phase_rebuild.c - the rebuild and connect phases, which share their
 * table: every process recreates its verbs objects and answers its new
 * real ids (rebuild), then every process gets every id of the job and
 * reconnects its QPs to their prior state (connect).  The leader gathers
 * the ids and hands the table out (gen_rebuild); each node asks its own
 * processes (genl_rebuild_ids, genl_connect); a member merges its
 * subtree's ids (gen_member.c).  Also the abort's way back from release,
 * and the whole of a restart's rebuild with resume. */
#include "config.h"

#include "gen_int.h"
#include "ibcr/ckpt_proto.h"
#include "fanout.h"

/* Rebuild: ids of every process gathered, handed to every process. */
int gen_rebuild (struct gen *g)
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
    gen_gather (g, rep, "ids", procs);
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

/* Rebuild: every libibcr reopens a device, recreates its objects and
 * answers its new real ids, appended to ids. */
int genl_rebuild_ids (struct gen *g, json_object *ids)
{
    return ctl_gather (g, PHASE_REBUILD, CKPT_REBUILD, NULL, CKPT_IDS, g->conf->timeout_rebuild,
                       ids);
}

/* Connect: every QP to its prior state with translated peers (procs:
 * the ids of every process of the job). */
int genl_connect (struct gen *g, json_object *procs)
{
    json_object *x = json_object_new_object ();
    int rc;

    json_object_object_add (x, "procs", json_object_get (procs));
    rc = ctl_phase (g, PHASE_CONNECT, CKPT_CONNECT, x, CKPT_CONNECTED, g->conf->timeout_rebuild);
    json_object_put (x);
    if (rc == 0)
        g->released = 0;
    return rc;
}
