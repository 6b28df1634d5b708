/*
 * compat/mlx5.c - a stand-in libmlx5.so.1 for softib.
 *
 * perftest and UCX's libuct_ib.so.0 link libmlx5 and call mlx5dv_* only
 * on Mellanox devices, but the dynamic loader must still resolve their
 * imports at start-up, and Debian's real libmlx5 needs rdma-core's
 * private provider ABI, which softib does not have.  This library loads
 * next to softib's libibverbs.so.1, exports what they import with the
 * same symbol versions (compat/mlx5.map), says no to
 * mlx5dv_is_supported() and fails every other call as the real library
 * does for a device that is no mlx5: EOPNOTSUPP, or NULL with errno
 * EOPNOTSUPP.  UCX asks mlx5dv_is_supported() before any mlx5 path
 * (devx, then dv), so it falls back to plain verbs: rc_verbs, ud_verbs.
 * Nothing here may ever pretend to succeed.
 */
#include "config.h"

#include <errno.h>
#include <infiniband/mlx5dv.h>

#define EXPORT __attribute__ ((visibility ("default")))

EXPORT struct ibv_qp *mlx5dv_create_qp (struct ibv_context *context,
                                        struct ibv_qp_init_attr_ex *qp_attr,
                                        struct mlx5dv_qp_init_attr *mlx5_attr)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT struct ibv_context *mlx5dv_open_device (struct ibv_device *device,
                                               struct mlx5dv_context_attr *a)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_devx_general_cmd (struct ibv_context *context, const void *in, size_t inlen,
                                    void *out, size_t outlen)
{
    return EOPNOTSUPP;
}

EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex (struct ibv_qp_ex *qp)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey (struct mlx5dv_mkey_init_attr *attr)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_destroy_mkey (struct mlx5dv_mkey *mkey)
{
    return EOPNOTSUPP;
}

EXPORT int mlx5dv_crypto_login (struct ibv_context *context, struct mlx5dv_crypto_login_attr *attr)
{
    return EOPNOTSUPP;
}

EXPORT struct mlx5dv_dek *mlx5dv_dek_create (struct ibv_context *context,
                                             struct mlx5dv_dek_init_attr *a)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_dek_destroy (struct mlx5dv_dek *dek)
{
    return EOPNOTSUPP;
}

EXPORT bool mlx5dv_is_supported (struct ibv_device *device)
{
    return false;
}

EXPORT struct ibv_cq_ex *mlx5dv_create_cq (struct ibv_context *context,
                                           struct ibv_cq_init_attr_ex *cq_attr,
                                           struct mlx5dv_cq_init_attr *mlx5_attr)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_init_obj (struct mlx5dv_obj *obj, uint64_t obj_type)
{
    return EOPNOTSUPP;
}

/* ---- devx: raw firmware commands, mlx5 only ---- */

EXPORT struct mlx5dv_devx_obj *mlx5dv_devx_obj_create (struct ibv_context *context, const void *in,
                                                       size_t inlen, void *out, size_t outlen)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_devx_obj_query (struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
                                  void *out, size_t outlen)
{
    return EOPNOTSUPP;
}

EXPORT int mlx5dv_devx_obj_modify (struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
                                   void *out, size_t outlen)
{
    return EOPNOTSUPP;
}

EXPORT int mlx5dv_devx_obj_destroy (struct mlx5dv_devx_obj *obj)
{
    return EOPNOTSUPP;
}

EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg (struct ibv_context *ctx, void *addr,
                                                      size_t size, uint32_t access)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT int mlx5dv_devx_umem_dereg (struct mlx5dv_devx_umem *umem)
{
    return EOPNOTSUPP;
}

EXPORT struct mlx5dv_devx_uar *mlx5dv_devx_alloc_uar (struct ibv_context *context, uint32_t flags)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT void mlx5dv_devx_free_uar (struct mlx5dv_devx_uar *devx_uar)
{
}

EXPORT int mlx5dv_devx_qp_query (struct ibv_qp *qp, const void *in, size_t inlen, void *out,
                                 size_t outlen)
{
    return EOPNOTSUPP;
}

EXPORT int mlx5dv_devx_qp_modify (struct ibv_qp *qp, const void *in, size_t inlen, void *out,
                                  size_t outlen)
{
    return EOPNOTSUPP;
}

EXPORT struct mlx5dv_devx_event_channel *
mlx5dv_devx_create_event_channel (struct ibv_context *context,
                                  enum mlx5dv_devx_create_event_channel_flags flags)
{
    errno = EOPNOTSUPP;
    return NULL;
}

EXPORT void mlx5dv_devx_destroy_event_channel (struct mlx5dv_devx_event_channel *event_channel)
{
}

EXPORT int mlx5dv_devx_subscribe_devx_event (struct mlx5dv_devx_event_channel *event_channel,
                                             struct mlx5dv_devx_obj *obj, uint16_t events_sz,
                                             uint16_t events_num[], uint64_t cookie)
{
    return EOPNOTSUPP;
}

EXPORT ssize_t mlx5dv_devx_get_event (struct mlx5dv_devx_event_channel *event_channel,
                                      struct mlx5dv_devx_async_event_hdr *event_data,
                                      size_t event_resp_len)
{
    errno = EOPNOTSUPP;
    return -1;
}
