/*
 * compat/mlx5.c - a stand-in libmlx5.so.1 for softib.
 *
 * perftest links libmlx5 and calls mlx5dv_* only on Mellanox devices,
 * but the dynamic loader must still resolve its imports at start-up, and
 * Debian's real libmlx5 needs rdma-core's private provider ABI, which
 * softib does not have.  This library loads next to softib's
 * libibverbs.so.1, exports what perftest imports with the same symbol
 * versions, and fails every call with EOPNOTSUPP: softib0 is no mlx5.
 */
#include "config.h"

#include <errno.h>
#include <infiniband/mlx5dv.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *qp_attr,
				       struct mlx5dv_qp_init_attr *mlx5_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
					      struct mlx5dv_context_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *context,
				   const void *in, size_t inlen, void *out,
				   size_t outlen)
{
	return EOPNOTSUPP;
}

EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(
	struct mlx5dv_mkey_init_attr *attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey)
{
	return EOPNOTSUPP;
}

EXPORT int mlx5dv_crypto_login(struct ibv_context *context,
			       struct mlx5dv_crypto_login_attr *attr)
{
	return EOPNOTSUPP;
}

EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context,
					    struct mlx5dv_dek_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek)
{
	return EOPNOTSUPP;
}

EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
	return false;
}
