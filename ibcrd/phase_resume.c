/* phase_resume.c - the resume phase: the application threads go on.  The
 * leader asks every node at once (gen_resume); each node asks its own
 * processes (genl_resume). */
#include "config.h"

#include "gen_int.h"
#include "ibcr/ckpt_proto.h"

int gen_resume (struct gen *g)
{
    return gen_step (g, PHASE_RESUME, genl_resume, g->conf->timeout_quiesce, &g->t_resume);
}

/* Resume: application threads go on. */
int genl_resume (struct gen *g)
{
    if (ctl_phase (g, PHASE_RESUME, CKPT_RESUME, NULL, CKPT_RESUMED, g->conf->timeout_quiesce) < 0)
        return -1;
    g->quiesced = 0;
    return 0;
}
