/* drain.h - the exact drain condition, evaluated by whoever relays the
 * drain reports (ibcrd's leader, or the test suite's coordinator).
 *
 * Input: every process's last "ckpt-drain-report" (see ckpt_proto.h).
 * For every RC/UC QP A with peer B (found by B's virtual LID and QPN):
 *   - A.rmsg_done == B.recv_done: every message the peer received has been
 *     acknowledged at the sender (delivered == acknowledged), and
 *   - A.sq_done == A.sq_posted, or A's oldest pending WR needs a receive
 *     and B has none posted (B.rq_avail == 0): the rest are stuck in RNR,
 *     were never delivered, and are reposted after rebuild.
 * For every UD QP A: all sends completed, and for each destination B the
 * sends completed equal B's receives from A, unless B has no receive
 * posted (a UD message with no receive is dropped, as on a real fabric)
 * or the datagrams missing are taken as lost (drain_round, below).
 * A peer missing from the reports (not in the job), or connected to
 * another QP than A, only needs A's sends completed.
 * A move to RESET drops an RC or UC QP's peer and starts its counts from
 * 0 (lib/ibcr/qp.c); the QP reports "reset" until it is connected again.
 * A's counts are not compared with such a peer's (it can receive
 * nothing).  A connection made after a RESET of both ends is compared on
 * its own.  One end reset and connected again to a peer that was not
 * compares counts that meet only if that peer sent nothing between the
 * last release and the RESET; otherwise the checkpoint fails at the
 * drain's timeout, naming the QP, and so do later ones until both ends
 * are reset.  Where a QP or its peer is in error ("err"), the peer must
 * have received at least the messages acknowledged: a failed send may
 * have been delivered.  Both ends of every QP count from 0 again at each
 * release (lib/ibcr/ckpt.c).
 */
#ifndef IBCR_DRAIN_H
#define IBCR_DRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

/* 1 when drained, 0 when another round is needed (why[] says which QP
 * waits for what), -1 with errno EPROTO for a malformed report. */
int drain_done (json_object **reports, int n, char *why, size_t whylen);

/* A fabric may drop a UD datagram (congestion, a wrong Q_Key; softib
 * drops the latter too), and its sender counts it all the same: a drain
 * that waited for every datagram sent would then never end.  Across the
 * rounds of one drain, the datagrams still missing are taken as lost
 * once nothing else keeps the job from being drained and no UD QP of the
 * job has received one for DRAIN_UD_SETTLE_MS (on a fabric a datagram
 * takes microseconds; softib's progress, a few milliseconds, more on a
 * loaded machine).
 * libibcr's UD counts start again at every release (lib/ibcr/ckpt.c), so
 * a loss costs one drain this wait, not every drain after it. */
#define DRAIN_UD_SETTLE_MS 500

struct drain_state {
    int64_t ud_recv; /* datagrams received job-wide at since_ms */
    double since_ms;
    bool ud_lost; /* the drain ended with datagrams taken as lost */
};

void drain_state_init (struct drain_state *s);
/* drain_done for one round of a drain (s carried from round to round,
 * now_ms a monotonic clock): also 1 once the only thing missing is UD
 * datagrams and the rule above takes them as lost (s->ud_lost; why[]
 * then names the first of them). */
int drain_round (struct drain_state *s, json_object **reports, int n, double now_ms, char *why,
                 size_t whylen);

#endif
