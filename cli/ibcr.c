/* ibcr.c - the ibcr command: global options, subcommand dispatch, and the
 * helpers every subcommand uses to reach ibcrd and the storage.
 *
 * Quiet and parseable when not on a terminal; errors always on stderr,
 * prefixed "ibcr: error:", with what to do.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/conf.h"
#include "common/proto.h"
#include "common/usock.h"

void cli_error (const char *fmt, ...)
{
    va_list ap;

    cli_progress_end (); /* the message starts its own line */
    fprintf (stderr, "ibcr: error: ");
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    fputc ('\n', stderr);
}

int cli_rc_for_errno (int errnum)
{
    switch (errnum) {
    case ENOENT:
    case ESRCH:
        return CLI_NOTFOUND;
    case EPERM:
    case EACCES:
        return CLI_DENIED;
    case EINVAL:
        return CLI_USAGE;
    case EBADMSG:
        return CLI_DAMAGED;
    default:
        return CLI_ERR;
    }
}

const char *cli_bytes (uint64_t n, char *buf, size_t len)
{
    static const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = n;
    int i = 0;

    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf (buf, len, "%llu B", (unsigned long long)n);
    else
        snprintf (buf, len, "%.1f %s", v, u[i]);
    return buf;
}

/* The socket: --socket, IBCR_SOCKET, the configuration's. */
const char *cli_socket_path (struct cli *c)
{
    static char *from_conf;
    char err[1024];

    if (c->socket)
        return c->socket;
    if (getenv ("IBCR_SOCKET") && *getenv ("IBCR_SOCKET"))
        return getenv ("IBCR_SOCKET");
    if (!from_conf) {
        const char *path = c->config ? c->config : conf_default_path ();
        struct conf *cf = access (path, F_OK) == 0 || c->config
            ? conf_load (path, NULL, err, sizeof (err))
            : conf_create (NULL);
        if (!cf) {
            cli_error ("%s", err);
            return NULL;
        }
        from_conf = strdup (cf->socket);
        conf_destroy (cf);
    }
    return from_conf;
}

/* Send req on fd (a connection to ibcrd at path, left open) and return its
 * reply, or NULL with *rc set after saying why. */
json_object *cli_request_on (struct cli *c, int fd, const char *path, json_object *req, int *rc)
{
    json_object *rep;

    /* "progress" messages may come before the reply: drawn, not returned. */
    for (int sent = 0;;) {
        char what[160];
        int bad = (!sent++ && proto_send (fd, req) < 0)
            || proto_recv_timeout (fd, 0, c->timeout_ms, &rep) < 0;
        if (bad || !rep) {
            cli_progress_end ();
            cli_error ("no reply from ibcrd at %s: %s", path,
                       bad ? strerror (errno) : "ibcrd closed the connection");
            *rc = CLI_NODAEMON;
            return NULL;
        }
        if (strcmp (proto_type (rep), "progress"))
            break;
        snprintf (what, sizeof (what), "job %s gen %lld", proto_get_str (rep, "job", "?"),
                  (long long)proto_get_int (rep, "generation", 0));
        cli_progress_show (what, proto_get_str (rep, "phase", "?"),
                           (uint64_t)proto_get_int (rep, "done", 0),
                           (uint64_t)proto_get_int (rep, "total", 0));
        json_object_put (rep);
    }
    cli_progress_end ();
    if (!strcmp (proto_type (rep), "error")) {
        int e = (int)proto_get_int (rep, "errno", EIO);
        cli_error ("%s", proto_get_str (rep, "message", "ibcrd refused the request"));
        json_object_put (rep);
        *rc = cli_rc_for_errno (e);
        return NULL;
    }
    *rc = CLI_OK;
    return rep;
}

json_object *cli_request (struct cli *c, json_object *req, int *rc)
{
    const char *path = cli_socket_path (c);
    json_object *rep;
    int fd;

    if (!path) {
        *rc = CLI_USAGE;
        return NULL;
    }
    if ((fd = usock_connect (path)) < 0) {
        cli_error ("cannot reach ibcrd at %s: %s; is ibcrd running? (give its socket with "
                   "--socket or IBCR_SOCKET)",
                   path, strerror (errno));
        *rc = CLI_NODAEMON;
        return NULL;
    }
    rep = cli_request_on (c, fd, path, req, rc);
    close (fd);
    return rep;
}

int cli_store (struct cli *c)
{
    char err[1024];

    if (c->st.root)
        return 0;
    if (c->storage) {
        c->st.root = c->storage;
        c->st.cluster = c->cluster ? c->cluster : "local";
        return 0;
    }
    /* Ask the daemon where it stores (it knows its %n expansion); when it
     * is not running, fall back to the configuration file. */
    const char *path = cli_socket_path (c);
    int fd = path ? usock_connect (path) : -1;
    if (fd >= 0) {
        json_object *req = proto_new ("status"), *rep = NULL, *d;
        if (req && usock_request (fd, req, c->timeout_ms, &rep) == 0
            && !strcmp (proto_type (rep), "ok") && json_object_object_get_ex (rep, "daemon", &d)) {
            c->st_root = strdup (proto_get_str (d, "storage", ""));
            c->st_cluster = strdup (proto_get_str (d, "cluster", "local"));
        }
        json_object_put (req);
        json_object_put (rep);
        close (fd);
    }
    if (!c->st_root || !c->st_root[0]) {
        const char *cpath = c->config ? c->config : conf_default_path ();
        struct conf *cf = conf_load (cpath, NULL, err, sizeof (err));
        if (!cf) {
            cli_error ("cannot find the checkpoint storage: ibcrd is not reachable and %s; "
                       "give it with --storage DIR",
                       err);
            return CLI_NODAEMON;
        }
        free (c->st_root);
        free (c->st_cluster);
        c->st_root = strdup (cf->storage);
        c->st_cluster = strdup (cf->cluster);
        conf_destroy (cf);
    }
    c->st.root = c->st_root;
    c->st.cluster = c->cluster ? c->cluster : c->st_cluster;
    return 0;
}

static void usage (FILE *f)
{
    fprintf (f,
             "Usage: ibcr [--socket PATH] [-c FILE] [--storage DIR [--cluster NAME]] COMMAND ...\n"
             "\n"
             "Commands:\n"
             "  run [--name N] [--interval D] [--detach] [--job ID --rank R --size N\n"
             "      --leader HOST] -- CMD ARGS   run CMD checkpointable; its exit status\n"
             "  checkpoint JOB [--wait]      take a generation now\n"
             "  restart JOB [--gen G] [--rank R] [--stopped]\n"
             "                               restore JOB's newest intact generation\n"
             "  status [JOB] [--json]        jobs registered with this node's ibcrd\n"
             "  list JOB [--json]            committed checkpoint generations of JOB\n"
             "  verify JOB [--gen N]         recompute and compare image checksums\n"
             "  prune JOB --keep K           keep only the newest K generations\n"
             "\n"
             "Options:\n"
             "  -s, --socket PATH   ibcrd's socket (default: IBCR_SOCKET, then ibcrd.conf)\n"
             "  -c, --config FILE   ibcrd.conf to read (default: IBCR_CONF, then %s)\n"
             "      --storage DIR   read checkpoints under DIR without asking ibcrd\n"
             "      --cluster NAME  cluster folder under the storage (default: local)\n"
             "  -h, --help          this help;  -V, --version  the version\n"
             "\n"
             "Exit codes: 0 ok, 1 failed, 2 usage, 3 ibcrd unreachable, 4 no such job or\n"
             "generation, 5 damaged image, 6 permission denied, 7 not implemented;\n"
             "run and restart return the program's own exit status.\n",
             conf_default_path ());
}

int main (int argc, char **argv)
{
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "config", required_argument, NULL, 'c' },
        { "storage", required_argument, NULL, 'S' },
        { "cluster", required_argument, NULL, 'C' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    static const struct {
        const char *name;
        int (*fn) (struct cli *, int, char **);
    } cmds[] = {
        { "status", cli_status },   { "list", cli_list }, { "verify", cli_verify },
        { "prune", cli_prune },     { "run", cli_run },   { "checkpoint", cli_checkpoint },
        { "restart", cli_restart },
    };
    struct cli c = { .timeout_ms = 30000 };
    int ch, rc;

    /* '+': options after the command belong to the command. */
    while ((ch = getopt_long (argc, argv, "+s:c:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            c.socket = optarg;
            break;
        case 'c':
            c.config = optarg;
            break;
        case 'S':
            if (optarg[0] != '/') {
                cli_error ("--storage %s: give an absolute path", optarg);
                return CLI_USAGE;
            }
            c.storage = optarg;
            break;
        case 'C':
            c.cluster = optarg;
            break;
        case 'h':
            usage (stdout);
            return CLI_OK;
        case 'V':
            printf ("ibcr %s\n", PACKAGE_VERSION);
            return CLI_OK;
        default:
            usage (stderr);
            return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        cli_error ("no command given; try 'ibcr --help'");
        return CLI_USAGE;
    }
    const char *cmd = argv[optind];
    argc -= optind;
    argv += optind;
    optind = 0; /* restart getopt for the subcommand (glibc: full reset) */
    for (size_t i = 0; i < sizeof (cmds) / sizeof (cmds[0]); i++)
        if (!strcmp (cmds[i].name, cmd)) {
            rc = cmds[i].fn (&c, argc, argv);
            free (c.st_root);
            free (c.st_cluster);
            return rc;
        }
    cli_error ("unknown command '%s'; commands are run, checkpoint, restart, status, list, "
               "verify, prune (try 'ibcr --help')",
               cmd);
    return CLI_USAGE;
}
