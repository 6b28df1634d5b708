/* conf.c - see conf.h.  Table-driven: each key names its parser, so a new
 * key is one line, and the list of known keys in error messages is always
 * complete. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <syslog.h>

#ifndef HAVE_INIH
#error "ibcrd.conf is parsed with inih: install it (Debian: libinih-dev) and re-run configure"
#endif
#include <ini.h>

#include "conf.h"
#include "duration.h"
#include "errbuf.h"
#include "expand.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif
#ifndef RUNSTATEDIR
#define RUNSTATEDIR "/run"
#endif
#ifndef LOCALSTATEDIR
#define LOCALSTATEDIR "/var"
#endif
#ifndef IBCR_CRIU_DEFAULT
#define IBCR_CRIU_DEFAULT "criu"
#endif

enum kind {
    K_PATH,
    K_SOCKPATH,
    K_WORD,
    K_LIST,
    K_CMD,
    K_PORT,
    K_POSINT,
    K_BOOL,
    K_LEVEL,
    K_DURATION,
    K_ACTION,
    K_ACTION_NORQ
};

static const struct key {
    const char *name;
    enum kind kind;
    size_t off;
} keys[] = {
    { "socket", K_SOCKPATH, offsetof (struct conf, socket) },
    { "pidfile", K_PATH, offsetof (struct conf, pidfile) },
    { "storage", K_PATH, offsetof (struct conf, storage) },
    { "staging", K_PATH, offsetof (struct conf, staging) },
    { "cluster", K_WORD, offsetof (struct conf, cluster) },
    { "node", K_WORD, offsetof (struct conf, node) },
    { "criu", K_CMD, offsetof (struct conf, criu) },
    { "munge_socket", K_SOCKPATH, offsetof (struct conf, munge_socket) },
    { "peer_address", K_WORD, offsetof (struct conf, peer_address) },
    { "peer_port", K_PORT, offsetof (struct conf, peer_port) },
    { "retention", K_POSINT, offsetof (struct conf, retention) },
    { "fanout", K_POSINT, offsetof (struct conf, fanout) },
    { "compression", K_BOOL, offsetof (struct conf, compression) },
    { "log_level", K_LEVEL, offsetof (struct conf, log_level) },
    { "timeout_connect", K_DURATION, offsetof (struct conf, timeout_connect) },
    { "timeout_request", K_DURATION, offsetof (struct conf, timeout_request) },
    { "timeout_quiesce", K_DURATION, offsetof (struct conf, timeout_quiesce) },
    { "timeout_drain", K_DURATION, offsetof (struct conf, timeout_drain) },
    { "timeout_dump", K_DURATION, offsetof (struct conf, timeout_dump) },
    { "timeout_rebuild", K_DURATION, offsetof (struct conf, timeout_rebuild) },
    { "timeout_commit", K_DURATION, offsetof (struct conf, timeout_commit) },
    { "timeout_restore", K_DURATION, offsetof (struct conf, timeout_restore) },
    { "on_timelimit", K_ACTION, offsetof (struct conf, on_timelimit) },
    { "on_drain", K_ACTION, offsetof (struct conf, on_drain) },
    { "on_preempt", K_ACTION, offsetof (struct conf, on_preempt) },
    { "on_cancel", K_ACTION_NORQ, offsetof (struct conf, on_cancel) },
    { "timelimit_margin", K_DURATION, offsetof (struct conf, timelimit_margin) },
    { "slurm_poll", K_DURATION, offsetof (struct conf, slurm_poll) },
    { "max_conns_per_uid", K_POSINT, offsetof (struct conf, max_conns_per_uid) },
    { "max_registrations_per_conn", K_POSINT, offsetof (struct conf, max_registrations_per_conn) },
    { "max_registrations_per_uid", K_POSINT, offsetof (struct conf, max_registrations_per_uid) },
    { "max_ranks", K_POSINT, offsetof (struct conf, max_ranks) },
    { "max_nodes", K_POSINT, offsetof (struct conf, max_nodes) },
    { "interval_min", K_DURATION, offsetof (struct conf, interval_min) },
    { "interval_max", K_DURATION, offsetof (struct conf, interval_max) },
    { "peer_idle_timeout", K_DURATION, offsetof (struct conf, peer_idle_timeout) },
    { "peers", K_LIST, offsetof (struct conf, peers) },
};
#define NKEYS (sizeof (keys) / sizeof (keys[0]))

const char *conf_default_path (void)
{
    const char *e = getenv ("IBCR_CONF");
    return e && *e ? e : SYSCONFDIR "/ibcr/ibcrd.conf";
}

int conf_parse_bool (const char *s)
{
    static const char *yes[] = { "yes", "on", "true", "1" };
    static const char *no[] = { "no", "off", "false", "0" };
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp (s, yes[i]))
            return 1;
        if (!strcasecmp (s, no[i]))
            return 0;
    }
    return -1;
}

static char **str_at (struct conf *c, size_t off)
{
    return (char **)((char *)c + off);
}

void conf_destroy (struct conf *c)
{
    int saved = errno;

    if (!c)
        return;
    for (size_t i = 0; i < NKEYS; i++) {
        enum kind k = keys[i].kind;
        if (k == K_PATH || k == K_SOCKPATH || k == K_WORD || k == K_LIST || k == K_CMD)
            free (*str_at (c, keys[i].off));
    }
    free (c->path);
    free (c);
    errno = saved;
}

static size_t key_index (const char *name)
{
    size_t i;
    for (i = 0; i < NKEYS; i++)
        if (!strcmp (keys[i].name, name))
            break;
    return i;
}

static int set_str (char **dst, const char *val)
{
    char *s = strdup (val);
    if (!s)
        return -1;
    free (*dst);
    *dst = s;
    return 0;
}

static char *dir_join (const char *path, const char *base)
{
    const char *slash = strrchr (path, '/');
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    char *s = malloc (dlen + strlen (base) + 2);

    if (s)
        sprintf (s, "%.*s/%s", (int)dlen, path, base);
    return s;
}

struct conf *conf_create (const char *node)
{
    struct conf *c = calloc (1, sizeof (*c));
    char host[256];

    if (!c)
        return NULL;
    if (!node) {
        if (expand_hostname (host, sizeof (host)) < 0)
            goto error;
        node = host;
    }
    if (set_str (&c->node, node) < 0 || set_str (&c->socket, RUNSTATEDIR "/ibcr/ibcrd.sock") < 0
        || set_str (&c->storage, LOCALSTATEDIR "/lib/ibcr/checkpoints") < 0
        || set_str (&c->staging, "/var/tmp/ibcr/staging") < 0 || set_str (&c->cluster, "local") < 0
        || set_str (&c->criu, IBCR_CRIU_DEFAULT) < 0 || set_str (&c->peer_address, "0.0.0.0") < 0
        || !(c->pidfile = dir_join (c->socket, "ibcrd.pid")))
        goto error;
    c->peer_port = 7195;
    c->retention = 3;
    c->fanout = 16;
    c->compression = 0;
    c->log_level = LOG_INFO;
    c->timeout_connect = 5000;
    c->timeout_request = 10000;
    c->timeout_quiesce = 30000;
    c->timeout_drain = 60000;
    c->timeout_dump = 600000;
    c->timeout_rebuild = 60000;
    c->timeout_commit = 3600000;
    c->timeout_restore = 300000;
    c->on_timelimit = CONF_ACT_REQUEUE;
    c->on_drain = CONF_ACT_REQUEUE;
    /* Not left to PreemptMode=REQUEUE: a task ending on its SIGTERM
     * before the GraceTime is over ends the batch script, and Slurm then
     * records the job as ended instead of requeueing it (measured). */
    c->on_preempt = CONF_ACT_REQUEUE;
    c->on_cancel = CONF_ACT_NOTHING;
    c->timelimit_margin = 60000;
    c->slurm_poll = 1000;
    c->max_conns_per_uid = 64;
    c->max_registrations_per_conn = 64;
    c->max_registrations_per_uid = 1024;
    c->max_ranks = 65536;
    c->max_nodes = 4096;
    c->interval_min = 1000;
    c->interval_max = 30ULL * 24 * 3600 * 1000;
    c->peer_idle_timeout = 60000;
    return c;
error:
    conf_destroy (c);
    return NULL;
}

/* State of one parse: inih does not tell a handler its line number (the
 * library is built without INI_HANDLER_LINENO), so our reader counts. */
struct parse {
    struct conf *c;
    FILE *f;
    const char *file;
    int line;     /* number of the line last handed to inih */
    int at_bol;   /* the last chunk ended a line */
    int too_long; /* line number of an over-long line, or 0 */
    int err_line; /* first error found by the handler */
    unsigned char seen[NKEYS];
    char *err;
    size_t errlen;
};

static char *reader (char *str, int num, void *stream)
{
    struct parse *p = stream;
    char *r = fgets (str, num, p->f);

    if (!r)
        return NULL;
    if (p->at_bol)
        p->line++;
    p->at_bol = strchr (str, '\n') != NULL;
    if (!p->at_bol && !feof (p->f) && !p->too_long)
        p->too_long = p->line;
    return r;
}

static int fail (struct parse *p, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static int fail (struct parse *p, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (p->err_line)
        return 0; /* keep the first error: later ones may be its echo */
    p->err_line = p->line;
    n = snprintf (p->err, p->errlen, "%s:%d: ", p->file, p->line);
    va_start (ap, fmt);
    if (n >= 0 && (size_t)n < p->errlen)
        vsnprintf (p->err + n, p->errlen - n, fmt, ap);
    va_end (ap);
    return 0;
}

static const char *known_keys (void)
{
    static char buf[1024];
    size_t off = 0;

    if (buf[0])
        return buf;
    for (size_t i = 0; i < NKEYS; i++) {
        int n = snprintf (buf + off, sizeof (buf) - off, "%s%s", i ? ", " : "", keys[i].name);
        if (n < 0 || (size_t)n >= sizeof (buf) - off)
            break;
        off += n;
    }
    return buf;
}

static int handler (void *user, const char *section, const char *name, const char *value)
{
    struct parse *p = user;
    const struct key *k = NULL;
    size_t i;

    if (section && *section)
        return fail (p, "section [%s]: ibcrd.conf has no sections; remove the [%s] line", section,
                     section);
    for (i = 0; i < NKEYS; i++)
        if (!strcmp (keys[i].name, name)) {
            k = &keys[i];
            break;
        }
    if (!k)
        return fail (p, "unknown key '%s'; known keys are: %s", name, known_keys ());
    if (p->seen[i])
        return fail (p,
                     "key '%s' is given twice (an indented line continues the "
                     "previous value: start every line at column 1)",
                     name);
    p->seen[i] = 1;
    if (!*value)
        return fail (p, "key '%s' has an empty value; give one or remove the line", name);

    void *dst = (char *)p->c + k->off;
    char *end;
    long n;
    uint64_t ms;
    int b;

    switch (k->kind) {
    case K_PATH:
    case K_SOCKPATH:
        /* Expansion (%n, %h) happens after the whole file is read, since
         * 'node' may come later; here only what does not depend on it. */
        if (value[0] != '/')
            return fail (p, "%s = %s: not an absolute path; give a path starting with '/'", name,
                         value);
        break;
    case K_CMD:
        if (strchr (value, ' '))
            return fail (p, "%s = %s: give the path of the binary only, without arguments", name,
                         value);
        break;
    case K_WORD:
        if (strpbrk (value, " \t/"))
            return fail (p, "%s = %s: must be one word without spaces or '/'", name, value);
        break;
    case K_LIST:
        break;
    case K_PORT:
        /* "any": the kernel picks a free port (tests; ibcrd logs it and
         * reports it in status). */
        if (!strcmp (value, "any")) {
            *(int *)dst = -1;
            return 1;
        }
        errno = 0;
        n = strtol (value, &end, 10);
        if (errno || *end || n < 0 || n > 65535)
            return fail (p,
                         "%s = %s: not a TCP port; give a number from 1 to 65535 "
                         "(0 disables the peer listener, any lets the system choose)",
                         name, value);
        *(int *)dst = (int)n;
        return 1;
    case K_POSINT:
        errno = 0;
        n = strtol (value, &end, 10);
        if (errno || *end || n < 1 || n > 100000)
            return fail (p, "%s = %s: not a positive integer; give a number such as 3", name,
                         value);
        *(int *)dst = (int)n;
        return 1;
    case K_BOOL:
        if ((b = conf_parse_bool (value)) < 0)
            return fail (p, "%s = %s: not a yes/no value; give yes or no", name, value);
        *(int *)dst = b;
        return 1;
    case K_LEVEL: {
        static const struct {
            const char *n;
            int l;
        } lv[] = {
            { "error", LOG_ERR }, { "warning", LOG_WARNING }, { "notice", LOG_NOTICE },
            { "info", LOG_INFO }, { "debug", LOG_DEBUG },
        };
        for (size_t j = 0; j < sizeof (lv) / sizeof (lv[0]); j++)
            if (!strcasecmp (value, lv[j].n)) {
                *(int *)dst = lv[j].l;
                return 1;
            }
        return fail (p, "%s = %s: not a log level; give error, warning, notice, info or debug",
                     name, value);
    }
    case K_DURATION:
        if (duration_parse (value, &ms) < 0 || ms == 0)
            return fail (p, "%s = %s: not a duration; give e.g. 30s, 5m, 1h30m or 250ms", name,
                         value);
        *(uint64_t *)dst = ms;
        return 1;
    case K_ACTION:
    case K_ACTION_NORQ:
        if (!strcmp (value, "nothing"))
            *(int *)dst = CONF_ACT_NOTHING;
        else if (!strcmp (value, "checkpoint"))
            *(int *)dst = CONF_ACT_CHECKPOINT;
        else if (!strcmp (value, "requeue") && k->kind == K_ACTION)
            *(int *)dst = CONF_ACT_REQUEUE;
        else if (!strcmp (value, "requeue"))
            /* A cancelled job is not to come back: requeueing it would
             * undo the user's scancel. */
            return fail (p,
                         "%s = requeue: a cancelled job is never requeued; give "
                         "checkpoint or nothing",
                         name);
        else
            return fail (p,
                         "%s = %s: give requeue (checkpoint, then requeue the job), "
                         "checkpoint (checkpoint only) or nothing",
                         name, value);
        return 1;
    }
    if (set_str ((char **)dst, value) < 0)
        return fail (p, "%s: out of memory", name);
    return 1;
}

/* Expand %n/%h in every path key now that the node name is known. */
static int expand_all (struct conf *c, const char *file, char *err, size_t errlen)
{
    for (size_t i = 0; i < NKEYS; i++) {
        char **s, *x, bad[3] = "";
        if (keys[i].kind != K_PATH && keys[i].kind != K_SOCKPATH && keys[i].kind != K_CMD)
            continue;
        s = str_at (c, keys[i].off);
        if (!*s)
            continue;
        if (!(x = expand_path (*s, c->node, NULL, bad))) {
            if (errno == EINVAL)
                snprintf (err, errlen,
                          "%s: %s = %s: unknown '%s'; paths may use %%n (node "
                          "name), %%h (host name) and %%%% (a percent sign)",
                          file, keys[i].name, *s, bad);
            else
                snprintf (err, errlen, "%s: %s: %s", file, keys[i].name, strerror (errno));
            return -1;
        }
        free (*s);
        *s = x;
        if (keys[i].kind == K_SOCKPATH
            && strlen (x) >= sizeof (((struct sockaddr_un *)0)->sun_path)) {
            return errnprintf (err, errlen, EINVAL,
                               "%s: %s = %s: longer than a unix socket path may be "
                               "(%zu bytes); choose a shorter path",
                               file, keys[i].name, x,
                               sizeof (((struct sockaddr_un *)0)->sun_path) - 1);
        }
    }
    return 0;
}

struct conf *conf_load (const char *path, const char *node, char *err, size_t errlen)
{
    struct parse p = { .file = path, .at_bol = 1, .err = err, .errlen = errlen };
    struct conf *c;
    int rc;

    if (errlen)
        err[0] = '\0';
    if (!(c = conf_create (node))) {
        errprintf (err, errlen, "%s: %s", path, strerror (errno));
        return NULL;
    }
    p.c = c;
    if (!(p.f = fopen (path, "r"))) {
        errprintf (err, errlen, "cannot open configuration %s: %s", path, strerror (errno));
        conf_destroy (c); /* keeps errno */
        return NULL;
    }
    rc = ini_parse_stream (reader, &p, handler, &p);
    fclose (p.f);
    if (p.too_long && (!p.err_line || p.too_long <= p.err_line)) {
        snprintf (err, errlen, "%s:%d: line longer than %d characters; shorten it", path,
                  p.too_long, INI_MAX_LINE - 2);
        goto inval;
    }
    if (rc < 0) {
        snprintf (err, errlen, "%s: cannot read: %s", path, strerror (errno ? errno : EIO));
        goto inval;
    }
    if (rc > 0 && (!p.err_line || rc < p.err_line)) {
        snprintf (err, errlen,
                  "%s:%d: not a 'key = value' line; write key = value, or start "
                  "a comment with '#'",
                  path, rc);
        goto inval;
    }
    if (p.err_line)
        goto inval;
    if (node && set_str (&c->node, node) < 0)
        goto nomem;
    /* IBCR_CRIU (as configure's summary says) names criu when the file
     * does not. */
    if (!p.seen[key_index ("criu")] && getenv ("IBCR_CRIU") && *getenv ("IBCR_CRIU")
        && set_str (&c->criu, getenv ("IBCR_CRIU")) < 0)
        goto nomem;
    if (set_str (&c->path, path) < 0)
        goto nomem;
    if (expand_all (c, path, err, errlen) < 0) {
        conf_destroy (c);
        return NULL;
    }
    c->peer_port_set = p.seen[key_index ("peer_port")];
    if (c->interval_min > c->interval_max) {
        snprintf (err, errlen,
                  "%s: interval_min is above interval_max; give interval_min "
                  "<= interval_max",
                  path);
        goto inval;
    }
    if (!p.seen[key_index ("pidfile")]) {
        free (c->pidfile);
        if (!(c->pidfile = dir_join (c->socket, "ibcrd.pid")))
            goto nomem;
    }
    return c;
nomem:
    conf_destroy (c);
    errnprintf (err, errlen, ENOMEM, "%s: out of memory", path);
    return NULL;
inval:
    conf_destroy (c);
    errno = EINVAL;
    return NULL;
}
