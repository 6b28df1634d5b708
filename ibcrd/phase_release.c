/* phase_release.c - the release phase: every real verbs object of the job is
 * destroyed, so that CRIU sees processes that never used a device.  The
 * leader asks every node at once (gen_release); each node asks its own
 * processes (genl_release). */
#include "config.h"

#include "gen_int.h"
#include "ibcr/ckpt_proto.h"

int gen_release (struct gen *g)
{
    return gen_step (g, PHASE_RELEASE, genl_release, g->conf->timeout_quiesce, &g->t_release);
}

/* Release: libibcr destroys every real verbs object and closes the
 * device, so CRIU sees a process that never used one. */
int genl_release (struct gen *g)
{
    /* From here on the objects are gone even if some process failed:
     * the abort path must rebuild. */
    for (int i = 0; i < g->ntasks; i++)
        if (g->tasks[i].nctl > 0)
            g->released = 1;
    return ctl_phase (g, PHASE_RELEASE, CKPT_RELEASE, NULL, CKPT_RELEASED,
                      g->conf->timeout_quiesce);
}
