/* restore.h - bring a task back from a committed generation: the one
 * restore pipeline of ibcr, shared by a requeued Slurm task (the SPANK
 * plugin's restorer) and by "ibcr restart" (ibcrd's restorer, on behalf
 * of the connected user).
 *
 *   choose    the newest committed generation (or the one asked for)
 *   verify    its checksums; a damaged one is skipped for the previous,
 *             saying so (never when one generation was asked for)
 *   decompress  a compressed generation, by root, into a private copy
 *             given to the user and removed once CRIU has read it
 *   restore   in new mount and PID namespaces (taskns.h): the holder
 *             (PID 1) mounts /proc, CRIU runs as the task's user (PID 2)
 *             with only its two capabilities, and leaves the tree stopped
 *   check     every restored process carries exactly the user's ids and
 *             no capability, else the tree is killed before it runs
 *   report    the holder's pid (its child is the restored init), or why
 *             not, with CRIU's first errors and its log's path
 *
 * Images are user data whoever wrote them (the parasite ran inside the
 * user's process): nothing here grants more than the user has.
 */
#ifndef IBCR_COMMON_RESTORE_H
#define IBCR_COMMON_RESTORE_H

#include <json-c/json.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pmi.h"
#include "store.h"
#include "taskns.h"

/* Processes of one task that use verbs, each with its own control
 * socket (ibcrd's jobs.h TASK_MAX_PROCS). */
#define RESTORE_MAX_CTL 64

struct restore_plan {
    int gen;                                  /* generation restored */
    char imgdir[PATH_MAX];                    /* gen-N/task-<rank> */
    char criu[PATH_MAX];                      /* the criu binary (ibcrd.conf criu=) */
    char workdir[PATH_MAX];                   /* root's folder for criu's log and work files */
    char log[PATH_MAX];                       /* criu's log, in workdir */
    char stdio[3][PATH_MAX];                  /* what fds 0..2 were at the dump ("" unknown):
                                       "pipe:[INO]", "socket:[INO]", a path */
    long long ctl_ino;                        /* libibcr's control socket at the dump, 0 none
                                       (the first of ctl_inos) */
    int nctl;                                 /* processes that used verbs at the dump */
    long long ctl_inos[RESTORE_MAX_CTL];      /* each one's control socket */
    long long pmi_ino;                        /* the PMI socket to slurmstepd at the dump, 0 none
                                       (pmi.h) */
    long long pmix_ino;                       /* the task's end of the PMIx relay at the dump, 0
                                       none (pmi.h) */
    unsigned char pmix_hello[PMIX_HELLO_MAX]; /* the rank's PMIx connect message */
    size_t pmix_hello_len;                    /* 0: none recorded */
    int in_ns;                                /* dumped inside its task's namespaces (taskns.h) */
    char looked[PATH_MAX];                    /* <storage>/<cluster> the pick looked in */
};

/* Choose what rank 'rank' of job restores (want: that generation only,
 * 0: the newest intact one).  Returns 1 with plan's gen, imgdir, stdio
 * and ctl_ino set and *manifest (a new reference) the generation's; 0
 * when the job has no committed generation (want 0 only); -1 with the
 * reason in err (errno: ENOENT none such, EBADMSG every candidate
 * damaged, else why it could not be read).  Damaged generations skipped
 * are said in note ("" when none).  The caller sets criu, workdir, log. */
int restore_pick (const struct store *st, const char *job, int want, uint32_t rank,
                  struct restore_plan *plan, json_object **manifest, char *note, size_t notelen,
                  char *err, size_t errlen);

/* The same for a user who may restore only their own generations: owner
 * is their uid (-1: any, for root).  The first candidate generation of
 * another uid fails it with EPERM, before any of its images is read (a
 * restore marks a generation it finds damaged: store_gen_mark_damaged). */
int restore_pick_for (const struct store *st, const char *job, int want, uint32_t rank,
                      int64_t owner, struct restore_plan *plan, json_object **manifest, char *note,
                      size_t notelen, char *err, size_t errlen);

/* Leave the restored tree stopped (for a debugger); else it runs once
 * checked. */
#define RESTORE_STOPPED 0x1

/* As root, in a process of its own (its mount namespace and the PID
 * namespace of its next child change): restore plan's images as the
 * user in as (uid, and its gid and groups: taskns_load_ids), with
 * fds[0..2] handed in for the dumped stdio that was a pipe, socket or
 * file, fds[3] (-1: none) for libibcr's control socket, fds[4] (-1:
 * none) for the new step's PMI socket, already greeted, and fds[5] (-1:
 * none) for the task's end of a new PMIx relay (pmi.h).  Returns the
 * holder's pid, our child, whose one child is the restored init, checked
 * and let run (unless RESTORE_STOPPED); it exits with the init's status;
 * err then says what the restore changed outside the image ("" nothing):
 * files the image holds open for writing that grew since the dump are
 * cut back to their size then (imgfiles.h).  -1 with err: nothing of the
 * image ran.  fds are left open. */
pid_t restore_tree (const struct restore_plan *plan, struct taskns_as *as, const int fds[6],
                    int flags, char *err, size_t errlen);

/* The same for a task with several processes that used verbs: ctl[i]
 * (nctl of them, plan->nctl when all are handed) takes the place of
 * plan->ctl_inos[i]; fds[3] is not used. */
pid_t restore_tree_ctl (const struct restore_plan *plan, struct taskns_as *as, const int fds[6],
                        const int *ctl, int nctl, int flags, char *err, size_t errlen);

#endif
