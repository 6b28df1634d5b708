/* pump.h - the thread that forwards completion events from real channels
 * to the applications' channel eventfds (see cq.c), and async events from
 * real contexts to the applications' async fds (device.c).
 *
 * Started at the first ibv_open_device, so a process that opens no device
 * has no such thread.  It acks each real event as it forwards it,
 * so real CQs can always be destroyed at release.
 */
#ifndef IBCR_PUMP_H
#define IBCR_PUMP_H

struct ibcr_chan;
struct ibcr_ctx;

int pump_start (void);
/* Watch / stop watching a channel's real fd.  After pump_del returns, the
 * pump never touches that real channel again. */
int pump_add (struct ibcr_chan *vchan);
void pump_del (struct ibcr_chan *vchan);
/* The same for a context's real async event fd. */
int pump_add_ctx (struct ibcr_ctx *vctx);
void pump_del_ctx (struct ibcr_ctx *vctx);

#endif
