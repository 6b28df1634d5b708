/* fds.h - descriptors a child must not inherit. */
#ifndef IBCR_COMMON_FDS_H
#define IBCR_COMMON_FDS_H

/* Close every fd above 2 but those in keep[0..nkeep) (any order, may
 * repeat, negative entries ignored).  Meant for a child between fork and
 * exec, where nothing else runs; errors are ignored: an fd that cannot be
 * closed was not open. */
void fds_close_except (const int *keep, int nkeep);

#endif
