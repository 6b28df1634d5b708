/* vw_oob.h - the out-of-band TCP channel of the verbs workload tools.
 *
 * Verbs peers must learn each other's LID/GID/QPN/PSN/rkey before any verbs
 * traffic can flow; these tools exchange them as text lines over a TCP
 * connection of their own, as ibv_rc_pingpong does.  Text keeps a failing
 * exchange readable in a test log.
 */
#ifndef VW_OOB_H
#define VW_OOB_H

#include <stddef.h>

/* Server: listen on port ("0" = any); *bound gets the real port.
 * Returns the listening fd or -1 with a message in err. */
int vw_oob_listen (const char *port, int *bound, char *err, size_t errlen);

/* Accept one client within timeout_ms.  Returns fd or -1 with err. */
int vw_oob_accept (int lfd, int timeout_ms, char *err, size_t errlen);

/* Client: connect to host:port, retrying while the server is not yet up,
 * for up to timeout_ms.  Returns fd or -1 with err. */
int vw_oob_connect (const char *host, const char *port, int timeout_ms, char *err, size_t errlen);

/* Send one line (a newline is appended).  0 or -1 with errno. */
int vw_oob_send (int fd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Receive one line (newline stripped) within timeout_ms.  0, or -1 with
 * errno (ETIMEDOUT, ECONNRESET on EOF, EMSGSIZE for an over-long line). */
int vw_oob_recv (int fd, char *buf, size_t len, int timeout_ms);

#endif
