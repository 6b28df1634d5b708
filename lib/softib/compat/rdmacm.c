/*
 * compat/rdmacm.c - a stand-in librdmacm.so.1 for softib (see
 * compat/mlx5.c).  Debian's librdmacm needs the kernel's rdma_cm, which
 * these machines lack; softib has no connection manager, so every call
 * fails with ENODEV, and perftest's -R / -z options report a clean error
 * instead of the program failing to start.  The calls a library makes to
 * probe for rdma_cm (UCX opens an event channel in every worker,
 * libfabric lists devices) fail quietly, as the real librdmacm does on a
 * machine without rdma_cm; the others also print why.  Prototypes are
 * written here with opaque types: librdmacm-dev is not a build
 * dependency, and only the return types matter to the ABI.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

#define EXPORT __attribute__ ((visibility ("default")))

struct rdma_event_channel;
struct rdma_cm_id;
struct rdma_cm_event;
struct rdma_addrinfo;
struct ibv_context;
struct ibv_qp_attr;

static int nodev (void)
{
    static const char msg[] = "softib: rdma_cm is not available on softib "
                              "(exchange connection data over TCP instead, e.g. without "
                              "perftest's -R/-z)\n";

    if (write (STDERR_FILENO, msg, sizeof (msg) - 1) < 0)
        return -1;
    errno = ENODEV;
    return -1;
}

/* Probes: quiet, or every UCX worker would print the message. */
EXPORT struct rdma_event_channel *rdma_create_event_channel (void)
{
    errno = ENODEV;
    return NULL;
}

EXPORT struct ibv_context **rdma_get_devices (int *num_devices)
{
    if (num_devices)
        *num_devices = 0;
    errno = ENODEV;
    return NULL;
}

EXPORT void rdma_free_devices (struct ibv_context **list)
{
}

EXPORT void rdma_destroy_event_channel (struct rdma_event_channel *ch)
{
}

EXPORT int rdma_create_id (struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx, int ps)
{
    return nodev ();
}

EXPORT int rdma_destroy_id (struct rdma_cm_id *id)
{
    return nodev ();
}

EXPORT int rdma_bind_addr (struct rdma_cm_id *id, void *addr)
{
    return nodev ();
}

EXPORT int rdma_resolve_addr (struct rdma_cm_id *id, void *src, void *dst, int timeout_ms)
{
    return nodev ();
}

EXPORT int rdma_resolve_route (struct rdma_cm_id *id, int timeout_ms)
{
    return nodev ();
}

EXPORT int rdma_create_qp (struct rdma_cm_id *id, void *pd, void *attr)
{
    return nodev ();
}

EXPORT int rdma_create_qp_ex (struct rdma_cm_id *id, void *attr)
{
    return nodev ();
}

EXPORT void rdma_destroy_qp (struct rdma_cm_id *id)
{
}

EXPORT int rdma_connect (struct rdma_cm_id *id, void *param)
{
    return nodev ();
}

EXPORT int rdma_listen (struct rdma_cm_id *id, int backlog)
{
    return nodev ();
}

EXPORT int rdma_accept (struct rdma_cm_id *id, void *param)
{
    return nodev ();
}

EXPORT int rdma_reject (struct rdma_cm_id *id, const void *data, unsigned char len)
{
    return nodev ();
}

EXPORT int rdma_disconnect (struct rdma_cm_id *id)
{
    return nodev ();
}

EXPORT int rdma_get_cm_event (struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
    return nodev ();
}

EXPORT int rdma_ack_cm_event (struct rdma_cm_event *ev)
{
    return nodev ();
}

EXPORT const char *rdma_event_str (int event)
{
    return "RDMA_CM_EVENT_UNSUPPORTED (softib has no rdma_cm)";
}

EXPORT int rdma_getaddrinfo (const char *node, const char *service,
                             const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
    return nodev ();
}

EXPORT void rdma_freeaddrinfo (struct rdma_addrinfo *res)
{
}

EXPORT int rdma_set_option (struct rdma_cm_id *id, int level, int optname, void *optval,
                            size_t optlen)
{
    return nodev ();
}

EXPORT int rdma_migrate_id (struct rdma_cm_id *id, struct rdma_event_channel *ch)
{
    return nodev ();
}

EXPORT int rdma_establish (struct rdma_cm_id *id)
{
    return nodev ();
}

EXPORT int rdma_init_qp_attr (struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask)
{
    return nodev ();
}

EXPORT void rdma_destroy_ep (struct rdma_cm_id *id)
{
}

/* No id ever exists, so no port either (0, as for an unbound id). */
EXPORT unsigned short rdma_get_src_port (struct rdma_cm_id *id)
{
    return 0;
}
