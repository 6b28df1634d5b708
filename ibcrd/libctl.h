/* libctl.h - ibcrd's side of libibcr's control connections: one request
 * to every task of a node and the collection of their replies, within a
 * deadline (lib/ibcr/ckpt_proto.h defines the messages).
 *
 * Runs in a generation's worker process, which owns these connections for
 * the generation; the daemon's loop does not read them meanwhile.
 */
#ifndef IBCRD_LIBCTL_H
#define IBCRD_LIBCTL_H

#include <stddef.h>
#include <sys/types.h>
#include <json-c/json.h>

/* Send a fresh message of 'type' (with every member of extra, which may be
 * NULL, and "gen") to each of the n fds, then wait until each answered with
 * a message of type 'want' or timeout_ms passed.  replies[i] (if replies
 * is not NULL) gets fd i's reply, owned by the caller.  -1 with errno and
 * a message naming the rank (ranks[i]) and process (pids[i], when pids
 * is not NULL and it is known) and what went wrong in err: an error
 * reply (its text), a wrong type, a closed connection or the timeout.
 * On failure no reply is left allocated. */
int libctl_round (const int *fds, const int *ranks, const pid_t *pids, int n, const char *type,
                  json_object *extra, int gen, const char *want, json_object **replies,
                  int timeout_ms, char *err, size_t len);

#endif
