/* phase_end.c - the end of a committed generation: every node removes its
 * staging and its dump logs (genl_cleanup; after an abort the logs stay).
 * The leader sends end to every node once the manifest is in place
 * (gen_run); a member passes it on to the nodes it leads (genm_end). */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/store.h"
#include "gen_int.h"
#include "fanout.h"

/* Staging of this generation and the dump logs: removed after a commit;
 * after an abort the logs stay (the error names them). */
void genl_cleanup (struct gen *g, int committed)
{
    char path[PATH_MAX + 64];

    for (int i = 0; i < g->ntasks; i++) {
        json_object_put (g->tasks[i].entry);
        g->tasks[i].entry = NULL;
    }

    if (g->staging[0])
        store_rmtree (g->staging);
    for (int i = 0; committed && i < g->ntasks; i++) {
        snprintf (path, sizeof (path), "%s/%s/dump-gen-%d-rank-%d.log", g->conf->staging, g->job,
                  g->gen, g->tasks[i].rank);
        unlink (path);
    }
}

/* Member: committed; the nodes below clean up too, and one that does not
 * answer is only logged, as the leader does. */
void genm_end (struct gen *g, int *state)
{
    fan_send (g, PHASE_END, NULL);
    genl_cleanup (g, 1);
    if (fan_wait (g, PHASE_END, NULL, genm_timeout (g, PHASE_END)) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: end: %s", g->job, g->gen, g->err);
    g->err[0] = '\0';
    *state = MEMBER_ENDED;
}
