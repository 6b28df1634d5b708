/*
 * compat/efa.c - a stand-in libefa.so.1 for softib (see compat/mlx5.c):
 * it lets perftest and libfabric (whose efa provider Open MPI's ofi
 * components load) start, and reports that softib0 is no EFA device.
 */
#include "config.h"

#include <errno.h>
#include <infiniband/efadv.h>

#define EXPORT __attribute__ ((visibility ("default")))

EXPORT int efadv_query_device (struct ibv_context *ibvctx, struct efadv_device_attr *attr,
                               uint32_t inlen)
{
    return EOPNOTSUPP;
}

EXPORT struct ibv_qp *efadv_create_qp_ex (struct ibv_context *ibvctx,
                                          struct ibv_qp_init_attr_ex *attr_ex,
                                          struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT struct ibv_qp *efadv_create_driver_qp (struct ibv_pd *ibvpd, struct ibv_qp_init_attr *attr,
                                              uint32_t driver_qp_type)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int efadv_query_ah (struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen)
{
    return EOPNOTSUPP;
}

EXPORT struct ibv_cq_ex *efadv_create_cq (struct ibv_context *ibvctx,
                                          struct ibv_cq_init_attr_ex *attr_ex,
                                          struct efadv_cq_init_attr *efa_attr, uint32_t inlen)
{
    errno = EOPNOTSUPP;
    return NULL;
}

/* Only a CQ of efadv_create_cq has an EFA view, and there is none. */
EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex (struct ibv_cq_ex *ibvcqx)
{
    errno = EOPNOTSUPP;
    return NULL;
}
