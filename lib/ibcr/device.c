/* device.c - devices, contexts, queries and async events, virtualized.
 *
 * The application gets ibcr_device and ibcr_ctx structs that live as long
 * as the process (devices) or until ibv_close_device (contexts).  Ports
 * answer with the LID and GIDs first seen: peers keep using those, and the
 * translation tables map them to the current real ones after a rebuild.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "ibcr.h"
#include "backend.h"
#include "gate.h"
#include "exports.h"
#include "pump.h"
#include "ucxclock.h"

#define MAX_DEVS 32
static struct ibcr_device devs[MAX_DEVS];
static int ndevs;

/* Make our device table mirror the backend's (names first seen stay). */
static int devs_sync (void)
{
    int n = 0;
    struct ibv_device **l = ibcr_be.get_device_list (&n);
    if (!l)
        return -1 * (be_errno () != 0);
    for (int i = 0; i < n && l[i]; i++) {
        int j;
        for (j = 0; j < ndevs; j++)
            if (strcmp (devs[j].dev.name, l[i]->name) == 0)
                break;
        if (j == ndevs) {
            if (ndevs == MAX_DEVS)
                break;
            struct ibcr_device *d = &devs[ndevs++];
            memset (d, 0, sizeof (*d));
            d->dev.node_type = l[i]->node_type;
            d->dev.transport_type = l[i]->transport_type;
            memcpy (d->dev.name, l[i]->name, sizeof (d->dev.name));
            memcpy (d->dev.dev_name, l[i]->dev_name, sizeof (d->dev.dev_name));
            memcpy (d->dev.dev_path, l[i]->dev_path, sizeof (d->dev.dev_path));
            memcpy (d->dev.ibdev_path, l[i]->ibdev_path, sizeof (d->dev.ibdev_path));
            d->guid = ibcr_be.get_device_guid (l[i]);
            d->index = i;
        }
    }
    ibcr_be.free_device_list (l);
    return n;
}

struct ibv_device **ibcr_get_device_list (int *num)
{
    if (ibcr_init () < 0)
        return NULL;
    gate_enter ();
    int n = devs_sync ();
    gate_leave ();
    if (n < 0)
        return NULL;
    /* Only devices the backend has now, in its order, but our structs. */
    struct ibv_device **l = calloc (ndevs + 1, sizeof (*l));
    if (!l) {
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < ndevs && i < n; i++)
        l[i] = &devs[i].dev;
    if (num)
        *num = n < ndevs ? n : ndevs;
    return l;
}

void ibcr_free_device_list (struct ibv_device **list)
{
    free (list);
}

const char *ibcr_get_device_name (struct ibv_device *dev)
{
    return dev->name;
}

__be64 ibcr_get_device_guid (struct ibv_device *dev)
{
    return ((struct ibcr_device *)dev)->guid;
}

/* The backend's device for one of ours: same name, else same index, else
 * the first (an image moved to another kind of machine), else none. */
static struct ibv_context *open_matching (struct ibcr_device *vdev)
{
    int n = 0;
    struct ibv_device **l = ibcr_be.get_device_list (&n);
    struct ibv_device *pick = NULL;
    struct ibv_context *c = NULL;
    if (!l) {
        be_errno ();
        return NULL;
    }
    for (int i = 0; i < n && !pick; i++)
        if (strcmp (l[i]->name, vdev->dev.name) == 0)
            pick = l[i];
    if (!pick && vdev->index < n)
        pick = l[vdev->index];
    if (!pick && n > 0)
        pick = l[0];
    if (!pick) {
        ibcr_log ("no verbs device in backend %s to open %s on", ibcr_be.path, vdev->dev.name);
        errno = ENODEV;
    } else {
        c = ibcr_be.open_device (pick);
        if (!c)
            be_errno ();
    }
    int saved = errno;
    ibcr_be.free_device_list (l);
    errno = saved;
    return c;
}

/* Query a real port the way the header's inline ibv_query_port does. */
int ibcr_real_query_port (struct ibv_context *real, uint8_t port, struct ibv_port_attr *pa)
{
    struct verbs_context *rv = verbs_get_ctx_op (real, query_port);
    memset (pa, 0, sizeof (*pa));
    if (rv)
        return rv->query_port (real, port, pa, sizeof (*pa));
    int rc = ibcr_be.query_port (real, port, (struct _compat_ibv_port_attr *)pa);
    return rc ? be_errno () : 0;
}

int ibcr_port_learn (struct ibcr_ctx *vctx, uint8_t port)
{
    struct ibv_port_attr pa;
    struct ibcr_port *p;
    if (port < 1 || port > IBCR_MAX_PORTS || port > vctx->nports)
        return 0;
    p = &vctx->port[port];
    if (ibcr_real_query_port (vctx->real, port, &pa) != 0)
        return -1;
    p->rlid = pa.lid;
    int ng = pa.gid_tbl_len < IBCR_MAX_GIDS ? pa.gid_tbl_len : IBCR_MAX_GIDS;
    for (int i = 0; i < ng; i++)
        if (ibcr_be.query_gid (vctx->real, port, i, &p->rgid[i]) != 0)
            memset (&p->rgid[i], 0, sizeof (p->rgid[i]));
    if (!p->known) {
        p->vlid = p->rlid;
        memcpy (p->vgid, p->rgid, sizeof (p->vgid));
        p->ngid = ng;
        p->known = true;
    }
    return 0;
}

int ibcr_ctx_open_real (struct ibcr_ctx *vctx)
{
    struct ibv_device_attr da;
    vctx->real = open_matching (vctx->vdev);
    if (!vctx->real)
        return -1;
    if (ibcr_be.query_device (vctx->real, &da) == 0)
        vctx->nports = da.phys_port_cnt < IBCR_MAX_PORTS ? da.phys_port_cnt : IBCR_MAX_PORTS;
    else
        vctx->nports = 1;
    vctx->vc.context.num_comp_vectors = vctx->real->num_comp_vectors;
    for (int p = 1; p <= vctx->nports; p++)
        ibcr_port_learn (vctx, p);
    return 0;
}

struct ibv_context *ibcr_open_device (struct ibv_device *dev)
{
    struct ibcr_ctx *vctx;
    if (ibcr_init () < 0)
        return NULL;
    /* UCX opens its devices in ucp_init, before its first endpoint or
     * timer: the last moment its choice of clock can be told. */
    ucxclock_check ();
    if (dev < &devs[0].dev || dev >= &devs[MAX_DEVS].dev) {
        ibcr_log ("ibv_open_device: not a device from ibv_get_device_list");
        errno = EINVAL;
        return NULL;
    }
    vctx = calloc (1, sizeof (*vctx));
    if (!vctx) {
        errno = ENOMEM;
        return NULL;
    }
    vctx->vdev = (struct ibcr_device *)dev;
    vctx->async_efd = -1;
    ibcr_list_init (&vctx->pds);
    ibcr_list_init (&vctx->mrs);
    ibcr_list_init (&vctx->chans);
    ibcr_list_init (&vctx->cqs);
    ibcr_list_init (&vctx->srqs);
    ibcr_list_init (&vctx->qps);
    ibcr_list_init (&vctx->ahs);
    idtab_init (&vctx->qp_by_rqpn);
    idtab_init (&vctx->mr_by_vlkey);
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    if (ibcr_ctx_open_real (vctx) < 0)
        goto error;
    /* The application may poll() the async fd: give it one of ours that
     * survives rebuilds; the pump feeds it from the real one. */
    vctx->async_efd = eventfd (0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (vctx->async_efd < 0)
        goto error;
    pthread_mutex_init (&vctx->alock, NULL);
    if (pump_add_ctx (vctx) < 0)
        goto error;
    vctx->vc.sz = sizeof (struct verbs_context);
    vctx->vc.context.device = dev;
    vctx->vc.context.cmd_fd = -1;
    vctx->vc.context.async_fd = vctx->async_efd;
    vctx->vc.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
    pthread_mutex_init (&vctx->vc.context.mutex, NULL);
    ibcr_ctx_fill_ops (vctx);
    ibcr_list_add (&ibcr_ctxs, &vctx->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    return &vctx->vc.context;
error:;
    int saved = errno;
    pump_del_ctx (vctx);
    if (vctx->async_efd >= 0)
        close (vctx->async_efd);
    if (vctx->real)
        ibcr_be.close_device (vctx->real);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    free (vctx);
    errno = saved;
    return NULL;
}

int ibcr_close_device (struct ibv_context *ctx)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    int rc = 0;
    gate_enter ();
    pthread_mutex_lock (&ibcr_lock);
    pump_del_ctx (vctx);
    if (vctx->real && ibcr_be.close_device (vctx->real) != 0)
        rc = -1;
    ibcr_list_del (&vctx->link);
    pthread_mutex_unlock (&ibcr_lock);
    gate_leave ();
    if (vctx->async_efd >= 0)
        close (vctx->async_efd);
    idtab_fini (&vctx->qp_by_rqpn);
    idtab_fini (&vctx->mr_by_vlkey);
    free (vctx->aq);
    free (vctx);
    return rc;
}

int ibcr_query_device (struct ibv_context *ctx, struct ibv_device_attr *attr)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    gate_enter ();
    int rc = ibcr_be.query_device (vctx->real, attr);
    if (rc)
        rc = be_errno ();
    else
        attr->node_guid = vctx->vdev->guid;
    gate_leave ();
    return rc;
}

static int query_device_ex (struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
                            struct ibv_device_attr_ex *attr, size_t attr_size)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    int rc;
    gate_enter ();
    struct verbs_context *rv = verbs_get_ctx_op (vctx->real, query_device_ex);
    if (rv) {
        rc = rv->query_device_ex (vctx->real, in, attr, attr_size);
    } else {
        memset (attr, 0, attr_size);
        rc = ibcr_be.query_device (vctx->real, &attr->orig_attr) ? be_errno () : 0;
    }
    if (rc == 0) {
        attr->orig_attr.node_guid = vctx->vdev->guid;
        /* Refused features are not advertised. */
        attr->odp_caps.general_caps = 0;
        attr->max_dm_size = 0;
        attr->xrc_odp_caps = 0;
    }
    gate_leave ();
    return rc;
}

static void port_virtualize (struct ibcr_ctx *vctx, uint8_t port, struct ibv_port_attr *pa)
{
    if (port >= 1 && port <= IBCR_MAX_PORTS && vctx->port[port].known)
        pa->lid = vctx->port[port].vlid;
}

int ibcr_query_port (struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *cpa)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    struct ibv_port_attr pa;
    gate_enter ();
    int rc = ibcr_real_query_port (vctx->real, port, &pa);
    gate_leave ();
    if (rc == 0) {
        port_virtualize (vctx, port, &pa);
        /* As rdma-core does: the exported symbol is reached from the
         * header's inline fallback with a whole struct ibv_port_attr. */
        memcpy (cpa, &pa, sizeof (pa));
    }
    return rc;
}

static int query_port_ex (struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *out,
                          size_t len)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    struct ibv_port_attr pa;
    gate_enter ();
    int rc = ibcr_real_query_port (vctx->real, port, &pa);
    gate_leave ();
    if (rc == 0) {
        port_virtualize (vctx, port, &pa);
        memset (out, 0, len);
        memcpy (out, &pa, len < sizeof (pa) ? len : sizeof (pa));
    }
    return rc;
}

int ibcr_query_gid (struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    if (port >= 1 && port <= IBCR_MAX_PORTS && vctx->port[port].known && index >= 0
        && index < vctx->port[port].ngid) {
        *gid = vctx->port[port].vgid[index];
        return 0;
    }
    gate_enter ();
    int rc = ibcr_be.query_gid (vctx->real, port, index, gid);
    if (rc)
        be_errno ();
    gate_leave ();
    return rc;
}

int ibcr_query_gid_ex (struct ibv_context *ctx, uint32_t port, uint32_t index,
                       struct ibv_gid_entry *entry, uint32_t flags, size_t size)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    gate_enter ();
    int rc = ibcr_be.query_gid_ex (vctx->real, port, index, entry, flags, size);
    gate_leave ();
    if (rc == 0 && port >= 1 && port <= IBCR_MAX_PORTS && vctx->port[port].known
        && index < (uint32_t)vctx->port[port].ngid)
        entry->gid = vctx->port[port].vgid[index];
    return rc;
}

int ibcr_query_pkey (struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    gate_enter ();
    int rc = ibcr_be.query_pkey (vctx->real, port, index, pkey);
    if (rc)
        be_errno ();
    gate_leave ();
    return rc;
}

/* One real event in the application's terms: the element is the object
 * the application holds (real objects carry their virtual one as context).
 * An SRQ limit event disarms the limit, as on the real SRQ. */
void ibcr_ctx_async_push (struct ibcr_ctx *vctx, const struct ibv_async_event *real)
{
    struct ibv_async_event ev = *real;
    uint64_t one = 1;
    switch (real->event_type) {
    case IBV_EVENT_CQ_ERR:
        ev.element.cq = (struct ibv_cq *)&((struct ibcr_cq *)real->element.cq->cq_context)->cqx;
        break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
        struct ibcr_srq *vsrq = real->element.srq->srq_context;
        if (real->event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
            vsrq->limit_set = false;
        ev.element.srq = &vsrq->srq;
        break;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        ev.element.qp = &((struct ibcr_qp *)real->element.qp->qp_context)->qpx.qp_base;
        break;
    default:
        break; /* port and device events: port_num as is */
    }
    pthread_mutex_lock (&vctx->alock);
    if (vctx->aq_len == vctx->aq_cap) {
        size_t ncap = vctx->aq_cap ? vctx->aq_cap * 2 : 8;
        struct ibv_async_event *n = malloc (ncap * sizeof (*n));
        if (!n) {
            pthread_mutex_unlock (&vctx->alock);
            ibcr_log ("out of memory queueing an async event (type %d): lost", (int)ev.event_type);
            return;
        }
        for (size_t i = 0; i < vctx->aq_len; i++)
            n[i] = vctx->aq[(vctx->aq_head + i) % vctx->aq_cap];
        free (vctx->aq);
        vctx->aq = n;
        vctx->aq_cap = ncap;
        vctx->aq_head = 0;
    }
    vctx->aq[(vctx->aq_head + vctx->aq_len) % vctx->aq_cap] = ev;
    vctx->aq_len++;
    pthread_mutex_unlock (&vctx->alock);
    if (write (vctx->async_efd, &one, sizeof (one)) != sizeof (one))
        ibcr_log ("signalling an async event failed: %m");
}

/* Waits outside the gate (a checkpoint may run meanwhile), on our eventfd:
 * blocking unless the application made the async fd non-blocking. */
int ibcr_get_async_event (struct ibv_context *ctx, struct ibv_async_event *ev)
{
    struct ibcr_ctx *vctx = vctx_of (ctx);
    uint64_t v;
    for (;;) {
        ssize_t n = read (vctx->async_efd, &v, sizeof (v));
        if (n == (ssize_t)sizeof (v))
            break;
        if (n < 0 && errno != EINTR)
            return -1;
    }
    pthread_mutex_lock (&vctx->alock);
    bool got = vctx->aq_len > 0;
    if (got) {
        *ev = vctx->aq[vctx->aq_head];
        vctx->aq_head = (vctx->aq_head + 1) % vctx->aq_cap;
        vctx->aq_len--;
    }
    pthread_mutex_unlock (&vctx->alock);
    if (!got) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

/* The real event was acked when it was forwarded. */
void ibcr_ack_async_event (struct ibv_async_event *ev)
{
    (void)ev;
}

/* Refusals reached through the extended context. */
static struct ibv_xrcd *open_xrcd (struct ibv_context *c, struct ibv_xrcd_init_attr *a)
{
    ibcr_refuse ("XRC domains (ibv_open_xrcd)", "XRC state cannot be drained and rebuilt");
    return NULL;
}
static struct ibv_dm *alloc_dm (struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
    ibcr_refuse ("device memory (ibv_alloc_dm)",
                 "its contents live on the HCA and are lost at release");
    return NULL;
}
static struct ibv_mr *reg_dm_mr (struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off, size_t l,
                                 unsigned int a)
{
    ibcr_refuse ("device memory (ibv_reg_dm_mr)", "device memory is not supported");
    return NULL;
}
static struct ibv_flow *create_flow (struct ibv_qp *qp, struct ibv_flow_attr *f)
{
    ibcr_refuse ("flow steering (ibv_create_flow)", "steering rules are not recreated at rebuild");
    return NULL;
}
static struct ibv_qp *open_qp (struct ibv_context *c, struct ibv_qp_open_attr *a)
{
    ibcr_refuse ("shared XRC QPs (ibv_open_qp)", "XRC is not supported");
    return NULL;
}
static struct ibv_wq *create_wq (struct ibv_context *c, struct ibv_wq_init_attr *a)
{
    ibcr_refuse ("work queues (ibv_create_wq)", "WQs and RSS tables are not recreated at rebuild");
    return NULL;
}
static struct ibv_rwq_ind_table *create_rwq (struct ibv_context *c,
                                             struct ibv_rwq_ind_table_init_attr *a)
{
    ibcr_refuse ("RSS indirection tables", "WQs and RSS tables are not recreated at rebuild");
    return NULL;
}
static struct ibv_td *alloc_td (struct ibv_context *c, struct ibv_td_init_attr *a)
{
    ibcr_refuse ("thread domains (ibv_alloc_td)", "not recreated at rebuild");
    return NULL;
}
static struct ibv_pd *alloc_parent_domain (struct ibv_context *c,
                                           struct ibv_parent_domain_init_attr *a)
{
    ibcr_refuse ("parent domains (ibv_alloc_parent_domain)", "not recreated at rebuild");
    return NULL;
}
static struct ibv_counters *create_counters (struct ibv_context *c,
                                             struct ibv_counters_init_attr *a)
{
    ibcr_refuse ("flow counters (ibv_create_counters)", "flow steering is not supported");
    return NULL;
}
static int advise_mr (struct ibv_pd *pd, enum ibv_advise_mr_advice adv, uint32_t f,
                      struct ibv_sge *s, uint32_t n)
{
    return ibcr_refuse ("on-demand paging (ibv_advise_mr)", "ODP MRs are not supported");
}
static struct ibv_mr *alloc_null_mr (struct ibv_pd *pd)
{
    ibcr_refuse ("null MRs (ibv_alloc_null_mr)", "not recreated at rebuild");
    return NULL;
}
static struct ibv_mw *alloc_mw (struct ibv_pd *pd, enum ibv_mw_type t)
{
    ibcr_refuse ("memory windows (ibv_alloc_mw)",
                 "MW bindings cannot be rebuilt with the same rkeys");
    return NULL;
}
static struct ibv_flow_action *create_flow_action_esp (struct ibv_context *c,
                                                       struct ibv_flow_action_esp_attr *a)
{
    ibcr_refuse ("flow actions (ESP)", "flow steering is not supported");
    return NULL;
}
static int query_rt_values (struct ibv_context *c, struct ibv_values_ex *v)
{
    return ibcr_refuse ("ibv_query_rt_values_ex", "HCA clocks differ across rebuilds");
}

void ibcr_ctx_fill_ops (struct ibcr_ctx *vctx)
{
    struct verbs_context *vc = &vctx->vc;
    struct ibv_context_ops *o = &vc->context.ops;
    o->poll_cq = ibcr_poll_cq;
    o->req_notify_cq = ibcr_req_notify_cq;
    o->post_send = ibcr_post_send;
    o->post_recv = ibcr_post_recv;
    o->post_srq_recv = ibcr_post_srq_recv;
    o->alloc_mw = alloc_mw;
    vc->query_port = query_port_ex;
    vc->query_device_ex = query_device_ex;
    vc->create_cq_ex = ibcr_create_cq_ex;
    vc->create_qp_ex = ibcr_create_qp_ex;
    vc->create_srq_ex = ibcr_create_srq_ex;
    vc->open_xrcd = open_xrcd;
    vc->alloc_dm = alloc_dm;
    vc->reg_dm_mr = reg_dm_mr;
    vc->ibv_create_flow = create_flow;
    vc->open_qp = open_qp;
    vc->create_wq = create_wq;
    vc->create_rwq_ind_table = create_rwq;
    vc->alloc_td = alloc_td;
    vc->alloc_parent_domain = alloc_parent_domain;
    vc->create_counters = create_counters;
    vc->advise_mr = advise_mr;
    vc->alloc_null_mr = alloc_null_mr;
    vc->create_flow_action_esp = create_flow_action_esp;
    vc->query_rt_values = query_rt_values;
}
