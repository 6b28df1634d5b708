/* server.h - ibcrd's local unix socket: accepting clients, reading framed
 * requests without blocking the loop, identifying each client with
 * SO_PEERCRED and answering.
 *
 * Any malformed, oversized, wrong-version or unknown-type message gets an
 * error reply and is logged; the daemon serves on.  Nothing here trusts an
 * identity written in a message.
 *
 * The bottom layer of the daemon: the modules that handle requests
 * (request.h) add their types to it; it calls none of them by name.
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

/* A SIGHUP was handled: err NULL when the file was taken, else why it
 * was refused.  Status replies show the count and the last refusal
 * ("reloads", "reload_error"), so an administrator (and a test) sees
 * what became of a SIGHUP without reading the log. */
void server_reloaded (struct server *s, const char *err);

/* Fill up to max pollfds with the listener and clients; returns the count. */
int server_pollfds (struct server *s, struct pollfd *pfd, int max);

/* Act on the revents of the pollfds filled by server_pollfds. */
void server_dispatch (struct server *s, struct pollfd *pfd, int n);

int server_nclients (struct server *s);

/* MUNGE for talking to the other nodes of multi-node jobs. */
void server_set_peerauth (struct server *s, struct peerauth *pa);

/* The peer port actually bound, for status replies (0: none). */
void server_set_peer_port (struct server *s, int port);

#endif
