/* xlate.c - id translation tables (see xlate.h).
 *
 * Written only by the checkpoint thread while the gate is closed; read by
 * application threads afterwards, so no lock is needed.
 */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ibcr.h"
#include "xlate.h"

static struct ibcr_map qps;     /* key -> struct xl_qp* */
static struct ibcr_map rev;     /* real key -> virtual key + 1 */
static struct ibcr_map lids;    /* vlid -> rlid + 1 */
static struct ibcr_map rkeys;   /* (rank << 32 | vrkey) -> rrkey + 1 */
static struct ibcr_map lidrank; /* vlid -> rank + 1, or LID_SHARED */
#define LID_SHARED ((void *)(uintptr_t)UINT32_MAX)
/* (vlid << 32 | vrkey) -> rank + 1, or LID_SHARED: which process behind a
 * virtual LID published that virtual rkey.  For a QP whose peer QP was
 * created after the last rebuild: it is in no table, and its LID is
 * shared by every process of its host, so only the key itself says whose
 * MR a WR names. */
static struct ibcr_map lidkeys;
/* virtual GID -> real GID: a few per process, looked up only when a QP is
 * connected or an AH created, so a plain array. */
static struct xl_gid {
    union ibv_gid v, r;
    int rank;
} * gids;
static size_t ngids, capgids;

void xlate_fini (void)
{
    for (long i = map_next (&qps, 0); i >= 0; i = map_next (&qps, i + 1))
        free (qps.slot[i].val);
    map_fini (&qps);
    map_fini (&rev);
    map_fini (&lids);
    map_fini (&rkeys);
    map_fini (&lidrank);
    map_fini (&lidkeys);
    free (gids);
    gids = NULL;
    ngids = capgids = 0;
}

/* 32 hex digits, as ckpt_rebuild writes them. */
static int gid_parse (json_object *o, const char *k, union ibv_gid *g)
{
    json_object *v;
    const char *s;
    if (!json_object_object_get_ex (o, k, &v) || !(s = json_object_get_string (v))
        || strlen (s) != 32)
        return -1;
    for (int i = 0; i < 16; i++) {
        unsigned b;
        if (sscanf (s + 2 * i, "%2x", &b) != 1)
            return -1;
        g->raw[i] = (uint8_t)b;
    }
    return 0;
}

static int gid_add (int rank, const union ibv_gid *v, const union ibv_gid *r)
{
    if (ngids == capgids) {
        size_t ncap = capgids ? capgids * 2 : 16;
        struct xl_gid *n = realloc (gids, ncap * sizeof (*n));
        if (!n)
            return -1;
        gids = n;
        capgids = ncap;
    }
    gids[ngids].v = *v;
    gids[ngids].r = *r;
    gids[ngids].rank = rank;
    ngids++;
    return 0;
}

bool xlate_gid (const union ibv_gid *vgid, union ibv_gid *rgid)
{
    for (size_t i = 0; i < ngids; i++)
        if (memcmp (&gids[i].v, vgid, sizeof (*vgid)) == 0) {
            *rgid = gids[i].r;
            return true;
        }
    return false;
}

bool xlate_gid_of (int rank, const union ibv_gid *vgid, union ibv_gid *rgid)
{
    for (size_t i = 0; i < ngids; i++)
        if (gids[i].rank == rank && memcmp (&gids[i].v, vgid, sizeof (*vgid)) == 0) {
            *rgid = gids[i].r;
            return true;
        }
    return xlate_gid (vgid, rgid);
}

bool xlate_gid_rev (const union ibv_gid *rgid, union ibv_gid *vgid)
{
    for (size_t i = 0; i < ngids; i++)
        if (memcmp (&gids[i].r, rgid, sizeof (*rgid)) == 0) {
            *vgid = gids[i].v;
            return true;
        }
    return false;
}

static int64_t geti (json_object *o, const char *k)
{
    json_object *v;
    if (!json_object_object_get_ex (o, k, &v) || !json_object_is_type (v, json_type_int))
        return -1;
    return json_object_get_int64 (v);
}

/* One more process behind vlid (lidrank). */
static int lid_owner_add (uint16_t vlid, int64_t rank)
{
    void *owner = map_get (&lidrank, vlid);
    if (owner == (void *)(uintptr_t)(rank + 1))
        return 0;
    return map_put (&lidrank, vlid, owner ? LID_SHARED : (void *)(uintptr_t)(rank + 1));
}

/* A process's virtual LIDs: those of its ports ("lids") and of its QPs,
 * each once, into *lids (grown as needed).  Their number, or -1. */
static int proc_lids (json_object *proc, uint16_t **lids, size_t *cap)
{
    static const char *const keys[] = { "lids", "qps" };
    int n = 0;
    for (int k = 0; k < 2; k++) {
        json_object *a;
        if (!json_object_object_get_ex (proc, keys[k], &a))
            continue;
        for (size_t i = 0; i < json_object_array_length (a); i++) {
            json_object *o = json_object_array_get_idx (a, i);
            int64_t l = k == 0
                ? (json_object_is_type (o, json_type_int) ? json_object_get_int64 (o) : -1)
                : geti (o, "vlid");
            int j;
            if (l < 0 || l > UINT16_MAX) {
                errno = EPROTO;
                return -1;
            }
            for (j = 0; j < n && (*lids)[j] != l; j++)
                ;
            if (j < n)
                continue;
            if ((size_t)n == *cap) {
                size_t ncap = *cap ? *cap * 2 : 8;
                uint16_t *t = realloc (*lids, ncap * sizeof (*t));
                if (!t) {
                    errno = ENOMEM;
                    return -1;
                }
                *lids = t;
                *cap = ncap;
            }
            (*lids)[n++] = (uint16_t)l;
        }
    }
    return n;
}

int xlate_load (json_object *procs)
{
    uint16_t *plids = NULL;
    size_t plcap = 0;
    int nplids;

    xlate_fini ();
    if (!json_object_is_type (procs, json_type_array))
        goto bad;
    for (size_t p = 0; p < json_object_array_length (procs); p++) {
        json_object *proc = json_object_array_get_idx (procs, p), *a;
        int64_t rank = geti (proc, "rank");
        if (rank < 0)
            goto bad;
        if (json_object_object_get_ex (proc, "qps", &a)) {
            for (size_t i = 0; i < json_object_array_length (a); i++) {
                json_object *q = json_object_array_get_idx (a, i);
                int64_t vlid = geti (q, "vlid"), vqpn = geti (q, "vqpn");
                int64_t rlid = geti (q, "rlid"), rqpn = geti (q, "rqpn");
                int64_t psn = geti (q, "psn");
                if (vlid < 0 || vqpn < 0 || rlid < 0 || rqpn < 0 || psn < 0)
                    goto bad;
                struct xl_qp *x = malloc (sizeof (*x));
                if (!x)
                    goto nomem;
                x->rlid = rlid;
                x->rqpn = rqpn;
                x->psn = psn;
                x->rank = rank;
                uint64_t k = xl_key (vlid, vqpn);
                free (map_get (&qps, k));
                if (map_put (&qps, k, x) < 0
                    || map_put (&rev, xl_key (rlid, rqpn), (void *)(uintptr_t)(k + 1)) < 0
                    || map_put (&lids, vlid, (void *)(uintptr_t)(rlid + 1)) < 0)
                    goto nomem;
            }
        }
        nplids = proc_lids (proc, &plids, &plcap);
        if (nplids < 0 && errno == ENOMEM)
            goto nomem;
        if (nplids < 0)
            goto bad;
        for (int i = 0; i < nplids; i++)
            if (lid_owner_add (plids[i], rank) < 0)
                goto nomem;
        if (json_object_object_get_ex (proc, "gids", &a)) {
            for (size_t i = 0; i < json_object_array_length (a); i++) {
                json_object *g = json_object_array_get_idx (a, i);
                union ibv_gid v, r;
                if (gid_parse (g, "vgid", &v) < 0 || gid_parse (g, "rgid", &r) < 0)
                    goto bad;
                if (gid_add ((int)rank, &v, &r) < 0)
                    goto nomem;
            }
        }
        if (json_object_object_get_ex (proc, "mrs", &a)) {
            for (size_t i = 0; i < json_object_array_length (a); i++) {
                json_object *m = json_object_array_get_idx (a, i);
                int64_t v = geti (m, "vrkey"), r = geti (m, "rrkey");
                if (v < 0 || r < 0)
                    goto bad;
                if (map_put (&rkeys, ((uint64_t)rank << 32) | (uint32_t)v,
                             (void *)(uintptr_t)((uint64_t)r + 1))
                    < 0)
                    goto nomem;
                for (int l = 0; l < nplids; l++) {
                    uint64_t k = ((uint64_t)plids[l] << 32) | (uint32_t)v;
                    void *owner = map_get (&lidkeys, k);
                    if (owner != (void *)(uintptr_t)(rank + 1)
                        && map_put (&lidkeys, k, owner ? LID_SHARED : (void *)(uintptr_t)(rank + 1))
                            < 0)
                        goto nomem;
                }
            }
        }
    }
    free (plids);
    return 0;
bad:
    free (plids);
    ibcr_log ("rebuild: malformed id table from the coordinator; QPs stay unconnected");
    errno = EPROTO;
    return -1;
nomem:
    free (plids);
    errno = ENOMEM;
    return -1;
}

const struct xl_qp *xlate_qp (uint16_t vlid, uint32_t vqpn)
{
    return map_get (&qps, xl_key (vlid, vqpn));
}

bool xlate_qp_rev (uint16_t rlid, uint32_t rqpn, uint16_t *vlid, uint32_t *vqpn)
{
    uint64_t k = (uint64_t)(uintptr_t)map_get (&rev, xl_key (rlid, rqpn));
    if (!k)
        return false;
    k--;
    *vlid = k >> 32;
    *vqpn = (uint32_t)k;
    return true;
}

bool xlate_lid (uint16_t vlid, uint16_t *rlid)
{
    uintptr_t r = (uintptr_t)map_get (&lids, vlid);
    if (!r)
        return false;
    *rlid = r - 1;
    return true;
}

uint32_t xlate_rkey (int rank, uint32_t vrkey)
{
    uintptr_t r = (uintptr_t)map_get (&rkeys, ((uint64_t)(uint32_t)rank << 32) | vrkey);
    return r ? (uint32_t)(r - 1) : vrkey;
}

bool xlate_has_rkey (int rank, uint32_t vrkey)
{
    return map_get (&rkeys, ((uint64_t)(uint32_t)rank << 32) | vrkey) != NULL;
}

uint32_t xlate_rkey_peer (int rank, uint16_t vlid, uint32_t vrkey)
{
    static int warned;
    void *owner;
    if (rank >= 0)
        return xlate_rkey (rank, vrkey);
    owner = map_get (&lidkeys, ((uint64_t)vlid << 32) | vrkey);
    if (!owner)
        return vrkey; /* registered after the last rebuild: real */
    if (owner != LID_SHARED)
        return xlate_rkey ((int)((uintptr_t)owner - 1), vrkey);
    if (!__atomic_exchange_n (&warned, 1, __ATOMIC_RELAXED))
        ibcr_log ("rkey %u: several processes behind LID %u published it at the last rebuild "
                  "and the QP's peer is not known yet; it is left untranslated until the next "
                  "checkpoint",
                  vrkey, vlid);
    return vrkey;
}

bool xlate_lid_has_rkey (uint16_t vlid, uint32_t vrkey)
{
    return map_get (&lidkeys, ((uint64_t)vlid << 32) | vrkey) != NULL;
}

bool xlate_lid_rank (uint16_t vlid, int *rank)
{
    void *v = map_get (&lidrank, vlid);
    if (!v || v == LID_SHARED)
        return false;
    *rank = (int)((uintptr_t)v - 1);
    return true;
}
