/* backend.c - load, resolve and unload the real verbs library (backend.h).
 *
 * Symbols are resolved with dlvsym at the version rdma-core 44 exports,
 * so a backend's IBVERBS_1.0 compat entry points are never picked by
 * mistake.  Never call the backend while holding its handle half-set:
 * backend_load fills ibcr_be completely or leaves it empty.
 */
#include "config.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "ibcr.h"
#include "backend.h"
#include "nsmalloc.h"
#include "nsheap.h"

struct ibcr_backend ibcr_be;
static void *ns_handle; /* libibcr_ns.so, first in the namespace */
static int want_fork_init;

struct sym {
    const char *name, *ver;
    size_t off;
};

#define S(field, name, ver)                                                                        \
    {                                                                                              \
        name, ver, __builtin_offsetof(struct ibcr_backend, field)                                  \
    }
static const struct sym syms[] = {
    S (get_device_list, "ibv_get_device_list", "IBVERBS_1.1"),
    S (free_device_list, "ibv_free_device_list", "IBVERBS_1.1"),
    S (get_device_name, "ibv_get_device_name", "IBVERBS_1.1"),
    S (get_device_guid, "ibv_get_device_guid", "IBVERBS_1.1"),
    S (open_device, "ibv_open_device", "IBVERBS_1.1"),
    S (close_device, "ibv_close_device", "IBVERBS_1.1"),
    S (query_device, "ibv_query_device", "IBVERBS_1.1"),
    S (query_port, "ibv_query_port", "IBVERBS_1.1"),
    S (query_gid, "ibv_query_gid", "IBVERBS_1.1"),
    S (query_gid_ex, "_ibv_query_gid_ex", "IBVERBS_1.11"),
    S (query_pkey, "ibv_query_pkey", "IBVERBS_1.1"),
    S (get_async_event, "ibv_get_async_event", "IBVERBS_1.1"),
    S (ack_async_event, "ibv_ack_async_event", "IBVERBS_1.1"),
    S (alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1"),
    S (dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1"),
    S (reg_mr, "ibv_reg_mr", "IBVERBS_1.1"),
    S (reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8"),
    S (dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1"),
    S (create_comp_channel, "ibv_create_comp_channel", "IBVERBS_1.0"),
    S (destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0"),
    S (create_cq, "ibv_create_cq", "IBVERBS_1.1"),
    S (resize_cq, "ibv_resize_cq", "IBVERBS_1.1"),
    S (destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1"),
    S (get_cq_event, "ibv_get_cq_event", "IBVERBS_1.1"),
    S (ack_cq_events, "ibv_ack_cq_events", "IBVERBS_1.1"),
    S (create_srq, "ibv_create_srq", "IBVERBS_1.1"),
    S (modify_srq, "ibv_modify_srq", "IBVERBS_1.1"),
    S (query_srq, "ibv_query_srq", "IBVERBS_1.1"),
    S (destroy_srq, "ibv_destroy_srq", "IBVERBS_1.1"),
    S (create_qp, "ibv_create_qp", "IBVERBS_1.1"),
    S (modify_qp, "ibv_modify_qp", "IBVERBS_1.1"),
    S (query_qp, "ibv_query_qp", "IBVERBS_1.1"),
    S (destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1"),
    S (create_ah, "ibv_create_ah", "IBVERBS_1.1"),
    S (destroy_ah, "ibv_destroy_ah", "IBVERBS_1.1"),
    S (fork_init, "ibv_fork_init", "IBVERBS_1.1"),
};
#undef S

int be_errno (void)
{
    int e = ibcr_be.errno_loc ? *ibcr_be.errno_loc () : 0;
    if (e == 0)
        e = EIO; /* a failure must never look like success */
    errno = e;
    return e;
}

void backend_want_fork_init (void)
{
    want_fork_init = 1;
    if (ibcr_be.handle && ibcr_be.fork_init)
        ibcr_be.fork_init ();
}

/* Open a new namespace with libibcr_ns.so (next to libibcr.so) in it and
 * hand it nsheap as its allocator; *lmid is the namespace.  -1 when the helper is
 * missing: the backend then gets a namespace of its own whose libc heaps
 * leak at every unload (logged once). */
static int ns_open (Lmid_t *lmid)
{
    static int warned;
    Dl_info di;
    char path[1024];
    const char *slash;

    if (!dladdr ((void *)ns_open, &di) || !di.dli_fname || !(slash = strrchr (di.dli_fname, '/')))
        goto missing;
    snprintf (path, sizeof (path), "%.*s/libibcr_ns.so", (int)(slash - di.dli_fname), di.dli_fname);
    ns_handle = dlmopen (LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
    if (!ns_handle)
        goto missing;
    void (*set) (const struct ibcr_ns_alloc *) =
        (void (*) (const struct ibcr_ns_alloc *))dlsym (ns_handle, "ibcr_ns_set_alloc");
    if (!set || dlinfo (ns_handle, RTLD_DI_LMID, lmid) != 0) {
        dlclose (ns_handle);
        ns_handle = NULL;
        goto missing;
    }
    struct ibcr_ns_alloc fns = {
        .malloc = nsheap_malloc,
        .free = nsheap_free,
        .calloc = nsheap_calloc,
        .realloc = nsheap_realloc,
        .posix_memalign = nsheap_memalign,
        .usable = nsheap_usable,
    };
    set (&fns);
    return 0;
missing:
    if (!warned++)
        ibcr_log ("libibcr_ns.so not found next to libibcr (%s): every checkpoint cycle "
                  "will leak the backend's heap; install it with libibcr",
                  dlerror () ? "not loadable" : "no path");
    return -1;
}

/* After the backend: the namespace's libc may still free at its fini. */
static void ns_close (void)
{
    if (ns_handle) {
        dlclose (ns_handle);
        ns_handle = NULL;
        nsheap_release ();
    }
}

int backend_load (const char *path)
{
    struct ibcr_backend be;
    const char *p = path;

    if (ibcr_be.handle)
        return 0;
    if (!p || !*p)
        p = getenv ("IBCR_BACKEND");
    if (!p || !*p)
        p = "libibverbs.so.1";
    memset (&be, 0, sizeof (be));
    Lmid_t lmid = LM_ID_NEWLM;
    if (ns_open (&lmid) < 0)
        lmid = LM_ID_NEWLM;
    be.handle = dlmopen (lmid, p, RTLD_NOW | RTLD_LOCAL);
    if (!be.handle) {
        ibcr_log ("cannot load the verbs backend %s: %s; set IBCR_BACKEND to "
                  "the path of a libibverbs.so.1",
                  p, dlerror ());
        ns_close ();
        errno = ENOENT;
        return -1;
    }
    snprintf (be.path, sizeof (be.path), "%s", p);
    be.errno_loc = (int *(*)(void))dlsym (be.handle, "__errno_location");
    for (size_t i = 0; i < sizeof (syms) / sizeof (syms[0]); i++) {
        void *f = dlvsym (be.handle, syms[i].name, syms[i].ver);
        if (!f)
            f = dlsym (be.handle, syms[i].name);
        if (!f) {
            ibcr_log ("verbs backend %s lacks %s@%s: not an rdma-core 44 "
                      "compatible libibverbs; set IBCR_BACKEND to one",
                      p, syms[i].name, syms[i].ver);
            dlclose (be.handle);
            ns_close ();
            errno = ENOSYS;
            return -1;
        }
        memcpy ((char *)&be + syms[i].off, &f, sizeof (f));
    }
    ibcr_be = be;
    if (want_fork_init)
        ibcr_be.fork_init ();
    ibcr_debug ("backend loaded: %s", p);
    return 0;
}

void backend_unload (void)
{
    if (!ibcr_be.handle)
        return;
    void *h = ibcr_be.handle;
    memset (&ibcr_be, 0, sizeof (ibcr_be));
    if (dlclose (h) != 0)
        ibcr_log ("unloading the verbs backend: %s", dlerror ());
    ns_close ();
}
