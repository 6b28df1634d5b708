/* gen.h - one checkpoint generation of one job, as DESIGN.md's protocol:
 * quiesce, drain rounds, release, dump, rebuild with id exchange, resume,
 * commit.  Each phase is a file of its own (gen.c's table, gen_int.h);
 * gen_run() strings them together and owns the abort path.
 *
 * Runs in a worker process forked by the daemon for this generation
 * (worker.h): it may block for as long as CRIU and the copy take without
 * stalling the daemon's loop, and it owns the tasks' libibcr control
 * connections until it exits.
 *
 * Invariant: a generation commits whole or leaves nothing behind.  Any
 * failure or timeout in any phase resumes the job (rebuilding its verbs
 * objects first if they were released), removes the staging images and
 * the partial storage folder, and reports the error; the last committed
 * generation stays the newest.  Only the manifest's rename commits.
 */
#ifndef IBCRD_GEN_H
#define IBCRD_GEN_H

#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "common/conf.h"
#include "common/ident.h"
#include "common/peerauth.h"
#include "common/proto.h"
#include "common/clock.h"
#include "phase.h"
#include "timeline.h"

/* Processes of one task that use verbs, each with its own libibcr
 * control connection (jobs.h's TASK_MAX_PROCS). */
#define GEN_MAX_CTL 64

struct gen_task {
    int rank;
    pid_t pid;                  /* the task's init: the root CRIU dumps */
    int nctl;                   /* its processes that use verbs */
    int ctl_fd[GEN_MAX_CTL];    /* libibcr's control connection of each */
    pid_t ctl_pid[GEN_MAX_CTL]; /* and its process (0 unknown), for errors */
    int restored;               /* restart: waits for rebuild, not dumped */
    int restored_gen;           /* the generation it was restored from, 0 unknown */
    char node[IDENT_MAX + 1];
    json_object *entry;      /* its manifest entry (genl_tasks_json), or NULL */
    double dump_t0, dump_t1; /* its CRIU dump's start and end (mono_ms_f) */
    double dump_cpu_ms;      /* CPU time its CRIU used (user + system), or -1 */
};

/* Another node of the job, as the leader knows it. */
struct gen_member {
    char node[IDENT_MAX + 1];
    char host[64];      /* its address, as its join came from */
    int port;           /* its ibcrd's peer port */
    int wport;          /* its worker's port for this generation */
    json_object *tasks; /* manifest entries of its tasks (gen-begin) */

    /* The leader's link to it (fanout.c). */
    int fd;      /* connection of the request awaited, or -1 */
    int session; /* fd is the generation's session (peerauth.h) */
    struct peerauth_session ses;
    struct proto_reader rd;
    unsigned rid;                      /* the request awaited, 0 when none */
    int lost;                          /* died, hung or unreachable: asked nothing more */
    int busy;                          /* answered gen-begin with EBUSY: asked again */
    double t_sent;                     /* when that request went (mono_ms_f) */
    struct gen_span span[PHASE_COUNT]; /* its timeline (timeline.h) */
    unsigned touched;                  /* phases (bits) whose span changed since the
                               request this worker serves came (relayed up) */

    /* Its place in the tree (fanout.h): a child of this node is asked
     * directly; the others are reached through one. */
    int child;
    int parent;                    /* the member it is a child of, -1 this node */
    int sub_lo, sub_hi;            /* its descendants: members[sub_lo, sub_hi) */
    int height;                    /* levels below it, 0 for a leaf */
    double restore_t0, restore_t1; /* restart: its tasks' restore (mono_ms_f), 0 unknown */
};

enum gen_kind {
    GEN_CHECKPOINT, /* the whole protocol, to a new generation */
    GEN_RESTORED,   /* after a restore: rebuild, connect, resume */
};

struct gen {
    const struct conf *conf;
    enum gen_kind kind;
    char job[IDENT_MAX + 1];
    uid_t uid;
    gid_t gid;
    int slurm;           /* a Slurm job (jobs.h): a failed restart may requeue it */
    int size;            /* ranks in the job */
    const char *trigger; /* "manual", "periodic", ... */
    int leave_running;   /* CRIU --leave-running (periodic) or not (ending) */
    int ntasks;
    struct gen_task *tasks;
    pid_t daemon;        /* the ibcrd that started this worker */
    struct peerauth *pa; /* MUNGE, for the other nodes */
    int nmembers;        /* the nodes this one leads: the leader's are the
                               other nodes of the job, a member's those of
                               its subtree (fanout.h) */
    struct gen_member *members;
    int fanout;                        /* at most this many children per node (conf) */
    int height;                        /* levels below this node */
    int levels;                        /* levels below the leader (its height) */
    double t_fan;                      /* when the last phase's requests went out */
    double restore_t0, restore_t1;     /* restart: this node's tasks' restore */
    int member_lfd;                    /* member: where the leader reaches this worker */
    struct peerauth_session ses;       /* member: its session with the leader */
    int progress_fd;                   /* whoever asked wants "progress" messages, or -1 */
    int report_fd;                     /* the daemon hears its phase and end here (worker.h), or -1;
                               a member's worker reads "A" on it: abort (fanout.h) */
    int abort_asked;                   /* member: it did (or the daemon is gone: -1) */
    int member;                        /* this is a member node's worker (gen_member_serve) */
    unsigned rid;                      /* leader: the last request id given (fanout.c) */
    int epfd;                          /* leader: epoll over the members' connections */
    double t0, t0_wall;                /* leader: its start, mono_ms_f () and epoch s */
    double fan_cpu_ms;                 /* leader: CPU spent sending and reading requests */
    double begin_cpu_ms;               /* leader: of which for gen-begin (MUNGE) */
    struct gen_span span[PHASE_COUNT]; /* leader: this node's own timeline */

    /* Filled while it runs. */
    int gen;                  /* generation number, once begun */
    int phase;                /* its enum gen_phase now (gen_enter), -1 before the first */
    enum gen_phase err_phase; /* the phase g->err names */
    int quiesced, released, dumped;
    char staging[4096]; /* <staging>/<job>/gen-N */
    double t_quiesce, t_drain, t_release, t_dump, t_rebuild, t_resume, t_commit;
    int drain_rounds;
    char drain_ud_lost[256]; /* UD datagrams the drain took as lost, or "" */
    uint64_t bytes;
    uint64_t copy_done, copy_total; /* this node's copy to storage */
    double progress_last;           /* when the last progress message went */
    char err[2048];
    int requeue; /* restart, a Slurm job: its next run restores every rank
                    from one generation (restored_from_one): requeue it */
};

/* Leader (or a job on one node): run the generation.  0 when committed
 * (or resumed, for GEN_RESTORED);
 * -1 with g->err saying what failed, in which phase, and what became of
 * the job. */
int gen_run (struct gen *g);

/* The reply for whoever asked: "ok" with generation, bytes, phase times,
 * or "error" with g->err. */
json_object *gen_reply (const struct gen *g, int rc);

/* The worker's reports to the daemon on g->report_fd (worker.h), each a
 * proto.h frame under GEN_REPORT_CAP bytes:
 *   "worker-phase" {job, gen, phase}    it entered phase (phase.h's name)
 *   "worker-end" {job, gen, result, phase?, error?}   its last message:
 *       result "committed" (this node's part of a committed generation),
 *       "resumed" (a restart's rebuild), or "aborted", then with the
 *       phase that failed first and g->err.
 * Bounded so that the daemon's reader never holds more. */
#define GEN_REPORT_CAP 8192

/* Send the "worker-end" report for the outcome rc (gen_run's or
 * gen_member_serve's); nothing when g->report_fd < 0. */
void gen_report_end (struct gen *g, int rc);

/* Member: serve the leader's phase requests on g->member_lfd until the
 * generation ends (gen_member.c).  0 when it committed. */
int gen_member_serve (struct gen *g);

/* Manifest entries of this node's tasks, taken before the dump: what a
 * restart must hand back fresh (phase_begin.c).  The daemon's too. */
json_object *genl_tasks_json (struct gen *g);

/* The phases themselves, and what they share, are gen_int.h's. */

#endif
