/* ucxtsc.c - UCX choosing its clock without libibcr (t1104).
 *
 * Preloaded ahead of libibcr, this module's ucs_x86_init_tsc_freq is the
 * one UCX calls: it runs libucs's own, which picks the CPU's time-stamp
 * counter on this machine, as a UCX would that calls it inside libucs
 * instead of through the PLT.  libibcr then cannot choose the wall clock,
 * and must say so at the first ibv_open_device (libibcr(7),
 * IBCR_UCX_CLOCK).
 */
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>

void ucs_x86_init_tsc_freq (void);

void ucs_x86_init_tsc_freq (void)
{
    void *ucs = dlopen ("libucs.so.0", RTLD_LAZY | RTLD_NOLOAD);
    void (*own) (void) = ucs ? (void (*) (void))dlsym (ucs, "ucs_x86_init_tsc_freq") : NULL;

    if (own)
        own ();
    if (ucs)
        dlclose (ucs);
}
