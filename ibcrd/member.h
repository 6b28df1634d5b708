/* member.h - node membership of multi-node jobs: a member node (one that
 * holds ranks but not rank 0) joins its job's leader, and the leader
 * records which nodes hold which ranks; the peer requests about jobs are
 * routed here.
 *
 * Contract:
 * - Identities of peers come from MUNGE (peer.h), never from a message.
 * - A join is retried while the leader has not registered rank 0 yet, so
 *   ranks may start in any order; refused for good on any other error.
 * - Layers: uses the request layer (request.h), jobs and schedule.h (a
 *   member's part of a generation); nothing calls it but the loop's peer
 *   listener and the registration hook.
 */
#ifndef IBCRD_MEMBER_H
#define IBCRD_MEMBER_H

#include <json-c/json.h>

#include "jobs.h"

struct server;

/* After a registration: a member's rank joins the leader. */
void member_registered (struct server *s, struct job *job, json_object *req);
void member_join_leader (struct server *s, struct job *job, int rank);

/* Peer requests about jobs ("join", "gen-begin"); for peer_set_handler. */
json_object *member_peer_request (void *arg, json_object *msg, const char *addr);

#endif
