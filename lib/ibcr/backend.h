/* backend.h - the verbs library libibcr forwards to.
 *
 * By default the libibverbs.so.1 the process would have loaded (found with
 * the process's own library search path), or the file named by
 * IBCR_BACKEND (or by the rebuild request).  It is loaded with
 * dlmopen(LM_ID_NEWLM) so that it, its providers and their threads live in
 * a link-map namespace of their own: nothing in it can bind to libibcr's
 * exported ibv_* names, and dlclose at release unloads all of it, leaving
 * no mapping that a restore on another machine would have to match.  It is
 * chosen again at every rebuild.
 *
 * The backend has its own copy of libc, hence its own errno: be_errno()
 * copies it after a failed call.
 */
#ifndef IBCR_BACKEND_H
#define IBCR_BACKEND_H

#include <infiniband/verbs.h>

struct ibcr_backend {
    void *handle;
    char path[512];
    int *(*errno_loc) (void);
    struct ibv_device **(*get_device_list) (int *);
    void (*free_device_list) (struct ibv_device **);
    const char *(*get_device_name) (struct ibv_device *);
    __be64 (*get_device_guid) (struct ibv_device *);
    struct ibv_context *(*open_device) (struct ibv_device *);
    int (*close_device) (struct ibv_context *);
    int (*query_device) (struct ibv_context *, struct ibv_device_attr *);
    int (*query_port) (struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);
    int (*query_gid) (struct ibv_context *, uint8_t, int, union ibv_gid *);
    int (*query_gid_ex) (struct ibv_context *, uint32_t, uint32_t, struct ibv_gid_entry *, uint32_t,
                         size_t);
    int (*query_pkey) (struct ibv_context *, uint8_t, int, __be16 *);
    int (*get_async_event) (struct ibv_context *, struct ibv_async_event *);
    void (*ack_async_event) (struct ibv_async_event *);
    struct ibv_pd *(*alloc_pd) (struct ibv_context *);
    int (*dealloc_pd) (struct ibv_pd *);
    struct ibv_mr *(*reg_mr) (struct ibv_pd *, void *, size_t, int);
    struct ibv_mr *(*reg_mr_iova2) (struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
    int (*dereg_mr) (struct ibv_mr *);
    struct ibv_comp_channel *(*create_comp_channel) (struct ibv_context *);
    int (*destroy_comp_channel) (struct ibv_comp_channel *);
    struct ibv_cq *(*create_cq) (struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
    int (*resize_cq) (struct ibv_cq *, int);
    int (*destroy_cq) (struct ibv_cq *);
    int (*get_cq_event) (struct ibv_comp_channel *, struct ibv_cq **, void **);
    void (*ack_cq_events) (struct ibv_cq *, unsigned int);
    struct ibv_srq *(*create_srq) (struct ibv_pd *, struct ibv_srq_init_attr *);
    int (*modify_srq) (struct ibv_srq *, struct ibv_srq_attr *, int);
    int (*query_srq) (struct ibv_srq *, struct ibv_srq_attr *);
    int (*destroy_srq) (struct ibv_srq *);
    struct ibv_qp *(*create_qp) (struct ibv_pd *, struct ibv_qp_init_attr *);
    int (*modify_qp) (struct ibv_qp *, struct ibv_qp_attr *, int);
    int (*query_qp) (struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *);
    int (*destroy_qp) (struct ibv_qp *);
    struct ibv_ah *(*create_ah) (struct ibv_pd *, struct ibv_ah_attr *);
    int (*destroy_ah) (struct ibv_ah *);
    int (*fork_init) (void);
};

extern struct ibcr_backend ibcr_be;

/* Load the backend: 'path' if not NULL, else $IBCR_BACKEND, else
 * "libibverbs.so.1" by the usual search.  0, or -1 with errno and a log
 * line naming the file and the loader's reason. */
int backend_load (const char *path);
/* Unload it (after every real object was destroyed).  Safe when unloaded. */
void backend_unload (void);
static inline int backend_loaded (void)
{
    return ibcr_be.handle != NULL;
}
/* Copy the backend's errno into ours; returns it. */
int be_errno (void);
/* Remember that the application called ibv_fork_init (re-applied at load). */
void backend_want_fork_init (void);

#endif
