/* proc.h - what /proc says of a process: its state, its parent, its first
 * child.  Used where ibcrd, ibcr and the SPANK plugin follow a task's tree
 * (init, then the application under it).
 *
 * Each answers 0 when the process is gone or /proc cannot say: callers
 * treat "unknown" as "not (yet) there" and poll or give up.
 */
#ifndef IBCR_COMMON_PROC_H
#define IBCR_COMMON_PROC_H

#include <sys/types.h>

/* State letter of pid (R, S, T, Z, ...), or 0. */
char proc_state (pid_t pid);

/* Parent of pid, or 0. */
pid_t proc_ppid (pid_t pid);

/* The first child of pid's main thread, or 0. */
pid_t proc_first_child (pid_t pid);

/* The same, read through procfd, a /proc opened earlier (a process whose
 * /proc was since covered by its PID namespace's own). */
pid_t proc_first_child_at (int procfd, pid_t pid);

#endif
