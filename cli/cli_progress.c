/* cli_progress.c - the one updating line on a terminal that shows a long
 * operation (checkpoint --wait, restart) going: phase, bytes done of
 * total, rate.  Drawn only when stderr is a terminal, so that scripts
 * reading our output never see it. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/clock.h"

static struct {
    int shown; /* a line is on the terminal */
    char phase[32];
    double t0; /* when this phase began (its rate's origin) */
} prog;

int cli_progress_wanted (void)
{
    return isatty (STDERR_FILENO);
}

void cli_progress_show (const char *what, const char *phase, uint64_t done, uint64_t total)
{
    char d[32], t[32], r[32], line[256];
    double el;

    if (!cli_progress_wanted ())
        return;
    if (strcmp (prog.phase, phase)) {
        snprintf (prog.phase, sizeof (prog.phase), "%s", phase);
        prog.t0 = mono_ms_f () / 1e3;
    }
    el = mono_ms_f () / 1e3 - prog.t0;
    if (total || done) {
        cli_bytes (done, d, sizeof (d));
        cli_bytes (total, t, sizeof (t));
        if (el > 0.05)
            snprintf (r, sizeof (r), ", %s/s",
                      cli_bytes ((uint64_t)(done / el), line, sizeof (line)));
        else
            r[0] = '\0';
        snprintf (line, sizeof (line), "%s: %-8s %s of %s (%.0f%%%s)", what, phase, d, t,
                  total ? 100.0 * (double)done / (double)total : 100.0, r);
    } else
        snprintf (line, sizeof (line), "%s: %-8s", what, phase);
    /* Carriage return and erase-line: one line, redrawn in place. */
    fprintf (stderr, "\r\033[K%s", line);
    fflush (stderr);
    prog.shown = 1;
}

void cli_progress_end (void)
{
    if (!prog.shown)
        return;
    fprintf (stderr, "\r\033[K");
    fflush (stderr);
    prog.shown = 0;
    prog.phase[0] = '\0';
}
