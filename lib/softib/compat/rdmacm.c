/*
 * compat/rdmacm.c - a stand-in librdmacm.so.1 for softib (see
 * compat/mlx5.c).  Debian's librdmacm needs the kernel's rdma_cm, which
 * these machines lack; softib has no connection manager, so every call
 * fails with ENODEV and a message, and perftest's -R / -z options report
 * a clean error instead of the program failing to start.  Prototypes are
 * written here with opaque types: librdmacm-dev is not a build
 * dependency, and only the return types matter to the ABI.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

struct rdma_event_channel;
struct rdma_cm_id;
struct rdma_cm_event;
struct rdma_addrinfo;

static int nodev(void)
{
	static const char msg[] = "softib: rdma_cm is not available on softib "
		"(exchange connection data over TCP instead, e.g. without "
		"perftest's -R/-z)\n";

	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		return -1;
	errno = ENODEV;
	return -1;
}

EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	nodev();
	return NULL;
}

EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *ch)
{
}

EXPORT int rdma_create_id(struct rdma_event_channel *ch,
			  struct rdma_cm_id **id, void *ctx, int ps)
{
	return nodev();
}

EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	return nodev();
}

EXPORT int rdma_bind_addr(struct rdma_cm_id *id, void *addr)
{
	return nodev();
}

EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, void *src, void *dst,
			     int timeout_ms)
{
	return nodev();
}

EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	return nodev();
}

EXPORT int rdma_create_qp(struct rdma_cm_id *id, void *pd, void *attr)
{
	return nodev();
}

EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, void *attr)
{
	return nodev();
}

EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
}

EXPORT int rdma_connect(struct rdma_cm_id *id, void *param)
{
	return nodev();
}

EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	return nodev();
}

EXPORT int rdma_accept(struct rdma_cm_id *id, void *param)
{
	return nodev();
}

EXPORT int rdma_reject(struct rdma_cm_id *id, const void *data,
		       unsigned char len)
{
	return nodev();
}

EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	return nodev();
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel *ch,
			     struct rdma_cm_event **ev)
{
	return nodev();
}

EXPORT int rdma_ack_cm_event(struct rdma_cm_event *ev)
{
	return nodev();
}

EXPORT const char *rdma_event_str(int event)
{
	return "RDMA_CM_EVENT_UNSUPPORTED (softib has no rdma_cm)";
}

EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			    const struct rdma_addrinfo *hints,
			    struct rdma_addrinfo **res)
{
	return nodev();
}

EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
}

EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
			   void *optval, size_t optlen)
{
	return nodev();
}
