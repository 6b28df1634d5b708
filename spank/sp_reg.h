/* sp_reg.h - the plugin's conversation with the node's ibcrd.
 *
 * One connection per task, opened by slurmstepd (as root) before the task
 * starts and held by the task's waiter process until the task ends: ibcrd
 * keeps a registration exactly as long as the connection that made it, so
 * the task is forgotten the moment it is gone.  Every step is bounded by
 * one deadline; nothing here may make a job start hang on a stuck daemon.
 */
#ifndef IBCR_SPANK_REG_H
#define IBCR_SPANK_REG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sp_task_id {
    char job[32];           /* Slurm job id */
    char step[32];          /* step id, "batch" for the batch script */
    uint32_t rank;          /* global task id */
    uint32_t local;         /* task id on this node */
    uint32_t ntasks;        /* tasks in the step */
    char node[256];         /* Slurm node name */
    uid_t uid;              /* the job's user */
    uint64_t interval_ms;   /* --checkpoint-ib period, 0 when bare */
    char leader[320];       /* "NODE@ADDR" of rank 0's ibcrd when it is on
                               another node, else "" */
    int restored;           /* registering a task restored from an image */
    int restored_gen;       /* the generation it was restored from (0: none) */
    int64_t restore_ms;     /* how long its CRIU restore took, for the
                               leader's restore timeline; -1 unknown */
    char fresh_after[4096]; /* a requeued job starting afresh: the storage
                               where no checkpoint was found ("" else) */
};

/* Connect to 'path' and check with a "ping" that a daemon answers there,
 * all within timeout_ms.  Returns the fd (close-on-exec), or -1 with a
 * message in err saying what failed on which socket. */
int sp_reg_open (const char *path, int timeout_ms, char *err, size_t errlen);

/* Register the task whose PID namespace init is 'init_pid' and whose
 * application is 'app_pid' (both as seen from the host) on fd, waiting
 * up to timeout_ms for ibcrd's answer.  0, or -1 with a message in err
 * (ibcrd's own when it refused). */
int sp_reg_register (int fd, const struct sp_task_id *id, pid_t init_pid, pid_t app_pid,
                     int timeout_ms, char *err, size_t errlen);

/* A fresh connection to ibcrd that becomes, once handed into the
 * restored tree, libibcr's control socket of task id->rank ("ctl-attach").
 * The fd, or -1 with err. */
int sp_reg_ctl_attach (const char *path, const struct sp_task_id *id, int timeout_ms, char *err,
                       size_t errlen);

/* Ask ibcrd to rebuild the restored task's verbs objects and let its
 * threads go ("resume-restored"); on a multi-node job the leader does it
 * once every rank is back.  0 when done, -1 with err. */
int sp_reg_resume (int fd, const struct sp_task_id *id, int timeout_ms, char *err, size_t errlen);

/* The task got SIGTERM: ask ibcrd over the registration connection fd
 * whether to wait (a final checkpoint runs), and return when it answers
 * or after wait_ms (plus a little).  0 when ibcrd answered, -1 with err. */
int sp_reg_term (int fd, const struct sp_task_id *id, int wait_ms, char *err, size_t errlen);

#endif
