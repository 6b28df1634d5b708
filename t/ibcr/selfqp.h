/* selfqp.h - one process talking to itself over verbs, for the libibcr
 * workloads run by the t20NN tests (t/ibcr/rnr.c, t/ibcr/async.c).
 *
 * Two RC QPs of one process connected to each other through the device's
 * port 1, and the file handshake by which such a workload lets the test
 * run a checkpoint cycle at a chosen point.  Failures BAIL_OUT (t/tap.h):
 * without its device or QPs a workload has nothing left to test.
 */
#ifndef IBCR_T_SELFQP_H
#define IBCR_T_SELFQP_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* Open the first verbs device and query its port 1 into *pa; *list is the
 * device list to free with ibv_free_device_list after closing. */
struct ibv_context *selfqp_open (struct ibv_device ***list, struct ibv_port_attr *pa);

/* Move RC QP qp through INIT, RTR and RTS towards QP dqpn behind LID lid,
 * PSNs 0, retrying RNR for ever; access: its remote access flags.
 * 0 or -1 (errno from ibv_modify_qp). */
int selfqp_connect (struct ibv_qp *qp, uint16_t lid, uint32_t dqpn, unsigned access);

/* Create file ready, then wait until file go exists (the test creates it
 * once its checkpoint cycle is over); BAIL_OUT after 60 s. */
void selfqp_handshake (const char *ready, const char *go);

/* Two processes' QPs meet through files in a folder: DIR/ROLE.addr holds
 * "LID QPN" (written whole, by a rename); reading waits up to 30 s for
 * it.  selfqp_touch creates DIR/NAME.  Failures BAIL_OUT. */
void selfqp_write_addr (const char *dir, const char *role, uint16_t lid, uint32_t qpn);
void selfqp_read_addr (const char *dir, const char *role, unsigned *lid, unsigned *qpn);
void selfqp_touch (const char *dir, const char *name);

#endif
