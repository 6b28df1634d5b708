/* err_access.c - remote access errors complete as the IB spec says.
 *
 * A requester QP posts an RDMA WRITE/READ or atomic that the responder must
 * refuse (unknown rkey, a deregistered MR's rkey, outside the MR, an MR or
 * QP without the remote right); the WR must complete with
 * IBV_WC_REM_ACCESS_ERR, the requester QP must be in ERR, later WRs must
 * flush, and the responder's memory must be untouched.  Valid operations
 * on the same memory, up to its last byte, are the control: they succeed.
 * Prints TAP; the device is whatever libibverbs.so.1 the loader finds.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vw_pair.h"

#define MR_LEN 4096
#define WAIT_MS 5000

enum target { T_FULL, T_NOWRITE, T_NOREAD, T_NOATOMIC, T_DEREG, T_BOGUS, T_NTARGET };

struct acase {
    const char *name;
    enum ibv_wr_opcode op;
    enum target target;
    long off; /* from the target MR's start */
    uint32_t len;
    int qp_access; /* responder QP's access flags; 0 = all */
    enum ibv_wc_status want;
};

static struct vw_dev dev;
static uint8_t *mem[T_NTARGET];
static struct ibv_mr *mr[T_NTARGET];
static uint32_t rkey[T_NTARGET];
static uint8_t *local;
static struct ibv_mr *local_mr;

#define ALL_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static const struct acase cases[] = {
    /* controls: the same memory is reachable when the request is valid */
    { "valid RDMA WRITE", IBV_WR_RDMA_WRITE, T_FULL, 0, 64, 0, IBV_WC_SUCCESS },
    { "RDMA WRITE ending on the MR's last byte", IBV_WR_RDMA_WRITE, T_FULL, MR_LEN - 64, 64, 0,
      IBV_WC_SUCCESS },
    { "valid RDMA READ", IBV_WR_RDMA_READ, T_FULL, 128, 64, 0, IBV_WC_SUCCESS },
    { "valid FETCH_AND_ADD", IBV_WR_ATOMIC_FETCH_AND_ADD, T_FULL, 256, 8, 0, IBV_WC_SUCCESS },
    { "valid CMP_AND_SWP (its compare fails)", IBV_WR_ATOMIC_CMP_AND_SWP, T_FULL, MR_LEN - 8, 8, 0,
      IBV_WC_SUCCESS },
    /* bad rkey */
    { "RDMA WRITE with an unknown rkey", IBV_WR_RDMA_WRITE, T_BOGUS, 0, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "RDMA READ with an unknown rkey", IBV_WR_RDMA_READ, T_BOGUS, 0, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "FETCH_AND_ADD with an unknown rkey", IBV_WR_ATOMIC_FETCH_AND_ADD, T_BOGUS, 0, 8, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "CMP_AND_SWP with an unknown rkey", IBV_WR_ATOMIC_CMP_AND_SWP, T_BOGUS, 0, 8, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "RDMA WRITE with a deregistered MR's rkey", IBV_WR_RDMA_WRITE, T_DEREG, 0, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    /* out of bounds */
    { "RDMA WRITE crossing the MR's end", IBV_WR_RDMA_WRITE, T_FULL, MR_LEN - 8, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "RDMA WRITE starting before the MR", IBV_WR_RDMA_WRITE, T_FULL, -64, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "RDMA WRITE one byte past the MR's end", IBV_WR_RDMA_WRITE, T_FULL, MR_LEN - 63, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "RDMA READ crossing the MR's end", IBV_WR_RDMA_READ, T_FULL, MR_LEN - 8, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "FETCH_AND_ADD just past the MR's end", IBV_WR_ATOMIC_FETCH_AND_ADD, T_FULL, MR_LEN, 8, 0,
      IBV_WC_REM_ACCESS_ERR },
    /* missing rights on the MR */
    { "RDMA WRITE to an MR without REMOTE_WRITE", IBV_WR_RDMA_WRITE, T_NOWRITE, 0, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "RDMA READ from an MR without REMOTE_READ", IBV_WR_RDMA_READ, T_NOREAD, 0, 64, 0,
      IBV_WC_REM_ACCESS_ERR },
    { "FETCH_AND_ADD on an MR without REMOTE_ATOMIC", IBV_WR_ATOMIC_FETCH_AND_ADD, T_NOATOMIC, 0, 8,
      0, IBV_WC_REM_ACCESS_ERR },
    { "CMP_AND_SWP on an MR without REMOTE_ATOMIC", IBV_WR_ATOMIC_CMP_AND_SWP, T_NOATOMIC, 0, 8, 0,
      IBV_WC_REM_ACCESS_ERR },
    /* missing rights on the responder QP */
    { "RDMA WRITE to a QP without REMOTE_WRITE", IBV_WR_RDMA_WRITE, T_FULL, 0, 64,
      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, IBV_WC_REM_ACCESS_ERR },
    { "RDMA READ from a QP without REMOTE_READ", IBV_WR_RDMA_READ, T_FULL, 0, 64,
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, IBV_WC_REM_ACCESS_ERR },
    { "FETCH_AND_ADD on a QP without REMOTE_ATOMIC", IBV_WR_ATOMIC_FETCH_AND_ADD, T_FULL, 0, 8,
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, IBV_WC_REM_ACCESS_ERR },
};

static void fill_targets (void)
{
    for (int t = 0; t < T_NTARGET; t++)
        if (mem[t])
            memset (mem[t], 0x3c + t, MR_LEN);
    for (int i = 0; i < MR_LEN; i++)
        local[i] = (uint8_t)(i * 7 + 1);
}

static int targets_intact (void)
{
    for (int t = 0; t < T_NTARGET; t++)
        for (int i = 0; mem[t] && i < MR_LEN; i++)
            if (mem[t][i] != (uint8_t)(0x3c + t)) {
                diag ("target %d byte %d is 0x%02x, expected 0x%02x", t, i, mem[t][i], 0x3c + t);
                return 0;
            }
    return 1;
}

static int local_intact (void)
{
    for (int i = 0; i < MR_LEN; i++)
        if (local[i] != (uint8_t)(i * 7 + 1))
            return 0;
    return 1;
}

/* The effect a successful control case must have had. */
static int success_effect (const struct acase *c)
{
    uint8_t *tgt = mem[c->target] + c->off;
    uint64_t v;

    switch (c->op) {
    case IBV_WR_RDMA_WRITE:
        return memcmp (tgt, local, c->len) == 0;
    case IBV_WR_RDMA_READ:
        return memcmp (local, tgt, c->len) == 0;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        /* vw_post1 adds 1; the old value comes back to local[0..7]. */
        memcpy (&v, tgt, 8);
        return v == 0x3c3c3c3c3c3c3c3cULL + 1
            && memcmp (local, "\x3c\x3c\x3c\x3c\x3c\x3c\x3c\x3c", 8) == 0;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        /* compare 1 fails against 0x3c..: memory unchanged, old value back */
        memcpy (&v, tgt, 8);
        return v == 0x3c3c3c3c3c3c3c3cULL
            && memcmp (local, "\x3c\x3c\x3c\x3c\x3c\x3c\x3c\x3c", 8) == 0;
    default:
        return 0;
    }
}

static void run_case (const struct acase *c)
{
    struct vw_rc_params par, par2;
    struct vw_pair p;
    struct ibv_wc wc;
    char err[256];
    uint64_t raddr;
    int rc, got, st;

    vw_rc_params_default (&par);
    par2 = par;
    if (c->qp_access)
        par2.access = c->qp_access;
    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, &par, &par2, err, sizeof (err)) < 0) {
        ok (0, "%s: set up a connected pair: %s", c->name, err);
        return;
    }
    fill_targets ();
    raddr = (uint64_t)(uintptr_t)(mem[c->target] ? mem[c->target] : mem[T_FULL]) + (uint64_t)c->off;
    rc = vw_post1 (p.qp[0], c->op, 1, local, c->len, local_mr->lkey, raddr, rkey[c->target],
                   IBV_SEND_SIGNALED);
    if (!ok (rc == 0, "%s: ibv_post_send accepts it", c->name)) {
        diag ("ibv_post_send returned %d (%s)", rc, strerror (rc));
        vw_pair_destroy (&p);
        return;
    }
    got = vw_cq_wait (p.cq[0], &wc, WAIT_MS);
    ok (got == 1, "%s: completes within %d ms", c->name, WAIT_MS);
    if (got != 1) {
        vw_pair_destroy (&p);
        return;
    }
    if (!ok (wc.status == c->want && wc.wr_id == 1, "%s: completes with %s", c->name,
             ibv_wc_status_str (c->want)))
        diag ("got status %s (%d), wr_id %llu", ibv_wc_status_str (wc.status), wc.status,
              (unsigned long long)wc.wr_id);
    if (c->want == IBV_WC_SUCCESS) {
        ok (success_effect (c), "%s: had its effect on memory", c->name);
        vw_pair_destroy (&p);
        return;
    }
    st = vw_qp_state (p.qp[0]);
    ok (st == IBV_QPS_ERR, "%s: requester QP is in ERR (%s)", c->name,
        st < 0 ? "query failed" : vw_qp_state_str ((enum ibv_qp_state)st));
    ok (targets_intact (), "%s: responder memory untouched", c->name);
    if (c->op == IBV_WR_RDMA_READ)
        ok (local_intact (), "%s: nothing was read into the local buffer", c->name);
    /* Later work on the failed QP must flush, not vanish or succeed. */
    rc = vw_post1 (p.qp[0], IBV_WR_SEND, 2, local, 8, local_mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    got = rc == 0 ? vw_cq_wait (p.cq[0], &wc, WAIT_MS) : 0;
    if (!ok (rc == 0 && got == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 2,
             "%s: a SEND posted afterwards completes with WR_FLUSH_ERR", c->name))
        diag ("post %d, completion %d, status %s", rc, got,
              got == 1 ? ibv_wc_status_str (wc.status) : "-");
    st = vw_qp_state (p.qp[1]);
    diag ("%s: responder QP ends in %s", c->name,
          st < 0 ? "?" : vw_qp_state_str ((enum ibv_qp_state)st));
    vw_pair_destroy (&p);
}

static void reg_checks (void)
{
    static uint8_t buf[4096];
    struct ibv_mr *m;

    /* The spec ties remote write and atomic rights to local write. */
    m = ibv_reg_mr (dev.pd, buf, sizeof (buf), IBV_ACCESS_REMOTE_WRITE);
    ok (m == NULL && errno == EINVAL,
        "ibv_reg_mr with REMOTE_WRITE but not LOCAL_WRITE fails with EINVAL");
    if (m)
        ibv_dereg_mr (m);
    m = ibv_reg_mr (dev.pd, buf, sizeof (buf), IBV_ACCESS_REMOTE_ATOMIC);
    ok (m == NULL && errno == EINVAL,
        "ibv_reg_mr with REMOTE_ATOMIC but not LOCAL_WRITE fails with EINVAL");
    if (m)
        ibv_dereg_mr (m);
}

static void lkey_check (void)
{
    struct vw_pair p;
    struct ibv_wc wc;
    char err[256];
    int rc, got;

    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) < 0) {
        ok (0, "bad lkey: set up a pair: %s", err);
        return;
    }
    rc = vw_post1 (p.qp[0], IBV_WR_RDMA_WRITE, 7, local, 64, local_mr->lkey ^ 0x5a5a5a00u,
                   (uintptr_t)mem[T_FULL], rkey[T_FULL], IBV_SEND_SIGNALED);
    got = rc == 0 ? vw_cq_wait (p.cq[0], &wc, WAIT_MS) : 0;
    if (!ok (rc != 0 || (got == 1 && wc.status == IBV_WC_LOC_PROT_ERR),
             "RDMA WRITE from a bad lkey fails (LOC_PROT_ERR or refused at post)"))
        diag ("post %d, completion %d, status %s", rc, got,
              got == 1 ? ibv_wc_status_str (wc.status) : "-");
    vw_pair_destroy (&p);
}

/* Receives and READ/atomic results write local memory: without
 * LOCAL_WRITE on its MR that is a local protection error. */
static void local_write_check (void)
{
    static uint8_t ro[4096] __attribute__ ((aligned (4096)));
    struct ibv_mr *romr = ibv_reg_mr (dev.pd, ro, sizeof (ro), 0);
    struct vw_pair p;
    struct ibv_wc wc;
    char err[256];
    int rc, got, st;

    if (!ok (romr != NULL, "ibv_reg_mr without any access flag (read-only) works"))
        return;
    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    rc = vw_recv1 (p.qp[1], 9, ro, 64, romr->lkey);
    if (rc == 0)
        rc = vw_post1 (p.qp[0], IBV_WR_SEND, 8, local, 64, local_mr->lkey, 0, 0, IBV_SEND_SIGNALED);
    got = rc == 0 ? vw_cq_wait (p.cq[1], &wc, WAIT_MS) : 0;
    if (!ok (rc != 0 || (got == 1 && wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 9),
             "a SEND into a receive buffer without LOCAL_WRITE: LOC_PROT_ERR "
             "on the receiver (or refused at post)"))
        diag ("post %d, completion %d, status %s", rc, got,
              got == 1 ? ibv_wc_status_str (wc.status) : "-");
    got = rc == 0 ? vw_cq_wait (p.cq[0], &wc, WAIT_MS) : 0;
    if (!ok (rc != 0 || (got == 1 && wc.status != IBV_WC_SUCCESS && wc.wr_id == 8),
             "and the SEND fails on the sender"))
        diag ("completion %d, status %s", got, got == 1 ? ibv_wc_status_str (wc.status) : "-");
    else if (got == 1)
        diag ("the sender got %s", ibv_wc_status_str (wc.status));
    ok (memcmp (ro, "\0\0\0\0\0\0\0\0", 8) == 0, "the read-only buffer is untouched");
    vw_pair_destroy (&p);

    if (vw_pair_create (&p, &dev, IBV_QPT_RC, NULL, err, sizeof (err)) < 0
        || vw_pair_connect (&p, NULL, NULL, err, sizeof (err)) < 0)
        BAIL_OUT ("pair: %s", err);
    fill_targets ();
    rc = vw_post1 (p.qp[0], IBV_WR_RDMA_READ, 10, ro, 64, romr->lkey, (uintptr_t)mem[T_FULL],
                   rkey[T_FULL], IBV_SEND_SIGNALED);
    got = rc == 0 ? vw_cq_wait (p.cq[0], &wc, WAIT_MS) : 0;
    if (!ok (rc != 0 || (got == 1 && wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 10),
             "an RDMA READ into an MR without LOCAL_WRITE: LOC_PROT_ERR"))
        diag ("post %d, completion %d, status %s", rc, got,
              got == 1 ? ibv_wc_status_str (wc.status) : "-");
    st = vw_qp_state (p.qp[0]);
    ok (rc != 0 || st == IBV_QPS_ERR, "and the reader's QP is in ERR (%s)",
        st < 0 ? "?" : vw_qp_state_str ((enum ibv_qp_state)st));
    ok (memcmp (ro, "\0\0\0\0\0\0\0\0", 8) == 0, "the read-only buffer is untouched");
    vw_pair_destroy (&p);
    ibv_dereg_mr (romr);
}

int main (void)
{
    static const int rights[T_NTARGET] = {
        [T_FULL] = ALL_REMOTE,
        [T_NOWRITE] = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
        [T_NOREAD] = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
        [T_NOATOMIC] = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
        [T_DEREG] = ALL_REMOTE,
    };
    char err[256];

    plan (NO_PLAN);
    if (vw_dev_open (&dev, getenv ("VW_DEVICE"), 1, -1, err, sizeof (err)) < 0)
        BAIL_OUT ("%s", err);
    for (int t = 0; t < T_NTARGET; t++) {
        if (t == T_BOGUS)
            continue;
        if (posix_memalign ((void **)&mem[t], 4096, MR_LEN) != 0)
            BAIL_OUT ("out of memory");
        mr[t] = ibv_reg_mr (dev.pd, mem[t], MR_LEN, IBV_ACCESS_LOCAL_WRITE | rights[t]);
        if (!mr[t])
            BAIL_OUT ("ibv_reg_mr: %s", strerror (errno));
        rkey[t] = mr[t]->rkey;
    }
    if (posix_memalign ((void **)&local, 4096, MR_LEN) != 0
        || !(local_mr = ibv_reg_mr (dev.pd, local, MR_LEN, IBV_ACCESS_LOCAL_WRITE)))
        BAIL_OUT ("local MR: %s", strerror (errno));
    ok (ibv_dereg_mr (mr[T_DEREG]) == 0, "deregister an MR to keep its stale rkey");
    mr[T_DEREG] = NULL;
    /* An rkey no MR of this process has: every MR here is ours. */
    rkey[T_BOGUS] = 0xdeadbeefu;
    for (int again = 1; again;) {
        again = 0;
        for (int t = 0; t < T_NTARGET; t++)
            if (t != T_BOGUS && t != T_DEREG && rkey[t] == rkey[T_BOGUS]) {
                rkey[T_BOGUS]++;
                again = 1;
            }
        if (local_mr->rkey == rkey[T_BOGUS]) {
            rkey[T_BOGUS]++;
            again = 1;
        }
    }
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++)
        run_case (&cases[i]);
    reg_checks ();
    lkey_check ();
    local_write_check ();
    for (int t = 0; t < T_NTARGET; t++)
        if (mr[t])
            ibv_dereg_mr (mr[t]);
    ibv_dereg_mr (local_mr);
    vw_dev_close (&dev);
    done_testing ();
    return exit_status ();
}
