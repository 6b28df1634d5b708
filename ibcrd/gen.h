/* gen.h - one checkpoint generation of one job, as DESIGN.md's protocol:
 * quiesce, drain rounds, release, dump, rebuild with id exchange, resume,
 * commit.  Each phase is a named function below; gen_run() strings them
 * together and owns the abort path.
 *
 * Runs in a worker process forked by the daemon for this generation
 * (worker.h): it may block for as long as CRIU and the copy take without
 * stalling the daemon's loop, and it owns the tasks' libibcr control
 * connections until it exits.
 *
 * Invariant: a generation commits whole or leaves nothing behind.  Any
 * failure or timeout in any phase resumes the job (rebuilding its verbs
 * objects first if they were released), removes the staging images and
 * the partial storage folder, and reports the error; the last committed
 * generation stays the newest.  Only the manifest's rename commits.
 */
#ifndef IBCRD_GEN_H
#define IBCRD_GEN_H

#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "common/conf.h"
#include "common/ident.h"

struct gen_task {
    int rank;
    pid_t pid;              /* the task's init: the root CRIU dumps */
    int ctl_fd;             /* libibcr's control connection, or -1 */
    int restored;           /* restart: waits for rebuild, not dumped */
    char node[IDENT_MAX + 1];
};

enum gen_kind {
    GEN_CHECKPOINT,         /* the whole protocol, to a new generation */
    GEN_RESTORED,           /* after a restore: rebuild, connect, resume */
};

struct gen {
    const struct conf *conf;
    enum gen_kind kind;
    char job[IDENT_MAX + 1];
    uid_t uid;
    gid_t gid;
    int size;               /* ranks in the job */
    const char *trigger;    /* "manual", "periodic", ... */
    int leave_running;      /* CRIU --leave-running (periodic) or not (ending) */
    int ntasks;
    struct gen_task *tasks;
    pid_t daemon;           /* the ibcrd that started this worker */

    /* Filled while it runs. */
    int gen;                /* generation number, once begun */
    int quiesced, released, dumped;
    char staging[4096];     /* <staging>/<job>/gen-N */
    double t_quiesce, t_drain, t_release, t_dump, t_rebuild, t_resume, t_commit;
    int drain_rounds;
    uint64_t bytes;
    char err[2048];
};

/* Run the generation.  0 when committed (or resumed, for GEN_RESTORED);
 * -1 with g->err saying what failed, in which phase, and what became of
 * the job. */
int gen_run (struct gen *g);

/* The reply for whoever asked: "ok" with generation, bytes, phase times,
 * or "error" with g->err. */
json_object *gen_reply (const struct gen *g, int rc);

#endif
