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
#include <stdint.h>
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
int peerauth_unwrap (struct peerauth *pa, json_object *env, json_object **body, uid_t *uid,
                     char *err, size_t len);

/* --- sessions ------------------------------------------------------------
 *
 * A generation's leader and each member worker talk over one connection
 * for the whole generation.  The session's key (PEERAUTH_KEY_LEN random
 * bytes, a fresh one per member and generation) travels once, inside a
 * MUNGE credential (the leader's "gen-begin": encrypted with the cluster
 * key and decodable only by root's ibcrd, peerauth_create).  Each message
 * on the connection is then
 *   {"version":1,"type":"peer-s","seq":N,"body":"<inner JSON>","mac":"<hex>"}
 * with mac = HMAC-SHA256(key, direction | seq as 8 bytes big-endian |
 * body).  The direction byte ('L' from the leader, 'M' from the member)
 * stops a message from being reflected back to its sender; seq, 1 then
 * +1 per message in each direction and checked exactly, stops one from
 * being replayed, dropped or reordered on the connection.  A key never
 * leaves the two processes and dies with the generation. */
#define PEERAUTH_KEY_LEN 32

struct peerauth_session {
    unsigned char key[PEERAUTH_KEY_LEN];
    uint64_t sent, got; /* last seq sent, last seq accepted */
    char self, peer;    /* direction bytes */
};

/* A new random key.  0, or -1 with errno. */
int peerauth_key_new (unsigned char *key);

/* Key to 2 * PEERAUTH_KEY_LEN hex digits + NUL, and back (-1 if not). */
void peerauth_key_hex (const unsigned char *key, char *hex);
int peerauth_key_parse (const char *hex, unsigned char *key);

/* leader: 1 on the leader's side, 0 on the member's. */
void peerauth_session_init (struct peerauth_session *s, const unsigned char *key, int leader);
void peerauth_session_wipe (struct peerauth_session *s);

/* The envelope carrying body (not consumed) as the session's next
 * message, or NULL with errno and err. */
json_object *peerauth_seal (struct peerauth_session *s, json_object *body, char *err, size_t len);

/* Check the session's next message and return its inner message.  -1
 * with errno EACCES (bad MAC, wrong direction or sequence, not a session
 * message) or EPROTO (malformed) and err. */
int peerauth_open (struct peerauth_session *s, json_object *env, json_object **body, char *err,
                   size_t len);

#endif
