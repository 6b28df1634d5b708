/* jobs.h - ibcrd's table of registered jobs and their tasks on this node.
 *
 * A task registers over its own connection (libibcr's control socket);
 * the registration lives as long as that connection.  A job belongs to the
 * uid that first registered a task of it (or the uid root named for it);
 * afterwards only that uid or root may add tasks, query or act on it.
 */
#ifndef IBCRD_JOBS_H
#define IBCRD_JOBS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <json-c/json.h>

#include "common/ident.h"

struct task {
    pid_t pid;                  /* as the daemon sees it (SO_PEERCRED or checked) */
    long ns_pid;                /* as the task sees itself, -1 when not given */
    long app_pid;               /* the application under the init, -1 unknown */
    int rank;
    char step[IDENT_MAX + 1];
    char node[IDENT_MAX + 1];
    int conn;                   /* connection id that registered it */
    int ctl_conn;               /* libibcr's control connection, or -1 */
    int restored;               /* came back from an image: libibcr waits
                                   for a rebuild before the job runs on */
    time_t since;
    struct task *next;
};

#define JOB_MAX_MEMBERS 64

/* Another node of a job (known to the leader from its "join"). */
#define MEMBER_MAX_RANKS 256

struct job_member {
    char node[IDENT_MAX + 1];
    char host[64];
    int port;
    int nranks;
    int ranks[MEMBER_MAX_RANKS];    /* a rank joins again after its ibcrd restarted */
};

struct job {
    char id[IDENT_MAX + 1];
    uid_t uid;
    time_t since;
    int ntasks;                 /* registered on this node */
    int size;                   /* ranks in the whole job (>= ntasks) */
    uint64_t interval_ms;       /* periodic checkpoints; 0 = none */
    struct timespec next_due;   /* CLOCK_MONOTONIC of the next periodic one */
    char leader[256];           /* host of rank 0's ibcrd; "" = this node */
    int leader_port;            /* its peer port */
    pid_t worker;               /* generation running (its worker), or 0 */
    int worker_kind;            /* its enum gen_kind */
    int last_gen;               /* last generation committed here, 0 none */
    int nmembers;               /* leader: the other nodes that joined */
    struct job_member members[JOB_MAX_MEMBERS];
    char last_error[512];       /* why the last generation failed, "" ok */
    struct task *tasks;
    struct job *next;
};

struct jobs;

struct jobs *jobs_create (void);
void jobs_destroy (struct jobs *j);

/* May a client with uid 'peer' act on a job owned by 'owner'? */
int jobs_may_act (uid_t peer, uid_t owner);

/* Register a task from a "register" request of a client identified by the
 * kernel as (uid, pid) on connection conn.  Returns the job, or NULL with
 * errno and a message for the client in err (EINVAL bad field, EPERM job
 * of another user or pid not the client's, EEXIST rank already there). */
struct job *jobs_register (struct jobs *j, uid_t uid, pid_t pid, int conn,
                           json_object *req, const char *node, char *err, size_t len);

/* Forget every task registered over connection conn (it closed), and
 * detach control connections equal to conn; logs each and drops jobs left
 * without tasks. */
void jobs_drop_conn (struct jobs *j, int conn);

struct job *jobs_find (struct jobs *j, const char *id);

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
