/* init_spawn.c - see init_spawn.h.
 *
 * What CRIU needs from the tree started here (checked by t0003):
 * - The dumped root is the namespace's init (criu dump -t INIT): CRIU then
 *   sees a whole PID namespace and restores it into a new one, so the
 *   restored pids never clash with the original, which may still run.
 * - The init is a session leader (setsid), so the session and process
 *   group ids belong to the dumped tree and no --shell-job is needed.
 * - No PR_SET_PDEATHSIG: CRIU restores it, and the restored init's first
 *   parent is criu itself, which exits right after --restore-detached.
 * - No mount namespace: with one (to mount a /proc of its own) CRIU must
 *   dump the mount tree, and here fails on it ("Can't lookup mount=N for
 *   fd=-3": the executables live on mounts the new namespace sees under
 *   other ids); restoring one would also need --root /.  Inside, /proc is
 *   the host's: /proc/self still works, only numeric pids differ.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "init_spawn.h"
#include "init_supervise.h"

void init_error (int errnum, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int n, saved = errno;

    va_start (ap, fmt);
    n = vsnprintf (buf, sizeof (buf), fmt, ap);
    va_end (ap);
    if (n >= 0 && errnum)
        fprintf (stderr, "ibcr-init: %s: %s\n", buf, strerror (errnum));
    else if (n >= 0)
        fprintf (stderr, "ibcr-init: %s\n", buf);
    errno = saved;
}

void init_exec (char **argv, const sigset_t *mask)
{
    int err;

    if (sigprocmask (SIG_SETMASK, mask, NULL) < 0) {
        init_error (errno, "cannot restore the signal mask");
        _exit (INIT_EXIT_FAILURE);
    }
    execvp (argv[0], argv);
    err = errno;
    init_error (err, "cannot run '%s'", argv[0]);
    _exit (err == ENOENT ? INIT_EXIT_NOTFOUND : INIT_EXIT_NOEXEC);
}

/* PID 1 of the namespace.  Exits with the application's exit code. */
static void __attribute__ ((noreturn))
ns_init (char **argv, const sigset_t *app_mask, const sigset_t *set)
{
    pid_t app;
    int status;

    if (setsid () < 0) {
        init_error (errno, "setsid failed in the new PID namespace");
        _exit (INIT_EXIT_FAILURE);
    }
    app = fork ();
    if (app < 0) {
        init_error (errno, "cannot fork the application");
        _exit (INIT_EXIT_FAILURE);
    }
    if (app == 0)
        init_exec (argv, app_mask);
    /* When we exit the kernel kills whatever is left in the namespace:
     * the task ends with its application, as under Slurm without us. */
    if (init_supervise (app, set, &status) < 0) {
        init_error (errno, "lost track of the application (pid %d)", (int)app);
        _exit (INIT_EXIT_FAILURE);
    }
    _exit (init_exit_code (status));
}

pid_t init_spawn_ns (char **argv, const sigset_t *app_mask, const sigset_t *set)
{
    pid_t pid;

    if (unshare (CLONE_NEWPID) < 0) {
        init_error (errno, "cannot create a PID namespace%s",
                    errno == EPERM ? " (needs root or CAP_SYS_ADMIN)" : "");
        return -1;
    }
    pid = fork ();
    if (pid < 0) {
        init_error (errno, "cannot fork the namespace's init");
        return -1;
    }
    if (pid == 0)
        ns_init (argv, app_mask, set);
    return pid;
}
