/*
 * device.c - the softib device: discovery, open/close, queries, async
 * events, host addressing.
 *
 * There is exactly one device, "softib0", with one port.  Its LID and GID
 * come from the host's IPv4 address, re-read at every ibv_open_device so a
 * process restored on another host starts afresh with the new address.
 * Nothing here is process-global: a device list owns its sib_dev, each
 * context owns everything it creates.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>

#include "softib.h"

/* ---- addressing ---- */

void sib_ip_to_gid (uint32_t ip, union ibv_gid *gid)
{
    memset (gid, 0, sizeof (*gid));
    gid->raw[10] = 0xff;
    gid->raw[11] = 0xff;
    memcpy (&gid->raw[12], &ip, 4);
}

bool sib_gid_to_ip (const union ibv_gid *gid, uint32_t *ip)
{
    static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

    if (memcmp (gid->raw, pfx, sizeof (pfx)) != 0)
        return false;
    memcpy (ip, &gid->raw[12], 4);
    return true;
}

/* LID-only addressing reaches hosts that share our /16 (documented in
 * softib(7)); a GRH (GID) reaches any IPv4 host. */
uint32_t sib_lid_to_ip (const struct sib_ctx *ctx, uint16_t lid)
{
    uint32_t me = ntohl (ctx->addr.ip);

    if (lid == ctx->addr.lid)
        return ctx->addr.ip;
    return htonl ((me & 0xffff0000u) | lid);
}

uint16_t sib_port_of_qpn (const struct sib_ctx *ctx, uint32_t qpn)
{
    return (uint16_t)(ctx->port_base + ((qpn >> SIB_QP_IDX_BITS) & 0xfff));
}

static int addr_from_iface (const char *want, uint32_t *ip)
{
    struct ifaddrs *ifa, *i;
    int rc = -1;

    if (getifaddrs (&ifa) < 0)
        return -1;
    for (i = ifa; i; i = i->ifa_next) {
        struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;

        if (!sin || sin->sin_family != AF_INET)
            continue;
        if (want) {
            if (strcmp (i->ifa_name, want) != 0)
                continue;
        } else if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) {
            continue;
        }
        *ip = sin->sin_addr.s_addr;
        rc = 0;
        break;
    }
    freeifaddrs (ifa);
    return rc;
}

int sib_host_addr (struct sib_addr *a)
{
    const char *s = getenv ("SOFTIB_ADDR");
    const char *ifname = getenv ("SOFTIB_IFACE");
    struct in_addr in;

    memset (a, 0, sizeof (*a));
    if (s && *s) {
        if (inet_pton (AF_INET, s, &in) != 1) {
            sib_log ("SOFTIB_ADDR='%s' is not an IPv4 address; "
                     "set it to this host's address, e.g. 10.0.0.1",
                     s);
            errno = EINVAL;
            return -1;
        }
        a->ip = in.s_addr;
    } else if (ifname && *ifname) {
        if (addr_from_iface (ifname, &a->ip) < 0) {
            sib_log ("SOFTIB_IFACE='%s' has no IPv4 address; name "
                     "an interface listed by 'ip -4 addr'",
                     ifname);
            errno = ENODEV;
            return -1;
        }
    } else if (addr_from_iface (NULL, &a->ip) < 0) {
        a->ip = htonl (INADDR_LOOPBACK);
    }
    /* softib has no multicast, so LIDs 0xc000..0xfffe are plain
	 * addresses too; only 0 and 0xffff cannot be used */
    a->lid = ntohl (a->ip) & 0xffff;
    if (a->lid == 0 || a->lid == 0xffff)
        sib_log ("warning: address %s gives the invalid LID 0x%x; "
                 "address peers by GID (GRH) instead",
                 inet_ntoa (*(struct in_addr *)&a->ip), a->lid);
    sib_ip_to_gid (a->ip, &a->gid);
    return 0;
}

/* ---- device list ---- */

void sib_dev_put (struct sib_dev *dev)
{
    if (dev && __atomic_sub_fetch (&dev->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free (dev);
}

#undef ibv_get_device_list
SIB_EXPORT struct ibv_device **ibv_get_device_list (int *num)
{
    struct ibv_device **list;
    struct sib_dev *dev;
    struct sib_addr a;

    list = calloc (2, sizeof (*list));
    dev = calloc (1, sizeof (*dev));
    if (!list || !dev) {
        free (list);
        free (dev);
        errno = ENOMEM;
        return NULL;
    }
    if (sib_host_addr (&a) < 0)
        a.ip = htonl (INADDR_LOOPBACK);
    dev->refs = 1;
    dev->guid = ((uint64_t)SIB_VENDOR_ID << 48) | ntohl (a.ip);
    dev->ibdev.node_type = IBV_NODE_CA;
    dev->ibdev.transport_type = IBV_TRANSPORT_IB;
    snprintf (dev->ibdev.name, sizeof (dev->ibdev.name), "%s", SIB_DEV_NAME);
    snprintf (dev->ibdev.dev_name, sizeof (dev->ibdev.dev_name), "uverbs0");
    snprintf (dev->ibdev.dev_path, sizeof (dev->ibdev.dev_path),
              "/sys/class/infiniband_verbs/uverbs0");
    snprintf (dev->ibdev.ibdev_path, sizeof (dev->ibdev.ibdev_path), "/sys/class/infiniband/%s",
              SIB_DEV_NAME);
    list[0] = &dev->ibdev;
    if (num)
        *num = 1;
    return list;
}

SIB_EXPORT void ibv_free_device_list (struct ibv_device **list)
{
    if (!list)
        return;
    for (int i = 0; list[i]; i++)
        sib_dev_put ((struct sib_dev *)list[i]);
    free (list);
}

SIB_EXPORT const char *ibv_get_device_name (struct ibv_device *device)
{
    return device ? device->name : NULL;
}

SIB_EXPORT __be64 ibv_get_device_guid (struct ibv_device *device)
{
    return htobe64 (((struct sib_dev *)device)->guid);
}

SIB_EXPORT int ibv_get_device_index (struct ibv_device *device)
{
    return device ? 0 : -1;
}

/* ---- queries ---- */

static void fill_device_attr (struct sib_ctx *ctx, struct ibv_device_attr *d)
{
    memset (d, 0, sizeof (*d));
    snprintf (d->fw_ver, sizeof (d->fw_ver), "%s", PACKAGE_VERSION);
    d->node_guid = htobe64 (ctx->dev->guid);
    d->sys_image_guid = d->node_guid;
    d->max_mr_size = UINT64_MAX;
    d->page_size_cap = 0xfffff000;
    d->vendor_id = SIB_VENDOR_ID;
    d->vendor_part_id = SIB_VENDOR_PART;
    d->hw_ver = 1;
    d->max_qp = SIB_MAX_QP - 2;
    d->max_qp_wr = SIB_MAX_WR;
    d->device_cap_flags =
        IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_PORT_ACTIVE_EVENT;
    d->max_sge = SIB_MAX_SGE;
    d->max_sge_rd = SIB_MAX_SGE;
    d->max_cq = 65536;
    d->max_cqe = SIB_MAX_CQE;
    d->max_mr = 1 << 20;
    d->max_pd = 65536;
    d->max_qp_rd_atom = SIB_MAX_RD_ATOM;
    d->max_ee_rd_atom = 0;
    d->max_res_rd_atom = SIB_MAX_RD_ATOM * (SIB_MAX_QP - 2);
    d->max_qp_init_rd_atom = SIB_MAX_RD_ATOM;
    d->atomic_cap = IBV_ATOMIC_HCA;
    d->max_ah = 65536;
    d->max_srq = 65536;
    d->max_srq_wr = SIB_MAX_WR;
    d->max_srq_sge = SIB_MAX_SGE;
    d->max_pkeys = 1;
    d->local_ca_ack_delay = 15;
    d->phys_port_cnt = 1;
}

static int sib_query_device (struct ibv_context *c, struct ibv_device_attr *d)
{
    fill_device_attr (sib_ctx_of (c), d);
    return 0;
}

SIB_EXPORT int ibv_query_device (struct ibv_context *c, struct ibv_device_attr *d)
{
    return sib_query_device (c, d);
}

static int sib_query_device_ex (struct ibv_context *c, const struct ibv_query_device_ex_input *in,
                                struct ibv_device_attr_ex *attr, size_t size)
{
    struct ibv_device_attr_ex ex;

    if (in && in->comp_mask)
        return EINVAL;
    memset (&ex, 0, sizeof (ex));
    fill_device_attr (sib_ctx_of (c), &ex.orig_attr);
    ex.completion_timestamp_mask = UINT64_MAX;
    ex.hca_core_clock = 1000000; /* kHz: timestamps are in ns */
    ex.max_dm_size = 0;
    ex.raw_packet_caps = 0;
    ex.pci_atomic_caps.fetch_add = 0;
    ex.phys_port_cnt_ex = 1;
    if (size > sizeof (ex))
        memset ((char *)attr + sizeof (ex), 0, size - sizeof (ex));
    memcpy (attr, &ex, size < sizeof (ex) ? size : sizeof (ex));
    return 0;
}

static void fill_port_attr (struct ibv_port_attr *p, struct sib_ctx *ctx)
{
    memset (p, 0, sizeof (*p));
    p->state = IBV_PORT_ACTIVE;
    p->max_mtu = IBV_MTU_4096;
    p->active_mtu = IBV_MTU_4096;
    p->gid_tbl_len = 1;
    p->port_cap_flags = 0;
    p->max_msg_sz = SIB_MAX_MSG;
    p->bad_pkey_cntr = 0;
    p->qkey_viol_cntr = 0;
    p->pkey_tbl_len = 1;
    p->lid = ctx->addr.lid;
    p->sm_lid = ctx->addr.lid;
    p->lmc = 0;
    p->max_vl_num = 1;
    p->sm_sl = 0;
    p->subnet_timeout = 18;
    p->init_type_reply = 0;
    p->active_width = 2;  /* 4x */
    p->active_speed = 32; /* EDR-like, informational only */
    p->phys_state = 5;    /* LinkUp */
    p->link_layer = IBV_LINK_LAYER_INFINIBAND;
    p->flags = 0;
    p->port_cap_flags2 = 0;
}

static int sib_query_port (struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr,
                           size_t len)
{
    struct ibv_port_attr p;

    if (port != 1)
        return EINVAL;
    fill_port_attr (&p, sib_ctx_of (c));
    memcpy (attr, &p, len < sizeof (p) ? len : sizeof (p));
    return 0;
}

/* The exported symbol is reached by old binaries and by the inline
 * ___ibv_query_port when no extended op exists; it receives the compat
 * struct, whose layout is the prefix of ibv_port_attr before port_cap_flags2
 * and later additions. */
struct _compat_ibv_port_attr;
#undef ibv_query_port
SIB_EXPORT int ibv_query_port (struct ibv_context *c, uint8_t port,
                               struct _compat_ibv_port_attr *attr)
{
    return sib_query_port (c, port, (struct ibv_port_attr *)attr,
                           offsetof (struct ibv_port_attr, port_cap_flags2));
}

static int check_gid (struct ibv_context *c, uint32_t port, uint32_t idx)
{
    if (!c || port != 1 || idx != 0)
        return -1;
    return 0;
}

SIB_EXPORT int ibv_query_gid (struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
    if (check_gid (c, port, (uint32_t)index) < 0) {
        errno = EINVAL;
        return -1;
    }
    *gid = sib_ctx_of (c)->addr.gid;
    return 0;
}

SIB_EXPORT int _ibv_query_gid_ex (struct ibv_context *c, uint32_t port, uint32_t idx,
                                  struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    if (flags || entry_size < sizeof (*entry))
        return EINVAL;
    if (check_gid (c, port, idx) < 0)
        return port != 1 ? EINVAL : ENODATA;
    memset (entry, 0, sizeof (*entry));
    entry->gid = sib_ctx_of (c)->addr.gid;
    entry->gid_index = 0;
    entry->port_num = 1;
    entry->gid_type = IBV_GID_TYPE_IB;
    entry->ndev_ifindex = 0;
    return 0;
}

SIB_EXPORT ssize_t _ibv_query_gid_table (struct ibv_context *c, struct ibv_gid_entry *entries,
                                         size_t max, uint32_t flags, size_t entry_size)
{
    if (flags || entry_size < sizeof (*entries))
        return -EINVAL;
    if (max < 1)
        return -EINVAL;
    return _ibv_query_gid_ex (c, 1, 0, entries, 0, entry_size) ? -EINVAL : 1;
}

/* IBVERBS_PRIVATE_34, imported by ibv_devinfo. */
SIB_EXPORT int ibv_query_gid_type (struct ibv_context *c, uint8_t port, unsigned int index,
                                   int *type);
int ibv_query_gid_type (struct ibv_context *c, uint8_t port, unsigned int index, int *type)
{
    if (check_gid (c, port, index) < 0) {
        errno = EINVAL;
        return -1;
    }
    *type = 0; /* IB/RoCE v1 in driver.h's enum */
    return 0;
}

SIB_EXPORT int ibv_query_pkey (struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
    if (!c || port != 1 || index != 0) {
        errno = EINVAL;
        return -1;
    }
    *pkey = htobe16 (0xffff);
    return 0;
}

SIB_EXPORT int ibv_get_pkey_index (struct ibv_context *c, uint8_t port, __be16 pkey)
{
    if (port != 1 || (be16toh (pkey) & 0x7fff) != 0x7fff) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

/* ---- async events ---- */

void sib_async_event (struct sib_ctx *ctx, enum ibv_event_type type, void *obj)
{
    struct sib_async *e = calloc (1, sizeof (*e));
    uint64_t one = 1;

    if (!e) {
        sib_log ("out of memory: async event %s lost", sib_event_str (type));
        return;
    }
    e->ev.event_type = type;
    switch (type) {
    case IBV_EVENT_CQ_ERR:
        e->ev.element.cq = obj;
        break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        e->ev.element.srq = obj;
        break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_DEVICE_FATAL:
        e->ev.element.port_num = 1;
        break;
    default:
        e->ev.element.qp = obj;
        break;
    }
    pthread_mutex_lock (&ctx->ev_lock);
    if (ctx->ev_tail)
        ctx->ev_tail->next = e;
    else
        ctx->ev_head = e;
    ctx->ev_tail = e;
    pthread_mutex_unlock (&ctx->ev_lock);
    if (write (ctx->vctx.context.async_fd, &one, sizeof (one)) < 0)
        sib_log ("async event fd: %s", strerror (errno));
}

SIB_EXPORT int ibv_get_async_event (struct ibv_context *c, struct ibv_async_event *event)
{
    struct sib_ctx *ctx = sib_ctx_of (c);
    struct sib_async *e;
    uint64_t n;

    /* blocks unless the application made async_fd non-blocking */
    if (read (c->async_fd, &n, sizeof (n)) != sizeof (n))
        return -1;
    pthread_mutex_lock (&ctx->ev_lock);
    e = ctx->ev_head;
    if (e) {
        ctx->ev_head = e->next;
        if (!ctx->ev_head)
            ctx->ev_tail = NULL;
    }
    pthread_mutex_unlock (&ctx->ev_lock);
    if (!e) {
        errno = EAGAIN;
        return -1;
    }
    *event = e->ev;
    free (e);
    return 0;
}

SIB_EXPORT void ibv_ack_async_event (struct ibv_async_event *event)
{
    (void)event;
}

/* ---- open / close ---- */

/* context ops and extended ops live in other files */
SIB_HIDDEN void sib_ctx_ops_init (struct sib_ctx *ctx);

static void ctx_free (struct sib_ctx *ctx)
{
    struct sib_async *e, *n;

    for (e = ctx->ev_head; e; e = n) {
        n = e->next;
        free (e);
    }
    if (ctx->vctx.context.async_fd >= 0)
        close (ctx->vctx.context.async_fd);
    sib_mr_table_free (ctx);
    pthread_mutex_destroy (&ctx->lock);
    pthread_mutex_destroy (&ctx->ev_lock);
    pthread_mutex_destroy (&ctx->cmd_lock);
    pthread_cond_destroy (&ctx->cmd_cond);
    pthread_mutex_destroy (&ctx->vctx.context.mutex);
    free (ctx);
}

SIB_EXPORT struct ibv_context *ibv_open_device (struct ibv_device *device)
{
    struct sib_dev *dev = (struct sib_dev *)device;
    struct sib_ctx *ctx;
    const char *pb = getenv ("SOFTIB_PORT_BASE");
    int err;

    if (!device) {
        errno = EINVAL;
        return NULL;
    }
    ctx = calloc (1, sizeof (*ctx));
    if (!ctx) {
        errno = ENOMEM;
        return NULL;
    }
    ctx->epfd = ctx->listen_fd = ctx->ulisten_fd = ctx->wake_fd = -1;
    pthread_mutex_init (&ctx->lock, NULL);
    pthread_mutex_init (&ctx->ev_lock, NULL);
    pthread_mutex_init (&ctx->cmd_lock, NULL);
    pthread_cond_init (&ctx->cmd_cond, NULL);
    pthread_mutex_init (&ctx->vctx.context.mutex, NULL);
    ctx->vctx.context.async_fd = eventfd (0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ctx->vctx.context.async_fd < 0)
        goto error;
    ctx->port_base = SIB_PORT_BASE;
    if (pb && *pb) {
        char *end;
        long v = strtol (pb, &end, 10);

        if (*end || v < 1024 || v > 65535 - SIB_SLOTS) {
            sib_log ("SOFTIB_PORT_BASE='%s' is not a port number "
                     "between 1024 and %d",
                     pb, 65535 - SIB_SLOTS);
            errno = EINVAL;
            goto error;
        }
        ctx->port_base = (uint16_t)v;
    }
    if (sib_log_check () < 0 || sib_host_addr (&ctx->addr) < 0)
        goto error;
    ctx->dev = dev;
    sib_mr_keys_seed (ctx);
    /* QP numbers are the context's slot and an index.  A context opened
     * again (libibcr's rebuild) may get its old slot back: starting the
     * indices at a random place, as MR keys do, keeps the new numbers from
     * repeating the old ones (a real HCA does not hand out a number it
     * just freed either). */
    ctx->qp_next = 2 + ctx->mr_gen % (SIB_MAX_QP - 2);
    ctx->lock_bias = sib_lock_bias_ok ();
    ctx->vctx.sz = sizeof (struct verbs_context);
    ctx->vctx.context.device = device;
    ctx->vctx.context.cmd_fd = -1;
    ctx->vctx.context.num_comp_vectors = 1;
    ctx->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx->vctx.query_port = sib_query_port;
    ctx->vctx.query_device_ex = sib_query_device_ex;
    ctx->vctx.context.ops._compat_query_device = sib_query_device;
    sib_ctx_ops_init (ctx);
    if (sib_progress_start (ctx) < 0)
        goto error;
    __atomic_add_fetch (&dev->refs, 1, __ATOMIC_ACQ_REL);
    return &ctx->vctx.context;
error:
    err = errno;
    ctx_free (ctx);
    errno = err;
    return NULL;
}

SIB_EXPORT int ibv_close_device (struct ibv_context *c)
{
    struct sib_ctx *ctx;
    struct sib_dev *dev;

    if (!c)
        return EINVAL;
    ctx = sib_ctx_of (c);
    dev = ctx->dev;
    sib_progress_stop (ctx);
    ctx_free (ctx);
    sib_dev_put (dev);
    return 0;
}

/* default versions; IBVERBS_1.0 ones are in misc.c */
SIB_V11 (ibv_get_device_list);
SIB_V11 (ibv_free_device_list);
SIB_V11 (ibv_get_device_name);
SIB_V11 (ibv_get_device_guid);
SIB_V11 (ibv_query_device);
SIB_V11 (ibv_query_port);
SIB_V11 (ibv_query_gid);
SIB_V11 (ibv_query_pkey);
SIB_V11 (ibv_get_async_event);
SIB_V11 (ibv_ack_async_event);
SIB_V11 (ibv_open_device);
SIB_V11 (ibv_close_device);
