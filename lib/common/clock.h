/* clock.h - the monotonic clock in milliseconds, for deadlines, timeouts
 * and the timelines of generations (never wall time: it does not jump). */
#ifndef IBCR_COMMON_CLOCK_H
#define IBCR_COMMON_CLOCK_H

/* CLOCK_MONOTONIC in whole milliseconds. */
long mono_ms (void);

/* The same with sub-millisecond precision. */
double mono_ms_f (void);

#endif
