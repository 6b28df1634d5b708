/* proto.h - the wire format of every ibcr message.
 *
 * One frame = a 4-byte big-endian length, then exactly that many bytes of
 * one JSON object (json-c).  The object always carries "version" (an
 * integer, PROTO_VERSION today) and "type" (a string); everything else
 * depends on the type.  The same framing is used on the local unix socket
 * (libibcr and ibcr <-> ibcrd) and between ibcrd's over TCP.
 *
 * A receiver enforces a size cap before it allocates anything, so a peer
 * can never make it allocate more than the cap.  This module never trusts
 * the payload for identity: who is speaking comes from SO_PEERCRED (local)
 * or MUNGE (peers), never from here.
 */
#ifndef IBCR_COMMON_PROTO_H
#define IBCR_COMMON_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#define PROTO_VERSION 1
/* Default cap for one frame's payload: generous for id tables of big jobs,
 * small enough that a hostile client cannot exhaust a node's memory. */
#define PROTO_DEFAULT_CAP (1024 * 1024)
#define PROTO_HDR_LEN 4

/* Send one frame: a full write of header and payload, restarted on EINTR
 * and short writes; never raises SIGPIPE (EPIPE comes back instead).
 * 0, or -1 with errno (EINVAL: msg is not an object or lacks version or
 * type; EMSGSIZE: over 4 GiB). */
int proto_send (int fd, json_object *msg);

/* Receive one frame on a blocking fd.
 *   0 and *msg set: a well-formed message (caller owns it: json_object_put);
 *   0 and *msg == NULL: clean end of file before any byte of a frame;
 *   -1, errno EPROTO: payload is not valid JSON, not an object, or lacks an
 *        integer "version" or a string "type" (the frame was consumed, so
 *        the stream stays in sync);
 *   -1, errno EMSGSIZE: announced length is over 'cap' (the payload was
 *        NOT read: the stream is out of sync and should be closed);
 *   -1, errno ECONNRESET: end of file in the middle of a frame;
 *   -1, other errno: from read(2).
 * cap == 0 means PROTO_DEFAULT_CAP. */
int proto_recv (int fd, size_t cap, json_object **msg);

/* Like proto_recv, but gives up with ETIMEDOUT when no complete frame
 * arrived within timeout_ms (a negative timeout waits forever). */
int proto_recv_timeout (int fd, size_t cap, int timeout_ms, json_object **msg);

/* Decode one payload already in memory (used by proto_recv and by the
 * incremental reader below).  0 and *msg, or -1 with errno EPROTO. */
int proto_decode (const char *buf, size_t len, json_object **msg);

/* A new message {"version":1,"type":type}, or NULL with errno. */
json_object *proto_new (const char *type);

/* The "type" string of a message (owned by msg), or NULL. */
const char *proto_type (json_object *msg);

/* The "version" of a message, or -1 when absent or not an integer. */
int proto_version (json_object *msg);

/* A reply of type "error":
 *   {"version":1,"type":"error","what":what,"errno":errnum,
 *    "errname":"ENOENT","message":"<fmt...>"}
 * 'what' names the request or object concerned; the message says what was
 * wrong and what to do.  NULL only when out of memory. */
json_object *proto_error (const char *what, int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Accessors for a reply: a string, an integer or a boolean member; the
 * default when absent or of another type. */
const char *proto_get_str (json_object *msg, const char *key, const char *dflt);
int64_t proto_get_int (json_object *msg, const char *key, int64_t dflt);
int proto_get_bool (json_object *msg, const char *key, int dflt);

/* Convenience setters (0, or -1 with errno ENOMEM). */
int proto_set_str (json_object *msg, const char *key, const char *val);
int proto_set_int (json_object *msg, const char *key, int64_t val);
int proto_set_bool (json_object *msg, const char *key, int val);

/* Incremental reader for a poll loop (ibcrd).  On sockets it never blocks
 * (MSG_DONTWAIT), so the fd itself may stay blocking for writes; other fds
 * must be O_NONBLOCK.  It
 * buffers at most one frame; a frame over the cap is skipped without being
 * stored, so one oversized message does not end the conversation. */
struct proto_reader {
    size_t cap;
    unsigned char hdr[PROTO_HDR_LEN];
    size_t hdr_got;
    uint32_t len; /* payload length once the header is complete */
    char *buf;    /* payload being read (NULL while skipping) */
    size_t got;   /* payload bytes read or skipped so far */
    int skipping; /* announced length was over cap */
    int not_sock; /* fd is a pipe or file: read(2), and it may block */
};

void proto_reader_init (struct proto_reader *r, size_t cap);
void proto_reader_fini (struct proto_reader *r);

/* Read what is available on fd (one read(2) at most per call) and return:
 *   1 and *msg set: a complete message;
 *   0: need more data (EAGAIN), call again when fd is readable;
 *   -1 errno EPROTO: a complete but invalid frame (consumed, stream ok);
 *   -1 errno EMSGSIZE: a frame over the cap was announced; the reader will
 *      skip its payload silently, keep calling;
 *   -1 errno 0 : clean end of file between frames;
 *   -1 errno ECONNRESET: end of file mid-frame; other errno from read(2). */
int proto_reader_read (struct proto_reader *r, int fd, json_object **msg);

/* Human name of an errno value ("ENOENT"), or "E?" for unknown ones. */
const char *proto_errname (int errnum);

#endif
