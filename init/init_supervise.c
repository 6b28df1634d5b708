/* init_supervise.c - see init_supervise.h.
 *
 * Runs as PID 1 of a task's namespace, also after a CRIU restore: the
 * process may be frozen and restored at any instruction, so the loop holds
 * no state outside the child's pid and restarts every interrupted call.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "init_supervise.h"

/* SIGCONT is forwarded too: a job stopped and continued by Slurm (or by
 * ibcr restart --stopped) must continue the application, not only us. */
static const int init_forwarded[] = {
    SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCONT, SIGQUIT, SIGALRM,
};

void init_signals (sigset_t *set)
{
    sigemptyset (set);
    for (size_t i = 0; i < sizeof (init_forwarded) / sizeof (init_forwarded[0]); i++)
        sigaddset (set, init_forwarded[i]);
    sigaddset (set, SIGCHLD);
}

/* Reap everything that has ended.  Returns true once 'child' was reaped;
 * orphans reparented to us are reaped and forgotten. */
static bool reap (pid_t child, int *status, int *err)
{
    bool done = false;

    for (;;) {
        int st;
        pid_t pid = waitpid (-1, &st, WNOHANG | __WALL);
        if (pid == 0)
            return done;
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            /* ECHILD: 'child' vanished without being reaped here. */
            if (!done)
                *err = errno;
            return done;
        }
        if (pid == child) {
            *status = st;
            done = true;
        }
    }
}

int init_supervise (pid_t child, const sigset_t *set, int *status)
{
    int err = 0;

    /* Ask about 'child' alone first: ECHILD here means it is not ours (a
     * wrong pid file), and it may have ended already with its SIGCHLD
     * consumed by the caller. */
    for (;;) {
        pid_t pid = waitpid (child, status, WNOHANG | __WALL);
        if (pid == child)
            return 0;
        if (pid == 0)
            break;
        if (errno != EINTR)
            return -1;
    }
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo (set, &si);
        if (sig < 0) {
            /* EINTR: ptrace (CRIU's seize) or a stop/continue. */
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (sig == SIGCHLD) {
            if (reap (child, status, &err))
                return 0;
            if (err) {
                errno = err;
                return -1;
            }
            continue;
        }
        /* ESRCH: the child is ending; its SIGCHLD is on the way. */
        (void)kill (child, sig);
    }
}

int init_exit_code (int status)
{
    if (WIFEXITED (status))
        return WEXITSTATUS (status);
    if (WIFSIGNALED (status))
        return 128 + WTERMSIG (status);
    return 125;
}
