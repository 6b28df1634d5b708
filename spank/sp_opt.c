/* sp_opt.c - see sp_opt.h.
 *
 * The interval spelling is lib/common's duration (the same that
 * ibcrd.conf and `ibcr run --interval` accept); this file only adds what
 * makes sense for a checkpoint period: whole seconds, at least one.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/duration.h"
#include "sp_opt.h"

#define SP_FORMS                                                                                   \
    "90s, 30m, 2h, 1h30m (units s, m, h, d), or the bare flag "                                    \
    "--checkpoint-ib for checkpoints only on preemption, time limit and drain"

static struct sp_opt sp_opt_state;

int sp_opt_parse (const char *arg, struct sp_opt *o, char *err, size_t errlen)
{
    uint64_t ms;

    memset (o, 0, sizeof (*o));
    o->set = 1;
    /* Slurm forwards a bare flag to steps as "" or as the printf of a
     * NULL pointer, depending on the path it took. */
    if (!arg || !*arg || !strcmp (arg, "(null)"))
        return 0;
    if (duration_parse (arg, &ms) < 0) {
        snprintf (err, errlen, "ibcr: --checkpoint-ib=%s: %s; accepted forms: %s", arg,
                  errno == ERANGE ? "interval too large" : "not an interval", SP_FORMS);
        return -1;
    }
    if (ms < 1000 || ms % 1000) {
        snprintf (err, errlen,
                  "ibcr: --checkpoint-ib=%s: the interval must be whole "
                  "seconds, at least 1s; accepted forms: %s",
                  arg, SP_FORMS);
        return -1;
    }
    o->interval_ms = ms;
    duration_format (ms, o->text, sizeof (o->text));
    return 0;
}

static int sp_opt_cb (int val, const char *optarg, int remote)
{
    char err[512];
    struct sp_opt o;

    (void)val;
    if (sp_opt_parse (optarg, &o, err, sizeof (err)) < 0) {
        /* Submitting side: the user reads stderr.  In slurmstepd the
         * value was checked at submission already; log it for the admin. */
        if (remote)
            slurm_error ("%s", err);
        else
            fprintf (stderr, "%s\n", err);
        return -1;
    }
    sp_opt_state = o;
    return 0;
}

static struct spank_option sp_opt_def = {
    .name = "checkpoint-ib",
    .arginfo = "[INTERVAL]", /* optional: Slurm prints "--checkpoint-ib=[INTERVAL]" */
    .usage = "ibcr: make this job checkpoint-restartable over InfiniBand; "
             "checkpoint every INTERVAL (90s, 30m, 2h, 1h30m), and on preemption, "
             "time limit, drain and requeue (bare flag: only those)",
    .has_arg = 2, /* optional argument */
    .val = 0,
    .cb = sp_opt_cb,
};

int sp_opt_register (spank_t sp)
{
    return spank_option_register (sp, &sp_opt_def) == ESPANK_SUCCESS ? 0 : -1;
}

const struct sp_opt *sp_opt_get (void)
{
    return &sp_opt_state;
}
