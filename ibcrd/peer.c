/* peer.c - see peer.h.  The same framing as the local socket (proto.h);
 * identity comes only from the MUNGE credential, never from the payload
 * or the TCP address.
 *
 * Anyone who can reach the port may connect, so connections are bounded
 * (PEER_MAX_CONNS) and one that sends nothing for peer_idle_timeout is
 * closed (peer_timer): idle connections can hold the listener out of the
 * poll set only that long, never for good.  On EMFILE the listener rests
 * for a second, as the local one does. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>
#include <unistd.h>

#include <time.h>

#include "common/errbuf.h"
#include "common/log.h"
#include "common/proto.h"
#include "peer.h"
#include "common/clock.h"

#define PEER_MAX_CONNS 256
#define PEER_ACCEPT_PAUSE_MS 1000

struct pconn {
    int fd;
    long last; /* CLOCK_MONOTONIC ms of its last bytes */
    char addr[64];
    struct proto_reader rd;
    struct pconn *next;
};

struct peer {
    struct conf *conf;
    struct peerauth *pa;
    int lfd;
    int port;
    int nconns;
    long paused_until; /* ms: the listener rests after EMFILE */
    long full_logged;  /* ms: last "all connections taken" line */
    struct pconn *conns;
    peer_handler_f handler;
    void *handler_arg;
};

void peer_set_handler (struct peer *p, peer_handler_f fn, void *arg)
{
    p->handler = fn;
    p->handler_arg = arg;
}

struct peer *peer_create (struct conf *conf, struct peerauth *pa, char *err, size_t len)
{
    struct peer *p = calloc (1, sizeof (*p));
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t slen = sizeof (sa);
    int one = 1;

    if (!p)
        return NULL;
    p->conf = conf;
    p->pa = pa;
    if (inet_pton (AF_INET, conf->peer_address, &sa.sin_addr) != 1) {
        free (p);
        errnprintf (err, len, EINVAL, "peer_address = %s: not an IPv4 address; give e.g. 0.0.0.0",
                    conf->peer_address);
        return NULL;
    }
    sa.sin_port = htons (conf->peer_port < 0 ? 0 : conf->peer_port);
    if ((p->lfd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0
        || setsockopt (p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one)) < 0
        || bind (p->lfd, (struct sockaddr *)&sa, sizeof (sa)) < 0 || listen (p->lfd, 64) < 0
        || getsockname (p->lfd, (struct sockaddr *)&sa, &slen) < 0) {
        int saved = errno;
        if (p->lfd >= 0)
            close (p->lfd);
        free (p);
        errnprintf (err, len, saved, "cannot listen for peers on %s:%d: %s%s", conf->peer_address,
                    conf->peer_port, strerror (saved),
                    saved == EADDRINUSE ? " (another ibcrd on this node? set peer_port)" : "");
        return NULL;
    }
    p->port = ntohs (sa.sin_port);
    return p;
}

static void conn_close (struct peer *p, struct pconn *c)
{
    for (struct pconn **cp = &p->conns; *cp; cp = &(*cp)->next)
        if (*cp == c) {
            *cp = c->next;
            break;
        }
    proto_reader_fini (&c->rd);
    close (c->fd);
    p->nconns--;
    free (c);
}

void peer_destroy (struct peer *p)
{
    if (!p)
        return;
    while (p->conns)
        conn_close (p, p->conns);
    close (p->lfd);
    free (p);
}

void peer_set_conf (struct peer *p, struct conf *conf)
{
    p->conf = conf;
}

int peer_port (struct peer *p)
{
    return p->port;
}

int peer_timer (struct peer *p)
{
    long now = mono_ms (), best = -1, idle = (long)p->conf->peer_idle_timeout;

    for (struct pconn *c = p->conns, *next; c; c = next) {
        next = c->next;
        if (now - c->last >= idle) {
            log_msg (LOG_INFO, "peer %s: idle for %ld ms (peer_idle_timeout): closed", c->addr,
                     now - c->last);
            conn_close (p, c);
        } else if (best < 0 || c->last + idle - now < best)
            best = c->last + idle - now;
    }
    if (p->paused_until > now && (best < 0 || p->paused_until - now < best))
        best = p->paused_until - now;
    return (int)best;
}

int peer_pollfds (struct peer *p, struct pollfd *pfd, int max)
{
    int n = 0;

    if (n < max && p->nconns >= PEER_MAX_CONNS && mono_ms () - p->full_logged >= 10000) {
        p->full_logged = mono_ms ();
        log_msg (LOG_WARNING,
                 "peer listener: all %d connections taken; new ones wait until "
                 "one closes or idles out (peer_idle_timeout)",
                 PEER_MAX_CONNS);
    }
    if (n < max && p->nconns < PEER_MAX_CONNS && mono_ms () >= p->paused_until)
        pfd[n++] = (struct pollfd){ .fd = p->lfd, .events = POLLIN };
    for (struct pconn *c = p->conns; c && n < max; c = c->next)
        pfd[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
    return n;
}

/* Replies are authenticated too, so a peer knows who answered. */
static void send_reply (struct peer *p, struct pconn *c, json_object *inner)
{
    char err[256];
    json_object *env;

    if (!inner)
        return;
    if (!(env = peerauth_wrap (p->pa, inner, err, sizeof (err)))) {
        /* No credential to be had (munged down): say so unauthenticated,
         * the peer will refuse it but log why. */
        log_msg (LOG_ERR, "peer %s: cannot authenticate reply: %s", c->addr, err);
        env = proto_error ("peer", EIO, "ibcrd on %s cannot authenticate: %s", p->conf->node, err);
    }
    if (env && proto_send (c->fd, env) < 0)
        log_msg (LOG_WARNING, "peer %s: cannot send reply: %s", c->addr, strerror (errno));
    json_object_put (env);
    json_object_put (inner);
}

static json_object *handle_inner (struct peer *p, struct pconn *c, json_object *m, uid_t uid)
{
    const char *type = proto_type (m), *to = proto_get_str (m, "to", NULL);
    json_object *o;

    if (proto_version (m) != PROTO_VERSION)
        return proto_error (type, EPROTONOSUPPORT,
                            "peer protocol version %d is not "
                            "supported; this ibcrd speaks %d",
                            proto_version (m), PROTO_VERSION);
    if (!to || strcmp (to, p->conf->node)) {
        log_msg (LOG_WARNING, "peer %s: message for node '%s' arrived at node %s: refused", c->addr,
                 to ? to : "(none)", p->conf->node);
        return proto_error (type, EACCES,
                            "message addressed to node '%s' refused by node "
                            "%s",
                            to ? to : "(none)", p->conf->node);
    }
    if (!strcmp (type, "ping")) {
        if ((o = proto_new ("ok"))) {
            proto_set_str (o, "request", "ping");
            proto_set_str (o, "node", p->conf->node);
            proto_set_str (o, "to", proto_get_str (m, "from", ""));
            proto_set_int (o, "uid", uid);
        }
        return o;
    }
    if (p->handler && (o = p->handler (p->handler_arg, m, c->addr)))
        return o;
    log_msg (LOG_WARNING, "peer %s: unknown peer request type '%.64s'", c->addr, type);
    return proto_error (type, EOPNOTSUPP,
                        "unknown peer request type '%.64s'; this ibcrd "
                        "knows: ping, join, gen-begin",
                        type);
}

static void handle (struct peer *p, struct pconn *c, json_object *env)
{
    char err[512];
    json_object *m;
    uid_t uid;

    if (peerauth_unwrap (p->pa, env, &m, &uid, err, sizeof (err)) < 0) {
        log_msg (LOG_WARNING, "peer %s: %s", c->addr, err);
        /* The error itself goes back unauthenticated only if we cannot
         * authenticate it; send_reply wraps it. */
        send_reply (p, c, proto_error ("peer", errno, "%s", err));
        return;
    }
    /* Only ibcrd's run this protocol: root, or our own uid in tests. */
    if (uid != 0 && uid != geteuid ()) {
        log_msg (LOG_WARNING,
                 "peer %s: credential of uid %u refused (only root's ibcrd "
                 "may speak to ibcrd)",
                 c->addr, (unsigned)uid);
        send_reply (p, c,
                    proto_error (proto_type (m), EACCES,
                                 "credential of uid %u "
                                 "refused: peers must be ibcrd (root)",
                                 (unsigned)uid));
        json_object_put (m);
        return;
    }
    log_msg (LOG_DEBUG, "peer %s: %s from node %s", c->addr, proto_type (m),
             proto_get_str (m, "from", "?"));
    send_reply (p, c, handle_inner (p, c, m, uid));
    json_object_put (m);
}

static void accept_peers (struct peer *p)
{
    for (;;) {
        struct sockaddr_in sa;
        socklen_t slen = sizeof (sa);
        struct timeval tv;
        int fd = accept4 (p->lfd, (struct sockaddr *)&sa, &slen, SOCK_CLOEXEC);
        struct pconn *c;

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                if (mono_ms () >= p->paused_until + 10000)
                    log_msg (LOG_ERR, "peer accept: %s; not accepting for %d ms", strerror (errno),
                             PEER_ACCEPT_PAUSE_MS);
                p->paused_until = mono_ms () + PEER_ACCEPT_PAUSE_MS;
            }
            return;
        }
        if (!(c = calloc (1, sizeof (*c)))) {
            close (fd);
            return;
        }
        c->fd = fd;
        c->last = mono_ms ();
        snprintf (c->addr, sizeof (c->addr), "%s:%d", inet_ntoa (sa.sin_addr), ntohs (sa.sin_port));
        tv.tv_sec = p->conf->timeout_request / 1000;
        tv.tv_usec = (p->conf->timeout_request % 1000) * 1000;
        setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
        proto_reader_init (&c->rd, PROTO_DEFAULT_CAP);
        c->next = p->conns;
        p->conns = c;
        if (++p->nconns >= PEER_MAX_CONNS)
            return;
    }
}

static int serve (struct peer *p, struct pconn *c)
{
    for (int budget = 16; budget > 0; budget--) {
        json_object *env;
        int rc = proto_reader_read (&c->rd, c->fd, &env);

        if (rc == 0)
            return 0;
        if (rc == 1) {
            handle (p, c, env);
            json_object_put (env);
            continue;
        }
        if (errno == EPROTO || errno == EMSGSIZE) {
            log_msg (LOG_WARNING, "peer %s: %s message refused", c->addr,
                     errno == EPROTO ? "malformed" : "oversized");
            send_reply (p, c,
                        proto_error ("peer", errno, "%s message refused",
                                     errno == EPROTO ? "malformed" : "oversized"));
            continue;
        }
        return -1;
    }
    return 0;
}

void peer_dispatch (struct peer *p, struct pollfd *pfd, int n)
{
    for (int i = 0; i < n; i++) {
        if (!pfd[i].revents)
            continue;
        if (pfd[i].fd == p->lfd) {
            accept_peers (p);
            continue;
        }
        for (struct pconn *c = p->conns; c; c = c->next)
            if (c->fd == pfd[i].fd) {
                c->last = mono_ms ();
                if (serve (p, c) < 0)
                    conn_close (p, c);
                break;
            }
    }
}

int peer_connect (const char *host, int port, int timeout_ms, char *err, size_t len)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
    char ports[16];
    int fd = -1, rc, last = EHOSTUNREACH;

    snprintf (ports, sizeof (ports), "%d", port);
    if ((rc = getaddrinfo (host, ports, &hints, &res)) != 0)
        return errnprintf (err, len, EHOSTUNREACH, "cannot resolve peer %s: %s", host,
                           gai_strerror (rc));
    for (ai = res; ai; ai = ai->ai_next) {
        struct pollfd pfd;
        int soerr = 0;
        socklen_t sl = sizeof (soerr);

        if ((fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
            last = errno;
            continue;
        }
        if (connect (fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
            soerr = errno;
        } else {
            pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
            if (poll (&pfd, 1, timeout_ms) <= 0)
                soerr = ETIMEDOUT;
            else
                getsockopt (fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        }
        if (!soerr) {
            fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
            break;
        }
        close (fd);
        fd = -1;
        last = soerr;
    }
    freeaddrinfo (res);
    if (fd < 0)
        return errnprintf (err, len, last, "cannot connect to peer ibcrd %s:%d: %s", host, port,
                           strerror (last));
    return fd;
}

int peer_request (struct peerauth *pa, const char *host, int port, const char *node,
                  json_object *body, int timeout_ms, json_object **reply, char *err, size_t len)
{
    json_object *env, *rep = NULL;
    uid_t uid;
    int fd, saved;

    *reply = NULL;
    if (proto_set_str (body, "to", node) < 0)
        return -1;
    if (!(env = peerauth_wrap (pa, body, err, len)))
        return -1;
    if ((fd = peer_connect (host, port, timeout_ms, err, len)) < 0) {
        json_object_put (env);
        return -1;
    }
    if (proto_send (fd, env) < 0 || proto_recv_timeout (fd, 0, timeout_ms, &rep) < 0 || !rep) {
        saved = rep ? errno : (errno ? errno : ECONNRESET);
        json_object_put (env);
        close (fd);
        return errnprintf (err, len, saved, "no reply from peer ibcrd %s:%d: %s", host, port,
                           strerror (saved));
    }
    json_object_put (env);
    close (fd);
    if (peerauth_unwrap (pa, rep, reply, &uid, err, len) < 0) {
        /* An unauthenticated error explains why the peer refused us. */
        int refused = !strcmp (proto_type (rep), "error");
        char why[512];

        saved = errno;
        snprintf (why, sizeof (why), "%s", refused ? proto_get_str (rep, "message", "?") : err);
        json_object_put (rep);
        if (refused)
            return errnprintf (err, len, saved, "peer %s:%d refused: %s", host, port, why);
        return errnprintf (err, len, saved,
                           "the reply of peer %s:%d cannot be authenticated (%s): do "
                           "both nodes use the same MUNGE key?",
                           host, port, why);
    }
    json_object_put (rep);
    if (uid != 0 && uid != geteuid ()) {
        json_object_put (*reply);
        *reply = NULL;
        return errnprintf (err, len, EACCES,
                           "reply from %s:%d carries a credential of uid %u, not ibcrd's", host,
                           port, (unsigned)uid);
    }
    return 0;
}
