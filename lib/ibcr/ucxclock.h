/* ucxclock.h - UCX reads the wall clock in a protected process (ucxclock.c).
 *
 * libibcr defines ucs_x86_init_tsc_freq, the function UCX calls once, the
 * first time it wants the time, to choose its clock: libibcr's answer is
 * gettimeofday instead of the CPU's time-stamp counter, unless
 * IBCR_UCX_CLOCK=tsc.  ucxclock_check() runs when a device is opened
 * (UCX does so in ucp_init, before any endpoint or timer exists) and warns
 * once when UCX chose the counter without asking libibcr.
 */
#ifndef IBCR_UCXCLOCK_H
#define IBCR_UCXCLOCK_H

void ucxclock_check (void);

#endif
