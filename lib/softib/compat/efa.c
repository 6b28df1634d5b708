/*
 * compat/efa.c - a stand-in libefa.so.1 for softib (see compat/mlx5.c):
 * it lets perftest load, and reports that softib0 is no EFA device.
 */
#include "config.h"

#include <errno.h>
#include <infiniband/efadv.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int efadv_query_device(struct ibv_context *ibvctx,
			      struct efadv_device_attr *attr,
			      uint32_t inlen)
{
	return EOPNOTSUPP;
}

EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
					 struct ibv_qp_init_attr_ex *attr_ex,
					 struct efadv_qp_init_attr *efa_attr,
					 uint32_t inlen)
{
	errno = EOPNOTSUPP;
	return NULL;
}
