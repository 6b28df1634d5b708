/* init_supervise.h - wait for one child while forwarding signals to it.
 *
 * Both halves of ibcr-init do the same thing: the process outside the PID
 * namespace waits for the namespace's init, and that init waits for the
 * application.  Each blocks the signals it forwards (plus SIGCHLD) and
 * takes them with sigwaitinfo(), so no handler ever runs and nothing is
 * lost between fork() and the wait.  Must never leave a child unreaped.
 */
#ifndef IBCR_INIT_SUPERVISE_H
#define IBCR_INIT_SUPERVISE_H

#include <signal.h>
#include <sys/types.h>

/* Fill 'set' with the signals ibcr-init forwards to its child (SIGTERM,
 * SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCONT, SIGQUIT, SIGALRM) plus
 * SIGCHLD, which it keeps for itself. */
void init_signals (sigset_t *set);

/* Wait until 'child' ends, forwarding every signal of 'set' except
 * SIGCHLD to it and reaping every other child that ends meanwhile (PID 1
 * and a subreaper inherit orphans).  The signals of 'set' must already be
 * blocked.  Returns 0 with the child's wait status in *status, or -1 with
 * errno (ECHILD: 'child' is not our child). */
int init_supervise (pid_t child, const sigset_t *set, int *status);

/* The exit code a shell would report for wait status 'status':
 * the exit code, or 128 + the signal that killed it. */
int init_exit_code (int status);

#endif
