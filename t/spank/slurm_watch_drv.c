/* slurm_watch_drv.c - ibcr-slurm-watch, a test driver for slurm_watch.h
 * (not installed): watch jobs on one Slurm node with the daemon's module
 * and print every event as one line, so a test can hold a real slurmctld
 * to what the module reports.
 *
 *   ibcr-slurm-watch -N NODE [-m MARGIN_S] [-p POLL_MS] [-c CKPT_S]
 *       [-t ACTION] [-d ACTION] [-P ACTION] [-R] [-L] [-T SECONDS] JOBID...
 *
 * ACTION is requeue, checkpoint or nothing (on_timelimit, on_drain,
 * on_preempt).  With -R, an event whose action is "requeue" is followed by
 * slurm_watch_requeue(), as ibcrd does after the final checkpoint (there is
 * no checkpoint here).  Ends when every job is gone, or after -T seconds
 * (default 300).  Output, flushed per line:
 *
 *   <unix time> <kind> job=<id> action=<action> left=<s> restarts=<n> <text>
 *   <unix time> requeued job=<id> | requeue-failed job=<id> <why>
 *   <unix time> looked <n>      (with -L: after each look at Slurm, the
 *                               n-th, so a test can wait for the next ones)
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "slurm_watch.h"

static struct slurm_watch *w;
static int do_requeue, show_looks;

static void usage (void)
{
    fprintf (stderr,
             "usage: ibcr-slurm-watch -N NODE [-m MARGIN_S] [-p POLL_MS] [-c CKPT_S] "
             "[-t ACTION] [-d ACTION] [-P ACTION] [-R] [-L] [-T SECONDS] JOBID...\n"
             "ACTION: requeue, checkpoint or nothing\n");
    exit (2);
}

static void on_event (const struct slurm_watch_event *ev, void *arg)
{
    char err[512];

    (void)arg;
    printf ("%ld %s job=%u action=%s left=%ld restarts=%u %s\n", (long)time (NULL),
            slurm_watch_kind_name (ev->kind), ev->job, slurm_watch_action_name (ev->action),
            ev->seconds_left, ev->restarts, ev->text);
    if (do_requeue && ev->action == SLURM_WATCH_CHECKPOINT_REQUEUE) {
        if (slurm_watch_requeue (w, ev->job, err, sizeof (err)) == 0)
            printf ("%ld requeued job=%u\n", (long)time (NULL), ev->job);
        else
            printf ("%ld requeue-failed job=%u %s\n", (long)time (NULL), ev->job, err);
    }
    fflush (stdout);
}

static unsigned long num (const char *opt, const char *s)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul (s, &end, 10);
    if (errno || end == s || *end) {
        fprintf (stderr, "ibcr-slurm-watch: %s %s: give a whole number\n", opt, s);
        exit (2);
    }
    return v;
}

static enum slurm_watch_action action (const char *opt, const char *s)
{
    int a = slurm_watch_action_parse (s);

    if (a < 0) {
        fprintf (stderr, "ibcr-slurm-watch: %s %s: give requeue, checkpoint or nothing\n", opt, s);
        exit (2);
    }
    return (enum slurm_watch_action)a;
}

int main (int argc, char **argv)
{
    struct slurm_watch_policy pol;
    const char *node = NULL;
    unsigned long total = 300;
    double ckpt = 0;
    char err[512];
    time_t until;
    unsigned long looks = 0;
    int ch, ms;

    slurm_watch_policy_defaults (&pol);
    while ((ch = getopt (argc, argv, "N:m:p:c:t:d:P:RLT:")) != -1) {
        switch (ch) {
        case 'N':
            node = optarg;
            break;
        case 'm':
            pol.margin_s = (unsigned)num ("-m", optarg);
            break;
        case 'p':
            pol.poll_ms = (unsigned)num ("-p", optarg);
            break;
        case 'c':
            ckpt = (double)num ("-c", optarg);
            break;
        case 't':
            pol.on_timelimit = action ("-t", optarg);
            break;
        case 'd':
            pol.on_drain = action ("-d", optarg);
            break;
        case 'P':
            pol.on_preempt = action ("-P", optarg);
            break;
        case 'R':
            do_requeue = 1;
            break;
        case 'L':
            show_looks = 1;
            break;
        case 'T':
            total = num ("-T", optarg);
            break;
        default:
            usage ();
        }
    }
    if (!node || optind >= argc)
        usage ();
    if (!(w = slurm_watch_create (node, &pol, on_event, NULL, err, sizeof (err)))) {
        fprintf (stderr, "ibcr-slurm-watch: %s\n", err);
        return 1;
    }
    for (int i = optind; i < argc; i++) {
        uint32_t id = (uint32_t)num ("JOBID", argv[i]);
        if (slurm_watch_add (w, id) < 0) {
            perror ("ibcr-slurm-watch");
            return 1;
        }
        slurm_watch_set_ckpt_seconds (w, id, ckpt);
    }
    until = time (NULL) + (time_t)total;
    while ((ms = slurm_watch_due_ms (w)) >= 0 && time (NULL) < until) {
        if (ms > 0)
            (void)poll (NULL, 0, ms);
        if (slurm_watch_poll (w) < 0) {
            printf ("%ld poll-failed %s\n", (long)time (NULL), slurm_watch_error (w));
            fflush (stdout);
        }
        if (show_looks) {
            printf ("%ld looked %lu\n", (long)time (NULL), ++looks);
            fflush (stdout);
        }
    }
    slurm_watch_destroy (w);
    return 0;
}
