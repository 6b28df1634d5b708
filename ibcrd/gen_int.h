/* gen_int.h - inside a generation's worker only: what gen.c (the
 * sequence), the phase_*.c files (one per phase) and gen_member.c (a
 * member's worker) share.  Not for the daemon's other modules: they use
 * gen.h.
 *
 * Each phase X is, in phase_X.c:
 *   gen_X    the leader's part, job-wide: this node's part and the
 *            members' at once (gen_step, gen_phase_all), and what is
 *            gathered from them;
 *   genl_X   this node's part, on its own tasks (the leader's and a
 *            member's worker's alike);
 *   genm_X   a member worker's handling, where it is more than relaying
 *            the request to the nodes it leads and doing genl_X
 *            (gen_member.c's serve_phase).
 * No decision to abort is taken in genl_X or genm_X: each reports, and
 * the leader decides (gen.c).
 */
#ifndef IBCRD_GEN_INT_H
#define IBCRD_GEN_INT_H

#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "gen.h"

/* --- the phases, leader's part (phase_*.c) --- */
int gen_begin (struct gen *g);
int gen_quiesce (struct gen *g);
int gen_drain (struct gen *g);
int gen_release (struct gen *g);
int gen_dump (struct gen *g);
int gen_rebuild (struct gen *g); /* rebuild, then connect */
int gen_resume (struct gen *g);
int gen_commit (struct gen *g, json_object *tasks); /* copy, then commit */
void gen_abort (struct gen *g);

/* --- this node's part of each phase (phase_*.c; genl_tasks_json, begin's,
 * is in gen.h) --- */
int genl_quiesce (struct gen *g);
int genl_drain_round (struct gen *g, int round, json_object *reports);
int genl_release (struct gen *g);
int genl_dump (struct gen *g);
int genl_rebuild_ids (struct gen *g, json_object *ids);
int genl_connect (struct gen *g, json_object *procs);
int genl_resume (struct gen *g);
int genl_copy (struct gen *g);
void genl_cleanup (struct gen *g, int committed);
void genl_undo (struct gen *g);

/* --- a member's worker (gen_member.c, phase_*.c) --- */

/* Where its session with the leader stands. */
enum { MEMBER_OK, MEMBER_ENDED, MEMBER_ABORTED };

/* The longest this node may wait on its children in phase. */
uint64_t genm_timeout (const struct gen *g, enum gen_phase phase);

int genm_begin (struct gen *g, json_object *o, int *relayed);
void genm_end (struct gen *g, int *state);
void genm_abort (struct gen *g, json_object *m, json_object *x, int *state);
int genm_give_up (struct gen *g, const char *why);

/* --- shared helpers (gen_common.c) --- */

/* g->err = "PHASE: why" (and g->err_phase); returns -1. */
int gen_fail (struct gen *g, enum gen_phase phase, const char *why);
void gen_append (char *dst, size_t len, size_t *off, const char *s);

/* The ibcrd that started this worker died: -1 with g->err (its work in
 * phase is void), else 0. */
int gen_daemon_gone (struct gen *g, enum gen_phase phase);

/* This node's worker is now in phase: g->phase, and the daemon is told
 * (worker.h's report) when it changed. */
void gen_enter (struct gen *g, enum gen_phase phase);

/* Tell whoever asked (g->progress_fd) that phase runs, done of total
 * bytes (0 and 0 when it moves no bytes).  At most every 200 ms unless
 * force (a new phase); a client gone is not an error. */
void gen_progress (struct gen *g, enum gen_phase phase, uint64_t done, uint64_t total, int force);

/* Leader: this node's part fn of phase, in its timeline. */
int gen_local_part (struct gen *g, enum gen_phase phase, int (*fn) (struct gen *));

/* Leader: one phase on every node at once: the members' requests first,
 * this node's part (local, if any) while they work, then their replies
 * together; replies[i] (if not NULL) gets member i's (fan_put them, also
 * on failure).  -1 with g->err naming the node on the first failure. */
int gen_phase_all (struct gen *g, enum gen_phase phase, int (*local) (struct gen *),
                   json_object *extra, json_object **replies, uint64_t timeout_ms);

/* Leader: append every element of the replies' arrays key to out (and
 * put the replies). */
void gen_gather (struct gen *g, json_object **replies, const char *key, json_object *out);

/* Leader: a phase that asks every process one thing and gathers nothing,
 * on every node at once; its duration into *took. */
int gen_step (struct gen *g, enum gen_phase phase, int (*local) (struct gen *), uint64_t timeout_ms,
              double *took);

/* This node: one request of type to every process of its tasks that uses
 * verbs, each answering want; ctl_gather appends the replies to out.  0,
 * or -1 with g->err naming phase. */
int ctl_phase (struct gen *g, enum gen_phase phase, const char *type, json_object *extra,
               const char *want, uint64_t timeout_ms);
int ctl_gather (struct gen *g, enum gen_phase phase, const char *type, json_object *extra,
                const char *want, uint64_t timeout_ms, json_object *out);

/* "file[MNT:INO]", CRIU's name for fd of pid when that is a file or a
 * device (begin's manifest entry, dump's --external); 0, or -1. */
int stdio_file_key (pid_t pid, int fd, char *buf, size_t len);

/* A task in a mount namespace of its own (taskns.h): 1 when so. */
int task_in_ns (const struct gen_task *t);

#endif
