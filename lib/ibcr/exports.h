/* exports.h - the implementations behind libibcr's exported verbs.
 *
 * exports.c gives them their public names and symbol versions; the other
 * modules define them.  Hidden: nothing here is visible outside libibcr.
 */
#ifndef IBCR_EXPORTS_H
#define IBCR_EXPORTS_H

#include <infiniband/verbs.h>

struct ibv_device **ibcr_get_device_list (int *num);
void ibcr_free_device_list (struct ibv_device **list);
const char *ibcr_get_device_name (struct ibv_device *dev);
__be64 ibcr_get_device_guid (struct ibv_device *dev);
struct ibv_context *ibcr_open_device (struct ibv_device *dev);
int ibcr_close_device (struct ibv_context *ctx);
int ibcr_query_device (struct ibv_context *ctx, struct ibv_device_attr *attr);
int ibcr_query_port (struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *pa);
int ibcr_real_query_port (struct ibv_context *real, uint8_t port, struct ibv_port_attr *pa);
int ibcr_query_gid (struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
int ibcr_query_gid_ex (struct ibv_context *ctx, uint32_t port, uint32_t index,
                       struct ibv_gid_entry *entry, uint32_t flags, size_t size);
int ibcr_query_pkey (struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey);
int ibcr_get_async_event (struct ibv_context *ctx, struct ibv_async_event *ev);
void ibcr_ack_async_event (struct ibv_async_event *ev);

struct ibv_pd *ibcr_alloc_pd (struct ibv_context *ctx);
int ibcr_dealloc_pd (struct ibv_pd *pd);
struct ibv_mr *ibcr_reg_mr (struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *ibcr_reg_mr_iova (struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                 int access);
struct ibv_mr *ibcr_reg_mr_iova2 (struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                  unsigned int access);
int ibcr_dereg_mr (struct ibv_mr *mr);
int ibcr_rereg_mr (struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
                   int access);
struct ibv_mr *ibcr_reg_dmabuf_mr (struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                   int fd, int access);

struct ibv_comp_channel *ibcr_create_comp_channel (struct ibv_context *ctx);
int ibcr_destroy_comp_channel (struct ibv_comp_channel *ch);
int ibcr_get_cq_event (struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
void ibcr_ack_cq_events (struct ibv_cq *cq, unsigned int nevents);
struct ibv_cq *ibcr_create_cq (struct ibv_context *ctx, int cqe, void *cq_context,
                               struct ibv_comp_channel *channel, int comp_vector);
struct ibv_cq_ex *ibcr_create_cq_ex (struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a);
int ibcr_resize_cq (struct ibv_cq *cq, int cqe);
int ibcr_destroy_cq (struct ibv_cq *cq);
int ibcr_poll_cq (struct ibv_cq *cq, int n, struct ibv_wc *wc);
int ibcr_req_notify_cq (struct ibv_cq *cq, int solicited_only);

struct ibv_srq *ibcr_create_srq (struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *ibcr_create_srq_ex (struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a);
int ibcr_modify_srq (struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int ibcr_query_srq (struct ibv_srq *srq, struct ibv_srq_attr *attr);
int ibcr_destroy_srq (struct ibv_srq *srq);

struct ibv_qp *ibcr_create_qp (struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *ibcr_create_qp_ex (struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);
struct ibv_qp_ex *ibcr_qp_to_qp_ex (struct ibv_qp *qp);
int ibcr_modify_qp (struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int ibcr_query_qp (struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                   struct ibv_qp_init_attr *init);
int ibcr_destroy_qp (struct ibv_qp *qp);

struct ibv_ah *ibcr_create_ah (struct ibv_pd *pd, struct ibv_ah_attr *attr);
int ibcr_destroy_ah (struct ibv_ah *ah);
int ibcr_init_ah_from_wc (struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
                          struct ibv_grh *grh, struct ibv_ah_attr *ah);
struct ibv_ah *ibcr_create_ah_from_wc (struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
                                       uint8_t port);

#endif
