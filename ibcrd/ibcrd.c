/* ibcrd.c - the per-node ibcr daemon: options, start-up, the main loop,
 * signals and shut-down.
 *
 * Signal handlers only set flags; the loop, woken by ppoll with the signals
 * unblocked only while it waits, acts on them.  Start-up follows munged:
 * config, secure socket folder, lock, stale socket removal, bind, pid file
 * last.  In service mode the parent waits for the daemon to report that
 * start-up succeeded, so errors reach the terminal and the exit status.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/criu.h"
#include "common/imgfiles.h"
#include "common/log.h"
#include "common/peerauth.h"
#include "common/proto.h"
#include "common/safedir.h"
#include "common/zimg.h"
#include "jobs.h"
#include "lock.h"
#include "peer.h"
#include "member.h"
#include "request.h"
#include "schedule.h"
#include "server.h"
#include "tasks.h"
#include "slurm_hook.h"
#include "worker.h"

#define MAX_POLLFDS 1100

static volatile sig_atomic_t got_term, got_hup, got_chld;

static void on_signal (int sig)
{
    if (sig == SIGHUP)
        got_hup = 1;
    else if (sig == SIGCHLD)
        got_chld = 1;
    else
        got_term = sig;
}

/* Reap the generations' workers that ended. */
static void reap_workers (struct server *srv)
{
    int status;
    pid_t pid;

    got_chld = 0;
    while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
        sched_worker_done (srv, pid,
                           WIFEXITED (status)
                               ? WEXITSTATUS (status)
                               : 128 + (WIFSIGNALED (status) ? WTERMSIG (status) : 0));
}

static void usage (FILE *f)
{
    fprintf (f,
             "Usage: ibcrd [OPTIONS]\n"
             "The ibcr per-node daemon (see ibcrd(8)).\n"
             "\n"
             "  -F, --foreground     stay in the foreground, log to stderr\n"
             "  -c, --config FILE    configuration file (default %s)\n"
             "  -N, --node NAME      node name for %%n in paths (default: short host name)\n"
             "  -v, --verbose        log debug messages\n"
             "  -P, --ping-peer NODE@HOST:PORT\n"
             "                       send one authenticated ping to that node's ibcrd,\n"
             "                       print its reply and exit (checks MUNGE and the network)\n"
             "  -V, --version        print the version and exit\n"
             "  -h, --help           print this help and exit\n",
             conf_default_path ());
}

struct opts {
    int foreground;
    int verbose;
    const char *config;
    const char *node;
    const char *ping;
};

/* Load the configuration: a file named with -c or IBCR_CONF must exist;
 * the default one may be missing (built-in defaults then). */
static struct conf *load_conf (const struct opts *o, char *err, size_t len)
{
    const char *path = o->config ? o->config : conf_default_path ();
    int explicit = o->config || getenv ("IBCR_CONF");
    struct conf *c;

    if (!explicit && access (path, F_OK) < 0 && errno == ENOENT) {
        if (!(c = conf_create (o->node)))
            snprintf (err, len, "out of memory");
        return c;
    }
    c = conf_load (path, o->node, err, len);
    if (c && o->verbose)
        c->log_level = LOG_DEBUG;
    return c;
}

/* Service mode: detach, and return in the daemon a pipe fd on which to
 * report start-up ("0" ok, else the error text); the parent waits. */
static int daemonize (void)
{
    int p[2];
    pid_t pid;

    if (pipe (p) < 0)
        return -1;
    if ((pid = fork ()) < 0)
        return -1;
    if (pid > 0) {
        char buf[1024];
        ssize_t n;
        close (p[1]);
        n = read (p[0], buf, sizeof (buf) - 1);
        if (n > 0 && buf[0] == '0')
            _exit (0);
        if (n > 0) {
            buf[n] = '\0';
            fprintf (stderr, "ibcrd: error: %s\n", buf);
        } else
            fprintf (stderr, "ibcrd: error: the daemon died during start-up\n");
        _exit (1);
    }
    close (p[0]);
    if (setsid () < 0)
        return -1;
    if ((pid = fork ()) < 0)
        return -1;
    if (pid > 0)
        _exit (0);
    if (chdir ("/") < 0)
        return -1;
    umask (022);
    return p[1];
}

static void report (int fd, const char *msg)
{
    if (fd >= 0) {
        /* If the parent vanished there is nobody to tell: ignore. */
        ssize_t n = write (fd, msg, strlen (msg));
        (void)n;
        close (fd);
    }
}

/* The daemon's layers, bottom up: the request layer (server.c), the
 * scheduling of generations (schedule.c), node membership (member.c), the
 * Slurm policy (slurm_hook.c).  Each calls only those below it; what a
 * lower one must reach above it is wired here, once. */
static json_object *system_status (uid_t uid);

static void wire (struct server *s)
{
    server_add_handler (s, "spawn", h_spawn);
    server_add_handler (s, "restore", h_restore);
    server_add_handler (s, "checkpoint", h_checkpoint);
    server_add_handler (s, "ctl-attach", h_ctl_attach);
    server_add_handler (s, "resume-restored", h_resume_restored);
    server_add_handler (s, "term", slurm_hook_term);
    /* In this order: a member joins its leader, a restarted job may then
     * be complete, and Slurm watches the job. */
    server_on_register (s, member_registered);
    server_on_register (s, sched_registered);
    server_on_register (s, slurm_hook_registered);
    server_add_info (s, "slurm", slurm_hook_status);
    server_add_info (s, "system", system_status);
    sched_set_observer (slurm_hook_gen_started, slurm_hook_gen_done);
}

static void detach_stdio (void)
{
    int fd = open ("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2 (fd, STDIN_FILENO);
        dup2 (fd, STDOUT_FILENO);
        dup2 (fd, STDERR_FILENO);
        if (fd > STDERR_FILENO)
            close (fd);
    }
}

/* The folders root writes into, made or checked before anything is
 * written there: staging, the socket's folder, the storage and its
 * cluster folder.  Each, and every folder above it, must be root's and
 * writable by nobody else (safedir.h): a user who made one first (or a
 * folder above it) would choose where root writes, so that is refused
 * with the folder's name and the fix, and an existing good folder is
 * kept as it is.  0, or -1 with the message in err. */
static int secure_dirs (const struct conf *c, char *err, size_t len)
{
    char sockdir[PATH_MAX], cl[PATH_MAX], why[768];
    const char *slash = strrchr (c->socket, '/');
    struct {
        const char *what, *path;
    } dirs[] = {
        { "staging", c->staging },
        { "socket folder", sockdir },
        { "storage", c->storage },
        { "storage cluster folder", cl },
    };

    snprintf (sockdir, sizeof (sockdir), "%.*s",
              slash && slash != c->socket ? (int)(slash - c->socket) : 1, c->socket);
    if ((size_t)snprintf (cl, sizeof (cl), "%s/%s", c->storage, c->cluster) >= sizeof (cl)) {
        snprintf (err, len, "storage %s: path too long", c->storage);
        return -1;
    }
    for (size_t i = 0; i < sizeof (dirs) / sizeof (dirs[0]); i++)
        if (safedir_ensure (dirs[i].path, 0755, why, sizeof (why)) < 0) {
            snprintf (err, len, "%s %s: %s", dirs[i].what, dirs[i].path, why);
            return -1;
        }
    return 0;
}

/* SIGHUP: reread the file; a bad file keeps the running configuration.
 * The socket and pid file cannot move without a restart. */
static struct conf *reload (const struct opts *o, struct conf *cur, struct server *srv)
{
    char err[1024];
    struct conf *c = load_conf (o, err, sizeof (err));

    if (!c || secure_dirs (c, err, sizeof (err)) < 0) {
        log_msg (LOG_ERR, "reload refused, keeping the running configuration: %s", err);
        server_reloaded (srv, err);
        conf_destroy (c);
        return cur;
    }
    if (strcmp (c->socket, cur->socket) || strcmp (c->pidfile, cur->pidfile)) {
        log_msg (LOG_WARNING,
                 "reload: socket or pidfile changed; they take effect only "
                 "after a restart, keeping %s",
                 cur->socket);
        free (c->socket);
        free (c->pidfile);
        c->socket = strdup (cur->socket);
        c->pidfile = strdup (cur->pidfile);
        if (!c->socket || !c->pidfile) {
            log_msg (LOG_ERR, "reload refused: out of memory");
            server_reloaded (srv, "out of memory");
            conf_destroy (c);
            return cur;
        }
    }
    log_set_level (c->log_level);
    server_set_conf (srv, c);
    slurm_hook_set_conf (c);
    conf_destroy (cur);
    server_reloaded (srv, NULL);
    log_msg (LOG_INFO, "configuration reloaded from %s", c->path ? c->path : "defaults");
    return c;
}

/* --ping-peer NODE@HOST:PORT: one request through the real peer client. */
static int ping_peer (struct conf *conf, const char *spec)
{
    char node[256], host[256], err[1024];
    int port;
    struct peerauth *pa;
    json_object *req, *rep;

    if (sscanf (spec, "%255[^@]@%255[^:]:%d", node, host, &port) != 3 || port <= 0) {
        log_msg (LOG_ERR, "--ping-peer %s: give NODE@HOST:PORT, e.g. n2@10.0.0.2:7195", spec);
        return 2;
    }
    if (!(pa = peerauth_create (conf->munge_socket)) || !(req = proto_new ("ping"))) {
        log_msg (LOG_ERR, "out of memory");
        peerauth_destroy (pa);
        return 1;
    }
    proto_set_str (req, "from", conf->node);
    if (peer_request (pa, host, port, node, req, (int)conf->timeout_request, &rep, err,
                      sizeof (err))
        < 0) {
        log_msg (LOG_ERR, "%s", err);
        json_object_put (req);
        peerauth_destroy (pa);
        return 1;
    }
    printf ("%s\n", json_object_to_json_string_ext (rep, JSON_C_TO_STRING_PLAIN));
    int rc = strcmp (proto_type (rep), "ok") ? 1 : 0;
    json_object_put (rep);
    json_object_put (req);
    peerauth_destroy (pa);
    return rc;
}

/* A kernel setting under /proc/sys, or -1 if it cannot be read. */
static long read_sysctl (const char *path)
{
    FILE *f = fopen (path, "r");
    long v;

    if (!f)
        return -1;
    if (fscanf (f, "%ld", &v) != 1)
        v = -1;
    fclose (f);
    return v;
}

/* What fs.pipe-max-size should at least be: CRIU (running as the job's
 * user, without CAP_SYS_RESOURCE) grows its page pipes up to it, and a
 * dump's stall falls with their size (doc/ckpt-stall.md). */
#define PIPE_MAX_WANT (8L << 20)

/* The kernel settings of ibcrd(8) SYSTEM SETTINGS, read at each call,
 * each with advice when it is off: `status` shows them as "system", and
 * the start logs the advice. */
static json_object *system_status (uid_t uid)
{
    json_object *o = json_object_new_object (), *adv = json_object_new_array ();
    long soft = read_sysctl ("/proc/sys/fs/pipe-user-pages-soft");
    long max = read_sysctl ("/proc/sys/fs/pipe-max-size");
    char msg[512];

    (void)uid;
    if (!o || !adv) {
        json_object_put (o);
        json_object_put (adv);
        return NULL;
    }
    proto_set_int (o, "pipe_user_pages_soft", soft);
    proto_set_int (o, "pipe_max_size", max);
    if (soft > 0) {
        snprintf (msg, sizeof (msg),
                  "fs.pipe-user-pages-soft is %ld pages (%ld MiB): a user whose dumps hold "
                  "more than that in pipes gets only tiny pipes until they end, so CRIU falls "
                  "back to many small ones, and a restore of another of their tasks meanwhile "
                  "fails ('Can't restore pipe size'; ibcr tries again for 16 s); set it to 0 "
                  "(contrib/sysctl.d/60-ibcr.conf, installed in lib/sysctl.d)",
                  soft, soft * (sysconf (_SC_PAGESIZE) / 1024) / 1024);
        json_object_array_add (adv, json_object_new_string (msg));
    }
    if (max >= 0 && max < PIPE_MAX_WANT) {
        snprintf (msg, sizeof (msg),
                  "fs.pipe-max-size is %ld KiB: CRIU, running as the job's user, cannot grow "
                  "its page pipes beyond it, and a checkpoint stops a task longer than with "
                  "%ld MiB (up to 1.6x in doc/ckpt-stall.md); set it to %ld "
                  "(contrib/sysctl.d/60-ibcr.conf, installed in lib/sysctl.d)",
                  max / 1024, PIPE_MAX_WANT >> 20, PIPE_MAX_WANT);
        json_object_array_add (adv, json_object_new_string (msg));
    }
    json_object_object_add (o, "advice", adv);
    return o;
}

static void warn_system (void)
{
    json_object *o = system_status (0), *adv;

    if (o && json_object_object_get_ex (o, "advice", &adv))
        for (size_t i = 0; i < json_object_array_length (adv); i++)
            log_msg (LOG_WARNING, "%s",
                     json_object_get_string (json_object_array_get_idx (adv, i)));
    json_object_put (o);
}

/* This binary is every dump's action script (criu.h, imgfiles.h): run
 * by the job's user inside the task's namespaces, so only when every
 * user can reach and run it; else dumps go without (output files the
 * task appends to are then not rolled back at a restore). */
static void dump_script (void)
{
    char exe[PATH_MAX], dir[PATH_MAX];
    struct stat sb;
    ssize_t n = readlink ("/proc/self/exe", exe, sizeof (exe) - 1);

    if (n <= 0)
        return;
    exe[n] = '\0';
    if (stat (exe, &sb) < 0 || !S_ISREG (sb.st_mode) || !(sb.st_mode & S_IXOTH))
        goto not ;
    snprintf (dir, sizeof (dir), "%s", exe);
    for (char *slash = strrchr (dir, '/'); slash && slash > dir; slash = strrchr (dir, '/')) {
        *slash = '\0';
        if (stat (dir, &sb) < 0 || !(sb.st_mode & S_IXOTH))
            goto not ;
    }
    criu_set_dump_script (exe);
    return;
    not : log_msg (LOG_WARNING,
                   "%s is not reachable and executable by every user: dumps go "
                   "without the record of the files open for writing, which are then not "
                   "rolled back at a restore",
                   exe);
}

int main (int argc, char **argv)
{
    static const struct option longopts[] = {
        { "foreground", no_argument, NULL, 'F' },
        { "config", required_argument, NULL, 'c' },
        { "node", required_argument, NULL, 'N' },
        { "verbose", no_argument, NULL, 'v' },
        { "ping-peer", required_argument, NULL, 'P' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct opts o = { 0 };
    struct conf *conf;
    struct jobs *jobs = NULL;
    struct server *srv = NULL;
    struct peerauth *pa = NULL;
    struct peer *peer = NULL;
    struct sigaction sa;
    sigset_t block, waitmask;
    char err[1024];
    int ch, lockfd = -1, repfd = -1, rc = 1;

    /* Run by CRIU as a dump's action script (dump_script below). */
    if (imgfiles_action () == 0)
        return 0;
    while ((ch = getopt_long (argc, argv, "Fc:N:vP:Vh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'F':
            o.foreground = 1;
            break;
        case 'c':
            o.config = optarg;
            break;
        case 'N':
            o.node = optarg;
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'P':
            o.ping = optarg;
            break;
        case 'V':
            printf ("ibcrd %s (protocol 1)\n", PACKAGE_VERSION);
            return 0;
        case 'h':
            usage (stdout);
            return 0;
        default:
            usage (stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "ibcrd: error: unexpected argument '%s'; ibcrd takes options only\n",
                 argv[optind]);
        usage (stderr);
        return 2;
    }
    log_open ("ibcrd", LOG_TO_STDERR, o.verbose ? LOG_DEBUG : LOG_INFO);
    if (!(conf = load_conf (&o, err, sizeof (err)))) {
        log_msg (LOG_ERR, "%s", err);
        return 2;
    }
    if (conf->compression && !zimg_available ()) {
        log_msg (LOG_ERR,
                 "%s: compression = yes, but this ibcrd was built without libzstd: "
                 "install libzstd-dev and rebuild, or set compression = no",
                 conf->path ? conf->path : "ibcrd.conf");
        conf_destroy (conf);
        return 2;
    }
    if (o.ping) {
        rc = ping_peer (conf, o.ping);
        conf_destroy (conf);
        return rc;
    }
    if (!o.foreground) {
        if ((repfd = daemonize ()) < 0) {
            log_err (errno, "cannot become a daemon");
            return 1;
        }
        log_open ("ibcrd", LOG_TO_SYSLOG, conf->log_level);
        worker_set_log (1, conf->log_level);
    } else {
        log_set_level (conf->log_level);
        worker_set_log (0, conf->log_level);
    }

    /* Signals are blocked except while ppoll waits, so a flag set by a
     * handler is always seen before the next wait. */
    sigemptyset (&block);
    sigaddset (&block, SIGHUP);
    sigaddset (&block, SIGTERM);
    sigaddset (&block, SIGINT);
    sigaddset (&block, SIGCHLD);
    sigprocmask (SIG_BLOCK, &block, &waitmask);
    sigdelset (&waitmask, SIGHUP);
    sigdelset (&waitmask, SIGTERM);
    sigdelset (&waitmask, SIGINT);
    sigdelset (&waitmask, SIGCHLD);
    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = on_signal;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGHUP, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGCHLD, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction (SIGPIPE, &sa, NULL);

    if (geteuid () != 0)
        log_msg (LOG_WARNING, "not running as root: checkpoints (CRIU) will not work");
    warn_system ();
    dump_script ();
    umask (022);
    if (secure_dirs (conf, err, sizeof (err)) < 0)
        goto startup_error;
    if ((lockfd = lock_acquire (conf->socket, conf->pidfile, err, sizeof (err))) < 0)
        goto startup_error;
    /* We hold the lock: whatever socket is there was left by a dead ibcrd. */
    if (unlink (conf->socket) == 0)
        log_msg (LOG_INFO, "removed stale socket %s", conf->socket);
    if (!(jobs = jobs_create ())) {
        snprintf (err, sizeof (err), "out of memory");
        goto startup_error;
    }
    if (!(srv = server_create (conf, jobs))) {
        snprintf (err, sizeof (err), "cannot listen on %s: %s", conf->socket, strerror (errno));
        goto startup_error;
    }
    wire (srv);
    if (conf->peer_port != 0) {
        if (!(pa = peerauth_create (conf->munge_socket))) {
            snprintf (err, sizeof (err), "cannot set up MUNGE: %s", strerror (errno));
            goto startup_error;
        }
        if (!(peer = peer_create (conf, pa, err, sizeof (err)))) {
            /* An explicit peer_port must work; the default one may be
             * taken by another ibcrd sharing this host (tests, one-node
             * use), which then serves its local socket only. */
            if (conf->peer_port_set)
                goto startup_error;
            log_msg (LOG_WARNING,
                     "%s; serving without the peer listener (set peer_port "
                     "to make this an error)",
                     err);
        }
    }
    if (peer) {
        server_set_peer_port (srv, peer_port (peer));
        server_set_peerauth (srv, pa);
        peer_set_handler (peer, member_peer_request, srv);
        log_msg (LOG_INFO, "listening for peer ibcrd's on %s:%d (MUNGE%s%s)", conf->peer_address,
                 peer_port (peer), conf->munge_socket ? " socket " : "",
                 conf->munge_socket ? conf->munge_socket : "");
    }
    slurm_hook_set_conf (conf);
    if (lock_write_pidfile (conf->pidfile, err, sizeof (err)) < 0)
        goto startup_error;
    log_msg (LOG_INFO, "ibcrd %s serving %s (node %s, storage %s, pid %ld)", PACKAGE_VERSION,
             conf->socket, conf->node, conf->storage, (long)getpid ());
    if (!o.foreground) {
        report (repfd, "0");
        repfd = -1;
        detach_stdio ();
    }

    while (!got_term) {
        struct pollfd pfd[MAX_POLLFDS];
        /* The timer first: a generation it starts lends the tasks' libibcr
         * connections to its worker, and those must then stay out of the
         * pollfds, or this loop would read the worker's replies. */
        int next = sched_timer (srv), hnext = slurm_hook_timer ();
        int pnext = peer ? peer_timer (peer) : -1;
        if (hnext >= 0 && (next < 0 || hnext < next))
            next = hnext;
        if (pnext >= 0 && (next < 0 || pnext < next))
            next = pnext;
        /* The workers' reports first: one that answered its asker has
         * told the daemon its end before, and a "status" the asker sends
         * next must see it. */
        int nw = sched_pollfds (srv, pfd, MAX_POLLFDS);
        int n = nw + server_pollfds (srv, pfd + nw, MAX_POLLFDS - nw);
        int np = peer ? peer_pollfds (peer, pfd + n, MAX_POLLFDS - n) : 0;
        int nh = slurm_hook_pollfd (&pfd[n + np]);

        struct timespec tmo = { .tv_sec = next / 1000, .tv_nsec = (next % 1000) * 1000000L };

        if (ppoll (pfd, n + np + nh, next >= 0 ? &tmo : NULL, &waitmask) < 0) {
            if (errno != EINTR) {
                log_err (errno, "poll");
                break;
            }
        } else {
            sched_dispatch (srv, pfd, nw);
            server_dispatch (srv, pfd + nw, n - nw);
            if (peer)
                peer_dispatch (peer, pfd + n, np);
        }
        slurm_hook_dispatch (srv, nh ? &pfd[n + np] : NULL);
        if (got_chld)
            reap_workers (srv);
        if (got_hup) {
            got_hup = 0;
            conf = reload (&o, conf, srv);
            if (peer)
                peer_set_conf (peer, conf);
        }
    }
    if (got_term)
        log_msg (LOG_INFO, "signal %d: shutting down (%d jobs registered)", (int)got_term,
                 jobs_count (jobs));
    rc = got_term ? 0 : 1;
    goto out;

startup_error:
    log_msg (LOG_ERR, "%s", err);
    report (repfd, err);
    repfd = -1;
out:
    slurm_hook_shutdown ();
    if (srv) {
        server_destroy (srv); /* removes the socket */
        unlink (conf->pidfile);
    }
    peer_destroy (peer);
    peerauth_destroy (pa);
    jobs_destroy (jobs);
    if (lockfd >= 0)
        close (lockfd);
    conf_destroy (conf);
    log_close ();
    return rc;
}
