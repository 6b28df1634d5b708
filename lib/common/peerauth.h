/* peerauth.h - MUNGE authentication of every message between ibcrd's on
 * different nodes, as Slurm authenticates its own.
 *
 * A peer message travels as {"version":1,"type":"peer","cred":"MUNGE:..."}
 * where the credential's payload is the inner message itself (JSON text):
 * munged MACs it with the cluster key, so the body cannot be altered
 * without the credential failing, and no separate hash is needed.  munged
 * refuses a credential decoded before (replay) or past its time-to-live.
 * The inner message names its destination node ("to"), so a credential
 * captured on its way to one node cannot be replayed to another node (whose
 * munged would not know it).
 */
#ifndef IBCR_COMMON_PEERAUTH_H
#define IBCR_COMMON_PEERAUTH_H

#include <stddef.h>
#include <sys/types.h>
#include <json-c/json.h>

/* Inner messages are capped so that the credential (base64, plus munge's
 * header) stays under PROTO_DEFAULT_CAP. */
#define PEERAUTH_MAX_BODY (700 * 1024)

struct peerauth;

/* munge_socket NULL: libmunge's default socket. */
struct peerauth *peerauth_create (const char *munge_socket);
void peerauth_destroy (struct peerauth *pa);

/* The envelope carrying body (not consumed), or NULL with errno and a
 * message in err (munged unreachable, body too large). */
json_object *peerauth_wrap (struct peerauth *pa, json_object *body, char *err, size_t len);

/* Check an envelope and return its inner message (a valid proto message)
 * and the sender's uid.  -1 with errno EACCES and a message in err when the
 * credential is missing, invalid, expired, replayed or unauthorized, EPROTO
 * when the envelope or inner message is malformed, EIO when munged cannot
 * be reached. */
int peerauth_unwrap (struct peerauth *pa, json_object *env, json_object **body,
                     uid_t *uid, char *err, size_t len);

#endif
