/* taskns.h - the namespaces a protected task lives in, and CRIU run
 * inside them with the task owner's credentials.
 *
 * A task is a tree in a PID namespace and a mount namespace of its own:
 *
 *   holder (PID 1)      never dumped; forwards signals to the init and
 *    |                  exits with its status.  It mounts the namespace's
 *    |                  /proc (as root) before anything else runs there.
 *    init (PID >= 101)  the root of what CRIU dumps: a subreaper that
 *     |                 runs the application and reaps its orphans
 *     application
 *
 * CRIU runs inside those namespaces (setns), as the task's owner with
 * only CAP_CHECKPOINT_RESTORE and CAP_SETPCAP ("--unprivileged"): the
 * parasite finds a /proc that belongs to the task, the dump never
 * includes a namespace, and a restore can only give back what that user
 * could have done.  An image is user data: a forged one may ask for
 * uid 0 or an fd on a root-only file, and CRIU running as the user cannot
 * grant either.  Capabilities are the exception (CRIU may pass on the
 * two it holds), so a restored tree is left stopped and checked
 * (taskns_check_tree) before it may run.
 *
 * Pids below TASKNS_FIRST_PID are left to the holder and to CRIU at
 * restore time (CRIU is PID 2 then), so they never collide with the
 * restored pids.
 */
#ifndef IBCR_COMMON_TASKNS_H
#define IBCR_COMMON_TASKNS_H

#include <stddef.h>
#include <sys/types.h>

#define TASKNS_FIRST_PID 101

/* Who CRIU runs as, and where. */
struct taskns_as {
    pid_t ns_pid;   /* a process whose PID and mount namespaces to enter (0: ours) */
    pid_t cred_pid; /* a process whose gid and groups CRIU takes (0: keep ours) */
    uid_t uid;      /* 0: full root; else that user, unprivileged, and
                     * cred_pid's real, effective, saved and fs uids must
                     * all be this one */
    /* Filled by taskns_load_ids (else read from cred_pid when needed). */
    int have_ids;
    gid_t gid;
    gid_t groups[256];
    size_t ngroups;
};

/* Read cred_pid's gid and groups (and check its uids) into as, for a
 * caller whose /proc will stop showing cred_pid.  0, or -1 with err. */
int taskns_load_ids (struct taskns_as *as, char *err, size_t len);

/* As root: give the calling process a mount namespace of its own (mounts
 * from the host still propagate in, none out).  0, or -1 with err. */
int taskns_unshare_mnt (char *err, size_t len);

/* As root: make the caller's next child PID 1 of a new PID namespace. */
int taskns_unshare_pid (char *err, size_t len);

/* Become, for good, ids->uid with its gid and groups (taskns_load_ids)
 * and no capability (uid 0: do nothing).  0, or -1 with err. */
struct taskns_as;
int taskns_drop (const struct taskns_as *ids, char *err, size_t len);

/* In the new namespace (PID 1 or a process forked into it), as root:
 * mount its /proc and, with reserve (a fresh task), keep pids below
 * TASKNS_FIRST_PID for a later restore's CRIU.  0, or -1 with err. */
int taskns_setup_proc (int reserve, char *err, size_t len);

/* In a forked child about to exec CRIU: enter as->ns_pid's namespaces
 * (forking once more for the PID namespace; the intermediate process
 * waits and exits with its child's status) and take as->uid and
 * cred_pid's gid and groups (CRIU's restore needs the image's groups,
 * which are the task's), with CRIU's two capabilities.  Returns in the
 * process that must exec, or -1 with err. */
int taskns_become (const struct taskns_as *as, char *err, size_t len);

/* The pid of host process 'pid' in its own (innermost) PID namespace,
 * or -1. */
pid_t taskns_nspid (pid_t pid);

/* Is host process 'pid' in a mount namespace other than ours?  1, 0, or
 * -1 with errno. */
int taskns_own_mnt (pid_t pid);

/* Check every process of the tree rooted at 'root' (a pid as seen by the
 * caller): real, effective, saved and fs uids and gids equal uid/gid,
 * and, unless uid is 0, no capability in any set.  Zombies (threads
 * that have ended) are not checked: they run nothing, and CRIU gives a
 * restored zombie its own credentials.  0, or -1 with what is wrong
 * (which pid, which field) in err. */
int taskns_check_tree (pid_t root, uid_t uid, gid_t gid, char *err, size_t len);

/* Send sig to every process of the tree rooted at root. */
void taskns_signal_tree (pid_t root, int sig);

#endif
