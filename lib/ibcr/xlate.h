/* xlate.h - the job-wide id tables of the last rebuild.
 *
 * After a rebuild every process knows, for every QP of the job, its virtual
 * (LID, QPN) -> current real (LID, QPN), the PSN its new QP starts with and
 * the rank that owns it; for every rank, virtual rkey -> real rkey, and
 * which virtual LIDs are its (its ports' and its QPs'); and
 * for every port of every process, virtual GID -> current real GID (the
 * GRH of RoCE-style addressing).  Keys of QPs are (virtual LID << 32 |
 * virtual QPN).
 */
#ifndef IBCR_XLATE_H
#define IBCR_XLATE_H

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>
#include <infiniband/verbs.h>

struct xl_qp {
    uint16_t rlid;
    uint32_t rqpn;
    uint32_t psn;
    int rank;
};

static inline uint64_t xl_key (uint16_t lid, uint32_t qpn)
{
    return ((uint64_t)lid << 32) | qpn;
}

/* Replace the tables with those of a "ckpt-connect" message.  0 or -1+errno
 * (EPROTO: malformed table, logged). */
int xlate_load (json_object *procs);
const struct xl_qp *xlate_qp (uint16_t vlid, uint32_t vqpn);
/* Real (LID, QPN) -> virtual; false when unknown. */
bool xlate_qp_rev (uint16_t rlid, uint32_t rqpn, uint16_t *vlid, uint32_t *vqpn);
/* A virtual LID's current real LID (any QP of that LID; UD AHs only). */
bool xlate_lid (uint16_t vlid, uint16_t *rlid);
/* The rank owning every QP behind a virtual LID; false when none or
 * several processes share it. */
bool xlate_lid_rank (uint16_t vlid, int *rank);
uint32_t xlate_rkey (int rank, uint32_t vrkey);
/* The rkey for a QP whose peer is 'rank' behind virtual LID vlid; rank -1
 * when its peer QP was created after the last rebuild and the LID is
 * shared (a host's processes): then the one process behind vlid that
 * published vrkey owns the MR, and a key nobody published is real. */
uint32_t xlate_rkey_peer (int rank, uint16_t vlid, uint32_t vrkey);
/* True when 'rank' published vrkey as a virtual rkey at the last rebuild. */
bool xlate_has_rkey (int rank, uint32_t vrkey);
/* True when a process behind vlid published vrkey at the last rebuild. */
bool xlate_lid_has_rkey (uint16_t vlid, uint32_t vrkey);
/* A virtual GID's current real GID, and back; false when unknown (the GID
 * of a process outside the job, or one created after the last rebuild). */
bool xlate_gid (const union ibv_gid *vgid, union ibv_gid *rgid);
/* The same, from what 'rank' published (processes that shared a host,
 * hence a virtual GID, may live on different hosts now). */
bool xlate_gid_of (int rank, const union ibv_gid *vgid, union ibv_gid *rgid);
bool xlate_gid_rev (const union ibv_gid *rgid, union ibv_gid *vgid);
void xlate_fini (void);

#endif
