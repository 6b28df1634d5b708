/* proto.c - framing and validation of ibcr messages; see proto.h.
 *
 * Must never allocate a buffer sized by a peer before checking the cap, and
 * never let a malformed frame desynchronize a stream it could keep in sync.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "clock.h"

static void put_be32 (unsigned char *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

static uint32_t get_be32 (const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static int valid_msg (json_object *msg)
{
    json_object *v;

    if (!msg || !json_object_is_type (msg, json_type_object))
        return 0;
    if (!json_object_object_get_ex (msg, "version", &v) || !json_object_is_type (v, json_type_int))
        return 0;
    if (!json_object_object_get_ex (msg, "type", &v) || !json_object_is_type (v, json_type_string))
        return 0;
    return 1;
}

/* Write all of iov; sendmsg with MSG_NOSIGNAL on sockets so a vanished
 * peer gives EPIPE rather than killing the process, writev otherwise. */
static int write_all (int fd, struct iovec *iov, int iovcnt)
{
    int use_send = 1;

    while (iovcnt > 0) {
        ssize_t n;
        if (use_send) {
            struct msghdr mh = { .msg_iov = iov, .msg_iovlen = iovcnt };
            n = sendmsg (fd, &mh, MSG_NOSIGNAL);
            if (n < 0 && errno == ENOTSOCK) {
                use_send = 0;
                continue;
            }
        } else
            n = writev (fd, iov, iovcnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                /* A non-blocking socket that is full: wait rather than
                 * hand the caller half a frame it cannot finish. */
                struct pollfd p = { .fd = fd, .events = POLLOUT };
                if (poll (&p, 1, -1) < 0 && errno != EINTR)
                    return -1;
                continue;
            }
            return -1;
        }
        while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
            n -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= n;
        }
    }
    return 0;
}

int proto_send (int fd, json_object *msg)
{
    unsigned char hdr[PROTO_HDR_LEN];
    struct iovec iov[2];
    const char *s;
    size_t len;

    if (!valid_msg (msg)) {
        errno = EINVAL;
        return -1;
    }
    s = json_object_to_json_string_length (msg, JSON_C_TO_STRING_PLAIN, &len);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    if (len > UINT32_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    put_be32 (hdr, (uint32_t)len);
    iov[0].iov_base = hdr;
    iov[0].iov_len = sizeof (hdr);
    iov[1].iov_base = (void *)s;
    iov[1].iov_len = len;
    return write_all (fd, iov, 2);
}

int proto_decode (const char *buf, size_t len, json_object **msg)
{
    struct json_tokener *tok;
    json_object *o;

    *msg = NULL;
    if (len == 0 || len > INT32_MAX) {
        errno = EPROTO;
        return -1;
    }
    if (!(tok = json_tokener_new ())) {
        errno = ENOMEM;
        return -1;
    }
    o = json_tokener_parse_ex (tok, buf, (int)len);
    /* The whole payload must be exactly one object: a truncated object
     * (continue), trailing bytes or an embedded NUL are all malformed. */
    if (!o || json_tokener_get_error (tok) != json_tokener_success
        || json_tokener_get_parse_end (tok) != len) {
        json_object_put (o);
        json_tokener_free (tok);
        errno = EPROTO;
        return -1;
    }
    json_tokener_free (tok);
    if (!valid_msg (o)) {
        json_object_put (o);
        errno = EPROTO;
        return -1;
    }
    *msg = o;
    return 0;
}

/* Read exactly len bytes.  Returns bytes read (short only at EOF), or -1.
 * deadline < 0: no timeout. */
static ssize_t read_full (int fd, void *buf, size_t len, long deadline)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n;
        if (deadline >= 0) {
            struct pollfd p = { .fd = fd, .events = POLLIN };
            long left = deadline - mono_ms ();
            int rc;
            if (left < 0)
                left = 0;
            rc = poll (&p, 1, (int)left);
            if (rc < 0) {
                if (errno == EINTR)
                    continue;
                return -1;
            }
            if (rc == 0) {
                errno = ETIMEDOUT;
                return -1;
            }
        }
        n = read (fd, (char *)buf + got, len - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if ((errno == EAGAIN || errno == EWOULDBLOCK) && deadline < 0) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                (void)poll (&p, 1, -1);
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        got += n;
    }
    return got;
}

int proto_recv_timeout (int fd, size_t cap, int timeout_ms, json_object **msg)
{
    unsigned char hdr[PROTO_HDR_LEN];
    long deadline = timeout_ms < 0 ? -1 : mono_ms () + timeout_ms;
    uint32_t len;
    ssize_t n;
    char *buf;
    int rc, saved;

    *msg = NULL;
    if (cap == 0)
        cap = PROTO_DEFAULT_CAP;
    if ((n = read_full (fd, hdr, sizeof (hdr), deadline)) < 0)
        return -1;
    if (n == 0)
        return 0; /* clean EOF between frames */
    if (n < (ssize_t)sizeof (hdr)) {
        errno = ECONNRESET;
        return -1;
    }
    len = get_be32 (hdr);
    if (len > cap) {
        errno = EMSGSIZE;
        return -1;
    }
    if (len == 0) {
        errno = EPROTO;
        return -1;
    }
    if (!(buf = malloc (len))) {
        errno = ENOMEM;
        return -1;
    }
    if ((n = read_full (fd, buf, len, deadline)) < 0) {
        saved = errno;
        free (buf);
        errno = saved;
        return -1;
    }
    if (n < (ssize_t)len) {
        free (buf);
        errno = ECONNRESET;
        return -1;
    }
    rc = proto_decode (buf, len, msg);
    saved = errno;
    free (buf);
    errno = saved;
    return rc;
}

int proto_recv (int fd, size_t cap, json_object **msg)
{
    return proto_recv_timeout (fd, cap, -1, msg);
}

json_object *proto_new (const char *type)
{
    json_object *o;

    if (!type) {
        errno = EINVAL;
        return NULL;
    }
    if (!(o = json_object_new_object ()))
        goto nomem;
    if (proto_set_int (o, "version", PROTO_VERSION) < 0 || proto_set_str (o, "type", type) < 0)
        goto nomem;
    return o;
nomem:
    json_object_put (o);
    errno = ENOMEM;
    return NULL;
}

const char *proto_type (json_object *msg)
{
    json_object *v;

    if (!msg || !json_object_object_get_ex (msg, "type", &v)
        || !json_object_is_type (v, json_type_string))
        return NULL;
    return json_object_get_string (v);
}

int proto_version (json_object *msg)
{
    json_object *v;

    if (!msg || !json_object_object_get_ex (msg, "version", &v)
        || !json_object_is_type (v, json_type_int))
        return -1;
    int64_t n = json_object_get_int64 (v);
    return n < 0 || n > 1000000 ? -1 : (int)n;
}

const char *proto_errname (int errnum)
{
    switch (errnum) {
#define E(x)                                                                                       \
    case x:                                                                                        \
        return #x
        E (EPERM);
        E (ENOENT);
        E (ESRCH);
        E (EINTR);
        E (EIO);
        E (E2BIG);
        E (EBADF);
        E (EAGAIN);
        E (ENOMEM);
        E (EACCES);
        E (EBUSY);
        E (EEXIST);
        E (ENODEV);
        E (ENOTDIR);
        E (EISDIR);
        E (EINVAL);
        E (ENOSPC);
        E (EPIPE);
        E (ERANGE);
        E (ENOSYS);
        E (ENOTSUP);
        E (EPROTO);
        E (EMSGSIZE);
        E (EBADMSG);
        E (EPROTONOSUPPORT);
        E (ECONNRESET);
        E (ECONNREFUSED);
        E (ETIMEDOUT);
        E (EALREADY);
        E (EINPROGRESS);
        E (ECANCELED);
        E (EROFS);
        E (EUSERS);
        E (EDQUOT);
        E (ENOTCONN);
        E (EKEYREJECTED);
        E (ENOEXEC);
        E (ESTALE);
#undef E
    default:
        return "E?";
    }
}

json_object *proto_error (const char *what, int errnum, const char *fmt, ...)
{
    char text[1024];
    json_object *o;
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (text, sizeof (text), fmt, ap);
    va_end (ap);
    if (!(o = proto_new ("error")))
        return NULL;
    if (proto_set_str (o, "what", what ? what : "") < 0 || proto_set_int (o, "errno", errnum) < 0
        || proto_set_str (o, "errname", proto_errname (errnum)) < 0
        || proto_set_str (o, "message", text) < 0) {
        json_object_put (o);
        errno = ENOMEM;
        return NULL;
    }
    return o;
}

const char *proto_get_str (json_object *msg, const char *key, const char *dflt)
{
    json_object *v;

    if (!msg || !json_object_object_get_ex (msg, key, &v)
        || !json_object_is_type (v, json_type_string))
        return dflt;
    return json_object_get_string (v);
}

int64_t proto_get_int (json_object *msg, const char *key, int64_t dflt)
{
    json_object *v;

    if (!msg || !json_object_object_get_ex (msg, key, &v)
        || !json_object_is_type (v, json_type_int))
        return dflt;
    return json_object_get_int64 (v);
}

int proto_get_bool (json_object *msg, const char *key, int dflt)
{
    json_object *v;

    if (!msg || !json_object_object_get_ex (msg, key, &v)
        || !json_object_is_type (v, json_type_boolean))
        return dflt;
    return json_object_get_boolean (v);
}

static int set (json_object *msg, const char *key, json_object *v)
{
    if (!v || json_object_object_add (msg, key, v) < 0) {
        json_object_put (v);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

int proto_set_str (json_object *msg, const char *key, const char *val)
{
    return set (msg, key, json_object_new_string (val ? val : ""));
}

int proto_set_int (json_object *msg, const char *key, int64_t val)
{
    return set (msg, key, json_object_new_int64 (val));
}

int proto_set_bool (json_object *msg, const char *key, int val)
{
    return set (msg, key, json_object_new_boolean (val ? 1 : 0));
}

void proto_reader_init (struct proto_reader *r, size_t cap)
{
    memset (r, 0, sizeof (*r));
    r->cap = cap ? cap : PROTO_DEFAULT_CAP;
}

void proto_reader_fini (struct proto_reader *r)
{
    if (r) {
        free (r->buf);
        r->buf = NULL;
    }
}

static void reader_reset (struct proto_reader *r)
{
    free (r->buf);
    r->buf = NULL;
    r->hdr_got = 0;
    r->got = 0;
    r->len = 0;
    r->skipping = 0;
}

int proto_reader_read (struct proto_reader *r, int fd, json_object **msg)
{
    *msg = NULL;
    for (;;) {
        char scratch[4096];
        void *dst;
        size_t want;
        ssize_t n;

        if (r->hdr_got < PROTO_HDR_LEN) {
            dst = r->hdr + r->hdr_got;
            want = PROTO_HDR_LEN - r->hdr_got;
        } else if (r->skipping) {
            dst = scratch;
            want = r->len - r->got;
            if (want > sizeof (scratch))
                want = sizeof (scratch);
        } else {
            dst = r->buf + r->got;
            want = r->len - r->got;
        }
        /* MSG_DONTWAIT: the fd may stay blocking for writes (replies with
         * a send timeout) while reads here never block the loop. */
        n = r->not_sock ? read (fd, dst, want) : recv (fd, dst, want, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == ENOTSOCK && !r->not_sock) {
                r->not_sock = 1;
                continue;
            }
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        if (n == 0) {
            int mid = r->hdr_got > 0;
            reader_reset (r);
            errno = mid ? ECONNRESET : 0;
            return -1;
        }
        if (r->hdr_got < PROTO_HDR_LEN) {
            r->hdr_got += n;
            if (r->hdr_got < PROTO_HDR_LEN)
                continue;
            r->len = get_be32 (r->hdr);
            r->got = 0;
            if (r->len == 0) {
                reader_reset (r);
                errno = EPROTO;
                return -1;
            }
            if (r->len > r->cap) {
                r->skipping = 1;
                errno = EMSGSIZE;
                return -1;
            }
            if (!(r->buf = malloc (r->len))) {
                r->skipping = 1; /* keep the stream in sync anyway */
                errno = ENOMEM;
                return -1;
            }
            continue;
        }
        r->got += n;
        if (r->got < r->len)
            continue;
        if (r->skipping) {
            reader_reset (r);
            continue;
        }
        int rc = proto_decode (r->buf, r->len, msg);
        int saved = errno;
        reader_reset (r);
        errno = saved;
        return rc < 0 ? -1 : 1;
    }
}
