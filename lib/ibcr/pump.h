/* pump.h - the thread that forwards completion events from real channels
 * to the applications' channel eventfds (see cq.c).
 *
 * Started at the first ibv_create_comp_channel, so a process without
 * channels has no such thread.  It acks each real event as it forwards it,
 * so real CQs can always be destroyed at release.
 */
#ifndef IBCR_PUMP_H
#define IBCR_PUMP_H

struct ibcr_chan;

int pump_start (void);
/* Watch / stop watching a channel's real fd.  After pump_del returns, the
 * pump never touches that real channel again. */
int pump_add (struct ibcr_chan *vchan);
void pump_del (struct ibcr_chan *vchan);

#endif
