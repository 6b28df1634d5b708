/* vw_oob.c - out-of-band TCP lines (vw_oob.h).
 *
 * Lines are read one byte at a time: the exchange is a few hundred bytes
 * per run, and not buffering means no line is ever stranded in a buffer
 * when the caller hands the fd to poll().
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vw_oob.h"

static long now_ms (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int listen_family (int family, const char *port, int *bound)
{
    struct addrinfo hints = { .ai_family = family,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE };
    struct addrinfo *res = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof (ss);
    int fd = -1, one = 1, zero = 0, rc, saved;

    if ((rc = getaddrinfo (NULL, port, &hints, &res)) != 0) {
        errno = EINVAL;
        return -1;
    }
    fd = socket (res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto error;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    if (family == AF_INET6)
        setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof (zero));
    if (bind (fd, res->ai_addr, res->ai_addrlen) < 0 || listen (fd, 4) < 0)
        goto error;
    if (getsockname (fd, (struct sockaddr *)&ss, &sl) < 0)
        goto error;
    if (ss.ss_family == AF_INET6)
        *bound = ntohs (((struct sockaddr_in6 *)&ss)->sin6_port);
    else
        *bound = ntohs (((struct sockaddr_in *)&ss)->sin_port);
    freeaddrinfo (res);
    return fd;
error:
    saved = errno;
    if (fd >= 0)
        close (fd);
    freeaddrinfo (res);
    errno = saved;
    return -1;
}

int vw_oob_listen (const char *port, int *bound, char *err, size_t errlen)
{
    int fd;

    /* One IPv6 socket with V6ONLY off serves IPv4 clients too; a network
     * namespace without IPv6 gets a plain IPv4 socket. */
    fd = listen_family (AF_INET6, port, bound);
    if (fd < 0 && errno != EADDRINUSE)
        fd = listen_family (AF_INET, port, bound);
    if (fd < 0)
        snprintf (err, errlen, "listen on TCP port %s: %s (pick another -p)", port,
                  strerror (errno));
    return fd;
}

int vw_oob_accept (int lfd, int timeout_ms, char *err, size_t errlen)
{
    struct pollfd pfd = { .fd = lfd, .events = POLLIN };
    int fd, one = 1, rc;

    rc = poll (&pfd, 1, timeout_ms);
    if (rc == 0) {
        snprintf (err, errlen, "no client connected within %d s", timeout_ms / 1000);
        return -1;
    }
    if (rc < 0 || (fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
        snprintf (err, errlen, "accept: %s", strerror (errno));
        return -1;
    }
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
    return fd;
}

int vw_oob_connect (const char *host, const char *port, int timeout_ms, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL, *ai;
    long deadline = now_ms () + timeout_ms;
    int fd = -1, one = 1, rc, saved = 0;

    if ((rc = getaddrinfo (host, port, &hints, &res)) != 0) {
        snprintf (err, errlen, "server '%s' port '%s': %s", host, port, gai_strerror (rc));
        return -1;
    }
    for (;;) {
        for (ai = res; ai; ai = ai->ai_next) {
            fd = socket (ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0)
                continue;
            if (connect (fd, ai->ai_addr, ai->ai_addrlen) == 0)
                goto connected;
            saved = errno;
            close (fd);
            fd = -1;
        }
        /* The server may still be starting: retry refused connections. */
        if (now_ms () >= deadline
            || (saved != ECONNREFUSED && saved != ENETUNREACH && saved != EHOSTUNREACH
                && saved != 0))
            break;
        usleep (20000);
    }
    snprintf (err, errlen, "connect to %s port %s: %s", host, port,
              strerror (saved ? saved : ETIMEDOUT));
    freeaddrinfo (res);
    return -1;
connected:
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
    freeaddrinfo (res);
    return fd;
}

int vw_oob_send (int fd, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int n;
    size_t off = 0;

    va_start (ap, fmt);
    n = vsnprintf (buf, sizeof (buf) - 1, fmt, ap);
    va_end (ap);
    if (n < 0 || (size_t)n >= sizeof (buf) - 1) {
        errno = EMSGSIZE;
        return -1;
    }
    buf[n++] = '\n';
    while (off < (size_t)n) {
        ssize_t w = send (fd, buf + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

int vw_oob_recv (int fd, char *buf, size_t len, int timeout_ms)
{
    long deadline = now_ms () + timeout_ms;
    size_t n = 0;

    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        long left = deadline - now_ms ();
        ssize_t r;
        char c;

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (poll (&pfd, 1, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        r = read (fd, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (c == '\n') {
            buf[n] = '\0';
            return 0;
        }
        if (n + 1 >= len) {
            errno = EMSGSIZE;
            return -1;
        }
        buf[n++] = c;
    }
}
