/* jobs.h - ibcrd's table of registered jobs and their tasks on this node.
 *
 * A task registers over its own connection (libibcr's control socket);
 * the registration lives as long as that connection.  A job belongs to the
 * uid that first registered a task of it (or the uid root named for it);
 * afterwards only that uid or root may add tasks, query or act on it.
 *
 * Two kinds of job ids:
 * - a Slurm job id (all digits) is one job node-wide; only root (the
 *   SPANK plugin in slurmstepd, which has the owner from Slurm) creates
 *   one or adds tasks to it: a user could otherwise claim another user's
 *   Slurm job before its first task registers, and have ibcrd requeue it
 *   and prune its generations;
 * - any other id (ibcr run) is a name in its owner's namespace: two users
 *   may both run a job "sim" without meeting.
 *
 * A registered pid (and app_pid) must be a process whose real, effective,
 * saved and filesystem uids all are the client's (root may name any); its
 * start time and uids are kept, and jobs_task_check tells at use whether
 * the pid still is that process.
 */
#ifndef IBCRD_JOBS_H
#define IBCRD_JOBS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <json-c/json.h>

#include "common/conf.h"
#include "common/ident.h"
#include "common/proc.h"
#include "common/proto.h"

/* A process of a task that uses verbs: libibcr in it holds a control
 * connection of its own.  A task may have several (a program that forks
 * a second rank, a script that starts two verbs programs); every one is
 * quiesced, drained, released, dumped with its socket external, rebuilt
 * and resumed, and handed a fresh connection back at restore. */
#define TASK_MAX_PROCS 64

struct task_proc {
    int conn;  /* its libibcr control connection */
    pid_t pid; /* as the kernel names it: SO_PEERCRED of its
                                   hello, or after a restore the process of
                                   the tree holding the connection's other
                                   end; 0 while unknown */
};

struct task {
    pid_t pid;                   /* as the daemon sees it (SO_PEERCRED or checked) */
    long ns_pid;                 /* as the task sees itself, -1 when not given */
    long app_pid;                /* the application under the init, -1 unknown */
    struct proc_ident ident;     /* pid's start time and uids at registration */
    struct proc_ident app_ident; /* app_pid's, when app_pid >= 0 */
    int rank;
    char step[IDENT_MAX + 1];
    char node[IDENT_MAX + 1];
    int conn;   /* connection id that registered it */
    int nprocs; /* its verbs processes, in hello order */
    struct task_proc procs[TASK_MAX_PROCS];
    int restored;                  /* came back from an image: libibcr waits
                                   for a rebuild before the job runs on */
    int restored_gen;              /* the generation it came back from, as its
                                      restarter says (0 unknown) */
    int rebuilding;                /* restored, and in the running rebuild's list */
    int resumed;                   /* was restored, and a rebuild has resumed it
                                      since (maybe before its own restarter asked) */
    double restore_t0, restore_t1; /* then its restore (mono_ms_f), as long as
                                   its restarter says it took, ending at its
                                   registration; 0 unknown (timeline only) */
    time_t since;
    struct task *next;
};

/* Another node of a job (known to the leader from its "join").  A job
 * has at most max_nodes nodes, the leader's included (ibcrd.conf(5)):
 * its table of members grows as they join. */
#define MEMBER_MAX_RANKS 256

struct job_member {
    char node[IDENT_MAX + 1];
    char host[64];
    int port;
    int nranks;
    int ranks[MEMBER_MAX_RANKS]; /* a rank joins again after its ibcrd restarted */
    int joins;                   /* joins accepted from it (again after a restart) */
};

struct job {
    char id[IDENT_MAX + 1];
    uid_t uid;
    int slurm; /* a Slurm job id (created by root only) */
    time_t since;
    int ntasks;               /* registered on this node */
    int size;                 /* ranks in the whole job (>= ntasks) */
    uint64_t interval_ms;     /* periodic checkpoints; 0 = none */
    struct timespec next_due; /* CLOCK_MONOTONIC of the next periodic one */
    int ending;               /* a Slurm trigger's final checkpoint ran and a
                                 requeue is ordered or done: no periodic
                                 generation until these tasks are gone */
    char leader[256];         /* host of rank 0's ibcrd; "" = this node */
    int leader_port;          /* its peer port */
    pid_t worker;             /* generation running (its worker), or 0 */
    int worker_kind;          /* its enum gen_kind */
    int requeue_restart;      /* its restart failed, and a requeue would not
                                 fail the same way (gen.c): Slurm job only */
    int report_fd;            /* its reports (gen.h's "worker-phase", "worker-end"), or -1 */
    struct proto_reader report_rd;
    int phase;        /* the phase it reported last (phase.h), -1 none */
    int phase_gen;    /* the generation it works on, 0 not numbered yet */
    int reported_end; /* it sent its "worker-end" */
    /* What the workers reported, for "ibcr status" (schedule.c):
     * last_gen is the newest generation whose part on this node
     * committed while this ibcrd ran (0: none yet; the store lists the
     * older ones); last_error is why the newest generation (or restart)
     * that did not succeed failed, kept until a later one succeeds, so
     * that "" means the job's newest attempt went well. */
    int last_gen;
    int nmembers;               /* leader: the other nodes that joined */
    int members_cap;            /* members[] has room for this many */
    struct job_member *members; /* on the heap, or NULL */
    char last_error[2048];
    json_object *last_generation; /* leader: its timeline (timeline.h), or NULL */
    json_object *last_restore;    /* leader: the last restart's, or NULL */
    struct task *tasks;
    struct job *next;
};

struct jobs;

struct jobs *jobs_create (void);
void jobs_destroy (struct jobs *j);

/* May a client with uid 'peer' act on a job owned by 'owner'? */
int jobs_may_act (uid_t peer, uid_t owner);

/* Is id a Slurm job id (digits only, as slurmctld gives them)? */
int jobs_is_slurm_id (const char *id);

/* Register a task from a "register" request of a client identified by the
 * kernel as (uid, pid) on connection conn, within conf's limits.  Returns
 * the job, or NULL with errno and a message for the client in err (EINVAL
 * bad field or a value outside its bounds, EPERM job of another user, a
 * Slurm job registered by a user, or a pid not the client's, EEXIST rank
 * already there, EUSERS a limit on registrations was reached). */
struct job *jobs_register (struct jobs *j, uid_t uid, pid_t pid, int conn, json_object *req,
                           const struct conf *conf, char *err, size_t len);

/* Is task t of job still the process that registered (same start time and
 * uids, for pid and app_pid)?  0, or -1 with errno (ESRCH gone, EPERM it
 * is another process or changed identity) and why in err.  Called before
 * ibcrd signals or dumps it: pids get reused. */
int jobs_task_check (const struct job *job, const struct task *t, char *err, size_t len);

/* Forget every task registered over connection conn (it closed), and
 * detach control connections equal to conn; logs each and drops jobs left
 * without tasks and without a running worker. */
void jobs_drop_conn (struct jobs *j, int conn);
/* A job whose tasks all ended while its worker ran (a commit still
 * copying) stays, so that its worker reports to it and a task of the same
 * job registering meanwhile finds the generation running (EBUSY), not a
 * fresh job that starts a second one; dropped here once the worker
 * ended. */
void jobs_drop_if_done (struct jobs *j, struct job *job);

/* Add control connection conn (of the process the kernel names pid, 0
 * unknown) to task t: 0, or -1 with errno EUSERS and why in err when the
 * task holds TASK_MAX_PROCS already.  A connection already there only
 * has its pid updated. */
int jobs_task_add_proc (struct job *job, struct task *t, int conn, pid_t pid, char *err,
                        size_t len);

/* Is conn one of task t's control connections? */
int jobs_task_has_conn (const struct task *t, int conn);

/* The job id that a client of uid may name: a Slurm job, or the job id in
 * uid's namespace; root also finds another user's job when only one user
 * has a job of that name.  NULL when none. */
struct job *jobs_find (struct jobs *j, const char *id, uid_t uid);

/* The job id of owner uid exactly (Slurm jobs: any owner); peers. */
struct job *jobs_find_owned (struct jobs *j, const char *id, uid_t uid);

/* Tasks registered over connection conn, and by uid. */
int jobs_conn_tasks (struct jobs *j, int conn);
int jobs_uid_tasks (struct jobs *j, uid_t uid);

/* The task whose pid (as the daemon sees it) is pid, and its job. */
struct task *jobs_find_pid (struct jobs *j, pid_t pid, struct job **job);

/* The task whose process tree holds pid: the task's init, its application,
 * or any descendant (libibcr says hello from the application, inside the
 * init's PID namespace).  NULL when none. */
struct task *jobs_find_tree (struct jobs *j, pid_t pid, struct job **job);

/* Task of job by rank, or NULL. */
struct task *jobs_task (struct job *job, int rank);

/* Iterate over every job (for the periodic timer). */
struct job *jobs_first (struct jobs *j);

/* JSON of one job, or an array of the jobs uid may see (all for root). */
json_object *jobs_job_json (const struct job *job);
json_object *jobs_list_json (struct jobs *j, uid_t uid);

int jobs_count (struct jobs *j);

#endif
