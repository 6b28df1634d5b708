/* tasktree.c - see tasktree.c.
 *
 * Invariants kept here:
 * - The application starts only after the waiter said so (go pipe), so a
 *   task that must fail never runs a single instruction of user code.
 * - Signals are blocked before the first fork and taken with
 *   sigwaitinfo() by the waiter and the init: none is lost between fork
 *   and wait, and no slurmstepd handler ever runs in them.
 * - The waiter's exit mirrors the application's wait status (exit code,
 *   or death by the same signal), so Slurm reports what it would have
 *   reported without ibcr.
 * - Neither the waiter nor the init ever returns into slurmstepd.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"
#include "taskns.h"
#include "tasktree.h"

/* Exit code of the waiter or init when ibcr itself failed (as env(1)). */
#define TASKTREE_EXIT_FAILURE 125

/* Signals passed on to the application.  Not the synchronous ones
 * (SEGV, BUS, FPE, ILL, TRAP, SYS: a blocked one raised by a fault kills
 * anyway) nor KILL/STOP (cannot be caught; Slurm's SIGKILL reaches every
 * process of the cgroup, its SIGSTOP is the cgroup freezer). */
static const int tasktree_fwd[] = {
    SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE,   SIGALRM, SIGTERM,  SIGCONT, SIGTSTP,
    SIGTTIN, SIGTTOU, SIGURG,  SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGWINCH, SIGIO,   SIGPWR,
};
#define TASKTREE_NFWD (sizeof (tasktree_fwd) / sizeof (tasktree_fwd[0]))

static tasktree_term_f tasktree_term_cb;
static void *tasktree_term_arg;

void tasktree_on_term (tasktree_term_f f, void *arg)
{
    tasktree_term_cb = f;
    tasktree_term_arg = arg;
}

static void tasktree_sigset (sigset_t *set)
{
    size_t i;

    sigemptyset (set);
    for (i = 0; i < TASKTREE_NFWD; i++)
        sigaddset (set, tasktree_fwd[i]);
    sigaddset (set, SIGCHLD);
}

/* An ignored signal is dropped when sent, even while blocked, and a
 * SIGCHLD set to SIG_IGN makes children vanish unwaited: the waiter and
 * the init must see all of them.  Only after the application forked, so
 * that it keeps the dispositions slurmstepd gave it. */
static void tasktree_default_dispositions (void)
{
    size_t i;

    for (i = 0; i < TASKTREE_NFWD; i++)
        (void)signal (tasktree_fwd[i], SIG_DFL);
    (void)signal (SIGCHLD, SIG_DFL);
}

static int tasktree_keep (int fd, const int *keep, int nkeep)
{
    int i;

    for (i = 0; i < nkeep; i++)
        if (keep[i] == fd)
            return 1;
    return 0;
}

/* What tasktree_fds does to each fd above 2 that is not kept. */
enum tasktree_fds_how {
    TASKTREE_CLOSE,          /* close it */
    TASKTREE_CLOSE_CLOEXEC,  /* close it if an exec would have */
    TASKTREE_LISTEN_CLOEXEC, /* a listening socket: close-on-exec */
};

/* Apply 'how' to every fd above 2 that is not kept.  Errors are ignored:
 * what cannot be listed cannot be closed, and is harmless. */
static int tasktree_hostproc = -1;

static void tasktree_fds (enum tasktree_fds_how how, const int *keep, int nkeep)
{
    /* The task process shares the task's mount namespace, whose /proc
     * does not know it ("self" resolves to nothing there): it reads its
     * fds through the host's /proc, opened before that was mounted. */
    int dfd = tasktree_hostproc >= 0
        ? openat (tasktree_hostproc, "self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        : open ("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir (dfd) : NULL;
    struct dirent *e;
    int fd, flags;

    if (!d) {
        if (dfd >= 0)
            (void)close (dfd);
        return;
    }
    while ((e = readdir (d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        fd = atoi (e->d_name);
        if (fd <= 2 || fd == dirfd (d) || fd == tasktree_hostproc
            || tasktree_keep (fd, keep, nkeep))
            continue;
        if (how != TASKTREE_CLOSE && (flags = fcntl (fd, F_GETFD)) < 0)
            continue;
        if (how == TASKTREE_LISTEN_CLOEXEC) {
            int on = 0;
            socklen_t len = sizeof (on);
            if (getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on)
                (void)fcntl (fd, F_SETFD, flags | FD_CLOEXEC);
            continue;
        }
        if (how == TASKTREE_CLOSE_CLOEXEC && !(flags & FD_CLOEXEC))
            continue;
        (void)close (fd);
    }
    (void)closedir (d);
}

/* In the task process, between tasktree_prepare and tasktree_start: the pipes
 * to the mounter (ask / its answer). */
static int tasktree_mreq = -1, tasktree_mdone = -1;
/* tasktree_hostproc (above): the host's /proc, opened before the task's
 * covered it in the task's mount namespace, which this process shares. */
static char tasktree_init_path[4096];

void tasktree_set_init (const char *path)
{
    snprintf (tasktree_init_path, sizeof (tasktree_init_path), "%s", path);
}

/* The mounter: forked as root by tasktree_prepare, in the task's new mount
 * namespace but outside its PID namespace (which has no process yet).
 * When the task's holder exists and asks, it forks once into that PID
 * namespace, where the child, still root, mounts the namespace's /proc
 * (what CRIU's parasite needs to dump a task of an ordinary user) and
 * answers: an empty string, or why it failed.  Takes nothing from the
 * user: the namespace is named by the task process it was forked from. */
static void __attribute__ ((noreturn)) tasktree_mounter (pid_t task, int req, int done)
{
    int keep[2] = { req, done }, fd, status;
    char path[64], err[256] = "", c;
    pid_t child;

    (void)prctl (PR_SET_NAME, "ibcr-mounter", 0, 0, 0);
    tasktree_fds (TASKTREE_CLOSE, keep, 2);
    if (read (req, &c, 1) != 1)
        _exit (0); /* the task never asked */
    /* Its pid names the namespace: only while it is our parent is it the
     * task process and not a later one with the same pid. */
    if (getppid () != task)
        _exit (0);
    snprintf (path, sizeof (path), "/proc/%ld/ns/pid_for_children", (long)task);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0 || setns (fd, CLONE_NEWPID) < 0) {
        snprintf (err, sizeof (err), "cannot enter the task's PID namespace: %s", strerror (errno));
        (void)write (done, err, strlen (err) + 1);
        _exit (1);
    }
    if ((child = fork ()) == 0) {
        if (taskns_setup_proc (1, err, sizeof (err)) < 0)
            (void)write (done, err, strlen (err) + 1);
        else
            (void)write (done, "", 1);
        _exit (0);
    }
    if (child < 0) {
        snprintf (err, sizeof (err), "cannot fork into the task's PID namespace: %s",
                  strerror (errno));
        (void)write (done, err, strlen (err) + 1);
        _exit (1);
    }
    while (waitpid (child, &status, 0) < 0 && errno == EINTR)
        ;
    _exit (0);
}

int tasktree_prepare (char *err, size_t errlen)
{
    int req[2], done[2];
    pid_t task = getpid (), h;

    if (taskns_unshare_mnt (err, errlen) < 0)
        return -1;
    if (tasktree_hostproc < 0
        && (tasktree_hostproc = open ("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf (err, errlen, "cannot open /proc: %s", strerror (errno));
        return -1;
    }
    if (pipe2 (req, O_CLOEXEC) < 0) {
        snprintf (err, errlen, "cannot make a pipe: %s", strerror (errno));
        return -1;
    }
    if (pipe2 (done, O_CLOEXEC) < 0) {
        snprintf (err, errlen, "cannot make a pipe: %s", strerror (errno));
        (void)close (req[0]);
        (void)close (req[1]);
        return -1;
    }
    /* Before the PID namespace: a child forked after it would be its
     * PID 1. */
    if ((h = fork ()) == 0)
        tasktree_mounter (task, req[0], done[1]);
    (void)close (req[0]);
    (void)close (done[1]);
    if (h < 0 || taskns_unshare_pid (err, errlen) < 0) {
        if (h < 0)
            snprintf (err, errlen, "cannot fork the task's /proc mounter: %s", strerror (errno));
        (void)close (req[1]); /* the mounter sees EOF and leaves */
        (void)close (done[0]);
        return -1;
    }
    tasktree_mreq = req[1];
    tasktree_mdone = done[0];
    return 0;
}

static int tasktree_write_all (int fd, const void *buf, size_t len)
{
    const char *p = buf;
    ssize_t n;

    while (len > 0) {
        if ((n = write (fd, p, len)) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* 1: read len bytes; 0: end of file first; -1: error. */
static int tasktree_read_all (int fd, void *buf, size_t len)
{
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        if ((n = read (fd, p, len)) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return 0;
        p += n;
        len -= (size_t)n;
    }
    return 1;
}

static void tasktree_say (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static void tasktree_say (const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;

    va_start (ap, fmt);
    n = vsnprintf (buf, sizeof (buf) - 1, fmt, ap);
    va_end (ap);
    if (n < 0)
        return;
    if (n > (int)sizeof (buf) - 2)
        n = (int)sizeof (buf) - 2;
    buf[n++] = '\n';
    (void)tasktree_write_all (2, buf, (size_t)n);
}

/* Die the way the application died, so slurmstepd records the same wait
 * status.  A core file of this process would only mislead. */
static void __attribute__ ((noreturn)) tasktree_exit_as (int status)
{
    struct rlimit no_core = { 0, 0 };
    sigset_t one;
    int sig;

    if (WIFEXITED (status))
        _exit (WEXITSTATUS (status));
    if (!WIFSIGNALED (status))
        _exit (TASKTREE_EXIT_FAILURE);
    sig = WTERMSIG (status);
    (void)setrlimit (RLIMIT_CORE, &no_core);
    (void)signal (sig, SIG_DFL);
    sigemptyset (&one);
    sigaddset (&one, sig);
    (void)kill (getpid (), sig);
    (void)sigprocmask (SIG_UNBLOCK, &one, NULL);
    /* Only reached for signals whose default is to be ignored. */
    _exit (128 + sig);
}

/* PID 1 of the task's namespace.  Reports the application's pid, then
 * its wait status, on 'report'; exits when the application has ended,
 * with its exit code or 128 + the signal that killed it (the kernel then
 * kills whatever it left in the namespace, as Slurm would at the end of
 * the step).  CRIU dumps this process (about 1.7 MB, 90 ms measured with
 * a shell application): it holds only fds 0-2 and 'report'. */
static void __attribute__ ((noreturn)) tasktree_init (pid_t app, int report, const sigset_t *set)
{
    int32_t word = (int32_t)app;
    siginfo_t si;
    int status, sig;
    pid_t pid;

    tasktree_default_dispositions ();
    if (report >= 0 && tasktree_write_all (report, &word, sizeof (word)) < 0)
        _exit (TASKTREE_EXIT_FAILURE);
    /* Reap first, then wait: setting SIGCHLD to SIG_DFL above discarded
     * a pending one (POSIX, blocked or not), and a short application
     * (true) may have ended before that. */
    for (sig = SIGCHLD;; sig = 0) {
        if (!sig) {
            if ((sig = sigwaitinfo (set, &si)) < 0) {
                sig = 0;
                continue; /* EINTR: nothing else can fail here */
            }
            if (sig != SIGCHLD) {
                (void)kill (app, sig);
                continue;
            }
        }
        /* Orphans of the application are ours to reap as well. */
        while ((pid = waitpid (-1, &status, WNOHANG)) > 0) {
            if (pid == app) {
                word = (int32_t)status;
                if (report >= 0)
                    (void)tasktree_write_all (report, &word, sizeof (word));
                /* Also as an exit code, the way ibcr-init reports it: a
                 * restored init has no waiter pipe, only this. */
                _exit (WIFEXITED (status)         ? WEXITSTATUS (status)
                           : WIFSIGNALED (status) ? 128 + WTERMSIG (status)
                                                  : TASKTREE_EXIT_FAILURE);
            }
        }
    }
}

/* The waiter, once the application may run: forward signals to the init
 * until it ends, then exit as the application did. */
static void __attribute__ ((noreturn)) tasktree_wait (pid_t init, int report, const sigset_t *set)
{
    int32_t word;
    siginfo_t si;
    int status, sig;
    pid_t pid;

    /* Reap first (a SIGCHLD pending when its action was reset to SIG_DFL
     * was discarded), then wait. */
    for (sig = SIGCHLD;; sig = 0) {
        if (!sig) {
            if ((sig = sigwaitinfo (set, &si)) < 0) {
                sig = 0;
                continue;
            }
            if (sig == SIGTERM && tasktree_term_cb)
                tasktree_term_cb (tasktree_term_arg); /* may hold it a while */
            if (sig != SIGCHLD) {
                (void)kill (init, sig);
                continue;
            }
        }
        while ((pid = waitpid (-1, &status, WNOHANG)) > 0) {
            if (pid != init)
                continue;
            /* The init writes the application's status before it exits;
             * without it (the init was killed) its own status is all
             * there is. */
            if (tasktree_read_all (report, &word, sizeof (word)) == 1)
                tasktree_exit_as ((int)word);
            tasktree_exit_as (status);
        }
    }
}

void tasktree_hold (pid_t child)
{
    sigset_t set;

    tasktree_sigset (&set);
    (void)sigprocmask (SIG_BLOCK, &set, NULL);
    tasktree_fds (TASKTREE_CLOSE, NULL, 0);
    tasktree_init (child, -1, &set);
}

void tasktree_adopt (pid_t init, const int *keep, int nkeep)
{
    sigset_t set;
    int status;

    tasktree_sigset (&set);
    (void)sigprocmask (SIG_BLOCK, &set, NULL);
    (void)prctl (PR_SET_NAME, "ibcr-task", 0, 0, 0);
    tasktree_default_dispositions ();
    tasktree_fds (TASKTREE_CLOSE_CLOEXEC, keep, nkeep);
    /* It may have ended before the signals were blocked: its SIGCHLD is
     * then gone, but not its zombie. */
    if (waitpid (init, &status, WNOHANG) == init)
        tasktree_exit_as (status);
    /* No report pipe: a restored init reports the application's status
     * as its own exit code. */
    tasktree_wait (init, -1, &set);
}

int tasktree_start (tasktree_started_f started, void *arg, const int *keep, int nkeep, char *err,
                    size_t errlen)
{
    int report[2] = { -1, -1 }, go[2] = { -1, -1 };
    sigset_t set, old;
    int32_t word;
    pid_t init, app;
    int status = 0;
    char c = 'g';

    tasktree_sigset (&set);
    if (sigprocmask (SIG_BLOCK, &set, &old) < 0) {
        snprintf (err, errlen, "cannot block signals: %s", strerror (errno));
        return -1;
    }
    if (pipe2 (report, O_CLOEXEC) < 0 || pipe2 (go, O_CLOEXEC) < 0) {
        snprintf (err, errlen, "cannot make a pipe: %s", strerror (errno));
        goto error;
    }
    if ((init = fork ()) < 0) {
        snprintf (err, errlen, "cannot fork the task's PID namespace init: %s", strerror (errno));
        goto error;
    }
    if (init == 0) {
        /* The holder, PID 1 of the new namespace (taskns.h): never
         * dumped, so a restore can make a fresh one. */
        char merr[256];
        ssize_t n;
        pid_t sub;

        (void)close (report[0]);
        (void)close (go[1]);
        /* Inside, the namespace's own /proc serves; the host's stays out. */
        if (tasktree_hostproc >= 0) {
            (void)close (tasktree_hostproc);
            tasktree_hostproc = -1;
        }
        (void)prctl (PR_SET_NAME, "ibcr-holder", 0, 0, 0);
        if (tasktree_mreq < 0 || write (tasktree_mreq, "m", 1) != 1
            || (n = read (tasktree_mdone, merr, sizeof (merr) - 1)) <= 0) {
            tasktree_say ("ibcr: the task's /proc was not mounted (its mounter is gone)");
            _exit (TASKTREE_EXIT_FAILURE);
        }
        merr[n] = '\0';
        if (merr[0]) {
            tasktree_say ("ibcr: %s", merr);
            _exit (TASKTREE_EXIT_FAILURE);
        }
        if ((sub = fork ()) < 0) {
            tasktree_say ("ibcr: cannot fork the task's init: %s", strerror (errno));
            _exit (TASKTREE_EXIT_FAILURE);
        }
        if (sub > 0) {
            tasktree_fds (TASKTREE_CLOSE, NULL, 0);
            tasktree_init (sub, -1, &set);
        }
        /* The init: what CRIU dumps.  A subreaper (it is not PID 1), so
         * the application's orphans stay in the dumped tree. */
        if (setsid () < 0 || prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
            tasktree_say ("ibcr: cannot set up the task's init: %s", strerror (errno));
            _exit (TASKTREE_EXIT_FAILURE);
        }
        if ((app = fork ()) < 0) {
            tasktree_say ("ibcr: cannot fork the application in its PID namespace: %s",
                          strerror (errno));
            _exit (TASKTREE_EXIT_FAILURE);
        }
        if (app == 0) {
            /* The application: wait for the waiter's word, then go back
             * to slurmstepd, which execs the user's command. */
            (void)close (report[1]);
            if (tasktree_read_all (go[0], &c, 1) != 1 || c != 'g')
                _exit (TASKTREE_EXIT_FAILURE);
            (void)close (go[0]);
            /* slurmstepd's own listeners reach its tasks (Slurm 22.05's
             * PMIx server socket, on 0.0.0.0 and an ephemeral port, is
             * fd 10 of every Open MPI rank).  The program never knew
             * them, and in its image each makes CRIU bind that port
             * again at a restore, where it can be taken (another rank's
             * copy, a socket of the new step) and the restore fails
             * "Address already in use".  Slurm's exec closes them. */
            tasktree_fds (TASKTREE_LISTEN_CLOEXEC, NULL, 0);
            (void)sigprocmask (SIG_SETMASK, &old, NULL);
            return 0;
        }
        /* What CRIU dumps holds nothing of slurmstepd's but the task's
         * own stdin, stdout and stderr, and runs a program started in
         * the task's mount namespace: CRIU cannot dump slurmstepd's
         * mappings, which belong to the host's. */
        tasktree_fds (TASKTREE_CLOSE, &report[1], 1);
        {
            /* ibcr-init writes the first word (the application's pid)
             * once it runs: the waiter waits for the exec. */
            char apid[32], rfd[32];
            snprintf (apid, sizeof (apid), "%ld", (long)app);
            snprintf (rfd, sizeof (rfd), "%d", report[1]);
            (void)fcntl (report[1], F_SETFD, 0);
            execl (tasktree_init_path, "ibcr-init", "--adopt", apid, "--report", rfd, (char *)NULL);
            tasktree_say ("ibcr: cannot run the task init %s: %s", tasktree_init_path,
                          strerror (errno));
            (void)kill (app, SIGKILL);
            _exit (TASKTREE_EXIT_FAILURE);
        }
    }
    if (tasktree_mreq >= 0) {
        (void)close (tasktree_mreq);
        (void)close (tasktree_mdone);
        tasktree_mreq = tasktree_mdone = -1;
    }

    /* The waiter. */
    (void)close (report[1]);
    report[1] = -1;
    (void)close (go[0]);
    go[0] = -1;
    if (tasktree_read_all (report[0], &word, sizeof (word)) != 1) {
        (void)waitpid (init, &status, 0);
        snprintf (err, errlen,
                  "the task's PID namespace init failed before starting "
                  "the application (status 0x%x)",
                  (unsigned)status);
        goto error;
    }
    (void)prctl (PR_SET_NAME, "ibcr-task", 0, 0, 0);
    tasktree_default_dispositions ();
    {
        int keep2[nkeep + 3];
        memcpy (keep2, keep, sizeof (int) * (size_t)nkeep);
        keep2[nkeep] = report[0];
        keep2[nkeep + 1] = go[1];
        keep2[nkeep + 2] = tasktree_hostproc;
        tasktree_fds (TASKTREE_CLOSE_CLOEXEC, keep2, nkeep + 3);
    }
    /* As seen from here: the dumped init is the holder's child, the
     * application the init's (the word is its pid inside). */
    {
        pid_t sub = proc_first_child_at (tasktree_hostproc, init);
        app = sub > 0 ? proc_first_child_at (tasktree_hostproc, sub) : -1;
        if (sub <= 0 || app <= 0) {
            (void)kill (init, SIGKILL);
            (void)waitpid (init, &status, 0);
            snprintf (err, errlen, "the task's init or application vanished at start");
            goto error;
        }
        if (started && started (sub, app, arg) < 0) {
            (void)kill (init, SIGKILL);
            (void)waitpid (init, &status, 0);
            _exit (1);
        }
    }
    if (tasktree_write_all (go[1], &c, 1) < 0) {
        tasktree_say ("ibcr: cannot start the application: %s", strerror (errno));
        (void)kill (init, SIGKILL);
        (void)waitpid (init, &status, 0);
        _exit (TASKTREE_EXIT_FAILURE);
    }
    (void)close (go[1]);
    tasktree_wait (init, report[0], &set);

error : {
    int e = errno;
    if (report[0] >= 0)
        (void)close (report[0]);
    if (report[1] >= 0)
        (void)close (report[1]);
    if (go[0] >= 0)
        (void)close (go[0]);
    if (go[1] >= 0)
        (void)close (go[1]);
    (void)sigprocmask (SIG_SETMASK, &old, NULL);
    errno = e;
}
    return -1;
}
