/* refuse.c - what libibcr cannot checkpoint fails at creation, clearly.
 *
 * Run under libibcr on softib.  Every feature libibcr refuses (XRC, memory
 * windows, ODP, device memory, flow steering, WQs, thread and parent
 * domains, raw packet and driver QPs, XRC SRQs, multicast, re-registration,
 * dma-buf MRs, imported objects) must fail with EOPNOTSUPP (NULL + errno,
 * or the errno value as its return), and libibcr must log one line per
 * refusal (counted by the calling test).  Ordinary objects keep working
 * afterwards.  TAP on stdout; the number of refusals on the last line.
 */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include "tap.h"

static int refusals;

static void null_eop (const void *p, const char *what)
{
    int e = errno;
    refusals++;
    ok (p == NULL && e == EOPNOTSUPP, "%s: NULL, errno EOPNOTSUPP (got %p, %s)", what, p,
        strerror (e));
}

static void rc_eop (int rc, const char *what)
{
    refusals++;
    ok (rc == EOPNOTSUPP || (rc == -1 && errno == EOPNOTSUPP), "%s: EOPNOTSUPP (got %d, errno %s)",
        what, rc, strerror (errno));
}

int main (void)
{
    static char buf[4096];
    struct ibv_device **l;
    int n;

    plan (NO_PLAN);
    l = ibv_get_device_list (&n);
    if (!l || n < 1)
        BAIL_OUT ("no verbs device (is softib on LD_LIBRARY_PATH?)");
    struct ibv_context *ctx = ibv_open_device (l[0]);
    struct ibv_pd *pd = ctx ? ibv_alloc_pd (ctx) : NULL;
    struct ibv_cq *cq = ctx ? ibv_create_cq (ctx, 8, NULL, NULL, 0) : NULL;
    struct ibv_mr *mr = pd ? ibv_reg_mr (pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!cq || !mr)
        BAIL_OUT ("ordinary objects: %s", strerror (errno));
    struct ibv_qp_init_attr qa = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_UD,
        .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
    };
    struct ibv_qp *ud = ibv_create_qp (pd, &qa);
    if (!ud)
        BAIL_OUT ("a UD QP: %s", strerror (errno));

    struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                     .fd = -1 };
    errno = 0;
    null_eop (ibv_open_xrcd (ctx, &xa), "ibv_open_xrcd (XRC)");
    errno = 0;
    null_eop (ibv_alloc_mw (pd, IBV_MW_TYPE_1), "ibv_alloc_mw (memory window)");
    errno = 0;
    null_eop (ibv_reg_mr (pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND),
              "ibv_reg_mr with IBV_ACCESS_ON_DEMAND (ODP)");
    struct ibv_alloc_dm_attr da = { .length = 4096 };
    errno = 0;
    null_eop (ibv_alloc_dm (ctx, &da), "ibv_alloc_dm (device memory)");
    struct ibv_flow_attr fa = { .size = sizeof (fa), .type = IBV_FLOW_ATTR_NORMAL, .port = 1 };
    errno = 0;
    null_eop (ibv_create_flow (ud, &fa), "ibv_create_flow (flow steering)");
    struct ibv_wq_init_attr wa = {
        .wq_type = IBV_WQT_RQ, .max_wr = 2, .max_sge = 1, .pd = pd, .cq = cq
    };
    errno = 0;
    null_eop (ibv_create_wq (ctx, &wa), "ibv_create_wq (work queue)");
    struct ibv_td_init_attr ta = { 0 };
    errno = 0;
    null_eop (ibv_alloc_td (ctx, &ta), "ibv_alloc_td (thread domain)");
    struct ibv_parent_domain_init_attr pda = { .pd = pd };
    errno = 0;
    null_eop (ibv_alloc_parent_domain (ctx, &pda), "ibv_alloc_parent_domain");

    qa.qp_type = IBV_QPT_XRC_SEND;
    errno = 0;
    null_eop (ibv_create_qp (pd, &qa), "ibv_create_qp IBV_QPT_XRC_SEND");
    qa.qp_type = IBV_QPT_RAW_PACKET;
    errno = 0;
    null_eop (ibv_create_qp (pd, &qa), "ibv_create_qp IBV_QPT_RAW_PACKET");
    qa.qp_type = IBV_QPT_DRIVER;
    errno = 0;
    null_eop (ibv_create_qp (pd, &qa), "ibv_create_qp IBV_QPT_DRIVER (DC, direct verbs)");

    struct ibv_srq_init_attr_ex sa = {
        .attr = { .max_wr = 2, .max_sge = 1 },
        .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ,
        .srq_type = IBV_SRQT_TM,
        .pd = pd,
        .cq = cq,
    };
    errno = 0;
    null_eop (ibv_create_srq_ex (ctx, &sa), "ibv_create_srq_ex tag-matching SRQ");

    union ibv_gid mgid = { .raw = { 0xff, 0x12 } };
    errno = 0;
    rc_eop (ibv_attach_mcast (ud, &mgid, 0xc001), "ibv_attach_mcast (multicast)");
    errno = 0;
    refusals++;
    int rr = ibv_rereg_mr (mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ok (rr != 0 && errno == EOPNOTSUPP, "ibv_rereg_mr: fails, errno EOPNOTSUPP (got %d, %s)", rr,
        strerror (errno));
    errno = 0;
    null_eop (ibv_reg_dmabuf_mr (pd, 0, 4096, 0, 0, IBV_ACCESS_LOCAL_WRITE),
              "ibv_reg_dmabuf_mr (dma-buf)");
    errno = 0;
    null_eop (ibv_import_pd (ctx, 1), "ibv_import_pd (shared object)");

    /* Ordinary objects still work after all that. */
    qa.qp_type = IBV_QPT_RC;
    struct ibv_qp *rc = ibv_create_qp (pd, &qa);
    ok (rc != NULL, "an RC QP is still created afterwards");
    struct ibv_mr *mr2 = ibv_reg_mr (pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
    ok (mr2 != NULL, "an MR is still registered afterwards");

    if (mr2)
        ibv_dereg_mr (mr2);
    if (rc)
        ibv_destroy_qp (rc);
    ibv_destroy_qp (ud);
    ibv_dereg_mr (mr);
    ibv_destroy_cq (cq);
    ibv_dealloc_pd (pd);
    ibv_close_device (ctx);
    ibv_free_device_list (l);
    done_testing ();
    printf ("# refusals %d\n", refusals);
    return exit_status ();
}
