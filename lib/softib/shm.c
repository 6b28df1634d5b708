/*
 * shm.c - the same-host transport under softib's connections.
 *
 * A connection carries a byte stream of framed messages (wire.h).  When
 * the peer endpoint has our own host address, the side that connects
 * first tries the peer's abstract unix socket (named by address and TCP
 * port, so it lives in the same network namespace as the TCP endpoint).
 * If that works, it creates one sealed memfd holding two single-producer
 * single-consumer byte rings (one per direction) and two eventfds (one
 * per side), and passes all three with its HELLO (SCM_RIGHTS).  From
 * then on every byte of the stream goes through the rings; the unix
 * socket stays open only so each side sees the other go away (EPOLLRDHUP,
 * in order after the bytes already in the ring).  With no listener there
 * (another netns, SOFTIB_SHM=0 on the peer) the connection uses TCP.
 *
 * Wake-ups: a consumer that is about to sleep (the progress thread going
 * back to epoll) sets `armed`; a producer that published bytes and sees
 * `armed` clears it and writes the consumer's eventfd.  A producer that
 * finds the ring full sets `want_space`; the consumer that frees space
 * and sees it writes the producer's eventfd.  Both pairs are ordered so
 * that no wake-up is lost, without a fence per message on the data path
 * (see shm_fast and room_check).
 *
 * Everything (mapping, eventfds, socket) belongs to the connection and is
 * released with it: after ibv_close_device (libibcr's checkpoint) no shm
 * mapping or fd of softib remains in the process.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "softib.h"

/* Bytes per direction.  2 MiB holds 31 SENDs of 64 KiB, twice what
 * 1 MiB held: with 1 MiB a sender posting a window of 64 found the ring
 * full, and its progress thread made most of the copies later, a third
 * busy thread on two cores (doc/softib-shm.md). */
#define SIB_SHM_RING (1u << 21)
#define SIB_SHM_CTL 4096 /* control page before the rings */
#define SIB_SHM_BYTES (SIB_SHM_CTL + 2 * (size_t)SIB_SHM_RING)
/* The layout of the control page, its wake-up protocol and what the
 * rings carry (3: short headers, 4: tiny headers, wire.h; 5: rings of
 * 2 MiB): in the name of
 * the unix endpoint, so that softib builds with another layout never meet
 * there (they use TCP between them). */
#define SIB_SHM_LAYOUT 5

/* Each index and each flag has a cache line of its own: the producer
 * writes head per message and the consumer tail per batch, while the
 * flags are written only around sleeps, so reading a flag per message
 * costs no cache miss. */
/* The control page: ring 0 (connector -> acceptor), ring 1 (acceptor ->
 * connector), and per side (0 connector, 1 acceptor) whether that side
 * is registered for membarrier(2) and so pays for its own sleeps (see
 * shm_fast). */
struct sib_shm_ctl {
    struct sib_ring_ctl ring[2];
    uint32_t mb[2] __attribute__ ((aligned (64)));
};

bool sib_shm_wanted (void)
{
    const char *s = getenv ("SOFTIB_SHM");

    return !s || strcmp (s, "0") != 0;
}

bool sib_shm_membarrier (void)
{
    return sib_membarrier_register ("SOFTIB_SHM_MEMBARRIER",
                                    MEMBARRIER_CMD_GLOBAL_EXPEDITED
                                        | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
                                    MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
}

static socklen_t ep_name (struct sockaddr_un *sun, uint32_t ip, uint16_t port)
{
    int n;

    memset (sun, 0, sizeof (*sun));
    sun->sun_family = AF_UNIX;
    /* abstract: sun_path[0] stays 0 */
    n = snprintf (sun->sun_path + 1, sizeof (sun->sun_path) - 1, "softib-shm%u-%08x-%u",
                  SIB_SHM_LAYOUT, ip, port);
    return (socklen_t)(offsetof (struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int sib_shm_listen (struct sib_ctx *ctx)
{
    struct sockaddr_un sun;
    socklen_t len = ep_name (&sun, ctx->addr.ip, ctx->port);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (bind (fd, (struct sockaddr *)&sun, len) < 0 || listen (fd, 256) < 0) {
        int err = errno;

        close (fd);
        errno = err;
        return -1;
    }
    return fd;
}

static void shm_layout (struct sib_shm *s, bool connector, bool mb)
{
    struct sib_shm_ctl *ctl = s->map;
    uint8_t *d0 = (uint8_t *)s->map + SIB_SHM_CTL;
    uint8_t *d1 = d0 + SIB_SHM_RING;

    _Static_assert(sizeof (struct sib_shm_ctl) <= SIB_SHM_CTL,
                   "ring controls fit the control page");
    /* ring 0: connector -> acceptor, ring 1: acceptor -> connector */
    s->tx = &ctl->ring[connector ? 0 : 1];
    s->rx = &ctl->ring[connector ? 1 : 0];
    s->txd = connector ? d0 : d1;
    s->rxd = connector ? d1 : d0;
    s->size = SIB_SHM_RING;
    s->peer_mb = &ctl->mb[connector ? 1 : 0];
    s->mb_self = mb;
    if (mb)
        __atomic_store_n (&ctl->mb[connector ? 0 : 1], 1u, __ATOMIC_RELEASE);
}

static void shm_close (struct sib_shm *s)
{
    if (s->map)
        munmap (s->map, SIB_SHM_BYTES);
    if (s->memfd >= 0)
        close (s->memfd);
    if (s->efd_self >= 0)
        close (s->efd_self);
    if (s->efd_peer >= 0)
        close (s->efd_peer);
    free (s);
}

static struct sib_shm *shm_alloc (void)
{
    struct sib_shm *s = calloc (1, sizeof (*s));

    if (s)
        s->memfd = s->efd_self = s->efd_peer = -1;
    return s;
}

/* Connector side: the peer's unix socket (connected, non-blocking) and a
 * fresh shm, or -1 (then TCP is used). */
int sib_shm_connect (struct sib_conn *c)
{
    struct sockaddr_un sun;
    socklen_t len = ep_name (&sun, c->peer_ip, c->peer_port);
    struct sib_shm *s;
    int fd;

    fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect (fd, (struct sockaddr *)&sun, len) < 0) {
        close (fd);
        return -1;
    }
    s = shm_alloc ();
    if (!s)
        goto fail;
    s->memfd = memfd_create ("softib-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    s->efd_self = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    s->efd_peer = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->memfd < 0 || s->efd_self < 0 || s->efd_peer < 0
        || ftruncate (s->memfd, (off_t)SIB_SHM_BYTES) < 0
        || fcntl (s->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto fail;
    s->map = mmap (NULL, SIB_SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        goto fail;
    }
    /* a forked child has no progress thread to serve these rings */
    madvise (s->map, SIB_SHM_BYTES, MADV_DONTFORK);
    shm_layout (s, true, c->ctx->shm_mb);
    s->hello_left = sizeof (struct sib_hdr) + sizeof (struct sib_hello);
    c->shm = s;
    return fd;
fail:
    sib_log ("same-host connection: cannot set up shared memory (%s); "
             "using TCP",
             strerror (errno));
    if (s)
        shm_close (s);
    close (fd);
    return -1;
}

/* Acceptor side: the fds that came with a HELLO on a unix socket. */
static int shm_attach (struct sib_conn *c, const int *fds, int nfds)
{
    struct sib_shm *s;
    struct stat st;
    int seals;

    if (nfds != 3)
        return -1;
    seals = fcntl (fds[0], F_GET_SEALS);
    if (fstat (fds[0], &st) < 0 || st.st_size != (off_t)SIB_SHM_BYTES || seals < 0
        || !(seals & F_SEAL_SHRINK))
        return -1; /* a peer could otherwise shrink it: SIGBUS */
    s = shm_alloc ();
    if (!s)
        return -1;
    s->map = mmap (NULL, SIB_SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        shm_close (s);
        return -1;
    }
    madvise (s->map, SIB_SHM_BYTES, MADV_DONTFORK);
    close (fds[0]);
    /* the connector sent (memfd, its own eventfd, ours) */
    s->efd_peer = fds[1];
    s->efd_self = fds[2];
    shm_layout (s, false, c->ctx->shm_mb);
    c->shm = s;
    return 0;
}

/* Reads from an accepted unix socket that has not sent its HELLO yet,
 * taking the fds passed with it (read(2) semantics). */
ssize_t sib_shm_recv_hello (struct sib_conn *c, void *buf, size_t len)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE (4 * sizeof (int))];
    } cm;
    struct iovec v = { .iov_base = buf, .iov_len = len };
    struct msghdr msg = {
        .msg_iov = &v, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof (cm.b)
    };
    struct cmsghdr *h;
    ssize_t n = recvmsg (c->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

    if (n < 0)
        return n;
    for (h = CMSG_FIRSTHDR (&msg); h; h = CMSG_NXTHDR (&msg, h)) {
        int fds[4], nfds;

        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        nfds = (int)((h->cmsg_len - CMSG_LEN (0)) / sizeof (int));
        if (nfds > 4)
            nfds = 4;
        memcpy (fds, CMSG_DATA (h), (size_t)nfds * sizeof (int));
        if (c->shm || shm_attach (c, fds, nfds) < 0) {
            for (int i = 0; i < nfds; i++)
                close (fds[i]);
            sib_log ("same-host connection: unusable shared memory "
                     "from the peer");
            errno = EPROTO;
            return -1;
        }
    }
    if (!c->shm && n > 0) {
        /* a same-host peer always passes its rings with the HELLO */
        errno = EPROTO;
        return -1;
    }
    return n;
}

/* After the handshake the socket only reports the peer going away, and
 * our eventfd reports bytes (or room) in the rings. */
int sib_shm_watch (struct sib_conn *c)
{
    struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = c };

    if (epoll_ctl (c->ctx->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        return -1;
    ev.events = EPOLLIN;
    if (epoll_ctl (c->ctx->epfd, EPOLL_CTL_ADD, c->shm->efd_self, &ev) < 0)
        return -1;
    c->shm->watched = true;
    return 0;
}

void sib_shm_unwatch (struct sib_conn *c)
{
    if (c->shm && c->shm->watched) {
        epoll_ctl (c->ctx->epfd, EPOLL_CTL_DEL, c->shm->efd_self, NULL);
        c->shm->watched = false;
    }
}

void sib_shm_free (struct sib_conn *c)
{
    if (c->shm)
        shm_close (c->shm);
    c->shm = NULL;
}

static void poke (int fd)
{
    uint64_t one = 1;

    if (write (fd, &one, sizeof (one)) < 0 && errno != EAGAIN)
        sib_log ("shm eventfd: %s", strerror (errno));
}

void sib_shm_kick_self (struct sib_conn *c)
{
    poke (c->shm->efd_self);
}

void sib_shm_drain_wake (struct sib_conn *c)
{
    uint64_t v;

    if (read (c->shm->efd_self, &v, sizeof (v)) < 0 && errno != EAGAIN)
        sib_log ("shm eventfd: %s", strerror (errno));
}

/* Sends the HELLO bytes (the first hello_left of the stream) with the
 * fds over the socket; 0 or -1. */
static int send_hello (struct sib_conn *c, const struct iovec *iov, int cnt, size_t *used_iov_bytes)
{
    struct sib_shm *s = c->shm;
    uint8_t buf[sizeof (struct sib_hdr) + sizeof (struct sib_hello)];
    size_t have = 0;
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE (3 * sizeof (int))];
    } cm;
    struct iovec v;
    struct msghdr msg = { .msg_iov = &v, .msg_iovlen = 1 };
    struct cmsghdr *h;
    int fds[3] = { s->memfd, s->efd_self, s->efd_peer };

    for (int i = 0; i < cnt && have < s->hello_left; i++) {
        size_t k = iov[i].iov_len;

        if (k > s->hello_left - have)
            k = s->hello_left - have;
        memcpy (buf + have, iov[i].iov_base, k);
        have += k;
    }
    if (have < s->hello_left) {
        *used_iov_bytes = 0; /* wait for the whole HELLO */
        return 0;
    }
    v.iov_base = buf;
    v.iov_len = have;
    memset (&cm, 0, sizeof (cm));
    msg.msg_control = cm.b;
    msg.msg_controllen = sizeof (cm.b);
    h = CMSG_FIRSTHDR (&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN (sizeof (fds));
    memcpy (CMSG_DATA (h), fds, sizeof (fds));
    /* 72 bytes into a fresh unix socket: taken whole or not at all */
    if (sendmsg (c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)have)
        return -1;
    close (s->memfd);
    s->memfd = -1;
    s->hello_left = 0;
    *used_iov_bytes = have;
    return 0;
}

/*
 * The wake-up handshakes are Dekker's: one side stores its index and
 * loads the other's flag, the other stores its flag and loads the
 * index, and a full fence on both sides keeps one of them from missing
 * the other.  The fence on the side that publishes data ran per message:
 * it waits for the store of the index to reach the other core, the
 * largest cost of an 8-byte message (doc/softib-shm.md).  When both
 * processes are registered for membarrier(2), the consumer going to
 * sleep (setting armed, rare) runs MEMBARRIER_CMD_GLOBAL_EXPEDITED
 * instead, which puts that fence into every running thread of the
 * registered processes, and the producer needs only a compiler barrier.
 * Each side says in the control page whether it does so; a side that
 * has not said it (yet) gets the fences.  want_space needs no fence on
 * the consumer's side at all (room_check).
 */
static bool shm_fast (struct sib_shm *s)
{
    if (__builtin_expect (!s->mb_fast, 0) && s->mb_self
        && __atomic_load_n (s->peer_mb, __ATOMIC_ACQUIRE))
        s->mb_fast = true;
    return s->mb_fast;
}

/* The sleeping side's half: a full fence, and the membarrier that the
 * peer's fast path relies on. */
static void sleep_fence (struct sib_shm *s)
{
    __atomic_thread_fence (__ATOMIC_SEQ_CST);
    if (s->mb_self && syscall (SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) < 0)
        sib_log ("membarrier: %s", strerror (errno)); /* registered: cannot fail */
}

/* The data side's half: nothing but the compiler's order if the peer's
 * sleeps use membarrier, else a full fence. */
static void data_fence (struct sib_shm *s)
{
    if (shm_fast (s))
        __atomic_signal_fence (__ATOMIC_SEQ_CST);
    else
        __atomic_thread_fence (__ATOMIC_SEQ_CST);
}

static void wake_consumer (struct sib_shm *s)
{
    data_fence (s);
    if (__atomic_load_n (&s->tx->armed, __ATOMIC_RELAXED))
        sib_shm_wake_armed (s);
}

void sib_shm_wake_armed (struct sib_shm *s)
{
    if (__atomic_exchange_n (&s->tx->armed, 0, __ATOMIC_ACQ_REL))
        poke (s->efd_peer);
}

/* Copies n bytes into the transmit ring at stream position pos. */
static inline void ring_put (struct sib_shm *s, uint64_t pos, const void *src, size_t n)
{
    uint32_t off = (uint32_t)(pos & (s->size - 1));
    size_t k = s->size - off;

    if (__builtin_expect (n <= k, 1)) {
        memcpy (s->txd + off, src, n);
        return;
    }
    memcpy (s->txd + off, src, k);
    memcpy (s->txd, (const uint8_t *)src + k, n - k);
}

/* The free bytes of the transmit ring, reading the consumer's tail again
 * only when the cached one leaves fewer than `want`; -1 if the peer
 * wrote nonsense into the tail. */
static int64_t tx_room (struct sib_shm *s, uint64_t want)
{
    uint64_t head = s->tx_head;

    if (s->size - (head - s->tx_tail) >= want)
        return (int64_t)(s->size - (head - s->tx_tail));
    s->tx_tail = __atomic_load_n (&s->tx->tail, __ATOMIC_ACQUIRE);
    if (head - s->tx_tail > s->size)
        return -1;
    return (int64_t)(s->size - (head - s->tx_tail));
}

static void tx_publish (struct sib_shm *s, uint64_t head)
{
    s->tx_head = head;
    __atomic_store_n (&s->tx->head, head, __ATOMIC_RELEASE);
    wake_consumer (s);
}

/* One whole message, a header of hlen bytes and at most one piece of
 * payload, if the ring has room for all of it: what sib_tx_progress
 * writes for nearly every work request, without the iovec of
 * sib_shm_writev.  false if
 * nothing was written (no room, HELLO not out yet, corrupt tail): the
 * caller takes the general path, which reports what is wrong. */
bool sib_shm_put (struct sib_conn *c, const void *h, size_t hlen, const void *pay, size_t plen)
{
    struct sib_shm *s = c->shm;
    uint64_t head = s->tx_head;

    uint32_t off = (uint32_t)(head & (s->size - 1));

    if (s->hello_left || tx_room (s, hlen + plen) < (int64_t)(hlen + plen))
        return false;
    if (__builtin_expect (hlen == SIB_HDR_SHORT && plen <= 16 && hlen + plen <= s->size - off, 1)) {
        /* a short SEND of a few bytes: no library call */
        memcpy (s->txd + off, h, SIB_HDR_SHORT);
        sib_copy_small (s->txd + off + SIB_HDR_SHORT, pay, plen);
    } else {
        ring_put (s, head, h, hlen);
        if (plen)
            ring_put (s, head + hlen, pay, plen);
    }
    tx_publish (s, head + hlen + plen);
    return true;
}

/* Writes what the ring takes from iov (like a non-blocking writev):
 * bytes written, or -1 with EAGAIN (full) or EPIPE (peer corrupt). */
ssize_t sib_shm_writev (struct sib_conn *c, const struct iovec *iov, int cnt)
{
    struct sib_shm *s = c->shm;
    uint64_t head = s->tx_head, room;
    size_t done = 0, skip = 0;
    int i = 0;

    if (s->hello_left) {
        if (send_hello (c, iov, cnt, &skip) < 0) {
            errno = EPIPE;
            return -1;
        }
        if (s->hello_left) {
            errno = EAGAIN;
            return -1;
        }
        done = skip;
    }
    {
        size_t want = 0;
        int64_t r;

        for (int j = 0; j < cnt; j++)
            want += iov[j].iov_len;
        r = tx_room (s, want - done);
        if (r < 0) {
            errno = EPIPE;
            return -1;
        }
        room = (uint64_t)r;
    }
    for (; i < cnt && room; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t n = iov[i].iov_len;

        if (skip >= n) {
            skip -= n;
            continue;
        }
        p += skip;
        n -= skip;
        skip = 0;
        if (n > room)
            n = (size_t)room;
        ring_put (s, head, p, n);
        head += n;
        room -= n;
        done += n;
        if (n < iov[i].iov_len)
            break;
    }
    if (head != s->tx_head)
        tx_publish (s, head);
    if (!done) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)done;
}

/* Wants a wake-up once the ring has room; true if it has room already. */
bool sib_shm_want_space (struct sib_conn *c, bool on)
{
    struct sib_shm *s = c->shm;

    if (!on) {
        if (__atomic_load_n (&s->tx->want_space, __ATOMIC_RELAXED))
            __atomic_store_n (&s->tx->want_space, 0u, __ATOMIC_RELAXED);
        return false;
    }
    /* a full fence, no membarrier: the consumer has a full ring to
	 * read, so it comes back and sees the flag (room_check) */
    __atomic_store_n (&s->tx->want_space, 1u, __ATOMIC_RELAXED);
    __atomic_thread_fence (__ATOMIC_SEQ_CST);
    s->tx_tail = __atomic_load_n (&s->tx->tail, __ATOMIC_ACQUIRE);
    return s->tx_head - s->tx_tail < s->size;
}

/*
 * The consumer's half of want_space, without a fence on its data path:
 * a producer that asks for room saw the ring full, so the consumer has
 * bytes to read and comes back: after consuming (sib_shm_consumed), on
 * every look at an empty ring (sib_shm_peek: a thread that keeps polling
 * sees the flag as soon as the producer's fenced store is visible) and
 * before it sleeps (sib_shm_arm, after its full fence, against the
 * producer's: one of the two sees the other).  A membarrier per ring
 * full instead cost one per 64 KiB message.
 */
static void room_check (struct sib_shm *s)
{
    if (__atomic_load_n (&s->rx->want_space, __ATOMIC_RELAXED)
        && __atomic_exchange_n (&s->rx->want_space, 0, __ATOMIC_ACQ_REL))
        poke (s->efd_peer);
}

/* The contiguous readable bytes: 0 if none, -1 if the peer wrote
 * nonsense into the indices. */
int64_t sib_shm_peek (struct sib_conn *c, uint8_t **p)
{
    struct sib_shm *s = c->shm;
    uint64_t head = __atomic_load_n (&s->rx->head, __ATOMIC_ACQUIRE);
    uint64_t avail = head - s->rx_tail;
    uint32_t off = (uint32_t)(s->rx_tail & (s->size - 1));

    if (avail > s->size)
        return -1;
    if (!avail)
        room_check (s);
    if (avail > s->size - off)
        avail = s->size - off;
    *p = s->rxd + off;
    return (int64_t)avail;
}

void sib_shm_consumed (struct sib_conn *c, uint32_t n)
{
    struct sib_shm *s = c->shm;

    if (!n)
        return;
    __atomic_store_n (&s->rx_tail, s->rx_tail + n, __ATOMIC_RELAXED);
    __atomic_store_n (&s->rx->tail, s->rx_tail, __ATOMIC_RELEASE);
    __atomic_signal_fence (__ATOMIC_SEQ_CST);
    room_check (s);
}

void sib_shm_disarm (struct sib_conn *c)
{
    /* no store if clear: the producer reads this line per message */
    if (__atomic_load_n (&c->shm->rx->armed, __ATOMIC_RELAXED))
        __atomic_store_n (&c->shm->rx->armed, 0u, __ATOMIC_RELAXED);
}

bool sib_shm_spin (struct sib_conn *c)
{
    struct sib_shm *s = c->shm;
    uint64_t end = sib_now_ns () + SIB_SHM_SPIN_NS;
    uint64_t tail = __atomic_load_n (&s->rx_tail, __ATOMIC_RELAXED);
    bool want_room = __atomic_load_n (&c->out_armed, __ATOMIC_RELAXED);
    uint64_t head = __atomic_load_n (&s->tx_head, __ATOMIC_RELAXED);

    /* the producer need not poke us while we look ourselves */
    sib_shm_disarm (c);
    do {
        if (__atomic_load_n (&s->rx->head, __ATOMIC_ACQUIRE) != tail)
            return true;
        if (want_room && head - __atomic_load_n (&s->tx->tail, __ATOMIC_ACQUIRE) < s->size)
            return true;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause ();
#endif
        sched_yield (); /* few cores: let the producer run */
    } while (sib_now_ns () < end);
    return false;
}

void sib_shm_app_sleeps (struct sib_ctx *ctx)
{
    if (!ctx->shm_on)
        return;
    __atomic_store_n (&ctx->shm_wake_all, true, __ATOMIC_RELEASE);
    sib_progress_kick (ctx);
}

/* Asks the producer for a wake-up on new bytes; true if some arrived
 * already (then the caller reads instead of sleeping). */
bool sib_shm_arm (struct sib_conn *c)
{
    struct sib_shm *s = c->shm;

    __atomic_store_n (&s->rx->armed, 1u, __ATOMIC_RELAXED);
    sleep_fence (s);
    room_check (s);
    return __atomic_load_n (&s->rx->head, __ATOMIC_ACQUIRE) != s->rx_tail;
}
