/*
 * post.c - the send and receive queues as the application sees them:
 * ibv_post_send / ibv_post_recv (through context->ops), the ibv_wr_*
 * builder API of ibv_qp_ex, and transmission of RC/UC work requests.
 *
 * Send WQEs move through three counters: posted (sq_head), fully written
 * to the requester connection (sq_tx), completed (sq_done).  A WQE
 * completes only when the responder's answer covers it (ACK, READ or
 * ATOMIC response): "completion only after the peer accepted it".  The
 * posting thread writes straight to the socket (gathering header and the
 * application's buffers with writev); the progress thread only continues
 * a write the socket could not take at once.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include "softib.h"

static bool op_has_payload(uint8_t op)
{
	return op == SIB_OP_SEND || op == SIB_OP_SEND_IMM
		|| op == SIB_OP_WRITE || op == SIB_OP_WRITE_IMM
		|| op == SIB_OP_UD_SEND;
}

static enum ibv_wc_opcode wc_opcode(uint8_t op)
{
	switch (op) {
	case SIB_OP_WRITE:
	case SIB_OP_WRITE_IMM:
		return IBV_WC_RDMA_WRITE;
	case SIB_OP_READ:
		return IBV_WC_RDMA_READ;
	case SIB_OP_CMP_SWP:
		return IBV_WC_COMP_SWAP;
	case SIB_OP_FETCH_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

void sib_send_complete(struct sib_qp *qp, struct sib_swqe *w,
		       enum ibv_wc_status st)
{
	if (w->signaled || st != IBV_WC_SUCCESS) {
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = w->wr_id;
		wc.status = st;
		wc.opcode = wc_opcode(w->op);
		wc.qp_num = qp->qpx.qp_base.qp_num;
		if (w->op == SIB_OP_READ)
			wc.byte_len = w->len;
		else if (w->op == SIB_OP_CMP_SWP || w->op == SIB_OP_FETCH_ADD)
			wc.byte_len = 8;
		sib_cq_push(qp->scq, &wc, false);
	}
	qp->sq_done++;
	if (qp->sq_tx < qp->sq_done)
		qp->sq_tx = qp->sq_done;
}

/* Completes every transmitted WQE with seq < seq_excl. */
void sib_sq_ack(struct sib_qp *qp, uint32_t seq_excl)
{
	while (qp->sq_done != qp->sq_tx) {
		struct sib_swqe *w = &qp->sq[qp->sq_done & (qp->sq_cap - 1)];

		if ((int32_t)(w->seq - seq_excl) >= 0 || !w->sent)
			break;
		sib_send_complete(qp, w, IBV_WC_SUCCESS);
		qp->rnr_left = qp->attr.rnr_retry;
	}
}

static uint8_t sib_op_of(enum ibv_wr_opcode op, enum ibv_qp_type t, int *err)
{
	*err = 0;
	switch (op) {
	case IBV_WR_SEND:
		return t == IBV_QPT_UD ? SIB_OP_UD_SEND : SIB_OP_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return t == IBV_QPT_UD ? SIB_OP_UD_SEND : SIB_OP_SEND_IMM;
	case IBV_WR_RDMA_WRITE:
		if (t != IBV_QPT_UD)
			return SIB_OP_WRITE;
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (t != IBV_QPT_UD)
			return SIB_OP_WRITE_IMM;
		break;
	case IBV_WR_RDMA_READ:
		if (t == IBV_QPT_RC)
			return SIB_OP_READ;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		if (t == IBV_QPT_RC)
			return SIB_OP_CMP_SWP;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (t == IBV_QPT_RC)
			return SIB_OP_FETCH_ADD;
		break;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_TSO:
	case IBV_WR_DRIVER1:
	case IBV_WR_ATOMIC_WRITE:
		*err = EOPNOTSUPP;
		return 0;
	}
	*err = EINVAL;
	return 0;
}

/*
 * Validates a WQE built at sq_head and translates its local addresses to
 * pointers.  Returns an errno for post_send; a bad lkey is not a post
 * error but a completion error (w->err), as on an HCA.
 */
static int wqe_prepare(struct sib_qp *qp, struct sib_swqe *w, bool inl,
		       uint32_t *err_status)
{
	bool dst = w->op == SIB_OP_READ || w->op == SIB_OP_CMP_SWP
		|| w->op == SIB_OP_FETCH_ADD;
	uint64_t len = 0;
	uint32_t i;

	*err_status = IBV_WC_SUCCESS;
	if (w->nsge > qp->cap.max_send_sge)
		return EINVAL;
	for (i = 0; i < w->nsge; i++)
		len += w->sge[i].length;
	if (len > SIB_MAX_MSG)
		return EINVAL;
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD && len > SIB_MTU_BYTES) {
		*err_status = IBV_WC_LOC_LEN_ERR;
		return 0;
	}
	w->len = (uint32_t)len;
	if (w->op == SIB_OP_CMP_SWP || w->op == SIB_OP_FETCH_ADD) {
		if (w->nsge != 1 || len != 8 || (w->raddr & 7))
			return EINVAL;
	}
	if (inl) {
		char *p = (char *)w->inl;

		if (dst || len > qp->cap.max_inline_data)
			return EINVAL;
		for (i = 0; i < w->nsge; i++) {
			memcpy(p, (void *)(uintptr_t)w->sge[i].addr,
			       w->sge[i].length);
			p += w->sge[i].length;
		}
		w->nsge = 0;
		return 0;
	}
	for (i = 0; i < w->nsge; i++) {
		enum ibv_wc_status st;
		void *p;

		if (!w->sge[i].length)
			continue;
		p = sib_mr_check(qp->ctx, qp->qpx.qp_base.pd, w->sge[i].lkey,
				 w->sge[i].addr, w->sge[i].length,
				 dst ? IBV_ACCESS_LOCAL_WRITE : 0,
				 IBV_WC_LOC_PROT_ERR, &st);
		if (!p) {
			*err_status = st;
			return 0;
		}
		w->sge[i].addr = (uintptr_t)p;
	}
	return 0;
}

static void wqe_build_hdr(struct sib_qp *qp, struct sib_swqe *w)
{
	struct sib_hdr *h = &w->hdr;

	memset(h, 0, sizeof(*h));
	h->op = w->op;
	h->flags = (w->solicited ? SIB_F_SOLICITED : 0)
		| (w->op == SIB_OP_SEND_IMM || w->op == SIB_OP_WRITE_IMM
		   ? SIB_F_IMM : 0);
	h->lid = qp->ctx->addr.lid;
	h->len = op_has_payload(w->op) ? w->len : 0;
	h->seq = w->seq;
	h->imm = w->imm;
	h->addr = w->raddr;
	h->rkey = w->rkey;
	h->rlen = w->op == SIB_OP_READ ? w->len : 0;
	h->cmp = w->cmp;
	h->swp = w->swp;
	sib_hdr_to_wire(h);
}

static size_t wqe_bytes(const struct sib_swqe *w)
{
	return sizeof(struct sib_hdr) + (op_has_payload(w->op) ? w->len : 0);
}

static int wqe_iov(struct sib_swqe *w, struct iovec *iov, int max)
{
	int n = 0;

	iov[n].iov_base = &w->hdr;
	iov[n++].iov_len = sizeof(w->hdr);
	if (!op_has_payload(w->op) || !w->len)
		return n;
	if (w->nsge == 0) {
		iov[n].iov_base = w->inl;
		iov[n++].iov_len = w->len;
		return n;
	}
	for (uint32_t i = 0; i < w->nsge && n < max; i++) {
		if (!w->sge[i].length)
			continue;
		iov[n].iov_base = (void *)(uintptr_t)w->sge[i].addr;
		iov[n++].iov_len = w->sge[i].length;
	}
	return n;
}

/* Fails the WQE at sq_done with its local error once everything before
 * it completed; returns true if it did. */
static bool fail_local(struct sib_qp *qp)
{
	struct sib_swqe *w = &qp->sq[qp->sq_done & (qp->sq_cap - 1)];

	if (qp->sq_done == qp->sq_head || qp->sq_done != qp->sq_tx
	    || w->hdr.op != 0xff)
		return false;
	sib_send_complete(qp, w, (enum ibv_wc_status)w->hdr.flags);
	sib_qp_error(qp, "local error in a posted work request (bad lkey, "
		     "bounds or length)");
	return true;
}

#define SIB_TX_IOV 64

void sib_tx_progress(struct sib_qp *qp)
{
	struct sib_conn *c = qp->req;
	struct iovec iov[SIB_TX_IOV + SIB_MAX_SGE + 1];

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD)
		return;
	if (!c) {
		if (qp->state == IBV_QPS_RTS && qp->sq_tx != qp->sq_head)
			sib_req_lost(qp, "no connection to the peer QP");
		return;
	}
	if (c->connecting || c->dead)
		return;
	if (c->olen > c->ooff) {
		if (sib_conn_flush(c) < 0) {
			sib_req_lost(qp, "write to peer failed");
			return;
		}
		if (c->olen > c->ooff)
			return;
	}
	for (;;) {
		uint32_t i = qp->sq_tx;
		size_t skip = qp->tx_off, built = 0;
		int n = 0;
		ssize_t wr;

		if (qp->tx_off == 0 && qp->rnr_rewind) {
			qp->rnr_rewind = false;
			qp->sq_tx = qp->sq_done;
			continue;
		}
		if (qp->tx_off == 0
		    && (qp->rnr_until || qp->state != IBV_QPS_RTS))
			break;
		while (i != qp->sq_head && n < SIB_TX_IOV) {
			struct sib_swqe *w = &qp->sq[i & (qp->sq_cap - 1)];

			/* while an RNR wait is pending only the partly
			 * written WQE may go out, to keep the stream framed */
			if ((qp->rnr_until || qp->rnr_rewind)
			    && i != qp->sq_tx)
				break;
			if (w->hdr.op == 0xff) {	/* local error */
				if (i == qp->sq_tx && fail_local(qp))
					return;
				break;
			}
			if (i != qp->sq_tx || qp->tx_off == 0)
				wqe_build_hdr(qp, w);
			n += wqe_iov(w, iov + n, SIB_TX_IOV + SIB_MAX_SGE - n);
			built += wqe_bytes(w);
			i++;
		}
		if (!n)
			break;
		/* drop what an earlier partial write already sent */
		{
			int k = 0;

			while (skip && skip >= iov[k].iov_len) {
				skip -= iov[k].iov_len;
				k++;
			}
			iov[k].iov_base = (char *)iov[k].iov_base + skip;
			iov[k].iov_len -= skip;
			wr = writev(c->fd, iov + k, n - k);
		}
		if (wr < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				sib_conn_want_out(c, true);
				return;
			}
			sib_req_lost(qp, "write to peer failed");
			return;
		}
		built -= qp->tx_off;
		{
			size_t left = (size_t)wr;

			while (left) {
				struct sib_swqe *w =
					&qp->sq[qp->sq_tx & (qp->sq_cap - 1)];
				size_t rem = wqe_bytes(w) - qp->tx_off;

				if (left >= rem) {
					left -= rem;
					w->sent = 1;
					qp->sq_tx++;
					qp->tx_off = 0;
				} else {
					qp->tx_off += left;
					left = 0;
				}
			}
		}
		if ((size_t)wr < built) {
			sib_conn_want_out(c, true);
			return;
		}
	}
	if (c->out_armed)
		sib_conn_want_out(c, false);
}

/* ---- ibv_post_send ---- */

static int post_one(struct sib_qp *qp, struct ibv_send_wr *wr)
{
	struct sib_swqe *w;
	uint32_t st;
	int err;
	uint8_t op;

	if (qp->sq_head - qp->sq_done >= qp->sq_cap)
		return ENOMEM;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > SIB_MAX_SGE)
		return EINVAL;
	op = sib_op_of(wr->opcode, qp->qpx.qp_base.qp_type, &err);
	if (err)
		return err;
	w = &qp->sq[qp->sq_head & (qp->sq_cap - 1)];
	w->wr_id = wr->wr_id;
	w->op = op;
	w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
	w->sent = 0;
	w->imm = (wr->opcode == IBV_WR_SEND_WITH_IMM
		  || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) ? wr->imm_data
		: 0;
	w->nsge = (uint32_t)wr->num_sge;
	if (wr->num_sge)
		memcpy(w->sge, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(w->sge[0]));
	w->raddr = 0;
	w->rkey = 0;
	w->cmp = w->swp = 0;
	switch (op) {
	case SIB_OP_WRITE:
	case SIB_OP_WRITE_IMM:
	case SIB_OP_READ:
		w->raddr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	case SIB_OP_CMP_SWP:
	case SIB_OP_FETCH_ADD:
		w->raddr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->cmp = wr->wr.atomic.compare_add;
		w->swp = wr->wr.atomic.swap;
		break;
	case SIB_OP_UD_SEND: {
		struct sib_ah *ah = (struct sib_ah *)wr->wr.ud.ah;

		if (!ah)
			return EINVAL;
		w->ud_ip = ah->ip;
		w->ud_grh = ah->attr.is_global;
		w->rqpn = wr->wr.ud.remote_qpn;
		w->ud_port = sib_port_of_qpn(qp->ctx, w->rqpn);
		w->qkey = (wr->wr.ud.remote_qkey & 0x80000000u)
			? qp->attr.qkey : wr->wr.ud.remote_qkey;
		if (wr->opcode == IBV_WR_SEND_WITH_IMM)
			w->imm = wr->imm_data;
		w->cmp = wr->opcode == IBV_WR_SEND_WITH_IMM;
		break;
	}
	}
	err = wqe_prepare(qp, w, (wr->send_flags & IBV_SEND_INLINE) != 0,
			  &st);
	if (err)
		return err;
	w->hdr.op = st == IBV_WC_SUCCESS ? 0 : 0xff;
	w->hdr.flags = (uint8_t)st;
	w->seq = qp->next_seq++;
	qp->sq_head++;
	return 0;
}

/* Called after WQEs were added at sq_head (qp->lock held). */
static void post_kick(struct sib_qp *qp)
{
	if (qp->state == IBV_QPS_ERR) {
		sib_qp_flush(qp);
		return;
	}
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		while (qp->sq_done != qp->sq_head) {
			struct sib_swqe *w =
				&qp->sq[qp->sq_done & (qp->sq_cap - 1)];

			if (w->hdr.op == 0xff)
				sib_send_complete(qp, w, w->hdr.flags);
			else
				sib_send_complete(qp, w, sib_ud_send(qp, w) < 0
						  ? IBV_WC_LOC_QP_OP_ERR
						  : IBV_WC_SUCCESS);
		}
		qp->sq_tx = qp->sq_done;
		return;
	}
	sib_tx_progress(qp);
}

static bool send_state_ok(struct sib_qp *qp)
{
	return qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD
		|| qp->state == IBV_QPS_SQE || qp->state == IBV_QPS_ERR;
}

int sib_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad)
{
	struct sib_qp *qp = (struct sib_qp *)ibqp;
	int rc = 0;

	pthread_mutex_lock(&qp->lock);
	if (!send_state_ok(qp)) {
		*bad = wr;
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;	/* sends need RTS (IB spec) */
	}
	for (; wr; wr = wr->next) {
		rc = post_one(qp, wr);
		if (rc) {
			*bad = wr;
			break;
		}
	}
	post_kick(qp);
	pthread_mutex_unlock(&qp->lock);
	return rc;
}

int sib_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad)
{
	struct sib_qp *qp = (struct sib_qp *)ibqp;
	int rc;

	pthread_mutex_lock(&qp->lock);
	if (qp->state == IBV_QPS_RESET || qp->srq) {
		*bad = wr;
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	rc = sib_rq_post(&qp->rq, wr, bad);
	if (qp->state == IBV_QPS_ERR)
		sib_qp_flush(qp);
	pthread_mutex_unlock(&qp->lock);
	return rc;
}

/* ---- ibv_wr_* API: WQEs are built between wr_start and wr_complete
 * with the QP locked, and become visible all at once. ---- */

static struct sib_qp *qpx_of(struct ibv_qp_ex *q)
{
	return (struct sib_qp *)q;
}

static struct sib_swqe *wr_cur(struct sib_qp *qp)
{
	return &qp->sq[(qp->sq_head - 1) & (qp->sq_cap - 1)];
}

static struct sib_swqe *wr_new(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct sib_qp *qp = qpx_of(q);
	struct sib_swqe *w;
	int err;

	if (qp->wr_err)
		return NULL;
	if (qp->sq_head - qp->sq_done >= qp->sq_cap) {
		qp->wr_err = true;
		return NULL;
	}
	w = &qp->sq[qp->sq_head & (qp->sq_cap - 1)];
	w->op = sib_op_of(op, q->qp_base.qp_type, &err);
	if (err) {
		qp->wr_err = true;
		return NULL;
	}
	w->wr_id = q->wr_id;
	w->signaled = qp->sq_sig_all || (q->wr_flags & IBV_SEND_SIGNALED);
	w->solicited = (q->wr_flags & IBV_SEND_SOLICITED) != 0;
	w->sent = 0;
	w->imm = 0;
	w->nsge = 0;
	w->len = 0;
	w->raddr = 0;
	w->rkey = 0;
	w->cmp = w->swp = 0;
	w->hdr.op = 1;	/* "not prepared yet" until wr_complete */
	w->hdr.flags = (q->wr_flags & IBV_SEND_INLINE) != 0;
	qp->sq_head++;
	return w;
}

static void wr_send(struct ibv_qp_ex *q)
{
	wr_new(q, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct sib_swqe *w = wr_new(q, IBV_WR_SEND_WITH_IMM);

	if (w) {
		w->imm = imm;
		w->cmp = 1;
	}
}

static void wr_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey,
		    uint64_t addr, __be32 imm)
{
	struct sib_swqe *w = wr_new(q, op);

	if (w) {
		w->rkey = rkey;
		w->raddr = addr;
		w->imm = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey,
			      uint64_t addr, __be32 imm)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
		       uint64_t cmp, uint64_t swp)
{
	struct sib_swqe *w = wr_new(q, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (w) {
		w->rkey = rkey;
		w->raddr = addr;
		w->cmp = cmp;
		w->swp = swp;
	}
}

static void wr_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			 uint64_t add)
{
	struct sib_swqe *w = wr_new(q, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (w) {
		w->rkey = rkey;
		w->raddr = addr;
		w->cmp = add;
	}
}

static void wr_unsupported(struct ibv_qp_ex *q)
{
	qpx_of(q)->wr_err = true;
}

static void wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	wr_unsupported(q);
}

static void wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	wr_unsupported(q);
}

static void wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t sz,
			uint16_t mss)
{
	wr_unsupported(q);
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn)
{
	wr_unsupported(q);
}

static void wr_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t a,
			    const void *v)
{
	wr_unsupported(q);
}

static void wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ibah,
			   uint32_t rqpn, uint32_t qkey)
{
	struct sib_qp *qp = qpx_of(q);
	struct sib_ah *ah = (struct sib_ah *)ibah;
	struct sib_swqe *w;

	if (qp->wr_err || qp->sq_head == qp->wr_first)
		return;
	w = wr_cur(qp);
	if (!ah) {
		qp->wr_err = true;
		return;
	}
	w->ud_ip = ah->ip;
	w->ud_grh = ah->attr.is_global;
	w->rqpn = rqpn;
	w->ud_port = sib_port_of_qpn(qp->ctx, rqpn);
	w->qkey = (qkey & 0x80000000u) ? qp->attr.qkey : qkey;
}

static void wr_set_sge_list(struct ibv_qp_ex *q, size_t n,
			    const struct ibv_sge *sg)
{
	struct sib_qp *qp = qpx_of(q);
	struct sib_swqe *w;

	if (qp->wr_err || qp->sq_head == qp->wr_first)
		return;
	if (n > SIB_MAX_SGE) {
		qp->wr_err = true;
		return;
	}
	w = wr_cur(qp);
	memcpy(w->sge, sg, n * sizeof(*sg));
	w->nsge = (uint32_t)n;
}

static void wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr,
		       uint32_t len)
{
	struct ibv_sge s = { .addr = addr, .length = len, .lkey = lkey };

	wr_set_sge_list(q, 1, &s);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n,
				    const struct ibv_data_buf *b)
{
	struct sib_qp *qp = qpx_of(q);
	struct sib_swqe *w;
	size_t len = 0, i;

	if (qp->wr_err || qp->sq_head == qp->wr_first)
		return;
	w = wr_cur(qp);
	for (i = 0; i < n; i++)
		len += b[i].length;
	if (len > qp->cap.max_inline_data || !w->inl) {
		qp->wr_err = true;
		return;
	}
	len = 0;
	for (i = 0; i < n; i++) {
		memcpy(w->inl + len, b[i].addr, b[i].length);
		len += b[i].length;
	}
	w->len = (uint32_t)len;
	w->nsge = 0;
	w->hdr.flags = 2;	/* already inline */
}

static void wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };

	wr_set_inline_data_list(q, 1, &b);
}

static void wr_start(struct ibv_qp_ex *q)
{
	struct sib_qp *qp = qpx_of(q);

	pthread_mutex_lock(&qp->lock);
	qp->wr_first = qp->sq_head;
	qp->wr_err = false;
}

static void wr_abort(struct ibv_qp_ex *q)
{
	struct sib_qp *qp = qpx_of(q);

	qp->sq_head = qp->wr_first;
	pthread_mutex_unlock(&qp->lock);
}

static int wr_complete(struct ibv_qp_ex *q)
{
	struct sib_qp *qp = qpx_of(q);
	uint32_t i, end = qp->sq_head, st;
	int err = 0;

	if (qp->wr_err)
		err = EINVAL;
	else if (!send_state_ok(qp))
		err = EINVAL;
	for (i = qp->wr_first; !err && i != end; i++) {
		struct sib_swqe *w = &qp->sq[i & (qp->sq_cap - 1)];

		if (w->hdr.flags == 2) {
			err = 0;
			st = IBV_WC_SUCCESS;
		} else {
			err = wqe_prepare(qp, w, w->hdr.flags == 1, &st);
		}
		w->hdr.op = st == IBV_WC_SUCCESS ? 0 : 0xff;
		w->hdr.flags = (uint8_t)st;
		w->seq = qp->next_seq + (i - qp->wr_first);
	}
	if (err) {
		qp->sq_head = qp->wr_first;
		pthread_mutex_unlock(&qp->lock);
		return err;
	}
	qp->next_seq += end - qp->wr_first;
	post_kick(qp);
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

void sib_qp_ex_init(struct sib_qp *qp)
{
	struct ibv_qp_ex *q = &qp->qpx;

	q->comp_mask = 0;
	q->wr_atomic_cmp_swp = wr_cmp_swp;
	q->wr_atomic_fetch_add = wr_fetch_add;
	q->wr_bind_mw = wr_bind_mw;
	q->wr_local_inv = wr_local_inv;
	q->wr_rdma_read = wr_rdma_read;
	q->wr_rdma_write = wr_rdma_write;
	q->wr_rdma_write_imm = wr_rdma_write_imm;
	q->wr_send = wr_send;
	q->wr_send_imm = wr_send_imm;
	q->wr_send_inv = wr_local_inv;
	q->wr_send_tso = wr_send_tso;
	q->wr_set_ud_addr = wr_set_ud_addr;
	q->wr_set_xrc_srqn = wr_set_xrc_srqn;
	q->wr_set_inline_data = wr_set_inline_data;
	q->wr_set_inline_data_list = wr_set_inline_data_list;
	q->wr_set_sge = wr_set_sge;
	q->wr_set_sge_list = wr_set_sge_list;
	q->wr_start = wr_start;
	q->wr_complete = wr_complete;
	q->wr_abort = wr_abort;
	q->wr_atomic_write = wr_atomic_write;
}
