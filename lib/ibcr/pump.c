/* pump.c - completion event forwarding thread (see pump.h).
 *
 * Invariant: the pump touches a real channel or context only while holding
 * pump_lock and only if it is in 'live'; pump_del/pump_del_ctx remove it
 * under the same lock, so release can destroy real objects safely.
 */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include "ibcr.h"
#include "backend.h"
#include "pump.h"

static pthread_mutex_t pump_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pump_once = PTHREAD_ONCE_INIT;
static int epfd = -1;
static int start_errno;
static struct ibcr_map live; /* ibcr_chan pointer -> itself */

static void forward (struct ibcr_chan *vchan)
{
    struct ibv_cq *rcq;
    void *cqctx;
    while (vchan->real && ibcr_be.get_cq_event (vchan->real, &rcq, &cqctx) == 0) {
        ibcr_be.ack_cq_events (rcq, 1);
        if (cqctx)
            ibcr_chan_push (vchan, cqctx);
    }
}

static void forward_async (struct ibcr_ctx *vctx)
{
    struct ibv_async_event ev;
    while (vctx->real && ibcr_be.get_async_event (vctx->real, &ev) == 0) {
        ibcr_ctx_async_push (vctx, &ev);
        /* Acked at once: the real object may be destroyed at any release,
         * and destroy waits for its events to be acked. */
        ibcr_be.ack_async_event (&ev);
    }
}

/* epoll data: a channel pointer, or a context pointer with bit 0 set. */
#define CTX_TAG 1u

static void *pump_main (void *arg)
{
    struct epoll_event ev[16];
    for (;;) {
        int n = epoll_wait (epfd, ev, 16, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            ibcr_log ("completion event pump: epoll_wait: %m; events stop");
            return NULL;
        }
        pthread_mutex_lock (&pump_lock);
        for (int i = 0; i < n; i++) {
            uint64_t d = ev[i].data.u64;
            if (!map_get (&live, d))
                continue;
            if (d & CTX_TAG)
                forward_async ((struct ibcr_ctx *)(uintptr_t)(d & ~(uint64_t)CTX_TAG));
            else
                forward ((struct ibcr_chan *)(uintptr_t)d);
        }
        pthread_mutex_unlock (&pump_lock);
    }
    return NULL;
}

static void start_once (void)
{
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;
    map_init (&live);
    epfd = epoll_create1 (EPOLL_CLOEXEC);
    if (epfd < 0) {
        start_errno = errno;
        return;
    }
    /* The application's signals are for its own threads. */
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &old);
    pthread_attr_init (&a);
    pthread_attr_setdetachstate (&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create (&t, &a, pump_main, NULL);
    pthread_attr_destroy (&a);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (rc) {
        start_errno = rc;
        close (epfd);
        epfd = -1;
    }
}

int pump_start (void)
{
    pthread_once (&pump_once, start_once);
    if (epfd < 0) {
        errno = start_errno ? start_errno : EAGAIN;
        return -1;
    }
    return 0;
}

int pump_add (struct ibcr_chan *vchan)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uintptr_t)vchan };
    if (pump_start () < 0)
        return -1;
    pthread_mutex_lock (&pump_lock);
    int rc = epoll_ctl (epfd, EPOLL_CTL_ADD, vchan->real->fd, &ev);
    if (rc == 0 && map_put (&live, ev.data.u64, vchan) < 0) {
        epoll_ctl (epfd, EPOLL_CTL_DEL, vchan->real->fd, NULL);
        rc = -1;
    }
    pthread_mutex_unlock (&pump_lock);
    return rc;
}

void pump_del (struct ibcr_chan *vchan)
{
    if (epfd < 0)
        return;
    pthread_mutex_lock (&pump_lock);
    if (map_get (&live, (uintptr_t)vchan)) {
        if (vchan->real)
            epoll_ctl (epfd, EPOLL_CTL_DEL, vchan->real->fd, NULL);
        map_del (&live, (uintptr_t)vchan);
    }
    pthread_mutex_unlock (&pump_lock);
}

int pump_add_ctx (struct ibcr_ctx *vctx)
{
    uint64_t key = (uintptr_t)vctx | CTX_TAG;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = key };
    if (pump_start () < 0)
        return -1;
    /* The pump must never block on a real async fd. */
    int fl = fcntl (vctx->real->async_fd, F_GETFL);
    if (fl >= 0)
        fcntl (vctx->real->async_fd, F_SETFL, fl | O_NONBLOCK);
    pthread_mutex_lock (&pump_lock);
    int rc = epoll_ctl (epfd, EPOLL_CTL_ADD, vctx->real->async_fd, &ev);
    if (rc == 0 && map_put (&live, key, vctx) < 0) {
        epoll_ctl (epfd, EPOLL_CTL_DEL, vctx->real->async_fd, NULL);
        rc = -1;
    }
    pthread_mutex_unlock (&pump_lock);
    return rc;
}

void pump_del_ctx (struct ibcr_ctx *vctx)
{
    uint64_t key = (uintptr_t)vctx | CTX_TAG;
    if (epfd < 0)
        return;
    pthread_mutex_lock (&pump_lock);
    if (map_get (&live, key)) {
        /* Events the device raised before (an SRQ limit reached during
         * the drain) are the application's: forwarded, not lost with
         * the device. */
        forward_async (vctx);
        if (vctx->real)
            epoll_ctl (epfd, EPOLL_CTL_DEL, vctx->real->async_fd, NULL);
        map_del (&live, key);
    }
    pthread_mutex_unlock (&pump_lock);
}
