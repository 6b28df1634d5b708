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

/* The process of root's tree (root or a descendant, at most 4096 of
 * them, 64 levels deep) that has an fd naming target (as readlink of
 * /proc/PID/fd/N says: "socket:[INO]"), or 0. */
pid_t proc_tree_find_fd (pid_t root, const char *target);

/* Who a process is, to tell it from a later process with the same pid:
 * its start time (clock ticks after boot) and its real, effective, saved
 * and filesystem uids. */
struct proc_ident {
    unsigned long long start;
    uid_t uid[4];
};

/* Fill id from /proc; 0, or -1 with errno (ESRCH: no such process). */
int proc_ident (pid_t pid, struct proc_ident *id);

/* Are all four uids of id equal to uid? */
int proc_ident_all_uid (const struct proc_ident *id, uid_t uid);

#endif
