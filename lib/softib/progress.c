/*
 * progress.c - a context's endpoint and its progress thread.
 *
 * Each open context listens on one TCP port (port_base + slot, the slot
 * chosen free at open and encoded in every QPN) and runs one thread that
 * waits in epoll for: new connections, data on connections, the wake
 * eventfd (commands from application threads), and timers (RNR waits,
 * connect retries).  Application threads hand over anything that must not
 * race with an in-flight event (destroying a QP, resetting it,
 * deregistering an MR) as a command and wait for it.  Stopping the thread
 * closes every socket and fd it owns: after ibv_close_device nothing of
 * softib remains in the process.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "softib.h"

/* 1 MiB: the progress thread needs far less, but ThreadSanitizer (t2009
 * runs a TSan build of libibcr over softib) refuses a thread whose stack
 * is under about 900 KiB.  Only what is touched gets committed. */
#define SIB_STACK (1024 * 1024)

static char sib_tag_wake, sib_tag_listen, sib_tag_ulisten;

void sib_progress_kick (struct sib_ctx *ctx)
{
    uint64_t one = 1;

    if (write (ctx->wake_fd, &one, sizeof (one)) < 0 && errno != EAGAIN)
        sib_log ("wake fd: %s", strerror (errno));
}

void sib_progress_cmd (struct sib_ctx *ctx, int type, void *arg)
{
    struct sib_cmd cmd = { .type = type, .arg = arg };

    if (pthread_equal (pthread_self (), ctx->thread)) {
        errno = EDEADLK; /* never from the progress thread */
        return;
    }
    pthread_mutex_lock (&ctx->cmd_lock);
    cmd.next = ctx->cmds;
    ctx->cmds = &cmd;
    pthread_mutex_unlock (&ctx->cmd_lock);
    sib_progress_kick (ctx);
    pthread_mutex_lock (&ctx->cmd_lock);
    while (!cmd.done)
        pthread_cond_wait (&ctx->cmd_cond, &ctx->cmd_lock);
    pthread_mutex_unlock (&ctx->cmd_lock);
}

/* An in-flight receive into memory that is going away is dropped. */
static void divert_rx (struct sib_ctx *ctx, struct sib_qp *qp, uint32_t key)
{
    struct sib_conn *c;

    for (c = ctx->conns; c; c = c->next) {
        bool hit = false;

        if (c->dead || !c->in_payload)
            continue;
        if (qp && c->qp == qp)
            hit = true;
        if (key && c->rx_key == key)
            hit = true;
        if (key && c->have_rwqe)
            for (uint32_t i = 0; i < c->rwqe.nsge; i++)
                if (c->rwqe.sge[i].lkey == key)
                    hit = true;
        if (!hit)
            continue;
        c->rdiscard += c->rleft;
        c->rleft = 0;
        c->riovcnt = 0;
        if (c->kind == SIB_CONN_UD_RX) {
            c->qp = NULL;
            c->have_rwqe = false;
        } else {
            c->rstatus = IBV_WC_GENERAL_ERR;
        }
    }
}

static void drop_qp_conns (struct sib_qp *qp)
{
    sib_lock (&qp->lock);
    if (qp->req)
        sib_conn_kill (qp->req, "QP reset or destroyed");
    if (qp->resp)
        sib_conn_kill (qp->resp, "QP reset or destroyed");
    qp->close_conns = false;
    sib_unlock (&qp->lock);
}

/* The QP is freed once its command is done: no connection may point to
 * it any more (reap locks c->qp).  Its RC connections are dead by now
 * (drop_qp_conns, or killed when replaced); a UD receiver lets go of it in
 * divert_rx. */
static void forget_qp (struct sib_ctx *ctx, struct sib_qp *qp)
{
    struct sib_conn *c;

    pthread_mutex_lock (&ctx->lock);
    for (c = ctx->conns; c; c = c->next)
        if (c->qp == qp)
            c->qp = NULL;
    pthread_mutex_unlock (&ctx->lock);
}

static void run_cmd (struct sib_ctx *ctx, struct sib_cmd *cmd)
{
    struct sib_qp *qp;

    switch (cmd->type) {
    case SIB_CMD_DESTROY_QP:
        qp = cmd->arg;
        pthread_mutex_lock (&ctx->lock);
        if (ctx->qps[qp->idx] == qp)
            ctx->qps[qp->idx] = NULL;
        pthread_mutex_unlock (&ctx->lock);
        divert_rx (ctx, qp, 0);
        drop_qp_conns (qp);
        forget_qp (ctx, qp);
        break;
    case SIB_CMD_RESET_QP:
        qp = cmd->arg;
        divert_rx (ctx, qp, 0);
        drop_qp_conns (qp);
        break;
    case SIB_CMD_DEREG_MR:
        divert_rx (ctx, NULL, ((struct sib_mr *)cmd->arg)->mr.lkey);
        break;
    default:
        break;
    }
}

static void run_cmds (struct sib_ctx *ctx)
{
    struct sib_cmd *list, *cmd, *next;

    pthread_mutex_lock (&ctx->cmd_lock);
    list = ctx->cmds;
    ctx->cmds = NULL;
    pthread_mutex_unlock (&ctx->cmd_lock);
    if (!list)
        return;
    for (cmd = list; cmd; cmd = cmd->next)
        run_cmd (ctx, cmd);
    pthread_mutex_lock (&ctx->cmd_lock);
    for (cmd = list; cmd; cmd = next) {
        next = cmd->next;
        cmd->done = true; /* cmd lives on the caller's stack */
    }
    pthread_cond_broadcast (&ctx->cmd_cond);
    pthread_mutex_unlock (&ctx->cmd_lock);
}

/* QPs that went to ERROR drop their connections here, where it is safe. */
static void close_errored (struct sib_ctx *ctx)
{
    for (uint32_t i = 0; i < SIB_MAX_QP; i++) {
        struct sib_qp *qp = ctx->qps[i];

        if (qp && qp->close_conns)
            drop_qp_conns (qp);
    }
}

/* Runs due timers; returns the epoll timeout in ms until the next one. */
static int run_timers (struct sib_ctx *ctx)
{
    uint64_t now = sib_now_ns (), next = 0;
    struct sib_conn *c;

    pthread_mutex_lock (&ctx->lock);
    for (c = ctx->conns; c; c = c->next)
        if (!c->dead && c->retry_at && (!next || c->retry_at < next))
            next = c->retry_at;
    pthread_mutex_unlock (&ctx->lock);
    if (next && next <= now) {
        for (c = ctx->conns; c; c = c->next)
            sib_conn_timer (c, now);
        next = 0;
        pthread_mutex_lock (&ctx->lock);
        for (c = ctx->conns; c; c = c->next)
            if (!c->dead && c->retry_at && (!next || c->retry_at < next))
                next = c->retry_at;
        pthread_mutex_unlock (&ctx->lock);
    }
    {
        bool all = __atomic_exchange_n (&ctx->shm_wake_all, false, __ATOMIC_ACQ_REL);
        uint64_t t = sib_conn_shm_timers (ctx, now, all);

        if (t && (!next || t < next))
            next = t;
    }
    for (uint32_t i = 0; i < SIB_MAX_QP; i++) {
        struct sib_qp *qp = ctx->qps[i];
        uint64_t t;

        if (!qp
            || (!__atomic_load_n (&qp->rnr_until, __ATOMIC_RELAXED)
                && !__atomic_load_n (&qp->gone_at, __ATOMIC_RELAXED)))
            continue;
        sib_lock (&qp->lock);
        t = qp->rnr_until;
        if (t && t <= now) {
            qp->rnr_until = 0;
            sib_tx_progress (qp);
        } else if (t && (!next || t < next)) {
            next = t;
        }
        t = sib_req_gone_timer (qp, now);
        if (t && (!next || t < next))
            next = t;
        sib_unlock (&qp->lock);
    }
    if (!next)
        return -1;
    now = sib_now_ns ();
    return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/*
 * Frees dead connections.  An application thread may have killed one
 * itself (polling a CQ, posting, modifying a QP: always under the owner
 * QP's lock) and still be using it in that same critical section: kill
 * marks it dead first, then unlinks it, and the caller goes on reading
 * its state.  So an RC connection is freed only after taking its QP's
 * lock once, which waits out whoever holds it.  c->qp is valid here: a
 * destroyed QP clears it in its connections (SIB_CMD_DESTROY_QP) before
 * the application may free the QP.  The QP lock is never taken under
 * ctx->lock: a thread holding a QP lock may want ctx->lock (a new
 * connection at RTS).
 */
static void reap (struct sib_ctx *ctx, bool all)
{
    struct sib_conn **pp, *c, *dead = NULL;

    pthread_mutex_lock (&ctx->lock);
    for (pp = &ctx->conns; (c = *pp);) {
        if (!c->dead && !all) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        c->next = dead;
        dead = c;
    }
    pthread_mutex_unlock (&ctx->lock);
    while ((c = dead)) {
        dead = c->next;
        if (c->qp && (c->kind == SIB_CONN_RC_REQ || c->kind == SIB_CONN_RC_RESP)) {
            sib_lock (&c->qp->lock);
            sib_unlock (&c->qp->lock);
        }
        /* wait out a UD sender that found it before it died */
        pthread_mutex_lock (&c->lock);
        pthread_mutex_unlock (&c->lock);
        sib_conn_free (c);
    }
}

static void accept_all (struct sib_ctx *ctx, int lfd)
{
    for (;;) {
        int fd = accept4 (lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        struct sib_conn *c;

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                sib_log ("accept: %s", strerror (errno));
            return;
        }
        c = sib_conn_new (ctx, fd, SIB_CONN_PENDING);
        if (!c) {
            sib_log ("cannot take a connection: %s", strerror (errno));
            close (fd);
        } else if (lfd == ctx->ulisten_fd) {
            c->is_unix = true; /* its HELLO brings rings */
        }
    }
}

static void *progress_main (void *arg)
{
    struct sib_ctx *ctx = arg;
    struct epoll_event evs[64];
    int timeout = -1;

    while (!__atomic_load_n (&ctx->stop, __ATOMIC_ACQUIRE)) {
        int n = epoll_wait (ctx->epfd, evs, 64, timeout);

        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;

            if (tag == &sib_tag_wake) {
                uint64_t v;

                if (read (ctx->wake_fd, &v, sizeof (v)) < 0)
                    continue;
            } else if (tag == &sib_tag_listen) {
                accept_all (ctx, ctx->listen_fd);
            } else if (tag == &sib_tag_ulisten) {
                accept_all (ctx, ctx->ulisten_fd);
            } else {
                sib_conn_event (tag, evs[i].events);
            }
        }
        run_cmds (ctx);
        close_errored (ctx);
        timeout = run_timers (ctx);
        reap (ctx, false);
    }
    return NULL;
}

static int listen_on_free_slot (struct sib_ctx *ctx)
{
    struct sockaddr_in sin = { .sin_family = AF_INET };
    uint32_t start =
        ((uint32_t)getpid () * 2654435761u + (uint32_t)sib_now_ns ()) % (SIB_SLOTS - 1);
    int one = 1;

    for (uint32_t k = 0; k < SIB_SLOTS - 1; k++) {
        uint16_t slot = (uint16_t)(1 + (start + k) % (SIB_SLOTS - 1));
        int fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

        if (fd < 0)
            return -1;
        setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
        sin.sin_addr.s_addr = htonl (INADDR_ANY);
        sin.sin_port = htons ((uint16_t)(ctx->port_base + slot));
        if (bind (fd, (struct sockaddr *)&sin, sizeof (sin)) == 0 && listen (fd, 256) == 0) {
            ctx->listen_fd = fd;
            ctx->slot = slot;
            ctx->port = (uint16_t)(ctx->port_base + slot);
            return 0;
        }
        close (fd);
    }
    sib_log ("no free TCP port in %u..%u for the endpoint; set "
             "SOFTIB_PORT_BASE to a free range",
             ctx->port_base + 1, ctx->port_base + SIB_SLOTS - 1);
    errno = EADDRINUSE;
    return -1;
}

int sib_progress_start (struct sib_ctx *ctx)
{
    struct epoll_event ev = { .events = EPOLLIN };
    int err;

    ctx->epfd = epoll_create1 (EPOLL_CLOEXEC);
    ctx->wake_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ctx->epfd < 0 || ctx->wake_fd < 0)
        goto error;
    if (listen_on_free_slot (ctx) < 0)
        goto error;
    ev.data.ptr = &sib_tag_wake;
    if (epoll_ctl (ctx->epfd, EPOLL_CTL_ADD, ctx->wake_fd, &ev) < 0)
        goto error;
    ev.data.ptr = &sib_tag_listen;
    if (epoll_ctl (ctx->epfd, EPOLL_CTL_ADD, ctx->listen_fd, &ev) < 0)
        goto error;
    ctx->shm_on = sib_shm_wanted ();
    if (ctx->shm_on) {
        ctx->shm_mb = sib_shm_membarrier ();
        /* same-host peers come here first; without it they use TCP */
        ctx->ulisten_fd = sib_shm_listen (ctx);
        ev.data.ptr = &sib_tag_ulisten;
        if (ctx->ulisten_fd < 0) {
            sib_log ("no same-host endpoint (%s); peers on this "
                     "host will use TCP",
                     strerror (errno));
        } else if (epoll_ctl (ctx->epfd, EPOLL_CTL_ADD, ctx->ulisten_fd, &ev) < 0) {
            goto error;
        }
    }
    /* our own stack, unmapped at stop: glibc would cache a stack it
	 * allocated after the join, and softib must leave no mapping */
    ctx->stack = mmap (NULL, SIB_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (ctx->stack == MAP_FAILED) {
        ctx->stack = NULL;
        goto error;
    }
    {
        pthread_attr_t attr;

        pthread_attr_init (&attr);
        pthread_attr_setstack (&attr, ctx->stack, SIB_STACK);
        err = pthread_create (&ctx->thread, &attr, progress_main, ctx);
        pthread_attr_destroy (&attr);
    }
    if (err) {
        errno = err;
        goto error;
    }
    return 0;
error:
    err = errno;
    if (ctx->listen_fd >= 0)
        close (ctx->listen_fd);
    if (ctx->ulisten_fd >= 0)
        close (ctx->ulisten_fd);
    if (ctx->wake_fd >= 0)
        close (ctx->wake_fd);
    if (ctx->epfd >= 0)
        close (ctx->epfd);
    if (ctx->stack)
        munmap (ctx->stack, SIB_STACK);
    ctx->stack = NULL;
    ctx->listen_fd = ctx->ulisten_fd = ctx->wake_fd = ctx->epfd = -1;
    errno = err;
    return -1;
}

void sib_progress_stop (struct sib_ctx *ctx)
{
    if (ctx->epfd < 0)
        return;
    __atomic_store_n (&ctx->stop, true, __ATOMIC_RELEASE);
    sib_progress_kick (ctx);
    pthread_join (ctx->thread, NULL);
    run_cmds (ctx); /* release anyone still waiting */
    reap (ctx, true);
    close (ctx->listen_fd);
    if (ctx->ulisten_fd >= 0)
        close (ctx->ulisten_fd);
    close (ctx->wake_fd);
    close (ctx->epfd);
    munmap (ctx->stack, SIB_STACK);
    ctx->stack = NULL;
    ctx->listen_fd = ctx->ulisten_fd = ctx->wake_fd = ctx->epfd = -1;
}
