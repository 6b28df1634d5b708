/* rawmsg - test helper: talk to ibcrd over its unix socket with frames
 * made by hand, including broken ones, and print every reply.
 *
 * Usage: rawmsg SOCKET FRAME...
 *   FRAME is a JSON text sent as one frame, or
 *   @big:N      a frame announcing N bytes followed by N bytes of 'x'
 *   @raw:TEXT   TEXT sent as one frame without any check
 *   @half:TEXT  the header and half of TEXT, then the connection is closed
 *   @sleep:MS   wait
 *   @noreply:TEXT  TEXT sent as one frame, no reply expected
 *   @drop:UID:GID  become UID:GID (no other groups) keeping the connection,
 *               as a restored program holds a connection root made
 *   @closed     expect ibcrd to close the connection (exit 1 if not)
 *   @read       read and print one reply without sending anything
 * After each frame but @half and @noreply, one reply is read and printed on its own
 * line as compact JSON.  Exits 0 if every expected reply came.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/usock.h"

static int put (int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write (fd, p, len);
        if (n < 0)
            return -1;
        p += n;
        len -= n;
    }
    return 0;
}

static int frame (int fd, const char *payload, size_t len, uint32_t announced)
{
    unsigned char h[4] = { announced >> 24, announced >> 16, announced >> 8, announced };
    return put (fd, h, 4) < 0 || put (fd, payload, len) < 0 ? -1 : 0;
}

int main (int argc, char **argv)
{
    int fd;

    if (argc < 3) {
        fprintf (stderr, "Usage: rawmsg SOCKET FRAME...\n");
        return 2;
    }
    if ((fd = usock_connect (argv[1])) < 0) {
        fprintf (stderr, "rawmsg: connect %s: %s\n", argv[1], strerror (errno));
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        json_object *r;

        if (!strncmp (a, "@drop:", 6)) {
            unsigned uid, gid;
            if (sscanf (a + 6, "%u:%u", &uid, &gid) != 2 || setgroups (0, NULL) < 0
                || setresgid (gid, gid, gid) < 0 || setresuid (uid, uid, uid) < 0) {
                fprintf (stderr, "rawmsg: %s: %s\n", a, strerror (errno));
                return 1;
            }
            continue;
        }
        if (!strcmp (a, "@read")) {
            if (proto_recv_timeout (fd, 0, 10000, &r) < 0 || !r) {
                fprintf (stderr, "rawmsg: nothing to read: %s\n",
                         r ? "" : strerror (errno ? errno : ECONNRESET));
                return 1;
            }
            printf ("%s\n", json_object_to_json_string_ext (r, JSON_C_TO_STRING_PLAIN));
            fflush (stdout);
            json_object_put (r);
            continue;
        }
        if (!strcmp (a, "@closed")) {
            char c;
            if (read (fd, &c, 1) != 0) {
                fprintf (stderr, "rawmsg: the connection is still open\n");
                return 1;
            }
            printf ("closed\n");
            continue;
        }
        if (!strncmp (a, "@sleep:", 7)) {
            usleep (atoi (a + 7) * 1000);
            continue;
        }
        if (!strncmp (a, "@noreply:", 9)) {
            const char *t = a + 9;
            if (frame (fd, t, strlen (t), strlen (t)) < 0) {
                fprintf (stderr, "rawmsg: write: %s\n", strerror (errno));
                return 1;
            }
            continue;
        }
        if (!strncmp (a, "@half:", 6)) {
            const char *t = a + 6;
            frame (fd, t, strlen (t) / 2, strlen (t));
            close (fd);
            return 0;
        }
        if (!strncmp (a, "@big:", 5)) {
            size_t n = strtoul (a + 5, NULL, 10);
            char *b = malloc (n);
            memset (b, 'x', n);
            if (frame (fd, b, n, n) < 0) {
                fprintf (stderr, "rawmsg: write: %s\n", strerror (errno));
                return 1;
            }
            free (b);
        } else {
            const char *t = !strncmp (a, "@raw:", 5) ? a + 5 : a;
            if (frame (fd, t, strlen (t), strlen (t)) < 0) {
                fprintf (stderr, "rawmsg: write: %s\n", strerror (errno));
                return 1;
            }
        }
        if (proto_recv_timeout (fd, 0, 10000, &r) < 0 || !r) {
            fprintf (stderr, "rawmsg: no reply to frame %d: %s\n", i - 1,
                     r ? "" : strerror (errno ? errno : ECONNRESET));
            return 1;
        }
        printf ("%s\n", json_object_to_json_string_ext (r, JSON_C_TO_STRING_PLAIN));
        fflush (stdout);
        json_object_put (r);
    }
    close (fd);
    return 0;
}
