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
 * posted (a UD message with no receive is dropped, as on a real fabric).
 * A peer missing from the reports (not in the job), or connected to
 * another QP than A, only needs A's sends completed.
 * A move to RESET drops an RC or UC QP's peer and starts its counts from
 * 0 (lib/ibcr/qp.c); the QP reports "reset" until it is connected again.
 * A's counts are not compared with such a peer's (it can receive
 * nothing).  A connection made after a RESET of both ends is compared on
 * its own.  One end reset and connected again to a peer that was not
 * compares counts that cannot meet, and its checkpoint fails at the
 * drain's timeout, naming the QP.
 */
#ifndef IBCR_DRAIN_H
#define IBCR_DRAIN_H

#include <json-c/json.h>

/* 1 when drained, 0 when another round is needed (why[] says which QP
 * waits for what), -1 with errno EPROTO for a malformed report. */
int drain_done (json_object **reports, int n, char *why, size_t whylen);

#endif
