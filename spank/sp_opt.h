/* sp_opt.h - the --checkpoint-ib[=INTERVAL] option of sbatch, salloc and
 * srun.
 *
 * On the submitting side the callback only checks the interval, so that a
 * malformed one is refused before anything is queued.  In slurmstepd
 * Slurm replays the callback with the value of the step (srun's own, or
 * the one inherited from the batch job through the environment), which
 * sets what sp_opt_get() reports.
 */
#ifndef IBCR_SPANK_OPT_H
#define IBCR_SPANK_OPT_H

#include <stdint.h>
#include <slurm/spank.h>

struct sp_opt {
    int set;              /* the option was given (or inherited) */
    uint64_t interval_ms; /* 0: bare flag, no periodic checkpoints */
    char text[32];        /* canonical spelling ("1h30m"), "" when bare */
};

/* Register the option with Slurm (every context that has options). */
int sp_opt_register (spank_t sp);

/* What the option says for this command or step. */
const struct sp_opt *sp_opt_get (void);

/* Parse one option value as the callback does.  Bare-flag spellings are
 * NULL, "" and "(null)" (what Slurm hands a step when the flag had no
 * value).  0, or -1 with a message for the user in err. */
int sp_opt_parse (const char *arg, struct sp_opt *o, char *err, size_t errlen);

#endif
