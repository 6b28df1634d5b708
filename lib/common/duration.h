/* duration.h - parse and print time spans such as "90s", "30m", "1h30m".
 *
 * Shared by ibcrd.conf (timeouts) and the --checkpoint-ib / --interval
 * options, so that every place accepts exactly the same spellings.
 */
#ifndef IBCR_COMMON_DURATION_H
#define IBCR_COMMON_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parse a duration into milliseconds.  Accepted: one or more
 * <digits><unit> groups with units "ms", "s", "m", "h", "d" in any order
 * without repeats (e.g. "1h30m", "90s", "250ms"), or bare digits meaning
 * seconds.  Zero is allowed; the caller decides whether it makes sense.
 * 0, or -1 with errno EINVAL (bad spelling) or ERANGE (too large). */
int duration_parse (const char *s, uint64_t *ms);

/* Print ms as the shortest exact spelling ("1h30m", "250ms", "0s") into
 * buf; returns buf. */
char *duration_format (uint64_t ms, char *buf, size_t len);

#endif
