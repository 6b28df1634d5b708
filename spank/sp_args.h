/* sp_args.h - the plugin's plugstack.conf arguments.
 *
 *   required /path/spank_ibcr.so [socket=PATH] [libibcr=PATH]
 *       [batch_step=yes|no] [on_daemon_down=warn|fail] [timeout=DURATION]
 *       [conf=PATH]
 *
 * conf= is ibcrd.conf (default: ibcrd's own default), read on a requeued
 * job's restart to find its checkpoints (storage=, cluster=) and criu.
 *
 * Parsed strictly in every context (srun, sbatch, salloc, slurmstepd), so
 * a typo stops submissions with a message naming the argument instead of
 * silently leaving jobs unprotected.  Paths keep their %n/%h: they are
 * expanded per node, in slurmstepd, where the node name is known.
 */
#ifndef IBCR_SPANK_ARGS_H
#define IBCR_SPANK_ARGS_H

#include <stddef.h>
#include <stdint.h>

enum sp_on_down {
    SP_DOWN_WARN = 0, /* run the task untouched, say it is UNPROTECTED */
    SP_DOWN_FAIL = 1, /* fail the task with the reason */
};

struct sp_args {
    char socket[4096];  /* ibcrd's socket, may hold %n and %h */
    char libibcr[4096]; /* the library preloaded into each task */
    char init[4096];    /* ibcr-init, what the task's init execs */
    int batch_step;     /* 1: the batch script is a protected task too */
    enum sp_on_down on_down;
    uint64_t timeout_ms;   /* whole exchange with ibcrd, per task */
    char conf[4096];       /* ibcrd.conf, may hold %n and %h; "" = default */
    uint64_t term_wait_ms; /* longest a task's SIGTERM waits for ibcrd's
                               final checkpoint; 0 = never held */
};

/* Defaults: the configured ibcrd socket and libibcr, batch_step=no,
 * on_daemon_down=warn, timeout=2s. */
void sp_args_defaults (struct sp_args *a);

/* Parse ac/av over the defaults.  0, or -1 with a message for the admin
 * in err ("ibcr: plugstack.conf: ...: why; what to do"). */
int sp_args_parse (struct sp_args *a, int ac, char **av, char *err, size_t errlen);

#endif
