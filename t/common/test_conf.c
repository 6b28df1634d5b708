/* Unit test of lib/common/{conf,duration,expand}.c: every key parses, every
 * kind of mistake is refused with the file, line and key named. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/duration.h"
#include "common/expand.h"
#include "tap.h"

static char file[] = "/tmp/ibcr-test-conf-XXXXXX";

static struct conf *load_text (const char *text, const char *node, char *err, size_t len)
{
    FILE *f = fopen (file, "w");
    if (!f || fputs (text, f) < 0 || fclose (f) != 0)
        BAIL_OUT ("cannot write %s", file);
    return conf_load (file, node, err, len);
}

/* Expect a failure whose message contains every needle. */
static void refuse (const char *text, const char *why, const char *n1, const char *n2)
{
    char err[1024];
    struct conf *c = load_text (text, NULL, err, sizeof (err));
    ok (!c && errno == EINVAL && strstr (err, file) && strstr (err, n1)
            && (!n2 || strstr (err, n2)),
        "%s is refused: %s", why, err);
    conf_destroy (c);
}

static void test_duration (void)
{
    uint64_t ms;
    char buf[64];
    static const struct {
        const char *s;
        uint64_t ms;
    } good[] = {
        { "90", 90000 },    { "90s", 90000 },     { "30m", 1800000 },
        { "2h", 7200000 },  { "1h30m", 5400000 }, { "250ms", 250 },
        { "1d", 86400000 }, { "1m30s", 90000 },   { "0", 0 },
    };
    static const char *bad[] = { "", "m", "30x", "1h1h", "-5s", "1.5h", "30 m", "h30", "5s3" };

    for (size_t i = 0; i < sizeof (good) / sizeof (good[0]); i++)
        ok (duration_parse (good[i].s, &ms) == 0 && ms == good[i].ms, "duration '%s' = %llu ms",
            good[i].s, (unsigned long long)good[i].ms);
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
        ok (duration_parse (bad[i], &ms) < 0 && errno == EINVAL, "duration '%s' is EINVAL", bad[i]);
    ok (duration_parse ("99999999999999999999999s", &ms) < 0 && errno == ERANGE,
        "overflow is ERANGE");
    ok (!strcmp (duration_format (5400000, buf, sizeof (buf)), "1h30m"), "format 1h30m: %s", buf);
    ok (!strcmp (duration_format (250, buf, sizeof (buf)), "250ms"), "format 250ms: %s", buf);
}

static void test_expand (void)
{
    char bad[3] = "", *s;

    s = expand_path ("/run/ibcr-%n/%h/100%%.sock", "node7", "hostA", bad);
    ok (s && !strcmp (s, "/run/ibcr-node7/hostA/100%.sock"), "expand %%n %%h %%%%: %s", s);
    free (s);
    s = expand_path ("/x/%n%n%n%n", "a-very-long-node-name", "h", bad);
    ok (s
            && !strcmp (s,
                        "/x/"
                        "a-very-long-node-namea-very-long-node-namea-very-long-node-namea-very-"
                        "long-node-name"),
        "repeated long expansions fit");
    free (s);
    s = expand_path ("/x/%q", "n", "h", bad);
    ok (!s && errno == EINVAL && !strcmp (bad, "%q"), "unknown %%q is refused and named");
    s = expand_path ("/x/%", "n", "h", bad);
    ok (!s && errno == EINVAL, "a trailing %% is refused");
}

static void test_conf (void)
{
    char err[1024];
    struct conf *c;

    c = load_text ("socket = /tmp/x/%n.sock\nstorage = /tmp/st\nstaging = /tmp/sg/%n\n", "nodeA",
                   err, sizeof (err));
    ok (c != NULL, "a file of only socket/storage/staging is valid: %s", c ? "" : err);
    ok (c && !strcmp (c->socket, "/tmp/x/nodeA.sock") && !strcmp (c->staging, "/tmp/sg/nodeA")
            && !strcmp (c->storage, "/tmp/st"),
        "paths are read and %%n expanded");
    ok (c && !strcmp (c->pidfile, "/tmp/x/ibcrd.pid"), "the pid file defaults next to the socket");
    ok (c && c->retention == 3 && c->peer_port == 7195 && !strcmp (c->cluster, "local"),
        "other keys keep their defaults");
    conf_destroy (c);

    c = load_text ("# full file\n"
                   "socket = /tmp/s.sock\n"
                   "; another comment\n"
                   "\n"
                   "storage = /tmp/st\nstaging = /tmp/sg\npidfile = /tmp/p.pid\n"
                   "cluster = c1\nnode = n9\ncriu = /usr/local/sbin/criu\n"
                   "munge_socket = /tmp/m/munge.socket\npeer_address = 127.0.0.1\n"
                   "peer_port = 0\nretention = 5\ncompression = yes\nlog_level = debug\n"
                   "timeout_connect = 2s\ntimeout_request = 250ms\ntimeout_quiesce = 1m\n"
                   "timeout_drain = 90\ntimeout_dump = 1h30m\ntimeout_rebuild = 1m30s\n"
                   "timeout_commit = 2h\nstorage_dummy_never = 1\n",
                   NULL, err, sizeof (err));
    ok (!c && strstr (err, ":24: unknown key 'storage_dummy_never'") && strstr (err, "retention"),
        "an unknown key names its line and lists the known keys: %s", err);
    c = load_text ("socket = /tmp/s.sock\nstorage = /tmp/st/%n\nstaging = /tmp/sg\n"
                   "pidfile = /tmp/p.pid\ncluster = c1\nnode = n9\n"
                   "criu = /usr/local/sbin/criu\nmunge_socket = /tmp/m/munge.socket\n"
                   "peer_address = 127.0.0.1\npeer_port = 0\nretention = 5\ncompression = yes\n"
                   "log_level = debug\ntimeout_connect = 2s\ntimeout_request = 250ms\n"
                   "timeout_quiesce = 1m\ntimeout_drain = 90\ntimeout_dump = 1h30m\n"
                   "timeout_rebuild = 1m30s\ntimeout_commit = 2h\n",
                   NULL, err, sizeof (err));
    ok (c != NULL, "every documented key parses: %s", c ? "" : err);
    ok (c && !strcmp (c->storage, "/tmp/st/n9") && !strcmp (c->node, "n9"),
        "'node' is used for %%n even when it comes after the path");
    ok (c && c->retention == 5 && c->compression == 1 && c->peer_port == 0
            && c->log_level == LOG_DEBUG && c->timeout_request == 250 && c->timeout_dump == 5400000
            && c->timeout_drain == 90000 && !strcmp (c->pidfile, "/tmp/p.pid")
            && !strcmp (c->cluster, "c1") && !strcmp (c->munge_socket, "/tmp/m/munge.socket"),
        "values are converted");
    conf_destroy (c);
    c = load_text ("node = n9\nsocket = /tmp/%n.sock\n", "override", err, sizeof (err));
    ok (c && !strcmp (c->socket, "/tmp/override.sock"), "a node given by the caller (-N) wins");
    conf_destroy (c);

    refuse ("socket = /tmp/s\nretention = many\n", "a bad integer", ":2:", "retention");
    refuse ("retention = 0\n", "retention 0", ":1:", "retention");
    refuse ("peer_port = 70000\n", "a port over 65535", ":1:", "peer_port");
    refuse ("compression = maybe\n", "a bad boolean", ":1:", "compression");
    refuse ("timeout_dump = 5 minutes\n", "a bad duration", ":1:", "timeout_dump");
    refuse ("log_level = loud\n", "a bad log level", ":1:", "log_level");
    refuse ("storage = relative/path\n", "a relative path", ":1:", "absolute");
    refuse ("storage = /a\nstorage = /b\n", "a repeated key", ":2:", "twice");
    refuse ("socket = /a\n  storage = /b\n", "an indented continuation", ":2:", "column 1");
    refuse ("[main]\nsocket = /a\n", "a section", "[main]", "no sections");
    refuse ("socket = /a\nthis line has no equals sign\n", "a line without '='",
            ":2:", "key = value");
    refuse ("staging =\n", "an empty value", ":1:", "staging");
    refuse ("cluster = a b\n", "a cluster name with a space", ":1:", "cluster");
    refuse ("socket = /tmp/%x\n", "an unknown %-sequence", "'%x'", "socket");
    refuse ("criu = /usr/bin/criu --verbose\n", "criu with arguments", ":1:", "criu");
    {
        char line[400];
        memset (line, 'a', sizeof (line));
        memcpy (line, "storage = /", 11);
        line[300] = '\n';
        line[301] = '\0';
        refuse (line, "a line over the parser's limit", ":1:", "longer");
    }
    {
        char text[300] = "socket = /";
        memset (text + 10, 's', 150);
        strcpy (text + 160, "\n");
        refuse (text, "a socket path over sun_path", "socket", "shorter");
    }
    c = conf_load ("/nonexistent/ibcrd.conf", NULL, err, sizeof (err));
    ok (!c && errno == ENOENT && strstr (err, "/nonexistent/ibcrd.conf"),
        "a missing file is ENOENT and named: %s", err);
    c = conf_create (NULL);
    ok (c && c->socket[0] == '/' && c->pidfile && c->node[0],
        "conf_create gives absolute defaults");
    conf_destroy (c);
    conf_destroy (NULL);
}

int main (void)
{
    int fd;

    plan (NO_PLAN);
    if ((fd = mkstemp (file)) < 0)
        BAIL_OUT ("mkstemp");
    close (fd);
    unsetenv ("IBCR_CRIU");
    test_duration ();
    test_expand ();
    test_conf ();
    unlink (file);
    done_testing ();
    return exit_status ();
}
