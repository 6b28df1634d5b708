/* init_spawn.h - start a command inside a new PID namespace under our init.
 *
 * The caller (outside) gets the pid of the namespace's init, which is the
 * root of the tree CRIU dumps.  Inside, the init calls setsid() and runs
 * the command as its child, so the application is never PID 1.
 */
#ifndef IBCR_INIT_SPAWN_H
#define IBCR_INIT_SPAWN_H

#include <signal.h>
#include <sys/types.h>

/* Exit codes of ibcr-init itself, as env(1) and timeout(1) use them. */
enum {
    INIT_EXIT_FAILURE = 125, /* ibcr-init could not do its part */
    INIT_EXIT_NOEXEC = 126,  /* the command exists but cannot run */
    INIT_EXIT_NOTFOUND = 127 /* the command does not exist */
};

/* Create a PID namespace and start its init, which runs argv[] with signal mask
 * 'app_mask' and forwards the signals of 'set' (blocked by the caller) to
 * it.  Returns the init's pid as seen by the caller, or -1 with errno and
 * a message on stderr. */
pid_t init_spawn_ns (char **argv, const sigset_t *app_mask, const sigset_t *set);

/* Exec argv[] with signal mask 'mask'; on failure print why and _exit()
 * with INIT_EXIT_NOEXEC or INIT_EXIT_NOTFOUND.  For a forked child only. */
void init_exec (char **argv, const sigset_t *mask) __attribute__ ((noreturn));

/* Print "ibcr-init: " + message (+ ": strerror(errnum)" if errnum);
 * errno is left as it was. */
void init_error (int errnum, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif
