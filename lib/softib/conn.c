/*
 * conn.c - one TCP connection of a context: connect with retry, the
 * HELLO handshake, the receive state machine (header, then payload placed
 * straight into the destination memory), and the byte queue used for
 * responses and UD datagrams.
 *
 * Ownership: a connection is created by any thread but freed only by the
 * progress thread (after it is marked dead and unlinked), so an epoll
 * event never points at freed memory.  RC connections are guarded by
 * their QP's lock, UD_TX ones by their own lock, PENDING and UD_RX ones
 * are touched by the progress thread alone.  Whatever arrives, a bad
 * message ends this connection (and, for RC, its QP) with a logged
 * reason; it never ends the process.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "softib.h"

#define SIB_STAGE 65536
#define SIB_DIRECT_MIN 16384     /* payload left: read straight into place */
#define SIB_RX_BUDGET (8u << 20) /* bytes per wakeup, for fairness */
#define SIB_CONNECT_S 10         /* seconds to keep retrying a connect */

static void set_sockopts (int fd)
{
    int one = 1;

    /* fails harmlessly (ENOTSUP) on a unix socket */
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
}

struct sib_conn *sib_conn_new (struct sib_ctx *ctx, int fd, enum sib_conn_kind kind)
{
    struct sib_conn *c = calloc (1, sizeof (*c));

    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    c->fd = fd;
    c->kind = kind;
    c->ctx = ctx;
    pthread_mutex_init (&c->lock, NULL);
    if (fd >= 0) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

        set_sockopts (fd);
        if (epoll_ctl (ctx->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            int err = errno;

            pthread_mutex_destroy (&c->lock);
            free (c);
            errno = err;
            return NULL;
        }
    }
    pthread_mutex_lock (&ctx->lock);
    c->next = ctx->conns;
    ctx->conns = c;
    pthread_mutex_unlock (&ctx->lock);
    return c;
}

static int start_connect (struct sib_conn *c)
{
    struct sockaddr_in sin = { .sin_family = AF_INET };
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
    int fd = -1;

    /* same host: the peer's unix endpoint and shared rings (shm.c) */
    if (c->ctx->shm_on && c->peer_ip == c->ctx->addr.ip)
        fd = sib_shm_connect (c);
    if (fd < 0) {
        fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        set_sockopts (fd);
        sin.sin_addr.s_addr = c->peer_ip;
        sin.sin_port = htons (c->peer_port);
        if (connect (fd, (struct sockaddr *)&sin, sizeof (sin)) < 0 && errno != EINPROGRESS) {
            int err = errno;

            close (fd);
            errno = err;
            return -1;
        }
    }
    c->fd = fd;
    c->connecting = true;
    c->out_armed = true;
    if (epoll_ctl (c->ctx->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int err = errno;

        close (fd);
        c->fd = -1;
        sib_shm_free (c);
        errno = err;
        return -1;
    }
    return 0;
}

int sib_conn_connect (struct sib_conn *c, uint32_t ip, uint16_t port)
{
    c->peer_ip = ip;
    c->peer_port = port;
    c->give_up_at = sib_now_ns () + SIB_CONNECT_S * 1000000000ull;
    return start_connect (c);
}

void sib_conn_want_out (struct sib_conn *c, bool on)
{
    struct epoll_event ev = { .data.ptr = c };

    if (c->shm && !c->connecting) {
        /* the consumer wakes us when it frees room; want_space is
		 * cleared by that wake, so set it again every time */
        if (c->dead || (!on && !c->out_armed))
            return;
        c->out_armed = on;
        if (sib_shm_want_space (c, on))
            sib_shm_kick_self (c);
        return;
    }
    if (c->dead || c->fd < 0 || c->out_armed == on || c->parked)
        return;
    ev.events = EPOLLIN | (on ? EPOLLOUT : 0);
    if (epoll_ctl (c->ctx->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->out_armed = on;
}

void sib_conn_resume (struct sib_conn *c)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

    if (!c->parked || c->dead)
        return;
    c->parked = false;
    if (c->shm) {
        /* what waits in the ring is read by the progress thread */
        ev.events = EPOLLRDHUP;
        if (epoll_ctl (c->ctx->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
            sib_conn_kill (c, "cannot watch the connection");
        else
            sib_shm_kick_self (c);
        return;
    }
    c->out_armed = false;
    if (epoll_ctl (c->ctx->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        sib_conn_kill (c, "cannot watch the connection");
}

static void park (struct sib_conn *c)
{
    struct epoll_event ev = { .events = 0, .data.ptr = c };

    /* shm: the socket's hang-up waits too; the eventfd keeps firing
	 * (drained each time) and the ring waits in place */
    c->parked = true;
    epoll_ctl (c->ctx->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

void sib_conn_kill (struct sib_conn *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->fd >= 0) {
        epoll_ctl (c->ctx->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        shutdown (c->fd, SHUT_RDWR);
    }
    sib_shm_unwatch (c);
    if (c->qp) {
        if (c->qp->req == c)
            c->qp->req = NULL;
        if (c->qp->resp == c)
            c->qp->resp = NULL;
    }
    (void)why;
    sib_progress_kick (c->ctx);
}

void sib_conn_free (struct sib_conn *c)
{
    if (c->fd >= 0)
        close (c->fd);
    sib_shm_free (c);
    free (c->stage);
    free (c->obuf);
    pthread_mutex_destroy (&c->lock);
    free (c);
}

/* ---- output byte queue ---- */

static int obuf_room (struct sib_conn *c, size_t n)
{
    if (c->ooff && c->ooff == c->olen)
        c->ooff = c->olen = 0;
    if (c->olen + n > c->ocap) {
        size_t cap = c->ocap ? c->ocap : 4096;
        uint8_t *b;

        if (c->ooff) { /* compact before growing */
            memmove (c->obuf, c->obuf + c->ooff, c->olen - c->ooff);
            c->olen -= c->ooff;
            c->ooff = 0;
        }
        while (cap < c->olen + n)
            cap *= 2;
        if (cap > c->ocap) {
            b = realloc (c->obuf, cap);
            if (!b)
                return -1;
            c->obuf = b;
            c->ocap = cap;
        }
    }
    return 0;
}

int sib_conn_queue (struct sib_conn *c, const void *a, size_t alen, const void *b, size_t blen)
{
    if (obuf_room (c, alen + blen) < 0) {
        errno = ENOMEM;
        return -1;
    }
    memcpy (c->obuf + c->olen, a, alen);
    c->olen += alen;
    if (blen) {
        memcpy (c->obuf + c->olen, b, blen);
        c->olen += blen;
    }
    return 0;
}

ssize_t sib_conn_writev (struct sib_conn *c, struct iovec *iov, int cnt)
{
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };

    if (c->shm)
        return sib_shm_writev (c, iov, cnt);
    /* sendmsg, not writev: a peer gone raises EPIPE, never a SIGPIPE
	 * that would kill the application */
    return sendmsg (c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Writes what the stream takes; 0 (maybe partial) or -1 on a dead peer. */
int sib_conn_flush (struct sib_conn *c)
{
    while (c->ooff < c->olen && !c->connecting && c->fd >= 0) {
        struct iovec v = { .iov_base = c->obuf + c->ooff, .iov_len = c->olen - c->ooff };
        ssize_t n = sib_conn_writev (c, &v, 1);

        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return -1;
        }
        c->ooff += (size_t)n;
    }
    if (c->ooff == c->olen)
        c->ooff = c->olen = 0;
    if (c->kind != SIB_CONN_RC_REQ)
        sib_conn_want_out (c, c->olen > c->ooff);
    return 0;
}

/* ---- handshake ---- */

static void queue_hello (struct sib_conn *c)
{
    struct sib_hdr h;
    struct sib_hello hello;
    struct sib_qp *qp = c->qp;

    memset (&h, 0, sizeof (h));
    memset (&hello, 0, sizeof (hello));
    h.op = SIB_OP_HELLO;
    h.len = sizeof (hello);
    hello.magic = htole32 (SIB_MAGIC);
    hello.version = htole16 (SIB_VERSION);
    hello.src_ip = c->ctx->addr.ip;
    if (c->kind == SIB_CONN_RC_REQ) {
        hello.kind = htole16 (SIB_HELLO_RC);
        hello.src_qpn = htole32 (qp->qpx.qp_base.qp_num);
        hello.dst_qpn = htole32 (qp->attr.dest_qp_num);
        hello.psn = htole32 (qp->attr.sq_psn);
    } else {
        hello.kind = htole16 (SIB_HELLO_UD);
        hello.src_qpn = htole32 (((uint32_t)c->ctx->slot) << SIB_QP_IDX_BITS);
    }
    sib_hdr_to_wire (&h);
    if (sib_conn_queue (c, &h, sizeof (h), &hello, sizeof (hello)) < 0)
        sib_conn_kill (c, "out of memory");
}

static void connected (struct sib_conn *c)
{
    c->connecting = false;
    if (c->shm)
        c->out_armed = false; /* the socket's EPOLLOUT goes */
    if (c->shm && sib_shm_watch (c) < 0) {
        if (c->kind == SIB_CONN_RC_REQ && c->qp)
            sib_req_lost (c->qp, "cannot watch the connection");
        sib_conn_kill (c, "cannot watch the connection");
        return;
    }
    if (c->kind == SIB_CONN_RC_REQ) {
        queue_hello (c);
        sib_tx_progress (c->qp);
    } else if (sib_conn_flush (c) < 0) {
        sib_log ("UD: lost the connection to %s:%u", inet_ntoa (*(struct in_addr *)&c->peer_ip),
                 c->peer_port);
        sib_conn_kill (c, "write failed");
    }
}

static void connect_failed (struct sib_conn *c, int err)
{
    uint64_t now = sib_now_ns ();

    epoll_ctl (c->ctx->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close (c->fd);
    c->fd = -1;
    c->out_armed = false;
    sib_shm_free (c);
    if (now < c->give_up_at) {
        /* the peer may not listen yet: retry, as an HCA retries */
        c->retry_at = now + 20000000ull;
        return;
    }
    sib_log ("cannot connect to %s:%u: %s (is the peer process running "
             "and reachable?)",
             inet_ntoa (*(struct in_addr *)&c->peer_ip), c->peer_port, strerror (err));
    if (c->kind == SIB_CONN_RC_REQ && c->qp)
        sib_req_lost (c->qp, "peer unreachable");
    sib_conn_kill (c, "connect failed");
}

void sib_conn_timer (struct sib_conn *c, uint64_t now)
{
    struct sib_qp *qp = c->kind == SIB_CONN_RC_REQ ? c->qp : NULL;

    if (!c->retry_at || now < c->retry_at)
        return;
    if (qp)
        sib_lock (&qp->lock);
    else
        pthread_mutex_lock (&c->lock);
    if (!c->dead && c->retry_at) {
        c->retry_at = 0;
        if (start_connect (c) < 0)
            connect_failed (c, errno);
    }
    if (qp)
        sib_unlock (&qp->lock);
    else
        pthread_mutex_unlock (&c->lock);
}

/* Sends a HELLO_NAK and drops the connection. */
static void hello_reject (struct sib_conn *c, uint32_t reason, const char *why)
{
    struct sib_hdr h;
    struct iovec v = { .iov_base = &h, .iov_len = sizeof (h) };

    memset (&h, 0, sizeof (h));
    h.op = SIB_OP_HELLO_NAK;
    h.imm = reason;
    sib_hdr_to_wire (&h);
    sib_log ("refusing connection from %s: %s", inet_ntoa (*(struct in_addr *)&c->peer_ip), why);
    if (sib_conn_writev (c, &v, 1) < 0)
        sib_log ("refusal not sent: %s", strerror (errno));
    sib_conn_kill (c, why);
}

/* Checks an RC requester's HELLO against the responder QP (qp->lock). */
bool sib_hello_matches (struct sib_conn *c, struct sib_qp *qp)
{
    struct sib_hello *h = (struct sib_hello *)c->small;

    if (le32toh (h->src_qpn) != qp->attr.dest_qp_num) {
        hello_reject (c, SIB_NAK_NOT_PEER,
                      "QP is connected to "
                      "another QPN (check the QPN exchange)");
        return false;
    }
    if ((le32toh (h->psn) & 0xffffff) != (qp->attr.rq_psn & 0xffffff)) {
        sib_log ("QP 0x%06x: requester's sq_psn 0x%x != our rq_psn 0x%x", qp->qpx.qp_base.qp_num,
                 le32toh (h->psn) & 0xffffff, qp->attr.rq_psn & 0xffffff);
        hello_reject (c, SIB_NAK_PSN, "PSN mismatch");
        return false;
    }
    return true;
}

static void hello_done (struct sib_conn *c)
{
    struct sib_hello *h = (struct sib_hello *)c->small;
    struct sib_qp *qp;

    if (le32toh (h->magic) != SIB_MAGIC || le16toh (h->version) != SIB_VERSION) {
        hello_reject (c, SIB_NAK_BAD_HELLO,
                      "not a softib peer or "
                      "another softib version");
        return;
    }
    c->peer_ip = h->src_ip;
    if (le16toh (h->kind) == SIB_HELLO_UD) {
        c->kind = SIB_CONN_UD_RX;
        return;
    }
    if (le16toh (h->kind) != SIB_HELLO_RC) {
        hello_reject (c, SIB_NAK_BAD_HELLO, "unknown connection kind");
        return;
    }
    qp = sib_qp_lookup (c->ctx, le32toh (h->dst_qpn));
    if (!qp || qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
        hello_reject (c, SIB_NAK_NO_QP, "no RC QP with that number");
        return;
    }
    sib_lock (&qp->lock);
    if (qp->state == IBV_QPS_ERR) {
        sib_unlock (&qp->lock);
        hello_reject (c, SIB_NAK_NO_QP, "QP is in ERROR");
        return;
    }
    if (qp->state != IBV_QPS_RESET && qp->state != IBV_QPS_INIT && !sib_hello_matches (c, qp)) {
        sib_unlock (&qp->lock);
        return;
    }
    if (qp->resp)
        sib_conn_kill (qp->resp, "replaced by a new connection");
    c->kind = SIB_CONN_RC_RESP;
    c->handoff = true;
    c->qp = qp;
    qp->resp = c;
    qp->resp_expect = 0;
    qp->resp_acked = 0;
    qp->resp_rnr_drop = false;
    if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT)
        park (c); /* requests wait until the QP reaches RTR */
    sib_unlock (&qp->lock);
}

/* ---- receive state machine ---- */

static void rx_reset (struct sib_conn *c)
{
    c->in_payload = false;
    c->rh_have = 0;
    c->riovcnt = 0;
    c->rleft = 0;
    c->rdiscard = 0;
    c->rx_key = 0;
    c->have_rwqe = false;
    c->rstatus = IBV_WC_SUCCESS;
}

static void garbage (struct sib_conn *c, const char *why)
{
    sib_log ("bad message from %s (%s); dropping the connection",
             inet_ntoa (*(struct in_addr *)&c->peer_ip), why);
    if (c->qp && (c->kind == SIB_CONN_RC_REQ || c->kind == SIB_CONN_RC_RESP)) {
        sib_async_event (c->ctx, IBV_EVENT_QP_FATAL, c->qp);
        sib_qp_error (c->qp, why);
    }
    sib_conn_kill (c, why);
}

void sib_conn_garbage (struct sib_conn *c, const char *why)
{
    garbage (c, why);
}

static void on_header (struct sib_conn *c)
{
    sib_hdr_from_wire (&c->rh);
    if (c->rh.op == 0 || c->rh.op >= SIB_OP_MAX || c->rh.len > SIB_MAX_MSG) {
        garbage (c, "unknown opcode or length");
        return;
    }
    c->in_payload = true;
    switch (c->kind) {
    case SIB_CONN_PENDING:
        if (c->rh.op != SIB_OP_HELLO || c->rh.len != sizeof (struct sib_hello)) {
            garbage (c, "connection did not start with HELLO");
            return;
        }
        c->riov[0].iov_base = c->small;
        c->riov[0].iov_len = sizeof (struct sib_hello);
        c->riovcnt = 1;
        c->rleft = c->rh.len;
        break;
    case SIB_CONN_RC_RESP:
        sib_resp_header (c);
        break;
    case SIB_CONN_RC_REQ:
        sib_req_header (c);
        break;
    case SIB_CONN_UD_RX:
        sib_ud_rx_header (c);
        break;
    default:
        garbage (c, "unexpected data");
        break;
    }
}

static void on_done (struct sib_conn *c)
{
    switch (c->kind) {
    case SIB_CONN_PENDING:
        hello_done (c);
        break;
    case SIB_CONN_RC_RESP:
        sib_resp_done (c);
        break;
    case SIB_CONN_RC_REQ:
        sib_req_done (c);
        break;
    case SIB_CONN_UD_RX:
        sib_ud_rx_done (c);
        break;
    default:
        break;
    }
    rx_reset (c);
}

/* Places n bytes from src into the payload sink. */
static void sink_copy (struct sib_conn *c, const uint8_t *src, size_t n)
{
    while (n && c->riovcnt) {
        struct iovec *v = &c->riov[0];
        size_t k = n < v->iov_len ? n : v->iov_len;

        memcpy (v->iov_base, src, k);
        v->iov_base = (char *)v->iov_base + k;
        v->iov_len -= k;
        src += k;
        n -= k;
        if (!v->iov_len) {
            memmove (&c->riov[0], &c->riov[1], (size_t)(c->riovcnt - 1) * sizeof (c->riov[0]));
            c->riovcnt--;
        }
    }
}

static void sink_advance (struct sib_conn *c, size_t n)
{
    while (n && c->riovcnt) {
        struct iovec *v = &c->riov[0];
        size_t k = n < v->iov_len ? n : v->iov_len;

        v->iov_base = (char *)v->iov_base + k;
        v->iov_len -= k;
        n -= k;
        if (!v->iov_len) {
            memmove (&c->riov[0], &c->riov[1], (size_t)(c->riovcnt - 1) * sizeof (c->riov[0]));
            c->riovcnt--;
        }
    }
}

/* Consumes staged bytes; returns false if the connection died. */
static bool consume (struct sib_conn *c)
{
    while (c->st_off < c->st_len && !c->dead && !c->parked && !c->handoff) {
        uint32_t avail = c->st_len - c->st_off;
        uint8_t *p = c->rbuf + c->st_off;

        if (!c->in_payload) {
            /* A whole tiny or short SEND on a responder: one step (resp.c). */
            if (c->kind == SIB_CONN_RC_RESP && !c->rh_have && avail >= SIB_HDR_TINY
                && (p[0] == (SIB_OP_SEND | SIB_OP_TINY) || p[0] == (SIB_OP_SEND | SIB_OP_SHORT)
                    || p[0] == (SIB_OP_SEND_IMM | SIB_OP_SHORT))) {
                uint32_t k = sib_resp_fast_send (c, p, avail);

                if (k) {
                    c->st_off += k;
                    continue;
                }
            }
            uint8_t op = c->rh_have ? c->rh.op : p[0];
            uint32_t end = op & SIB_OP_TINY ? SIB_HDR_TINY
                : op & SIB_OP_SHORT         ? SIB_HDR_SHORT
                                            : sizeof (c->rh);
            uint32_t k = end - c->rh_have;

            if (k > avail)
                k = avail;
            if (k == sizeof (c->rh))
                memcpy (&c->rh, p, sizeof (c->rh));              /* inlined: fixed sizes */
            else if (k == SIB_HDR_SHORT && end == SIB_HDR_SHORT) /* so rh_have was 0 */
                memcpy (&c->rh, p, SIB_HDR_SHORT);
            else
                memcpy ((uint8_t *)&c->rh + c->rh_have, p, k);
            c->rh_have += k;
            c->st_off += k;
            if (c->rh_have < end)
                continue;
            if (end == SIB_HDR_TINY) {
                /* in wire order, as the other headers, for on_header */
                struct sib_hdr_tiny t;

                memcpy (&t, &c->rh, SIB_HDR_TINY);
                memset (&c->rh, 0, sizeof (c->rh));
                c->rh.op = t.op & (uint8_t)~SIB_OP_TINY;
                c->rh.flags = t.flags & (uint8_t)~SIB_F_IMM; /* no immediate */
                c->rh.lid = htole16 (c->ctx->addr.lid);
                c->rh.len = htole32 (le16toh (t.len));
                c->rh.seq = t.seq;
                c->rh_have = sizeof (c->rh);
            } else if (end == SIB_HDR_SHORT) {
                memset ((uint8_t *)&c->rh + SIB_HDR_SHORT, 0, sizeof (c->rh) - SIB_HDR_SHORT);
                c->rh.op &= (uint8_t)~SIB_OP_SHORT;
                c->rh_have = sizeof (c->rh);
            }
            on_header (c);
            if (c->dead)
                return false;
            if (!c->rleft && !c->rdiscard)
                on_done (c);
            continue;
        }
        if (c->rdiscard) {
            uint64_t k = c->rdiscard < avail ? c->rdiscard : avail;

            c->rdiscard -= k;
            c->st_off += (uint32_t)k;
        } else {
            uint64_t k = c->rleft < avail ? c->rleft : avail;

            sink_copy (c, p, (size_t)k);
            c->rleft -= k;
            c->st_off += (uint32_t)k;
        }
        if (!c->rleft && !c->rdiscard)
            on_done (c);
    }
    return !c->dead;
}

static void rx_eof (struct sib_conn *c, int err)
{
    bool mid = c->in_payload || c->rh_have;

    switch (c->kind) {
    case SIB_CONN_RC_RESP:
        if (mid) {
            garbage (c,
                     "peer disconnected in the middle of a "
                     "message");
            return;
        }
        break;
    case SIB_CONN_RC_REQ:
        sib_req_lost (c->qp,
                      err ? "connection to the responder "
                            "failed"
                          : "responder closed the connection");
        break;
    default:
        if (mid && c->kind == SIB_CONN_UD_RX)
            sib_log ("UD peer %s disconnected mid-datagram",
                     inet_ntoa (*(struct in_addr *)&c->peer_ip));
        break;
    }
    sib_conn_kill (c, "end of stream");
}

static void rx_end (struct sib_conn *c)
{
    if (c->kind == SIB_CONN_RC_RESP && c->qp)
        sib_resp_batch_end (c);
    if (c->olen > c->ooff && sib_conn_flush (c) < 0)
        rx_eof (c, errno);
}

/* The same-host stream: messages are parsed straight from the ring and
 * their payloads copied once, into place. */
static void shm_rx (struct sib_conn *c)
{
    uint32_t budget = SIB_RX_BUDGET;
    uint8_t *p;

    while (!c->dead && !c->parked && !c->handoff && budget) {
        int64_t n = sib_shm_peek (c, &p);
        uint32_t used;

        if (n < 0) {
            garbage (c, "corrupt shared ring");
            return;
        }
        if (n == 0)
            break;
        c->rbuf = p;
        c->st_len = (uint32_t)n;
        c->st_off = 0;
        consume (c);
        used = c->st_off;
        c->st_len = c->st_off = 0;
        if (c->dead)
            return;
        sib_shm_consumed (c, used);
        if (!used)
            break;
        budget = used >= budget ? 0 : budget - used;
    }
    if (c->dead || c->parked || c->handoff)
        return;
    if (c->peer_gone && sib_shm_peek (c, &p) == 0) {
        rx_eof (c, 0);
        return;
    }
    rx_end (c);
}

static void rx_loop (struct sib_conn *c)
{
    uint32_t budget = SIB_RX_BUDGET;

    if (c->shm) {
        shm_rx (c);
        return;
    }
    if (!c->stage) {
        c->stage = malloc (SIB_STAGE);
        if (!c->stage) {
            sib_log ("out of memory for a receive buffer");
            return;
        }
    }
    c->rbuf = c->stage;
    while (!c->dead && !c->parked && budget) {
        ssize_t n;

        if (!consume (c) || c->handoff)
            return; /* sib_conn_event goes on under the lock */
        if (c->parked)
            break;
        if (c->shm) {
            /* the HELLO brought the rings: the rest is there */
            c->st_len = c->st_off = 0;
            shm_rx (c);
            return;
        }
        if (c->in_payload && !c->rdiscard && c->riovcnt && c->rleft >= SIB_DIRECT_MIN) {
            /* large payload: straight into its destination */
            struct iovec v[SIB_MAX_SGE + 1];
            int cnt = c->riovcnt;
            uint64_t want = c->rleft;

            memcpy (v, c->riov, (size_t)cnt * sizeof (v[0]));
            for (int i = 0; i < cnt; i++) {
                if (v[i].iov_len > want)
                    v[i].iov_len = (size_t)want;
                want -= v[i].iov_len;
            }
            n = readv (c->fd, v, cnt);
            if (n > 0) {
                sink_advance (c, (size_t)n);
                c->rleft -= (uint64_t)n;
                budget = (uint32_t)n >= budget ? 0 : budget - (uint32_t)n;
                if (!c->rleft && !c->rdiscard)
                    on_done (c);
                continue;
            }
        } else {
            if (c->is_unix) {
                n = sib_shm_recv_hello (c, c->stage, SIB_STAGE);
                if (c->shm && sib_shm_watch (c) < 0) {
                    sib_conn_kill (c,
                                   "cannot watch the "
                                   "connection");
                    return;
                }
            } else {
                n = read (c->fd, c->stage, SIB_STAGE);
            }
            if (n > 0) {
                c->st_len = (uint32_t)n;
                c->st_off = 0;
                budget = (uint32_t)n >= budget ? 0 : budget - (uint32_t)n;
                continue;
            }
        }
        if (n == 0) {
            rx_eof (c, 0);
            return;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        if (errno == EINTR)
            continue;
        rx_eof (c, errno);
        return;
    }
    if (c->dead)
        return;
    rx_end (c);
}

void sib_conn_poll (struct sib_conn *c)
{
    if (c->dead || c->connecting || c->parked || c->fd < 0 || !c->pollable)
        return;
    if (c->shm)
        __atomic_store_n (&c->shm->app_polls, c->shm->app_polls + 1,
                          __ATOMIC_RELAXED); /* see shm_service */
    rx_loop (c);
}

static void lock_owner (struct sib_conn *c, struct sib_qp **qp)
{
    *qp = NULL;
    if ((c->kind == SIB_CONN_RC_REQ || c->kind == SIB_CONN_RC_RESP) && c->qp) {
        *qp = c->qp;
        sib_lock (&(*qp)->lock);
    } else if (c->kind == SIB_CONN_UD_TX) {
        pthread_mutex_lock (&c->lock);
    }
}

static void unlock_owner (struct sib_conn *c, struct sib_qp *qp)
{
    if (qp)
        sib_unlock (&qp->lock);
    else if (c->kind == SIB_CONN_UD_TX)
        pthread_mutex_unlock (&c->lock);
}

/* Progress thread, owner locked: serves a same-host connection, then
 * asks for a wake-up before going back to sleep (if `arm`: not before a
 * spin, which would take it back at once, and arming costs a
 * membarrier), unless an application thread polled it since the last
 * look (it will read what comes; a timer brings us back, or
 * sib_shm_app_sleeps). */
static void shm_service (struct sib_conn *c, struct sib_qp *qp, bool force, bool arm)
{
    struct sib_shm *s;

    for (int k = 0; k < 8 && !c->dead; k++) {
        rx_loop (c);
        if (c->dead || c->handoff)
            return;
        if (c->kind == SIB_CONN_RC_REQ && qp)
            sib_tx_progress (qp);
        else if (c->olen > c->ooff && sib_conn_flush (c) < 0)
            sib_conn_kill (c, "write failed");
        if (c->dead || c->parked)
            return;
        s = c->shm;
        if (!force && __atomic_load_n (&s->app_polls, __ATOMIC_RELAXED) != s->seen_polls) {
            s->seen_polls = __atomic_load_n (&s->app_polls, __ATOMIC_RELAXED);
            s->lazy_until = sib_now_ns () + SIB_SHM_LAZY_NS;
            sib_shm_disarm (c);
            return;
        }
        s->seen_polls = __atomic_load_n (&s->app_polls, __ATOMIC_RELAXED);
        s->lazy_until = 0;
        if (!arm || !sib_shm_arm (c))
            return;
    }
    sib_shm_kick_self (c); /* busy: come back after the others */
}

/* shm_service, then, if the ring is armed (no application thread is
 * polling it), a short unlocked busy wait before sleeping: a stream keeps
 * the progress thread on its CPU instead of costing the producer an
 * eventfd write and us a wake-up per burst.  Bounded, so commands and the
 * other connections wait at most SIB_SHM_SPIN_ROUNDS spins. */
static void shm_serve_spin (struct sib_conn *c, struct sib_qp **qp)
{
    bool last = false;

    for (int k = 0; k < SIB_SHM_SPIN_ROUNDS; k++) {
        bool work;

        shm_service (c, *qp, false, last);
        if (last || c->dead || !c->shm || c->shm->lazy_until)
            return;
        if (c->parked || c->handoff || c->peer_gone) {
            shm_service (c, *qp, false, true); /* no spin: arm */
            return;
        }
        /* the connection stays allocated: only this thread frees */
        unlock_owner (c, *qp);
        work = sib_shm_spin (c);
        lock_owner (c, qp);
        if (c->dead)
            return;
        last = !work; /* timed out: arm again, then sleep */
    }
    /* rounds used up with bytes still coming: the spin left the ring
	 * disarmed, so come back after the other events */
    if (!c->dead && c->shm)
        sib_shm_kick_self (c);
}

uint64_t sib_conn_shm_timers (struct sib_ctx *ctx, uint64_t now, bool all)
{
    uint64_t next = 0;
    struct sib_conn *c;

    /* the list is only unlinked by this thread (reap) */
    for (c = ctx->conns; c; c = c->next) {
        struct sib_qp *qp;
        uint64_t t;

        if (c->dead || !c->shm || !c->shm->watched
            || !__atomic_load_n (&c->shm->lazy_until, __ATOMIC_RELAXED))
            continue;
        if (!all) {
            /* not due, or an application thread polled it since our
			 * last look (shm_service): look again later, without
			 * taking the owner's lock, which is biased to that
			 * thread and costs us a membarrier.  Only this thread
			 * writes seen_polls and lazy_until. */
            struct sib_shm *s = c->shm;
            uint32_t p = __atomic_load_n (&s->app_polls, __ATOMIC_RELAXED);

            if (s->lazy_until > now) {
                if (!next || s->lazy_until < next)
                    next = s->lazy_until;
                continue;
            }
            if (p != s->seen_polls) {
                s->seen_polls = p;
                s->lazy_until = now + SIB_SHM_LAZY_NS;
                sib_shm_disarm (c);
                if (!next || s->lazy_until < next)
                    next = s->lazy_until;
                continue;
            }
        }
        lock_owner (c, &qp);
        t = c->shm ? c->shm->lazy_until : 0;
        if (!c->dead && t && (all || t <= now))
            shm_service (c, qp, all, true);
        t = c->dead || !c->shm ? 0 : c->shm->lazy_until;
        unlock_owner (c, qp);
        if (t && (!next || t < next))
            next = t;
    }
    return next;
}

void sib_conn_event (struct sib_conn *c, uint32_t events)
{
    struct sib_qp *qp;

    if (c->dead)
        return;
    lock_owner (c, &qp);
    if (c->dead)
        goto out;
    if (c->connecting) {
        int err = 0;
        socklen_t len = sizeof (err);

        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            goto out;
        if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            connect_failed (c, err);
            goto out;
        }
        connected (c);
        if (c->dead)
            goto out;
        if (c->shm) {
            shm_service (c, qp, false, true);
            goto out;
        }
    }
    if (c->shm && c->shm->watched) {
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            c->peer_gone = true;
        sib_shm_drain_wake (c);
        shm_serve_spin (c, &qp);
        goto out;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        rx_loop (c);
    if (c->shm && !c->dead && !c->handoff) {
        /* a unix HELLO just brought the rings (UD receiver) */
        shm_service (c, qp, false, true);
        goto out;
    }
    if (!c->dead && (events & EPOLLOUT)) {
        if (c->kind == SIB_CONN_RC_REQ && qp)
            sib_tx_progress (qp);
        else if (sib_conn_flush (c) < 0)
            sib_conn_kill (c, "write failed");
    }
out:
    unlock_owner (c, qp);
    if (c->handoff && !qp) {
        /* the HELLO made this an RC responder: what follows it is
		 * the QP's business, under its lock, as for every event
		 * from now on */
        c->handoff = false;
        if (c->dead || c->kind != SIB_CONN_RC_RESP || !c->qp)
            return;
        lock_owner (c, &qp);
        if (!c->dead) {
            c->pollable = true;
            if (c->shm)
                shm_service (c, qp, false, true);
            else
                rx_loop (c);
        }
        unlock_owner (c, qp);
    }
}
