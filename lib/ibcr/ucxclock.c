/* ucxclock.c - UCX reads the wall clock in a protected process, so that a
 * restore on another host cannot make its clock run backwards.
 *
 * UCX 1.13 on x86_64 times everything (the UD peer timeout, the keepalive,
 * its timer wheel) with rdtsc, the CPU's time-stamp counter, and compares
 * times as unsigned differences.  Counters of two hosts are unrelated: a
 * rank restored on a host whose counter is behind the dumped host's sees
 * `now - then` wrap to centuries, and UCX declares every peer dead.  The
 * wall clock is kept close across hosts by NTP, so after a restore it has
 * only moved forward by the downtime, which the plugin's 30-day
 * UCX_UD_TIMEOUT covers.
 *
 * UCX chooses its clock once: the first time any of its libraries wants
 * the time while the exported ucs_arch_x86_enable_rdtsc is UCS_TRY, it
 * calls ucs_x86_init_tsc_freq() through the PLT (src/ucs/arch/x86_64/
 * cpu.h), which sets it to UCS_YES (rdtsc) or UCS_NO (gettimeofday, in
 * microseconds).  That first time is inside libucs's own constructor
 * (ucs_init -> ucs_generate_uuid -> ucs_get_time): before libibcr's
 * constructor when the program links UCX (MPICH), inside the dlopen of
 * MPI_Init when it loads UCX as a plugin (Open MPI).  No libibcr code runs
 * in between, so libibcr defines that function and answers UCS_NO.
 *
 * It never changes a choice already made: UCX keeps timestamps of the
 * clock it chose, and mixing two clocks is worse than either.
 *
 * UCX's unique ids.  ucs_generate_uuid() (src/ucs/sys/sys.c) sums, each
 * times a prime: the calling thread's id, ucs_get_time(), the boot id,
 * gettimeofday's seconds and microseconds, and the host name.  In a
 * protected task the thread id is the same in every rank (the program is
 * PID 102 of its own namespace), and on the wall clock ucs_get_time() is
 * in microseconds: two ranks of one node that start a UCP worker in the
 * same microsecond get the same id.  The worker's first multi-fragment
 * message id is one (ucp_worker.c: am_message_id = ucs_generate_uuid(0)),
 * and a receiver keys fragments by that id alone: two such ranks sending
 * large eager messages to one peer mix their fragments (UCX asserts in
 * ucp_tag_frag_list_process_queue, or delivers wrong data).  libibcr
 * defines the function too, and libucs and libucp call it through the
 * PLT: it adds 64 random bits to UCX's own sum.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "ibcr.h"
#include "ucxclock.h"

/* ucs_ternary_auto_value_t (UCX src/ucs/config/types.h) */
enum { UCX_NO = 0, UCX_YES = 1, UCX_TRY = 2 };

#define UCX_CLOCK_VAR "ucs_arch_x86_enable_rdtsc"
#define UCX_CLOCK_FN "ucs_x86_init_tsc_freq"

#define UCX_UUID_FN "ucs_generate_uuid"

IBCR_EXPORT void ucs_x86_init_tsc_freq (void);
IBCR_EXPORT uint64_t ucs_generate_uuid (uint64_t seed);

/* IBCR_UCX_CLOCK: "wall" (the default) or "tsc" (leave UCX its choice). */
static int want_tsc (void)
{
    static atomic_int said;
    const char *v = getenv ("IBCR_UCX_CLOCK");

    if (!v || !*v || strcmp (v, "wall") == 0)
        return 0;
    if (strcmp (v, "tsc") == 0)
        return 1;
    if (!atomic_exchange (&said, 1))
        ibcr_log ("IBCR_UCX_CLOCK=%s is neither wall nor tsc: UCX reads the wall clock", v);
    return 0;
}

/* NAME as the UCX code at ADDR sees it.  The global scope first: a
 * program linked with UCX that reads the variable itself (ucx_info) has
 * its own copy of it (a copy relocation), which libucs then uses too,
 * and a lookup in libucs's scope would find the unused original.  Open
 * MPI loads UCX with RTLD_LOCAL, out of the global scope: then the
 * caller's object and its dependencies.  Never libibcr's own definition. */
static int ucx_is_ours (const void *sym)
{
    return sym == (void *)ucs_x86_init_tsc_freq || sym == (void *)ucs_generate_uuid;
}

static void *ucx_sym (const void *addr, const char *name)
{
    Dl_info info;
    void *sym = dlsym (RTLD_DEFAULT, name);

    if (ucx_is_ours (sym))
        sym = dlsym (RTLD_NEXT, name);
    if (!sym && addr && dladdr (addr, &info) && info.dli_fname && *info.dli_fname) {
        void *h = dlopen (info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            sym = dlsym (h, name);
            dlclose (h);
        }
    }
    if (ucx_is_ours (sym))
        sym = NULL;
    return sym;
}

/* Called by UCX (only while its choice is UCS_TRY) in place of its own. */
void ucs_x86_init_tsc_freq (void)
{
    const void *caller = __builtin_return_address (0);
    int *rdtsc = ucx_sym (caller, UCX_CLOCK_VAR);

    if (want_tsc () || !rdtsc) {
        void (*own) (void) = (void (*) (void))ucx_sym (caller, UCX_CLOCK_FN);
        if (own) {
            own ();
            return;
        }
    }
    if (!rdtsc) {
        /* UCX asserts that a choice was made: it would abort anyway. */
        ibcr_log ("UCX asks for its clock, but neither %s nor its own %s is found from the "
                  "caller: aborting",
                  UCX_CLOCK_VAR, UCX_CLOCK_FN);
        abort ();
    }
    if (*rdtsc == UCX_TRY) {
        *rdtsc = UCX_NO;
        ibcr_debug ("UCX reads the wall clock (gettimeofday), not the CPU's time-stamp counter");
    }
}

/* 64 bits no other process has: the kernel's random numbers, or (before
 * its pool is ready) the clock in nanoseconds, this process's stack
 * address (ASLR) and a count, stirred (splitmix64's finaliser). */
static uint64_t ucx_random64 (void)
{
    static atomic_uint_fast64_t count;
    uint64_t r;
    struct timespec ts;

    if (getrandom (&r, sizeof (r), GRND_NONBLOCK) == (ssize_t)sizeof (r))
        return r;
    (void)clock_gettime (CLOCK_MONOTONIC, &ts);
    r = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    r ^= (uint64_t)(uintptr_t)&ts << 16;
    r += atomic_fetch_add (&count, 1) * 0x9e3779b97f4a7c15u;
    r = (r ^ (r >> 30)) * 0xbf58476d1ce4e5b9u;
    r = (r ^ (r >> 27)) * 0x94d049bb133111ebu;
    return r ^ (r >> 31);
}

/* Called by libucs and libucp in place of their own (see the top). */
uint64_t ucs_generate_uuid (uint64_t seed)
{
    uint64_t (*own) (uint64_t) =
        (uint64_t (*) (uint64_t))ucx_sym (__builtin_return_address (0), UCX_UUID_FN);

    return (own ? own (seed) : seed) + ucx_random64 ();
}

void ucxclock_check (void)
{
#if defined(__x86_64__)
    static atomic_int warned;
    int *rdtsc = dlsym (RTLD_DEFAULT, UCX_CLOCK_VAR);

    if (!rdtsc) {
        void *h = dlopen ("libucs.so.0", RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            rdtsc = dlsym (h, UCX_CLOCK_VAR);
            dlclose (h);
        }
    }
    if (!rdtsc || *rdtsc != UCX_YES || want_tsc () || atomic_exchange (&warned, 1))
        return;
    ibcr_log ("warning: UCX chose the CPU's time-stamp counter as its clock without asking "
              "libibcr (its %s was not called through libibcr), and it is too late to change: "
              "if this process is restored on a host whose counter is behind this one's, UCX "
              "will count its peers silent for centuries and fail them (UD peer timeout), and "
              "the job will abort.  Set IBCR_UCX_CLOCK=tsc to accept that and silence this "
              "warning",
              UCX_CLOCK_FN);
#endif
}
