/* phase_quiesce.c - the quiesce phase: every application thread of the job
 * stops at libibcr's gate.  The leader asks every node at once
 * (gen_quiesce); each node asks its own processes (genl_quiesce). */
#include "config.h"

#include "gen_int.h"
#include "ibcr/ckpt_proto.h"

int gen_quiesce (struct gen *g)
{
    return gen_step (g, PHASE_QUIESCE, genl_quiesce, g->conf->timeout_quiesce, &g->t_quiesce);
}

/* Quiesce: application threads stop at libibcr's gate. */
int genl_quiesce (struct gen *g)
{
    if (ctl_phase (g, PHASE_QUIESCE, CKPT_QUIESCE, NULL, CKPT_QUIESCED, g->conf->timeout_quiesce)
        < 0)
        return -1;
    g->quiesced = 1;
    return 0;
}
