/* peer.h - ibcrd's TCP listener for other nodes' ibcrd's, and the client
 * side of one request to a peer.
 *
 * Every message in both directions is a MUNGE envelope (peerauth.h); a
 * message with a missing, bad, expired or replayed credential, from a uid
 * other than root or ours, or addressed to another node, is refused with an
 * error reply and logged, and the listener serves on.
 */
#ifndef IBCRD_PEER_H
#define IBCRD_PEER_H

#include <poll.h>
#include <json-c/json.h>

#include "common/conf.h"
#include "common/peerauth.h"

struct peer;

/* Listen on conf->peer_address:peer_port (NULL with errno and err). */
struct peer *peer_create (struct conf *conf, struct peerauth *pa, char *err, size_t len);
void peer_destroy (struct peer *p);
void peer_set_conf (struct peer *p, struct conf *conf);

/* Requests other than ping go to fn (the daemon's job table), with the
 * sender's address ("ip:port") for replies that need one; fn returns the
 * inner reply (owned by the caller). */
typedef json_object *(*peer_handler_f) (void *arg, json_object *msg, const char *addr);
void peer_set_handler (struct peer *p, peer_handler_f fn, void *arg);

/* The port actually bound (useful with peer_port = any). */
int peer_port (struct peer *p);

int peer_pollfds (struct peer *p, struct pollfd *pfd, int max);

/* Close connections idle for peer_idle_timeout; ms until the next one may
 * be due (or the listener comes back after EMFILE), or -1. */
int peer_timer (struct peer *p);
void peer_dispatch (struct peer *p, struct pollfd *pfd, int n);

/* A blocking TCP connection to host:port, made within timeout_ms; the fd,
 * or -1 with errno and a message in err. */
int peer_connect (const char *host, int port, int timeout_ms, char *err, size_t len);

/* Send 'body' (its "to" is set to 'node') to the ibcrd at host:port and
 * return its authenticated inner reply (which may be of type "error").
 * -1 with errno and a message in err. */
int peer_request (struct peerauth *pa, const char *host, int port, const char *node,
                  json_object *body, int timeout_ms, json_object **reply, char *err, size_t len);

#endif
