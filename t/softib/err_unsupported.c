/* err_unsupported.c - what the device does not implement fails cleanly.
 *
 * XRC domains, memory windows, on-demand paging, device memory, flow
 * steering, multicast and QP types beyond RC/UD/UC must fail with an error
 * (EOPNOTSUPP where the verbs API defines one), never succeed silently and
 * never damage the context: after all of them, a normal MR and QP still
 * work.  On a real HCA that supports some of these, the matching test
 * reports the support in a diag line and passes.  Prints TAP.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vw_pair.h"

static struct vw_dev dev;

static int supported_ok (const char *what)
{
    /* Only softib promises to refuse; a real HCA may well support it. */
    int strict = getenv ("VW_STRICT_UNSUPPORTED") != NULL;

    if (strict)
        return ok (0, "%s must be refused by this device, but succeeded", what);
    diag ("%s is supported by this device", what);
    return ok (1, "%s is supported (set VW_STRICT_UNSUPPORTED to demand refusal)", what);
}

static void check_null (void *obj, int err, const char *what)
{
    if (obj) {
        supported_ok (what);
        return;
    }
    if (!ok (err == EOPNOTSUPP, "%s fails with EOPNOTSUPP", what))
        diag ("errno %d (%s)", err, strerror (err));
}

int main (void)
{
    static uint8_t buf[8192];
    struct ibv_cq *cq;
    char err[256];

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    if (!(cq = ibv_create_cq (dev.ctx, 16, NULL, NULL, 0)))
        BAIL_OUT ("ibv_create_cq: %s", strerror (errno));

    {
        struct ibv_xrcd_init_attr xa = { .comp_mask =
                                             IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                         .fd = -1,
                                         .oflags = O_CREAT };
        struct ibv_xrcd *x;
        errno = 0;
        x = ibv_open_xrcd (dev.ctx, &xa);
        check_null (x, errno, "ibv_open_xrcd (XRC domain)");
        if (x)
            ibv_close_xrcd (x);
    }
    {
        struct ibv_mw *mw;
        errno = 0;
        mw = ibv_alloc_mw (dev.pd, IBV_MW_TYPE_1);
        check_null (mw, errno, "ibv_alloc_mw type 1 (memory window)");
        if (mw)
            ibv_dealloc_mw (mw);
        errno = 0;
        mw = ibv_alloc_mw (dev.pd, IBV_MW_TYPE_2);
        check_null (mw, errno, "ibv_alloc_mw type 2 (memory window)");
        if (mw)
            ibv_dealloc_mw (mw);
    }
    {
        struct ibv_mr *mr;
        errno = 0;
        mr = ibv_reg_mr (dev.pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
        check_null (mr, errno, "ibv_reg_mr with IBV_ACCESS_ON_DEMAND (ODP)");
        if (mr)
            ibv_dereg_mr (mr);
    }
    {
        struct ibv_alloc_dm_attr da = { .length = 4096 };
        struct ibv_dm *dm;
        errno = 0;
        dm = ibv_alloc_dm (dev.ctx, &da);
        check_null (dm, errno, "ibv_alloc_dm (device memory)");
        if (dm)
            ibv_free_dm (dm);
    }
    {
        struct ibv_qp_init_attr ia = {
            .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD, .cap = { 4, 4, 1, 1, 0 }
        };
        struct ibv_qp *qp = ibv_create_qp (dev.pd, &ia);
        struct ibv_flow_attr fa = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof (fa), .port = 1 };
        union ibv_gid mgid = { .raw = { 0xff, 0x12, 0x40, 0x1b } };
        struct ibv_flow *fl;
        int rc;

        if (!qp)
            BAIL_OUT ("ibv_create_qp(UD): %s", strerror (errno));
        errno = 0;
        fl = ibv_create_flow (qp, &fa);
        check_null (fl, errno, "ibv_create_flow (flow steering)");
        if (fl)
            ibv_destroy_flow (fl);
        errno = 0;
        rc = ibv_attach_mcast (qp, &mgid, 0xc001);
        if (rc == 0) {
            supported_ok ("ibv_attach_mcast (multicast)");
            ibv_detach_mcast (qp, &mgid, 0xc001);
        } else if (!ok (rc == EOPNOTSUPP || errno == EOPNOTSUPP,
                        "ibv_attach_mcast (multicast) fails with EOPNOTSUPP")) {
            diag ("returned %d, errno %d", rc, errno);
        }
        ok (ibv_destroy_qp (qp) == 0, "the UD QP used above still destroys");
    }
    {
        static const struct {
            enum ibv_qp_type t;
            const char *n;
        } types[] = {
            { IBV_QPT_XRC_SEND, "XRC_SEND" },
            { IBV_QPT_XRC_RECV, "XRC_RECV" },
            { IBV_QPT_RAW_PACKET, "RAW_PACKET" },
            { IBV_QPT_DRIVER, "DRIVER (DC)" },
        };
        for (size_t i = 0; i < sizeof (types) / sizeof (types[0]); i++) {
            struct ibv_qp_init_attr ia = {
                .send_cq = cq, .recv_cq = cq, .qp_type = types[i].t, .cap = { 4, 4, 1, 1, 0 }
            };
            struct ibv_qp *qp;
            char what[64];
            errno = 0;
            qp = ibv_create_qp (dev.pd, &ia);
            snprintf (what, sizeof (what), "ibv_create_qp type %s", types[i].n);
            if (qp) {
                supported_ok (what);
                ibv_destroy_qp (qp);
            } else if (!ok (errno == EOPNOTSUPP || errno == EINVAL,
                            "%s fails (EOPNOTSUPP or EINVAL)", what)) {
                diag ("errno %d (%s)", errno, strerror (errno));
            }
        }
    }
    {
        /* The context must be intact after all the refusals. */
        struct vw_pair p;
        struct ibv_mr *mr = ibv_reg_mr (dev.pd, buf, sizeof (buf), IBV_ACCESS_LOCAL_WRITE);
        struct ibv_wc wc;
        int good;

        good = mr && vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) == 0
            && vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) == 0;
        ok (good, "a normal MR and a connected RC pair still work");
        if (good) {
            memset (buf, 0x42, 64);
            memset (buf + 4096, 0, 64);
            ok (vw_recv1 (p.qp[1], 1, buf + 4096, 64, mr->lkey) == 0
                    && vw_post1 (p.qp[0], IBV_WR_SEND, 2, buf, 64, mr->lkey, 0, 0,
                                 IBV_SEND_SIGNALED)
                        == 0
                    && vw_cq_wait (p.cq[1], &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS
                    && memcmp (buf, buf + 4096, 64) == 0,
                "and a SEND between them arrives intact");
            vw_pair_destroy (&p);
        }
        if (mr)
            ibv_dereg_mr (mr);
    }
    ok (ibv_destroy_cq (cq) == 0, "destroy the CQ");
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
