/* cli_restart.c - "ibcr restart JOB [--gen G] [--rank R] [--stopped]":
 * bring one task of JOB back from its newest intact committed generation
 * and stay with it like "ibcr run".
 *
 * ibcrd does it (tasks.h): the one restore pipeline of restore.h, which
 * a requeued Slurm task goes through too.  Here: attach a fresh control
 * connection for libibcr (ours, so it speaks for our uid), hand ibcrd
 * our pipes and that connection, register the restored task, have ibcrd
 * rebuild its verbs objects and release its threads, relay and wait.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "common/clock.h"
#include "common/ident.h"
#include "common/proto.h"
#include "common/restore.h"
#include "common/taskns.h"
#include "common/usock.h"

/* Continue every process of the tree rooted at pid (CRIU left them all
 * stopped with --leave-stopped). */
static void continue_tree (pid_t pid, int depth)
{
    char path[128];
    long child;
    FILE *f;

    kill (pid, SIGCONT);
    snprintf (path, sizeof (path), "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    if (depth > 32 || !(f = fopen (path, "r")))
        return;
    while (fscanf (f, "%ld", &child) == 1)
        continue_tree ((pid_t)child, depth + 1);
    fclose (f);
}

/* A fresh connection to ibcrd, attached as a control connection of
 * job's rank (ctl-attach): a restored process's libibcr speaks over it.
 * Its fd, or -1 said. */
static int ctl_attach (struct cli *c, const char *job, int rank)
{
    const char *sock = cli_socket_path (c);
    json_object *a = proto_new ("ctl-attach"), *rep = NULL;
    int fd = -1;

    proto_set_str (a, "job", job);
    proto_set_int (a, "rank", rank);
    if (!sock || (fd = usock_connect (sock)) < 0 || usock_request (fd, a, c->timeout_ms, &rep) < 0
        || strcmp (proto_type (rep), "ok")) {
        cli_error ("cannot attach libibcr's control connection at ibcrd %s: %s", sock ? sock : "?",
                   rep ? proto_get_str (rep, "message", "?") : strerror (errno));
        if (fd >= 0)
            close (fd);
        fd = -1;
    }
    json_object_put (a);
    json_object_put (rep);
    return fd;
}

/* The restart through ibcrd's restore pipeline (tasks.h, restore.h): it
 * chooses and verifies the generation, restores it as its user in new
 * namespaces and checks it; we hand it our pipes and libibcr's control
 * connection, register the task and wait for it.  An exit code. */
static int restart_by_daemon (struct cli *c, const char *job, int want, int rank, int stopped,
                              const char *leader)
{
    struct cli_task t = { .out_r = -1, .err_r = -1, .regfd = -1, .relay = -1 };
    json_object *req = proto_new ("restore"), *rep = NULL, *f;
    int fd, rc, gen, nctl, out[2], err[2], fds[RESTORE_MAX_CTL + 2];
    char what[160];
    uint64_t bytes;

    proto_set_str (req, "job", job);
    proto_set_int (req, "rank", rank);
    proto_set_int (req, "gen", want);
    proto_set_bool (req, "stopped", stopped);
    fd = cli_relay_open (c, req, "restore-ready", &rep, &rc);
    json_object_put (req);
    if (fd < 0) {
        if (rep)
            cli_error ("%s", proto_get_str (rep, "message", "?"));
        json_object_put (rep);
        return rc;
    }
    gen = (int)proto_get_int (rep, "gen", 0);
    /* One control connection per process that used verbs (an older
     * ibcrd says only ctl_ino: one). */
    nctl = (int)proto_get_int (rep, "nctl", proto_get_int (rep, "ctl_ino", 0) > 0 ? 1 : 0);
    bytes = (uint64_t)proto_get_int (rep, "bytes", 0);
    if (*proto_get_str (rep, "note", ""))
        fprintf (stderr, "ibcr: warning: job %s %s\n", job, proto_get_str (rep, "note", ""));
    json_object_put (rep);
    snprintf (what, sizeof (what), "job %s gen %d rank %d", job, gen, rank);
    if (nctl < 0 || nctl > RESTORE_MAX_CTL) {
        cli_error ("ibcrd asks for %d control connections (at most %d)", nctl, RESTORE_MAX_CTL);
        close (fd);
        return CLI_ERR;
    }
    /* libibcr's control sockets: fresh connections, ours, that ibcrd
     * binds to this rank when the restored task registers. */
    for (int i = 0; i < nctl; i++)
        if ((fds[2 + i] = ctl_attach (c, job, rank)) < 0) {
            for (int k = 0; k < i; k++)
                close (fds[2 + k]);
            close (fd);
            return CLI_NODAEMON;
        }
    if (pipe2 (out, O_CLOEXEC) < 0 || pipe2 (err, O_CLOEXEC) < 0) {
        cli_error ("cannot make pipes: %s", strerror (errno));
        close (fd);
        return CLI_ERR;
    }
    fds[0] = out[1];
    fds[1] = err[1];
    cli_progress_show (what, "restore", 0, bytes);
    double t_restore = mono_ms_f ();
    rc = cli_relay_send_fds (fd, fds, 2 + nctl);
    for (int i = 0; i < 2 + nctl; i++)
        if (fds[i] >= 0)
            close (fds[i]);
    if (rc < 0 || !(rep = cli_relay_recv (fd, "restored", &rc))) {
        cli_progress_end ();
        close (out[0]);
        close (err[0]);
        close (fd);
        return rc ? rc : CLI_ERR;
    }
    cli_progress_show (what, "restore", bytes, bytes);
    t.init = (pid_t)proto_get_int (rep, "init", 0);
    t.app = (pid_t)proto_get_int (rep, "app", 0);
    t.relay = fd;
    t.out_r = out[0];
    t.err_r = err[0];
    f = json_object_new_object ();
    json_object_object_add (f, "job", json_object_new_string (job));
    json_object_object_add (f, "rank", json_object_new_int (rank));
    json_object_object_add (f, "size", json_object_new_int ((int)proto_get_int (rep, "size", 1)));
    json_object_object_add (f, "restored", json_object_new_boolean (nctl > 0));
    /* The leader resumes ranks of one generation only. */
    if (proto_get_int (rep, "gen", 0) > 0)
        json_object_object_add (f, "restored_gen",
                                json_object_new_int ((int)proto_get_int (rep, "gen", 0)));
    /* For the leader's restore timeline (ibcrd(8)). */
    json_object_object_add (f, "restore_ms",
                            json_object_new_int64 ((int64_t)(mono_ms_f () - t_restore)));
    json_object_object_add (f, "source", json_object_new_string ("restart"));
    json_object_object_add (f, "ns_pid", json_object_new_int (TASKNS_FIRST_PID));
    /* Root restores a user's generation as that user: the task is theirs. */
    if (geteuid () == 0 && proto_get_int (rep, "uid", 0) > 0)
        json_object_object_add (f, "uid", json_object_new_int64 (proto_get_int (rep, "uid", 0)));
    json_object_put (rep);
    if (leader)
        cli_add_leader (f, leader); /* checked with the options */
    if (ident_is_slurm_id (job)) {
        /* Slurm's job: only its step registers it (a requeue resumes it
         * under Slurm); here it is restored for inspection. */
        json_object_put (f);
        rc = CLI_DENIED;
        cli_progress_end ();
        fprintf (stderr,
                 "ibcr: job %s is a Slurm job: restored outside Slurm, not registered "
                 "and never checkpointed (requeue it to go on under Slurm)\n",
                 job);
    } else if ((rc = cli_task_register (c, &t, f)))
        fprintf (stderr, "ibcr: warning: the restored task runs, but not registered\n");
    cli_progress_end ();
    fprintf (stderr,
             "ibcr: job %s rank %d restored from generation %d (init pid %ld, "
             "application pid %ld)\n",
             job, rank, gen, (long)t.init, (long)t.app);
    if (stopped) {
        printf ("job %s rank %d stopped: init %ld application %ld\n", job, rank, (long)t.init,
                (long)t.app);
        printf ("attach with 'gdb -p %ld'; after detaching, continue it with 'kill -CONT "
                "%ld'\n",
                (long)t.app, (long)t.app);
        fflush (stdout);
        while (cli_task_stopped (t.app ? t.app : t.init))
            usleep (50000);
        continue_tree (t.init, 0);
    }
    if (nctl > 0 && !rc) {
        json_object *r = proto_new ("resume-restored"), *o;
        int rrc;
        /* ibcrd waits for every rank, then rebuilds and resumes them.
         * Asked on the connection that registered the task: ibcrd then
         * knows which task asks, and answers at once if another rank's
         * request has rebuilt and resumed it already. */
        cli_progress_show (what, "rebuild", 0, 0);
        proto_set_str (r, "job", job);
        c->timeout_ms = -1;
        o = cli_request_on (c, t.regfd, t.sock, r, &rrc);
        json_object_put (r);
        cli_progress_end ();
        if (!o) {
            cli_error ("the restored task cannot go on; ending it");
            if (t.init > 0)
                kill (t.init, SIGKILL);
            /* Not registered again while it ends. */
            json_object_put (t.regreq);
            t.regreq = NULL;
            cli_task_wait (&t);
            return rrc ? rrc : CLI_ERR;
        }
        json_object_put (o);
    }
    return cli_task_wait (&t);
}

int cli_restart (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "gen", required_argument, NULL, 'g' },
        { "rank", required_argument, NULL, 'r' },
        { "stopped", no_argument, NULL, 's' },
        { "leader", required_argument, NULL, 'l' },
        { NULL, 0, NULL, 0 },
    };
    int ch, want = 0, rank = 0, stopped = 0;
    const char *leader = NULL;
    char *end;

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        long v;
        switch (ch) {
        case 'g':
        case 'r':
            v = strtol (optarg, &end, 10);
            if (*end || !*optarg || v < (ch == 'g' ? 1 : 0)) {
                cli_error ("--%s %s: give a number (see 'ibcr list')", ch == 'g' ? "gen" : "rank",
                           optarg);
                return CLI_USAGE;
            }
            if (ch == 'g')
                want = (int)v;
            else
                rank = (int)v;
            break;
        case 's':
            stopped = 1;
            break;
        case 'l': {
            json_object *tmp = json_object_new_object ();
            int bad = cli_add_leader (tmp, optarg);
            json_object_put (tmp);
            if (bad)
                return CLI_USAGE;
            leader = optarg;
            break;
        }
        default:
            cli_error ("usage: ibcr restart JOB [--gen G] [--rank R] [--leader [NODE@]HOST[:PORT]] "
                       "[--stopped]");
            return CLI_USAGE;
        }
    }
    if (argc - optind != 1) {
        cli_error ("usage: ibcr restart JOB [--gen G] [--rank R] [--stopped]: give one job");
        return CLI_USAGE;
    }
    return restart_by_daemon (c, argv[optind], want, rank, stopped, leader);
}
