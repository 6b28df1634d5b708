/* fanout.h - the leader's requests to the member nodes of a generation,
 * sent to all of them at once and awaited together (poll over their
 * connections), so that a phase lasts as long as its slowest node, not
 * as the sum of them.
 *
 * Every request carries a request id ("rid"); a reply to an earlier
 * request (one the leader stopped waiting for when the phase failed) is
 * recognised and dropped.  A member that closes its connection, answers
 * an error, or stays silent past the phase's timeout fails the phase,
 * named in g->err; one that died or went silent is marked lost: its
 * session is closed, which is its abort, and it is left out of the
 * abort's requests, so the abort itself takes bounded time.
 */
#ifndef IBCRD_FANOUT_H
#define IBCRD_FANOUT_H

#include <json-c/json.h>

#include "gen.h"

/* The tree (issue 13): a node asks at most g->fanout children directly;
 * each child leads a contiguous run of g->members (sub_lo..sub_hi), split
 * the same way below it, so a phase takes about log_k(N) hops on its
 * critical path.  Each member's worker relays what it is asked to its own
 * children (gen_member.c) and merges their answers into its own: their
 * errors (naming the node that failed, "relayed"), their reports and ids,
 * and their timeline ("tl", fan_tl_json).  A child that fails is lost
 * with everything below it; a worker whose session with its parent ends
 * closes its children's, which is their abort.  A node waits for a child
 * with levels below it longer, by fan_margin_ms, so that the child can
 * name a lost node of its own first.  With fanout >= the number of
 * members, every member is a child of the leader: the flat fan-out.
 *
 * fan_shape: g->members' children and subtrees, and g->height. */
void fan_shape (struct gen *g);

/* What waiting on this node's children adds to phase's timeout. */
double fan_margin_ms (const struct gen *g, enum gen_phase phase);

/* The spans changed (member->touched) of the nodes this one leads, for
 * its answer to its parent: times relative to base, when the request
 * came (whole spans: the parent places them after its own request went
 * out, whenever they come).  fan_untouch: they were told. */
json_object *fan_tl_json (const struct gen *g, double base);
void fan_untouch (struct gen *g);

/* Member: its daemon said the leader aborted (sched_member_abort): 1
 * once it did; reads the report channel when it is readable. */
int fan_abort_heard (struct gen *g);

/* Aborting (the leader, or a member whose generation ends undone):
 * every node below a lost child, that no message of the tree reaches any
 * more, is told through its daemon ("gen-abort", MUNGE) to undo its part
 * (sched_member_abort), all at once. */
void fan_abort_orphans (struct gen *g);

/* Before the first request / after the last: no connection is open. */
void fan_init (struct gen *g);
void fan_fini (struct gen *g);

/* "gen-begin" to every child's ibcrd at once, each with a new session
 * key and the list of the nodes it leads: each starts a worker for this
 * generation and answers its port and its tasks' manifest entries (into
 * m->wport, m->tasks), and on a restart when its tasks were restored;
 * then the session with each worker is opened, and the children that
 * lead nodes are asked "begin" on it: they do the same below them, and
 * answer their subtree's tasks (appended to m->tasks) and timeline.  -1
 * with g->err naming the first node that failed. */
int fan_begin (struct gen *g, uint64_t timeout_ms);

/* "gen-phase" {phase, extra's keys} on the session of every child that
 * is not lost.  -1 with g->err when one cannot be sent to (it is marked lost;
 * those already sent to stay awaited). */
int fan_send (struct gen *g, enum gen_phase phase, json_object *extra);

/* Wait until every member sent to has answered, or the first failure,
 * or timeout_ms.  replies[i] (if not NULL) gets member i's reply, owned
 * by the caller, also when it fails (NULL for a member that did not
 * answer): fan_put() them.  -1 with g->err. */
int fan_wait (struct gen *g, enum gen_phase phase, json_object **replies, uint64_t timeout_ms);
void fan_put (struct gen *g, json_object **replies);

#endif
