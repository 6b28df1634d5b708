/* server.h - ibcrd's local unix socket: accepting clients, reading framed
 * requests without blocking the loop, identifying each client with
 * SO_PEERCRED and answering.
 *
 * Any malformed, oversized, wrong-version or unknown-type message gets an
 * error reply and is logged; the daemon serves on.  Nothing here trusts an
 * identity written in a message.
 */
#ifndef IBCRD_SERVER_H
#define IBCRD_SERVER_H

#include <poll.h>
#include <sys/types.h>
#include <time.h>

#include "common/conf.h"
#include "common/peerauth.h"
#include "jobs.h"

struct server;

/* Bind conf->socket (the caller holds the lock and removed a stale one).
 * NULL with errno on failure. */
struct server *server_create (struct conf *conf, struct jobs *jobs);
void server_destroy (struct server *s);

/* Replace the configuration after a SIGHUP reload (the socket stays). */
void server_set_conf (struct server *s, struct conf *conf);

/* Fill up to max pollfds with the listener and clients; returns the count. */
int server_pollfds (struct server *s, struct pollfd *pfd, int max);

/* Act on the revents of the pollfds filled by server_pollfds. */
void server_dispatch (struct server *s, struct pollfd *pfd, int n);

int server_nclients (struct server *s);

/* A generation's worker ended (status 0: committed or resumed); the
 * connections it owned are read here again. */
void server_worker_done (struct server *s, pid_t pid, int status);

/* Start the periodic generations that are due; returns the ms until the
 * next one is due, or -1 when none is scheduled. */
int server_timer (struct server *s);

/* MUNGE for talking to the other nodes of multi-node jobs. */
void server_set_peerauth (struct server *s, struct peerauth *pa);

/* Peer requests about jobs ("join", "gen-begin"); for peer_set_handler. */
json_object *server_peer_request (void *arg, json_object *msg, const char *addr);

/* A final generation of job for a Slurm trigger ("timelimit", "drain",
 * "preempt", "cancel"; slurm_hook.c), the job left running.  0, or -1
 * with errno: EINVAL not the job's leader, EBUSY a generation runs,
 * EAGAIN not every rank registered yet. */
int server_start_trigger (struct server *s, struct job *job, const char *trigger);

/* The peer port actually bound, for status replies (0: none). */
void server_set_peer_port (struct server *s, int port);

#endif
