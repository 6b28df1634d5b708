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

/* Before the first request / after the last: no connection is open. */
void fan_init (struct gen *g);
void fan_fini (struct gen *g);

/* "gen-begin" to every member's ibcrd at once, each with a new session
 * key: each starts a worker for this generation and answers its port and
 * its tasks' manifest entries (into m->wport, m->tasks); then the session
 * with each worker is opened.  -1 with g->err naming the first node that
 * failed. */
int fan_begin (struct gen *g, uint64_t timeout_ms);

/* "gen-phase" {phase, extra's keys} on the session of every member that
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
