/* cli_run.c - "ibcr run": start a program checkpointable, on one machine
 * or as one rank of a job spread over several (no Slurm needed).
 *
 *   ibcr run [--name N | --job ID] [--rank R --size N --leader HOST[:PORT]]
 *            [--interval D] [--detach] -- CMD ARGS...
 *
 * CMD runs under ibcr-init (its own PID namespace and session), with
 * libibcr preloaded and IBCR_SOCKET naming this node's ibcrd, and is
 * registered with that ibcrd, which checkpoints it on request or every
 * interval.  We wait and return CMD's exit status; its output comes out
 * of ours.  Creating a PID namespace and CRIU need root.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common/duration.h"
#include "common/ident.h"
#include "common/proto.h"

#ifndef LIBDIR
#define LIBDIR "/usr/local/lib"
#endif

/* libibcr: IBCR_LIBIBCR (the build tree in tests), else the installed one. */
static const char *libibcr_path (void)
{
    const char *e = getenv ("IBCR_LIBIBCR");
    return e && *e ? e : LIBDIR "/libibcr.so";
}

int cli_add_leader (json_object *f, const char *spec)
{
    char buf[256], *colon;
    long port = 0;

    if (strlen (spec) >= sizeof (buf) || !*spec) {
        cli_error ("--leader %s: give [NODE@]HOST[:PORT], the ibcrd of rank 0", spec);
        return -1;
    }
    strcpy (buf, spec);
    if ((colon = strrchr (buf, ':'))) {
        char *end;
        *colon = '\0';
        port = strtol (colon + 1, &end, 10);
        if (*end || port < 1 || port > 65535) {
            cli_error ("--leader %s: the port after ':' must be 1-65535", spec);
            return -1;
        }
    }
    json_object_object_add (f, "leader", json_object_new_string (buf));
    if (port)
        json_object_object_add (f, "leader_port", json_object_new_int ((int)port));
    return 0;
}

static const char run_usage[] =
    "usage: ibcr run [--name N] [--interval D] [--detach] [--job ID --rank R --size N "
    "--leader HOST[:PORT]] -- CMD [ARGS...]";

/* Child: the environment of the task, then exec ibcr-init. */
static void exec_launcher (const char *sock, const char *job, int rank, const char *pidfile,
                           int out_w, int err_w, char **cmd)
{
    const char *lib = libibcr_path (), *old = getenv ("LD_PRELOAD");
    char rankbuf[16], *preload;
    int nul = open ("/dev/null", O_RDONLY);
    int n = 0;

    while (cmd[n])
        n++;
    char *argv[n + 5];
    argv[0] = (char *)cli_init_path ();
    argv[1] = "--pidfile";
    argv[2] = (char *)pidfile;
    argv[3] = "--";
    memcpy (argv + 4, cmd, (n + 1) * sizeof (char *));
    if (asprintf (&preload, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "") < 0)
        _exit (125);
    snprintf (rankbuf, sizeof (rankbuf), "%d", rank);
    setenv ("LD_PRELOAD", preload, 1);
    setenv ("IBCR_SOCKET", sock, 1);
    setenv ("IBCR_JOB", job, 1);
    setenv ("IBCR_RANK", rankbuf, 1);
    /* stdin is /dev/null: a terminal would tie the image to this session. */
    if (nul < 0 || dup2 (nul, 0) < 0 || dup2 (out_w, 1) < 0 || dup2 (err_w, 2) < 0)
        _exit (125);
    /* Nothing else of ours goes into the task: every fd in it is in its
     * image, and one open on a file that grows fails the restore. */
    close_range (3, ~0U, 0);
    execv (argv[0], argv);
    fprintf (stderr, "ibcr: error: cannot run %s: %s (set IBCR_INIT to ibcr-init's path)\n",
             argv[0], strerror (errno));
    _exit (125);
}

int cli_run (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "name", required_argument, NULL, 'n' },
        { "job", required_argument, NULL, 'j' },
        { "rank", required_argument, NULL, 'r' },
        { "size", required_argument, NULL, 'N' },
        { "leader", required_argument, NULL, 'l' },
        { "interval", required_argument, NULL, 'i' },
        { "detach", no_argument, NULL, 'd' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL, *leader = NULL, *sock;
    char jobbuf[IDENT_MAX + 1], pidfile[256];
    uint64_t interval = 0;
    int ch, rank = 0, size = 1, detach = 0, out[2], err[2], rc;
    struct cli_task t = { .out_r = -1, .err_r = -1, .regfd = -1 };
    json_object *f;
    char *end;

    while ((ch = getopt_long (argc, argv, "+", opts, NULL)) != -1) {
        switch (ch) {
        case 'n': case 'j':
            job = optarg;
            break;
        case 'r': case 'N': {
            long v = strtol (optarg, &end, 10);
            if (*end || !*optarg || v < (ch == 'r' ? 0 : 1) || v > 1000000) {
                cli_error ("--%s %s: give a number from %d", ch == 'r' ? "rank" : "size",
                           optarg, ch == 'r' ? 0 : 1);
                return CLI_USAGE;
            }
            if (ch == 'r')
                rank = (int)v;
            else
                size = (int)v;
            break;
        }
        case 'l': leader = optarg; break;
        case 'i':
            if (duration_parse (optarg, &interval) < 0 || interval < 1000) {
                cli_error ("--interval %s: give a duration of at least 1s, e.g. 90s, 30m, "
                           "1h30m", optarg);
                return CLI_USAGE;
            }
            break;
        case 'd': detach = 1; break;
        default:
            cli_error ("%s", run_usage);
            return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        cli_error ("no command to run; %s", run_usage);
        return CLI_USAGE;
    }
    if (rank >= size) {
        cli_error ("--rank %d is not below --size %d: ranks are 0 .. size-1", rank, size);
        return CLI_USAGE;
    }
    if (leader) {
        json_object *tmp = json_object_new_object ();
        int bad = cli_add_leader (tmp, leader);
        json_object_put (tmp);
        if (bad)
            return CLI_USAGE;
    }
    /* Without --leader, rank 0 runs on this node too (one ibcrd leads). */
    if (!job) {
        snprintf (jobbuf, sizeof (jobbuf), "run-%ld", (long)getpid ());
        job = jobbuf;
    }
    if (!ident_ok (job)) {
        cli_error ("--name %s: a job name is 1-%d letters, digits, '.', '_' or '-', not "
                   "starting with '.' or '-'", job, IDENT_MAX);
        return CLI_USAGE;
    }
    if (geteuid () != 0) {
        cli_error ("ibcr run is root's (it makes the task's namespaces); as an ordinary "
                   "user, protect your program under Slurm: srun or sbatch --checkpoint-ib "
                   "(spank-ibcr(8))");
        return CLI_DENIED;
    }
    if (access (libibcr_path (), R_OK) < 0) {
        cli_error ("cannot preload %s: %s (set IBCR_LIBIBCR to libibcr.so's path)",
                   libibcr_path (), strerror (errno));
        return CLI_ERR;
    }
    if (!(sock = cli_socket_path (c)))
        return CLI_USAGE;
    if (access (sock, F_OK) < 0) {
        cli_error ("ibcrd is not running at %s: start it first (or give its socket with "
                   "--socket or IBCR_SOCKET)", sock);
        return CLI_NODAEMON;
    }
    if (detach) {
        pid_t p = fork ();
        if (p < 0) {
            cli_error ("cannot fork: %s", strerror (errno));
            return CLI_ERR;
        }
        if (p > 0) {
            printf ("job %s started (ibcr run pid %ld)\n", job, (long)p);
            return CLI_OK;
        }
        setsid ();
    }
    snprintf (pidfile, sizeof (pidfile), "/tmp/ibcr-run.%ld.%s.pid", (long)getpid (), job);
    unlink (pidfile);
    if (pipe (out) < 0 || pipe (err) < 0) {
        cli_error ("cannot make pipes: %s", strerror (errno));
        return CLI_ERR;
    }
    if ((t.launcher = fork ()) < 0) {
        cli_error ("cannot fork: %s", strerror (errno));
        return CLI_ERR;
    }
    if (t.launcher == 0) {
        close (out[0]);
        close (err[0]);
        exec_launcher (sock, job, rank, pidfile, out[1], err[1], argv + optind);
    }
    close (out[1]);
    close (err[1]);
    t.out_r = out[0];
    t.err_r = err[0];
    if ((rc = cli_task_wait_pid (&t, pidfile, "ibcr-init"))) {
        /* Ended before we could register it: nothing to checkpoint, but
         * its output and exit status are the user's. */
        int code = cli_task_wait (&t);
        unlink (pidfile);
        return rc < 0 ? code : rc;
    }
    f = json_object_new_object ();
    json_object_object_add (f, "job", json_object_new_string (job));
    json_object_object_add (f, "rank", json_object_new_int (rank));
    json_object_object_add (f, "size", json_object_new_int (size));
    json_object_object_add (f, "source", json_object_new_string ("run"));
    if (interval)
        json_object_object_add (f, "interval_ms", json_object_new_int64 ((int64_t)interval));
    if (leader && cli_add_leader (f, leader) < 0)
        return CLI_USAGE;
    if ((rc = cli_task_register (c, &t, f))) {
        /* A task that cannot be checkpointed is not what was asked for. */
        kill (t.launcher, SIGTERM);
        cli_task_wait (&t);
        unlink (pidfile);
        return rc;
    }
    rc = cli_task_wait (&t);
    unlink (pidfile);
    return rc;
}
