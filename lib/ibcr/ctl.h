/* ctl.h - libibcr's control channel to its coordinator.
 *
 * When $IBCR_SOCKET is set, the first verbs call connects to that unix
 * socket, says hello (ckpt_proto.h) and starts a thread that serves the
 * coordinator's requests by calling the ckpt_* operations.  Without it,
 * libibcr virtualizes but never checkpoints.
 */
#ifndef IBCR_CTL_H
#define IBCR_CTL_H

/* 0 (also when no socket is configured), or -1+errno with a log line. */
int ctl_start (void);

#endif
