/* Unit test of lib/common/proto.c: framing, validation, caps and truncation
 * over real socketpairs, including a large frame written by another
 * process and byte-at-a-time delivery to the incremental reader. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proto.h"
#include "tap.h"

static void raw_frame (int fd, const char *payload, size_t len, uint32_t announced)
{
    unsigned char h[4] = { announced >> 24, announced >> 16, announced >> 8, announced };
    if (write (fd, h, 4) != 4 || (len && write (fd, payload, len) != (ssize_t)len))
        BAIL_OUT ("write to socketpair failed: %s", strerror (errno));
}

static void raw (int fd, const char *payload)
{
    raw_frame (fd, payload, strlen (payload), strlen (payload));
}

static void pair (int sv[2])
{
    if (socketpair (AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        BAIL_OUT ("socketpair: %s", strerror (errno));
}

static int recv_errno (int fd, size_t cap)
{
    json_object *m = NULL;
    errno = 0;
    if (proto_recv (fd, cap, &m) == 0) {
        json_object_put (m);
        return 0;
    }
    return errno;
}

static void test_roundtrip (void)
{
    int sv[2];
    json_object *m, *r;

    pair (sv);
    m = proto_new ("register");
    ok (m != NULL, "proto_new makes a message");
    ok (proto_version (m) == PROTO_VERSION, "it carries version %d", PROTO_VERSION);
    ok (proto_type (m) && strcmp (proto_type (m), "register") == 0, "and its type");
    proto_set_int (m, "pid", 4242);
    proto_set_str (m, "job", "17");
    proto_set_bool (m, "flag", 1);
    ok (proto_send (sv[0], m) == 0, "proto_send succeeds");
    ok (proto_recv (sv[1], 0, &r) == 0 && r != NULL, "proto_recv gets a message");
    ok (r && proto_get_int (r, "pid", -1) == 4242
            && strcmp (proto_get_str (r, "job", ""), "17") == 0
            && proto_get_bool (r, "flag", 0) == 1,
        "members survive the trip");
    ok (proto_get_int (r, "absent", -7) == -7 && proto_get_str (r, "pid", NULL) == NULL,
        "absent or mistyped members give the default");
    json_object_put (r);
    json_object_put (m);

    close (sv[0]);
    ok (proto_recv (sv[1], 0, &r) == 0 && r == NULL, "clean EOF gives 0 and NULL");
    close (sv[1]);
}

static void test_error_reply (void)
{
    json_object *e = proto_error ("checkpoint", ENOENT, "job %d is not registered", 12);
    ok (e && strcmp (proto_type (e), "error") == 0, "proto_error has type error");
    ok (e && proto_get_int (e, "errno", 0) == ENOENT
            && strcmp (proto_get_str (e, "errname", ""), "ENOENT") == 0
            && strcmp (proto_get_str (e, "what", ""), "checkpoint") == 0,
        "it names what and the errno");
    ok (e && strcmp (proto_get_str (e, "message", ""), "job 12 is not registered") == 0,
        "and carries the formatted message");
    json_object_put (e);
}

static void test_bad_send (void)
{
    int sv[2];
    json_object *o = json_object_new_object ();

    pair (sv);
    errno = 0;
    ok (proto_send (sv[0], o) < 0 && errno == EINVAL,
        "sending an object without version/type: EINVAL");
    json_object_put (o);
    o = json_object_new_array ();
    errno = 0;
    ok (proto_send (sv[0], o) < 0 && errno == EINVAL, "sending an array: EINVAL");
    json_object_put (o);
    errno = 0;
    ok (proto_send (sv[0], NULL) < 0 && errno == EINVAL, "sending NULL: EINVAL");
    close (sv[0]);
    close (sv[1]);
}

static void test_malformed (void)
{
    static const struct {
        const char *payload, *why;
    } bad[] = {
        { "{\"version\":1,\"type\":", "truncated JSON" },
        { "not json at all", "garbage" },
        { "[1,2,3]", "an array" },
        { "42", "a number" },
        { "{\"type\":\"status\"}", "no version" },
        { "{\"version\":\"1\",\"type\":\"status\"}", "string version" },
        { "{\"version\":1}", "no type" },
        { "{\"version\":1,\"type\":7}", "integer type" },
        { "{\"version\":1,\"type\":\"a\"}{}", "trailing bytes" },
    };
    int sv[2];
    json_object *m;

    pair (sv);
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        raw (sv[0], bad[i].payload);
        ok (recv_errno (sv[1], 0) == EPROTO, "%s is EPROTO", bad[i].why);
    }
    /* An embedded NUL must not let a valid prefix pass. */
    raw_frame (sv[0], "{\"version\":1,\"type\":\"a\"}\0x", 26, 26);
    ok (recv_errno (sv[1], 0) == EPROTO, "embedded NUL is EPROTO");
    raw_frame (sv[0], NULL, 0, 0);
    ok (recv_errno (sv[1], 0) == EPROTO, "zero-length frame is EPROTO");
    raw (sv[0], "{\"version\":1,\"type\":\"status\"}");
    ok (proto_recv (sv[1], 0, &m) == 0 && m && strcmp (proto_type (m), "status") == 0,
        "after malformed frames the stream is still in sync");
    json_object_put (m);
    close (sv[0]);
    close (sv[1]);
}

static void test_caps (void)
{
    int sv[2];
    json_object *m = proto_new ("x");
    char big[200];

    pair (sv);
    memset (big, 'a', sizeof (big) - 1);
    big[sizeof (big) - 1] = '\0';
    proto_set_str (m, "pad", big);
    proto_send (sv[0], m);
    ok (recv_errno (sv[1], 100) == EMSGSIZE, "a 200-byte frame over a 100-byte cap: EMSGSIZE");
    close (sv[0]);
    close (sv[1]);

    /* A 4 GiB announcement with nothing behind it must fail at once, not
     * try to allocate or wait for the payload. */
    pair (sv);
    raw_frame (sv[0], NULL, 0, 0xffffffffu);
    alarm (5);
    ok (recv_errno (sv[1], 0) == EMSGSIZE, "a 4 GiB announcement: EMSGSIZE before reading on");
    alarm (0);
    raw_frame (sv[0], NULL, 0, PROTO_DEFAULT_CAP + 1);
    ok (recv_errno (sv[1], 0) == EMSGSIZE, "default cap is enforced (1 MiB + 1)");
    close (sv[0]);
    close (sv[1]);
    json_object_put (m);
}

static void test_truncated (void)
{
    int sv[2];
    json_object *m = NULL;

    pair (sv);
    if (write (sv[0], "\0\0", 2) != 2)
        BAIL_OUT ("write");
    close (sv[0]);
    ok (recv_errno (sv[1], 0) == ECONNRESET, "EOF inside the header: ECONNRESET");
    close (sv[1]);

    pair (sv);
    raw_frame (sv[0], "{\"version\":1", 12, 30);
    close (sv[0]);
    ok (recv_errno (sv[1], 0) == ECONNRESET, "EOF inside the payload: ECONNRESET");
    close (sv[1]);

    pair (sv);
    raw_frame (sv[0], "{\"ver", 5, 30);
    errno = 0;
    ok (proto_recv_timeout (sv[1], 0, 100, &m) < 0 && errno == ETIMEDOUT && !m,
        "a stalled frame times out with ETIMEDOUT");
    close (sv[0]);
    close (sv[1]);
}

static void test_large_from_child (void)
{
    const size_t n = 600 * 1024;
    int sv[2], status;
    json_object *m = NULL;
    pid_t pid;

    pair (sv);
    pid = fork ();
    if (pid == 0) {
        char *s = malloc (n + 1);
        json_object *o = proto_new ("bulk");
        for (size_t i = 0; i < n; i++)
            s[i] = 'a' + i % 26;
        s[n] = '\0';
        proto_set_str (o, "data", s);
        _exit (proto_send (sv[0], o) == 0 ? 0 : 1);
    }
    close (sv[0]);
    ok (proto_recv (sv[1], 0, &m) == 0 && m, "a 600 KiB frame arrives through short reads");
    const char *d = proto_get_str (m, "data", "");
    int good = strlen (d) == n;
    for (size_t i = 0; good && i < n; i++)
        good = d[i] == (char)('a' + i % 26);
    ok (good, "every byte of the 600 KiB payload is right");
    json_object_put (m);
    waitpid (pid, &status, 0);
    ok (WIFEXITED (status) && WEXITSTATUS (status) == 0, "the sender saw a full write");
    close (sv[1]);
}

static void test_epipe (void)
{
    int sv[2];
    json_object *m = proto_new ("x");

    pair (sv);
    close (sv[1]);
    errno = 0;
    ok (proto_send (sv[0], m) < 0 && errno == EPIPE, "send to a closed peer: EPIPE, no SIGPIPE");
    close (sv[0]);
    json_object_put (m);
}

static void test_reader (void)
{
    struct proto_reader r;
    int sv[2], rc, msgs = 0, emsgsize = 0, eproto = 0;
    const char *frames[] = {
        "{\"version\":1,\"type\":\"one\"}",
        "{\"broken",
        "{\"version\":1,\"type\":\"two\"}",
    };
    json_object *m;

    pair (sv);
    fcntl (sv[1], F_SETFL, O_NONBLOCK);
    proto_reader_init (&r, 64);
    /* Feed: one, broken, an oversized frame, two; one byte at a time. */
    char stream[512];
    size_t len = 0;
    for (int i = 0; i < 3; i++) {
        size_t l = strlen (frames[i]);
        unsigned char h[4] = { 0, 0, l >> 8, l };
        if (i == 2) {
            unsigned char hb[4] = { 0, 0, 0, 100 };
            memcpy (stream + len, hb, 4);
            len += 4;
            memset (stream + len, 'z', 100);
            len += 100;
        }
        memcpy (stream + len, h, 4);
        len += 4;
        memcpy (stream + len, frames[i], l);
        len += l;
    }
    const char *types[2] = { NULL, NULL };
    for (size_t i = 0; i < len; i++) {
        if (write (sv[0], stream + i, 1) != 1)
            BAIL_OUT ("write");
        while ((rc = proto_reader_read (&r, sv[1], &m)) != 0) {
            if (rc == 1) {
                if (msgs < 2)
                    types[msgs] = strcmp (proto_type (m), "one") == 0 ? "one" : "two";
                msgs++;
                json_object_put (m);
            } else if (errno == EMSGSIZE)
                emsgsize++;
            else if (errno == EPROTO)
                eproto++;
            else
                break;
        }
    }
    ok (msgs == 2 && types[0] && types[1] && strcmp (types[0], "one") == 0
            && strcmp (types[1], "two") == 0,
        "byte-at-a-time reader got both good frames in order");
    ok (eproto == 1, "it reported the broken frame once as EPROTO");
    ok (emsgsize == 1, "it reported the oversized frame once as EMSGSIZE and skipped it");
    ok (proto_reader_read (&r, sv[1], &m) == 0, "nothing more: 0 (would block)");
    if (write (sv[0], "\0\0\0\x20{", 5) != 5)
        BAIL_OUT ("write");
    close (sv[0]);
    do
        rc = proto_reader_read (&r, sv[1], &m);
    while (rc == 0);
    ok (rc < 0 && errno == ECONNRESET, "EOF mid-frame: ECONNRESET");
    rc = proto_reader_read (&r, sv[1], &m);
    ok (rc < 0 && errno == 0, "then a clean EOF");
    proto_reader_fini (&r);
    close (sv[1]);
}

int main (void)
{
    plan (NO_PLAN);
    signal (SIGPIPE, SIG_DFL); /* proto_send must not need it ignored */
    test_roundtrip ();
    test_error_reply ();
    test_bad_send ();
    test_malformed ();
    test_caps ();
    test_truncated ();
    test_large_from_child ();
    test_epipe ();
    test_reader ();
    done_testing ();
    return exit_status ();
}
