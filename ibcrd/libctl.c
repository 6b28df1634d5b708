/* libctl.c - see libctl.h.  Replies are taken as they come: a slow task
 * must not hold the others' replies in their sockets, and one deadline
 * covers the whole round. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/proto.h"
#include "libctl.h"
#include "common/clock.h"

/* "rank R" or "rank R pid P": which process of the node i is. */
static const char *who (const int *ranks, const pid_t *pids, int i, char *buf, size_t len)
{
    if (pids && pids[i] > 0)
        snprintf (buf, len, "rank %d pid %ld", ranks[i], (long)pids[i]);
    else
        snprintf (buf, len, "rank %d", ranks[i]);
    return buf;
}

int libctl_round (const int *fds, const int *ranks, const pid_t *pids, int n, const char *type,
                  json_object *extra, int gen, const char *want, json_object **replies,
                  int timeout_ms, char *err, size_t len)
{
    char w[64];
    struct proto_reader *rd = calloc (n ? n : 1, sizeof (*rd));
    json_object **got = calloc (n ? n : 1, sizeof (*got));
    long deadline = mono_ms () + timeout_ms;
    int pending = n, saved = EIO;

    if (!rd || !got) {
        snprintf (err, len, "out of memory");
        saved = ENOMEM;
        goto error;
    }
    for (int i = 0; i < n; i++) {
        json_object *m = proto_new (type);
        int rc;

        if (!m) {
            snprintf (err, len, "out of memory");
            saved = ENOMEM;
            goto error;
        }
        if (extra) {
            json_object_object_foreach (extra, key, val)
                json_object_object_add (m, key, json_object_get (val));
        }
        proto_set_int (m, "gen", gen);
        rc = proto_send (fds[i], m);
        saved = errno;
        json_object_put (m);
        if (rc < 0) {
            snprintf (err, len, "%s: cannot send %s to libibcr: %s (the task ended?)",
                      who (ranks, pids, i, w, sizeof (w)), type, strerror (saved));
            goto error;
        }
        proto_reader_init (&rd[i], PROTO_DEFAULT_CAP);
    }
    while (pending > 0) {
        struct pollfd pfd[n];
        int idx[n], np = 0, left = (int)(deadline - mono_ms ());

        for (int i = 0; i < n; i++)
            if (!got[i]) {
                pfd[np] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
                idx[np++] = i;
            }
        if (left <= 0 || poll (pfd, np, left) == 0) {
            for (int k = 0; k < np; k++) {
                snprintf (err, len,
                          "%s: no %s from libibcr within %d ms (the "
                          "application is stuck in a verbs call, or stopped?)",
                          who (ranks, pids, idx[k], w, sizeof (w)), want, timeout_ms);
                break;
            }
            saved = ETIMEDOUT;
            goto error;
        }
        for (int k = 0; k < np; k++) {
            int i = idx[k], rc;
            json_object *m = NULL;

            if (!pfd[k].revents)
                continue;
            rc = proto_reader_read (&rd[i], fds[i], &m);
            if (rc == 0)
                continue;
            if (rc < 0) {
                saved = errno ? errno : ECONNRESET;
                snprintf (err, len, "%s: libibcr's control connection %s during %s",
                          who (ranks, pids, i, w, sizeof (w)),
                          errno == 0 || errno == ECONNRESET ? "closed (the task "
                                                              "ended?)"
                                                            : strerror (errno),
                          type);
                goto error;
            }
            if (!strcmp (proto_type (m), "error")) {
                snprintf (err, len, "%s: libibcr refused %s: %s",
                          who (ranks, pids, i, w, sizeof (w)), type,
                          proto_get_str (m, "message", "(no message)"));
                saved = (int)proto_get_int (m, "errno", EIO);
                json_object_put (m);
                goto error;
            }
            if (strcmp (proto_type (m), want)) {
                snprintf (err, len, "%s: libibcr answered %s with '%.64s', expected %s",
                          who (ranks, pids, i, w, sizeof (w)), type, proto_type (m), want);
                json_object_put (m);
                saved = EPROTO;
                goto error;
            }
            got[i] = m;
            pending--;
        }
    }
    for (int i = 0; i < n; i++) {
        proto_reader_fini (&rd[i]);
        if (replies)
            replies[i] = got[i];
        else
            json_object_put (got[i]);
    }
    free (rd);
    free (got);
    return 0;
error:
    for (int i = 0; rd && got && i < n; i++) {
        proto_reader_fini (&rd[i]);
        json_object_put (got[i]);
    }
    free (rd);
    free (got);
    errno = saved;
    return -1;
}
