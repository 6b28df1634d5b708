/* init.c - ibcr-init, the tiny init every checkpointable task runs under.
 *
 *   ibcr-init [--pidfile FILE] -- CMD ARGS...
 *     Runs CMD in a new PID namespace whose PID 1 is our init (see
 *     init_spawn.c), writes that init's pid (as seen from here: the pid
 *     to give "criu dump -t") to FILE, forwards signals and exits with
 *     CMD's exit code.
 *
 *   ibcr-init --restored FILE [--pidfile FILE2] -- CMD ARGS...
 *     The restart side.  CMD is a "criu restore --restore-detached
 *     --pidfile FILE ..." that restores such a tree; ibcr-init is a child
 *     subreaper, so when criu exits the restored init becomes our child,
 *     and we wait for it, forward signals and exit with its exit code as
 *     if the task had never stopped.
 *
 * The CRIU options that work for these trees (CRIU 4.2.1, kernel 6.18,
 * checked by t/t0003-criu-basic.t):
 *   dump:    criu dump -t INIT -D DIR -o dump.log [--leave-running]
 *            No --shell-job (the init is a session leader), no
 *            --external for the PID namespace (CRIU dumps it as ours).
 *            Without --leave-running CRIU kills the tree after the dump;
 *            the outer ibcr-init then exits 137 (128+SIGKILL).
 *            64 MiB + 3 threads: ~80 ms; restore ~110 ms (t0003 prints).
 *   restore: ibcr-init --restored /abs/pidfile -- \
 *              criu restore -D DIR -o restore.log --restore-detached \
 *                --pidfile /abs/pidfile --inherit-fd 'fd[N]:PATH' ...
 *            --pidfile must be absolute (a relative one lands in DIR).  CRIU creates the new PID namespace itself, so a
 *            restore can run while the original still does.  Every
 *            regular file the task writes (stdout, stderr) has grown since
 *            the dump and fails CRIU's size check: open it in the caller
 *            (e.g. "3>>out") and pass --inherit-fd 'fd[3]:PATH', PATH being
 *            the file's path without its leading '/', as in the image.
 *            No --root: the tree shares the host's mount namespace.
 *            t0003 gives the task /dev/null and files; a terminal from
 *            outside the tree is something CRIU must be told about
 *            (--shell-job or --external tty; not tried here).
 *            --leave-stopped works: the tree stays stopped (for gdb -p)
 *            until a SIGCONT to ibcr-init --restored, which it forwards.
 *            Two restores of one image may run side by side, each in its
 *            own namespace, each with its own inherited output file.
 *
 * Exit codes: CMD's, or 128+N when signal N killed it; 125 when ibcr-init
 * itself failed, 126/127 when CMD cannot run / does not exist.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init_spawn.h"
#include "init_supervise.h"

static const char init_usage[] =
    "Usage: ibcr-init [--pidfile FILE] -- CMD [ARGS...]\n"
    "       ibcr-init --restored FILE [--pidfile FILE2] -- CMD [ARGS...]\n"
    "       ibcr-init --adopt PID [--report FD]\n"
    "\n"
    "Run CMD in a new PID namespace under a small init (PID 1, its own\n"
    "session) that forwards signals to CMD and exits with CMD's status.\n"
    "\n"
    "  -p, --pidfile FILE   write the pid of the namespace's init (the pid\n"
    "                       to checkpoint) to FILE; removed on exit\n"
    "  -r, --restored FILE  CMD restores a tree (criu restore\n"
    "                       --restore-detached --pidfile FILE, FILE absolute):\n"
    "                       wait for CMD, then adopt the pid in FILE and wait\n"
    "                       for it\n"
    "  -h, --help           show this help\n"
    "\n"
    "Exit status: CMD's, 128+N if signal N killed it, 125 if ibcr-init\n"
    "failed, 126 if CMD cannot run, 127 if CMD was not found.\n";

struct init_opts {
    const char *pidfile;
    const char *restored;
    pid_t adopt; /* --adopt: supervise this child, start nothing */
    int report;  /* --report: write its wait status (int32) here */
    char **argv;
};

/* Write the pid so that a reader never sees a partial file: the daemon
 * polls for it and kills by it. */
static int pidfile_write (const char *path, pid_t pid)
{
    char tmp[PATH_MAX];
    FILE *f;

    if (snprintf (tmp, sizeof (tmp), "%s.tmp", path) >= (int)sizeof (tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!(f = fopen (tmp, "w")))
        return -1;
    fprintf (f, "%d\n", (int)pid);
    if (fclose (f) != 0 || rename (tmp, path) < 0) {
        int err = errno;
        (void)unlink (tmp);
        errno = err;
        return -1;
    }
    return 0;
}

/* Read a pid written by criu --pidfile: one positive decimal number. */
static pid_t pidfile_read (const char *path)
{
    char buf[32];
    ssize_t n;
    char *end;
    long val;
    int fd;

    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read (fd, buf, sizeof (buf) - 1);
    (void)close (fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    errno = 0;
    val = strtol (buf, &end, 10);
    while (*end == '\n' || *end == ' ')
        end++;
    if (errno || end == buf || *end != '\0' || val <= 1 || val > INT_MAX) {
        errno = EINVAL;
        return -1;
    }
    return (pid_t)val;
}

static int parse_args (int argc, char **argv, struct init_opts *o)
{
    static const struct option longopts[] = {
        { "pidfile", required_argument, NULL, 'p' }, { "restored", required_argument, NULL, 'r' },
        { "adopt", required_argument, NULL, 'a' },   { "report", required_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
    };
    int c;

    o->report = -1;
    opterr = 0;
    /* '+': stop at CMD, whose own options are not ours. */
    while ((c = getopt_long (argc, argv, "+:p:r:a:R:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            o->pidfile = optarg;
            break;
        case 'r':
            o->restored = optarg;
            break;
        case 'a':
            o->adopt = (pid_t)atol (optarg);
            break;
        case 'R':
            o->report = atoi (optarg);
            break;
        case 'h':
            fputs (init_usage, stdout);
            exit (0);
        case ':':
            init_error (0, "option '%s' needs an argument; see ibcr-init --help", argv[optind - 1]);
            return -1;
        default:
            init_error (0, "unknown option '%s'; see ibcr-init --help", argv[optind - 1]);
            return -1;
        }
    }
    /* --adopt: the SPANK plugin's init forked the application, then
     * exec'd us in its place (a program started inside the task's mount
     * namespace, which CRIU can dump: slurmstepd's was not). */
    if (o->adopt > 1) {
        o->argv = argv + optind;
        return 0;
    }
    if (optind >= argc) {
        init_error (0, "no command given: usage is ibcr-init [OPTIONS] -- CMD [ARGS...]");
        return -1;
    }
    /* criu writes a relative --pidfile into its images folder, where we
     * would never find it. */
    if (o->restored && o->restored[0] != '/') {
        init_error (0,
                    "--restored %s: give an absolute path, as to criu --pidfile "
                    "(criu puts a relative one in its images folder)",
                    o->restored);
        return -1;
    }
    o->argv = argv + optind;
    return 0;
}

/* Something went wrong after CMD restored a tree that is now our child
 * (we are a subreaper): end it rather than leave an unsupervised copy of
 * the task running.  We have no other children at this point. */
static void kill_adopted (void)
{
    char path[64];
    FILE *f;
    int pid, status;

    snprintf (path, sizeof (path), "/proc/self/task/%d/children", (int)getpid ());
    if ((f = fopen (path, "r"))) {
        while (fscanf (f, "%d", &pid) == 1) {
            init_error (0, "killing restored process %d", pid);
            (void)kill (pid, SIGKILL);
        }
        (void)fclose (f);
    }
    while (waitpid (-1, &status, __WALL) > 0 || errno == EINTR)
        ;
}

/* The restart side: run CMD (criu restore --restore-detached) and return
 * the pid of the tree it restored, now our child since we are a
 * subreaper, or -1 after saying why.  Leaves *code set for the exit. */
static pid_t adopt_restored (const struct init_opts *o, const sigset_t *app_mask, int *code)
{
    pid_t cmd, pid;
    int status;

    *code = INIT_EXIT_FAILURE;
    if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        init_error (errno, "cannot become a child subreaper");
        return -1;
    }
    /* A stale pid from an earlier attempt must not be adopted. */
    if (unlink (o->restored) < 0 && errno != ENOENT) {
        init_error (errno, "cannot remove the old pid file %s", o->restored);
        return -1;
    }
    if ((cmd = fork ()) < 0) {
        init_error (errno, "cannot fork '%s'", o->argv[0]);
        return -1;
    }
    if (cmd == 0)
        init_exec (o->argv, app_mask);
    /* Wait for CMD alone: the restored tree, reparented to us when CMD
     * exits, may end at once and must stay a zombie until we know its pid.
     * Forwarded signals stay pending meanwhile and reach the tree later. */
    while (waitpid (cmd, &status, 0) < 0) {
        if (errno != EINTR) {
            init_error (errno, "lost track of '%s'", o->argv[0]);
            return -1;
        }
    }
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        init_error (0,
                    "'%s' failed (exit code %d); nothing was restored; "
                    "see its log",
                    o->argv[0], init_exit_code (status));
        return -1;
    }
    if ((pid = pidfile_read (o->restored)) < 0) {
        init_error (errno, "'%s' succeeded but left no valid pid in %s", o->argv[0], o->restored);
        init_error (0, "run it as: criu restore --restore-detached --pidfile %s ...", o->restored);
        kill_adopted ();
        return -1;
    }
    return pid;
}

int main (int argc, char **argv)
{
    struct init_opts o = { 0 };
    sigset_t set, app_mask;
    pid_t child;
    int status, code = INIT_EXIT_FAILURE;

    if (parse_args (argc, argv, &o) < 0)
        return INIT_EXIT_FAILURE;

    /* Block before any fork: a signal arriving between fork and the wait
     * is then queued for the child instead of killing us or getting lost.
     * CMD gets the mask we were started with. */
    init_signals (&set);
    if (sigprocmask (SIG_BLOCK, &set, &app_mask) < 0) {
        init_error (errno, "cannot block signals");
        return INIT_EXIT_FAILURE;
    }
    if (o.adopt > 1) {
        child = o.adopt;
        /* The first word says this program runs now: the waiter lets the
         * application go only then, so that nothing sees (or dumps) the
         * init before its exec. */
        if (o.report >= 0) {
            int32_t word = (int32_t)child;
            if (write (o.report, &word, sizeof (word)) != (ssize_t)sizeof (word)) {
                init_error (errno, "cannot report to the task's waiter");
                (void)kill (child, SIGKILL);
                return INIT_EXIT_FAILURE;
            }
        }
    } else if (o.restored)
        child = adopt_restored (&o, &app_mask, &code);
    else
        child = init_spawn_ns (o.argv, &app_mask, &set);
    if (child < 0)
        return code;
    if (o.pidfile && pidfile_write (o.pidfile, child) < 0) {
        /* The task runs but cannot be checkpointed: say so, end it. */
        init_error (errno, "cannot write pid file %s; stopping the task", o.pidfile);
        (void)kill (child, SIGKILL);
        (void)waitpid (child, &status, 0);
        return INIT_EXIT_FAILURE;
    }
    if (init_supervise (child, &set, &status) < 0) {
        if (errno == ECHILD && o.restored)
            init_error (0,
                        "pid %d in %s is not a child of ibcr-init; was '%s' "
                        "run with --restore-detached?",
                        (int)child, o.restored, o.argv[0]);
        else
            init_error (errno, "lost track of pid %d", (int)child);
        if (o.restored)
            kill_adopted ();
        code = INIT_EXIT_FAILURE;
    } else {
        code = init_exit_code (status);
        if (o.report >= 0) {
            int32_t word = (int32_t)status;
            (void)write (o.report, &word, sizeof (word));
        }
    }
    if (o.pidfile)
        (void)unlink (o.pidfile);
    return code;
}
