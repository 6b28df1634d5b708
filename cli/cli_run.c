/* cli_run.c - "ibcr run": start a program checkpointable, on one machine
 * or as one rank of a job spread over several (no Slurm needed).
 *
 *   ibcr run [--name N | --job ID] [--rank R --size N --leader HOST[:PORT]]
 *            [--interval D] [--detach] -- CMD ARGS...
 *
 * ibcrd starts CMD for us (tasks.h): as our user, in mount and PID
 * namespaces of its own under ibcr-init (taskns.h, as a Slurm task), with
 * libibcr preloaded and IBCR_SOCKET naming this node's ibcrd.  We
 * register it with that ibcrd, which checkpoints it on request or every
 * interval, relay its output and return its exit status.  Any user may:
 * the privileged steps are ibcrd's.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/duration.h"
#include "common/ident.h"
#include "common/proto.h"
#include "common/taskns.h"

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

/* The task's environment: ours, with libibcr preloaded and the names
 * it reads (IBCR_SOCKET, IBCR_JOB, IBCR_RANK) set. */
static json_object *task_env (const char *sock, const char *job, int rank)
{
    static const char *const ours[] = { "LD_PRELOAD=", "IBCR_SOCKET=", "IBCR_JOB=", "IBCR_RANK=" };
    const char *lib = libibcr_path (), *old = getenv ("LD_PRELOAD");
    json_object *env = json_object_new_array ();
    char buf[8192];

    for (char **e = environ; *e; e++) {
        int skip = 0;
        for (size_t i = 0; i < sizeof (ours) / sizeof (ours[0]); i++)
            skip |= !strncmp (*e, ours[i], strlen (ours[i]));
        if (!skip)
            json_object_array_add (env, json_object_new_string (*e));
    }
    snprintf (buf, sizeof (buf), "LD_PRELOAD=%s%s%s", lib, old && *old ? ":" : "",
              old && *old ? old : "");
    json_object_array_add (env, json_object_new_string (buf));
    snprintf (buf, sizeof (buf), "IBCR_SOCKET=%s", sock);
    json_object_array_add (env, json_object_new_string (buf));
    snprintf (buf, sizeof (buf), "IBCR_JOB=%s", job);
    json_object_array_add (env, json_object_new_string (buf));
    snprintf (buf, sizeof (buf), "IBCR_RANK=%d", rank);
    json_object_array_add (env, json_object_new_string (buf));
    return env;
}

/* Have ibcrd start cmd as us in the task's own namespaces (tasks.h),
 * with stdout and stderr on pipes we read.  0 with t's init, app, relay
 * and pipes set; or an exit code after printing why. */
static int spawn (struct cli *c, struct cli_task *t, const char *sock, const char *job, int rank,
                  char **cmd)
{
    json_object *req = proto_new ("spawn"), *argv = json_object_new_array (), *rep = NULL;
    int out[2], err[2], fds[3], rc, fd;

    for (char **a = cmd; *a; a++)
        json_object_array_add (argv, json_object_new_string (*a));
    proto_set_str (req, "job", job);
    proto_set_int (req, "rank", rank);
    proto_set_str (req, "init", cli_init_path ());
    json_object_object_add (req, "argv", argv);
    json_object_object_add (req, "env", task_env (sock, job, rank));
    fd = cli_relay_open (c, req, "spawn-ready", &rep, &rc);
    json_object_put (req);
    if (fd < 0) {
        if (rep)
            cli_error ("ibcrd does not start the task: %s", proto_get_str (rep, "message", "?"));
        json_object_put (rep);
        return rc;
    }
    json_object_put (rep);
    if (pipe2 (out, O_CLOEXEC) < 0 || pipe2 (err, O_CLOEXEC) < 0) {
        cli_error ("cannot make pipes: %s", strerror (errno));
        close (fd);
        return CLI_ERR;
    }
    /* The working folder by fd: ibcrd never resolves a path of ours. */
    if ((fds[0] = open (".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        cli_error ("cannot open the working folder: %s", strerror (errno));
        close (fd);
        return CLI_ERR;
    }
    fds[1] = out[1];
    fds[2] = err[1];
    rc = cli_relay_send_fds (fd, fds, 3);
    for (int i = 0; i < 3; i++)
        close (fds[i]);
    if (rc < 0 || !(rep = cli_relay_recv (fd, "spawned", &rc))) {
        close (out[0]);
        close (err[0]);
        close (fd);
        return rc ? rc : CLI_ERR;
    }
    t->init = (pid_t)proto_get_int (rep, "init", 0);
    t->app = (pid_t)proto_get_int (rep, "app", 0);
    json_object_put (rep);
    t->relay = fd;
    t->out_r = out[0];
    t->err_r = err[0];
    return CLI_OK;
}

int cli_run (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "name", required_argument, NULL, 'n' },   { "job", required_argument, NULL, 'j' },
        { "rank", required_argument, NULL, 'r' },   { "size", required_argument, NULL, 'N' },
        { "leader", required_argument, NULL, 'l' }, { "interval", required_argument, NULL, 'i' },
        { "detach", no_argument, NULL, 'd' },       { NULL, 0, NULL, 0 },
    };
    const char *job = NULL, *leader = NULL, *sock;
    char jobbuf[IDENT_MAX + 1];
    uint64_t interval = 0;
    int ch, rank = 0, size = 1, detach = 0, rc;
    struct cli_task t = { .out_r = -1, .err_r = -1, .regfd = -1, .relay = -1 };
    json_object *f;
    char *end;

    while ((ch = getopt_long (argc, argv, "+", opts, NULL)) != -1) {
        switch (ch) {
        case 'n':
        case 'j':
            job = optarg;
            break;
        case 'r':
        case 'N': {
            long v = strtol (optarg, &end, 10);
            if (*end || !*optarg || v < (ch == 'r' ? 0 : 1) || v > 1000000) {
                cli_error ("--%s %s: give a number from %d", ch == 'r' ? "rank" : "size", optarg,
                           ch == 'r' ? 0 : 1);
                return CLI_USAGE;
            }
            if (ch == 'r')
                rank = (int)v;
            else
                size = (int)v;
            break;
        }
        case 'l':
            leader = optarg;
            break;
        case 'i':
            if (duration_parse (optarg, &interval) < 0 || interval < 1000) {
                cli_error ("--interval %s: give a duration of at least 1s, e.g. 90s, 30m, "
                           "1h30m",
                           optarg);
                return CLI_USAGE;
            }
            break;
        case 'd':
            detach = 1;
            break;
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
                   "starting with '.' or '-'",
                   job, IDENT_MAX);
        return CLI_USAGE;
    }
    if (access (libibcr_path (), R_OK) < 0) {
        cli_error ("cannot preload %s: %s (set IBCR_LIBIBCR to libibcr.so's path)", libibcr_path (),
                   strerror (errno));
        return CLI_ERR;
    }
    if (!(sock = cli_socket_path (c)))
        return CLI_USAGE;
    if (access (sock, F_OK) < 0) {
        cli_error ("ibcrd is not running at %s: start it first (or give its socket with "
                   "--socket or IBCR_SOCKET)",
                   sock);
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
    if ((rc = spawn (c, &t, sock, job, rank, argv + optind)))
        return rc;
    f = json_object_new_object ();
    json_object_object_add (f, "job", json_object_new_string (job));
    json_object_object_add (f, "rank", json_object_new_int (rank));
    json_object_object_add (f, "size", json_object_new_int (size));
    json_object_object_add (f, "source", json_object_new_string ("run"));
    json_object_object_add (f, "ns_pid", json_object_new_int (TASKNS_FIRST_PID));
    if (interval)
        json_object_object_add (f, "interval_ms", json_object_new_int64 ((int64_t)interval));
    if (leader && cli_add_leader (f, leader) < 0)
        return CLI_USAGE;
    rc = cli_task_register (c, &t, f);
    {
        /* The application starts once registered; a task that cannot be
         * checkpointed is not what was asked for: it never runs. */
        json_object *go = proto_new (rc ? "abort" : "go");
        if (proto_send (t.relay, go) < 0 && !rc) {
            cli_error ("ibcrd's relay went away before the task started: %s", strerror (errno));
            rc = CLI_ERR;
        }
        json_object_put (go);
    }
    if (rc) {
        cli_task_wait (&t);
        return rc;
    }
    return cli_task_wait (&t);
}
