/* expand.h - per-node expansion of paths from ibcrd.conf and plugstack.conf.
 *
 * Several nodes may share one filesystem (as in the test clusters), so a
 * configured path may contain %n (the Slurm node name) and %h (the host
 * name) to give each node its own socket, staging and logs.
 */
#ifndef IBCR_COMMON_EXPAND_H
#define IBCR_COMMON_EXPAND_H

#include <stddef.h>

/* Expand %n -> node, %h -> host, %% -> %.  node or host NULL means the
 * short host name from gethostname(2).  Any other %x is an error (EINVAL)
 * with the offending two characters copied into bad[3] when given.
 * Returns a malloc'd string, or NULL with errno. */
char *expand_path (const char *in, const char *node, const char *host, char bad[3]);

/* The short host name (up to the first dot) into buf. 0 or -1+errno. */
int expand_hostname (char *buf, size_t len);

#endif
