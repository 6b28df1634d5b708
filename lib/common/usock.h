/* usock.h - the local unix socket between ibcrd and its clients (libibcr,
 * ibcr, the SPANK plugin): connecting, listening, peer identity, and one
 * request/reply exchange.
 *
 * Identity always comes from the kernel (SO_PEERCRED), never from what a
 * client writes.
 */
#ifndef IBCR_COMMON_USOCK_H
#define IBCR_COMMON_USOCK_H

#include <stddef.h>
#include <sys/types.h>
#include <json-c/json.h>

/* Bind and listen on path (which must not exist: the caller removes a
 * stale one under its lock), mode 0666 so every user's tasks can connect.
 * Returns the fd (close-on-exec), or -1 with errno. */
int usock_listen (const char *path, int backlog);

/* Connect to path; the fd is close-on-exec.  -1 with errno (ENOENT: no
 * socket there; ECONNREFUSED: nobody listening; ENAMETOOLONG). */
int usock_connect (const char *path);

/* uid, gid and pid of the process at the other end. 0 or -1+errno. */
int usock_peercred (int fd, uid_t *uid, gid_t *gid, pid_t *pid);

/* The socket a client should use: IBCR_SOCKET if set, else 'configured'. */
const char *usock_client_path (const char *configured);

/* Send req and wait up to timeout_ms (negative: forever) for the reply.
 * 0 and *reply (which may be of type "error": the caller reports it), or
 * -1 with errno (ECONNRESET when the daemon closed without a reply). */
int usock_request (int fd, json_object *req, int timeout_ms, json_object **reply);

#endif
