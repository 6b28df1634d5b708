/* exports.c - libibcr's public face: rdma-core 44's libibverbs ABI with
 * its symbol versions, each entry calling the virtualizing implementation.
 *
 * Names with two versions get both: @@IBVERBS_1.1 (what every binary of
 * the last 15 years binds) is served, @IBVERBS_1.0 (the 2006 ABI with
 * other struct layouts) is refused with a log line.  Functions that touch
 * no verbs object (ibv_wc_status_str, ibv_rate_to_mult, ...) are not
 * exported: the process's own libibverbs answers them.  The version script
 * libibcr.map hides every other symbol.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include "ibcr.h"
#include "backend.h"
#include "exports.h"

#define SYMVER(impl, name, ver) __asm__(".symver " #impl "," #name ver)

/* An entry point whose implementation has the same signature. */
#define EXPORT(ver, vtag, rtype, name, params, args)                                               \
    IBCR_EXPORT rtype exp_##name##_##vtag params;                                                  \
    rtype exp_##name##_##vtag params                                                               \
    {                                                                                              \
        return ibcr_##name args;                                                                   \
    }                                                                                              \
    SYMVER (exp_##name##_##vtag, ibv_##name, "@@IBVERBS_" ver)

#define OLD_PTR(name)                                                                              \
    IBCR_EXPORT void *exp10_##name (void);                                                         \
    void *exp10_##name (void)                                                                      \
    {                                                                                              \
        ibcr_refuse ("ibv_" #name "@IBVERBS_1.0",                                                  \
                     "the libibverbs 1.0 ABI is not supported; relink against rdma-core");         \
        return NULL;                                                                               \
    }                                                                                              \
    SYMVER (exp10_##name, ibv_##name, "@IBVERBS_1.0")
#define OLD_INT(name)                                                                              \
    IBCR_EXPORT int exp10_##name (void);                                                           \
    int exp10_##name (void)                                                                        \
    {                                                                                              \
        ibcr_refuse ("ibv_" #name "@IBVERBS_1.0",                                                  \
                     "the libibverbs 1.0 ABI is not supported; relink against rdma-core");         \
        return -1;                                                                                 \
    }                                                                                              \
    SYMVER (exp10_##name, ibv_##name, "@IBVERBS_1.0")

EXPORT ("1.1", 11, struct ibv_device **, get_device_list, (int *n), (n));
EXPORT ("1.1", 11, const char *, get_device_name, (struct ibv_device * d), (d));
EXPORT ("1.1", 11, __be64, get_device_guid, (struct ibv_device * d), (d));
EXPORT ("1.1", 11, struct ibv_context *, open_device, (struct ibv_device * d), (d));
EXPORT ("1.1", 11, int, close_device, (struct ibv_context * c), (c));
EXPORT ("1.1", 11, int, query_device, (struct ibv_context * c, struct ibv_device_attr *a), (c, a));
EXPORT ("1.1", 11, int, query_port,
        (struct ibv_context * c, uint8_t p, struct _compat_ibv_port_attr *a), (c, p, a));
EXPORT ("1.1", 11, int, query_gid, (struct ibv_context * c, uint8_t p, int i, union ibv_gid *g),
        (c, p, i, g));
EXPORT ("1.1", 11, int, query_pkey, (struct ibv_context * c, uint8_t p, int i, __be16 *k),
        (c, p, i, k));
EXPORT ("1.1", 11, int, get_async_event, (struct ibv_context * c, struct ibv_async_event *e),
        (c, e));
EXPORT ("1.1", 11, struct ibv_pd *, alloc_pd, (struct ibv_context * c), (c));
EXPORT ("1.1", 11, int, dealloc_pd, (struct ibv_pd * p), (p));
EXPORT ("1.1", 11, struct ibv_mr *, reg_mr, (struct ibv_pd * p, void *a, size_t l, int f),
        (p, a, l, f));
EXPORT ("1.7", 17, struct ibv_mr *, reg_mr_iova,
        (struct ibv_pd * p, void *a, size_t l, uint64_t i, int f), (p, a, l, i, f));
EXPORT ("1.8", 18, struct ibv_mr *, reg_mr_iova2,
        (struct ibv_pd * p, void *a, size_t l, uint64_t i, unsigned int f), (p, a, l, i, f));
EXPORT ("1.12", 112, struct ibv_mr *, reg_dmabuf_mr,
        (struct ibv_pd * p, uint64_t o, size_t l, uint64_t i, int fd, int f), (p, o, l, i, fd, f));
EXPORT ("1.1", 11, int, rereg_mr,
        (struct ibv_mr * m, int fl, struct ibv_pd *p, void *a, size_t l, int f),
        (m, fl, p, a, l, f));
EXPORT ("1.1", 11, int, dereg_mr, (struct ibv_mr * m), (m));
EXPORT ("1.0", 10, struct ibv_comp_channel *, create_comp_channel, (struct ibv_context * c), (c));
EXPORT ("1.0", 10, int, destroy_comp_channel, (struct ibv_comp_channel * c), (c));
EXPORT ("1.1", 11, struct ibv_cq *, create_cq,
        (struct ibv_context * c, int n, void *x, struct ibv_comp_channel *ch, int v),
        (c, n, x, ch, v));
EXPORT ("1.1", 11, int, resize_cq, (struct ibv_cq * c, int n), (c, n));
EXPORT ("1.1", 11, int, destroy_cq, (struct ibv_cq * c), (c));
EXPORT ("1.1", 11, int, get_cq_event, (struct ibv_comp_channel * ch, struct ibv_cq **c, void **x),
        (ch, c, x));
EXPORT ("1.1", 11, struct ibv_srq *, create_srq, (struct ibv_pd * p, struct ibv_srq_init_attr *a),
        (p, a));
EXPORT ("1.1", 11, int, modify_srq, (struct ibv_srq * s, struct ibv_srq_attr *a, int m), (s, a, m));
EXPORT ("1.1", 11, int, query_srq, (struct ibv_srq * s, struct ibv_srq_attr *a), (s, a));
EXPORT ("1.1", 11, int, destroy_srq, (struct ibv_srq * s), (s));
EXPORT ("1.1", 11, struct ibv_qp *, create_qp, (struct ibv_pd * p, struct ibv_qp_init_attr *a),
        (p, a));
EXPORT ("1.6", 16, struct ibv_qp_ex *, qp_to_qp_ex, (struct ibv_qp * q), (q));
EXPORT ("1.1", 11, int, modify_qp, (struct ibv_qp * q, struct ibv_qp_attr *a, int m), (q, a, m));
EXPORT ("1.1", 11, int, query_qp,
        (struct ibv_qp * q, struct ibv_qp_attr *a, int m, struct ibv_qp_init_attr *i),
        (q, a, m, i));
EXPORT ("1.1", 11, int, destroy_qp, (struct ibv_qp * q), (q));
EXPORT ("1.1", 11, struct ibv_ah *, create_ah, (struct ibv_pd * p, struct ibv_ah_attr *a), (p, a));
EXPORT ("1.1", 11, int, destroy_ah, (struct ibv_ah * a), (a));
EXPORT ("1.1", 11, int, init_ah_from_wc,
        (struct ibv_context * c, uint8_t p, struct ibv_wc *w, struct ibv_grh *g,
         struct ibv_ah_attr *a),
        (c, p, w, g, a));
EXPORT ("1.1", 11, struct ibv_ah *, create_ah_from_wc,
        (struct ibv_pd * p, struct ibv_wc *w, struct ibv_grh *g, uint8_t port), (p, w, g, port));

/* void entry points */
IBCR_EXPORT void exp_free_device_list_11 (struct ibv_device **l);
void exp_free_device_list_11 (struct ibv_device **l)
{
    ibcr_free_device_list (l);
}
SYMVER (exp_free_device_list_11, ibv_free_device_list, "@@IBVERBS_1.1");
IBCR_EXPORT void exp_ack_async_event_11 (struct ibv_async_event *e);
void exp_ack_async_event_11 (struct ibv_async_event *e)
{
    ibcr_ack_async_event (e);
}
SYMVER (exp_ack_async_event_11, ibv_ack_async_event, "@@IBVERBS_1.1");
IBCR_EXPORT void exp_ack_cq_events_11 (struct ibv_cq *c, unsigned int n);
void exp_ack_cq_events_11 (struct ibv_cq *c, unsigned int n)
{
    ibcr_ack_cq_events (c, n);
}
SYMVER (exp_ack_cq_events_11, ibv_ack_cq_events, "@@IBVERBS_1.1");

/* Extended entry points not reached through the context */
IBCR_EXPORT int exp_query_gid_ex (struct ibv_context *c, uint32_t p, uint32_t i,
                                  struct ibv_gid_entry *e, uint32_t f, size_t s);
int exp_query_gid_ex (struct ibv_context *c, uint32_t p, uint32_t i, struct ibv_gid_entry *e,
                      uint32_t f, size_t s)
{
    return ibcr_query_gid_ex (c, p, i, e, f, s);
}
SYMVER (exp_query_gid_ex, _ibv_query_gid_ex, "@@IBVERBS_1.11");

IBCR_EXPORT ssize_t exp_query_gid_table (struct ibv_context *c, struct ibv_gid_entry *e, size_t max,
                                         uint32_t f, size_t s);
ssize_t exp_query_gid_table (struct ibv_context *c, struct ibv_gid_entry *e, size_t max, uint32_t f,
                             size_t s)
{
    ssize_t n = 0;
    struct ibcr_ctx *vctx = vctx_of (c);
    for (int p = 1; p <= vctx->nports; p++)
        for (int i = 0; i < vctx->port[p].ngid && (size_t)n < max; i++) {
            struct ibv_gid_entry *ent = (void *)((char *)e + n * s);
            if (ibcr_query_gid_ex (c, p, i, ent, f, s) == 0)
                n++;
        }
    return n;
}
SYMVER (exp_query_gid_table, _ibv_query_gid_table, "@@IBVERBS_1.11");

IBCR_EXPORT int exp_query_gid_type (struct ibv_context *c, uint8_t p, unsigned int i, int *t);
int exp_query_gid_type (struct ibv_context *c, uint8_t p, unsigned int i, int *t)
{
    struct ibv_gid_entry e;
    if (ibcr_query_gid_ex (c, p, i, &e, 0, sizeof (e)))
        return -1;
    /* driver.h's enum ibv_gid_type_sysfs: 0 IB/RoCE v1, 1 RoCE v2. */
    *t = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
    return 0;
}
SYMVER (exp_query_gid_type, ibv_query_gid_type, "@@IBVERBS_PRIVATE_34");

IBCR_EXPORT int exp_get_device_index (struct ibv_device *d);
int exp_get_device_index (struct ibv_device *d)
{
    return ((struct ibcr_device *)d)->index;
}
SYMVER (exp_get_device_index, ibv_get_device_index, "@@IBVERBS_1.9");

IBCR_EXPORT int exp_get_pkey_index (struct ibv_context *c, uint8_t p, __be16 pkey);
int exp_get_pkey_index (struct ibv_context *c, uint8_t p, __be16 pkey)
{
    for (int i = 0; i < 128; i++) {
        __be16 k;
        if (ibcr_query_pkey (c, p, i, &k))
            break;
        if (k == pkey)
            return i;
    }
    errno = ENOENT;
    return -1;
}
SYMVER (exp_get_pkey_index, ibv_get_pkey_index, "@@IBVERBS_1.5");

IBCR_EXPORT int exp_fork_init (void);
int exp_fork_init (void)
{
    backend_want_fork_init ();
    return 0;
}
SYMVER (exp_fork_init, ibv_fork_init, "@@IBVERBS_1.1");

IBCR_EXPORT int exp_query_qp_data_in_order (struct ibv_qp *q, enum ibv_wr_opcode op,
                                            uint32_t flags);
int exp_query_qp_data_in_order (struct ibv_qp *q, enum ibv_wr_opcode op, uint32_t flags)
{
    return 0; /* "not guaranteed": always a safe answer */
}
SYMVER (exp_query_qp_data_in_order, ibv_query_qp_data_in_order, "@@IBVERBS_1.14");

/* Refused: objects that cannot be rebuilt or are shared outside the process. */
#define REFUSE(name, ver, rtype, rval, feature, why)                                               \
    IBCR_EXPORT rtype exp_r_##name (void);                                                         \
    rtype exp_r_##name (void)                                                                      \
    {                                                                                              \
        ibcr_refuse (feature, why);                                                                \
        return rval;                                                                               \
    }                                                                                              \
    SYMVER (exp_r_##name, name, "@@IBVERBS_" ver)

REFUSE (ibv_import_device, "1.10", void *, NULL, "ibv_import_device",
        "a device shared with another process cannot be checkpointed");
REFUSE (ibv_import_pd, "1.10", void *, NULL, "ibv_import_pd",
        "objects shared with another process cannot be checkpointed");
REFUSE (ibv_import_mr, "1.10", void *, NULL, "ibv_import_mr",
        "objects shared with another process cannot be checkpointed");
REFUSE (ibv_import_dm, "1.13", void *, NULL, "ibv_import_dm", "device memory is not supported");
REFUSE (ibv_unimport_pd, "1.10", void *, NULL, "ibv_unimport_pd", "import is not supported");
REFUSE (ibv_unimport_mr, "1.10", void *, NULL, "ibv_unimport_mr", "import is not supported");
REFUSE (ibv_unimport_dm, "1.13", void *, NULL, "ibv_unimport_dm", "import is not supported");
REFUSE (ibv_attach_mcast, "1.1", int, EOPNOTSUPP, "multicast (ibv_attach_mcast)",
        "group membership is not rebuilt");
REFUSE (ibv_detach_mcast, "1.1", int, EOPNOTSUPP, "multicast (ibv_detach_mcast)",
        "group membership is not rebuilt");
REFUSE (ibv_set_ece, "1.10", int, EOPNOTSUPP, "ibv_set_ece",
        "enhanced connection establishment options are not replayed");
REFUSE (ibv_query_ece, "1.10", int, EOPNOTSUPP, "ibv_query_ece",
        "enhanced connection establishment options are not replayed");
REFUSE (ibv_resolve_eth_l2_from_gid, "1.1", int, -1, "ibv_resolve_eth_l2_from_gid",
        "Ethernet L2 addresses change across rebuilds");

IBCR_EXPORT void exp_register_driver (const char *n, void *f);
void exp_register_driver (const char *n, void *f)
{
    (void)n;
    (void)f;
}
SYMVER (exp_register_driver, ibv_register_driver, "@IBVERBS_1.1");

/* The 1.0 ABI */
OLD_PTR (get_device_list);
OLD_PTR (get_device_name);
OLD_PTR (open_device);
OLD_PTR (alloc_pd);
OLD_PTR (reg_mr);
OLD_PTR (create_cq);
OLD_PTR (create_srq);
OLD_PTR (create_qp);
OLD_PTR (create_ah);
OLD_PTR (free_device_list);
OLD_PTR (ack_async_event);
OLD_PTR (ack_cq_events);
OLD_PTR (get_device_guid);
OLD_INT (close_device);
OLD_INT (query_device);
OLD_INT (query_port);
OLD_INT (query_gid);
OLD_INT (query_pkey);
OLD_INT (get_async_event);
OLD_INT (dealloc_pd);
OLD_INT (dereg_mr);
OLD_INT (resize_cq);
OLD_INT (destroy_cq);
OLD_INT (get_cq_event);
OLD_INT (modify_srq);
OLD_INT (query_srq);
OLD_INT (destroy_srq);
OLD_INT (modify_qp);
OLD_INT (query_qp);
OLD_INT (destroy_qp);
OLD_INT (destroy_ah);
OLD_INT (attach_mcast);
OLD_INT (detach_mcast);
