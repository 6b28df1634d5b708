/* cli_ckpt.c - "ibcr checkpoint JOB [--wait] [--end]": ask ibcrd (the
 * job's leader) for a generation now.  With --wait, return once it is
 * committed (or aborted, with why). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common/proto.h"

int cli_checkpoint (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "wait", no_argument, NULL, 'w' },
        { "end", no_argument, NULL, 'e' },
        { NULL, 0, NULL, 0 },
    };
    json_object *req, *rep;
    int ch, wait = 0, end = 0, rc;
    char bb[32];

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'w')
            wait = 1;
        else if (ch == 'e')
            end = 1;
        else {
            cli_error ("usage: ibcr checkpoint JOB [--wait] [--end]");
            return CLI_USAGE;
        }
    }
    if (argc - optind != 1) {
        cli_error ("usage: ibcr checkpoint JOB [--wait] [--end]: give one job");
        return CLI_USAGE;
    }
    if (!(req = proto_new ("checkpoint")))
        return CLI_ERR;
    proto_set_str (req, "job", argv[optind]);
    proto_set_bool (req, "wait", wait);
    proto_set_bool (req, "end", end);
    /* Phases and bytes as they go, only for a terminal (stderr). */
    if (wait && cli_progress_wanted ())
        proto_set_bool (req, "progress", 1);
    if (wait)
        c->timeout_ms = -1; /* ibcrd's own phase timeouts bound it */
    rep = cli_request (c, req, &rc);
    json_object_put (req);
    if (!rep)
        return rc;
    if (wait)
        printf ("job %s: generation %lld committed (%s, dump %.0f ms, copy %.0f ms)\n",
                proto_get_str (rep, "job", "?"), (long long)proto_get_int (rep, "generation", 0),
                cli_bytes ((uint64_t)proto_get_int (rep, "bytes", 0), bb, sizeof (bb)),
                json_object_get_double (json_object_object_get (rep, "dump_ms")),
                json_object_get_double (json_object_object_get (rep, "copy_ms")));
    else
        printf ("job %s: checkpoint started\n", proto_get_str (rep, "job", "?"));
    json_object_put (rep);
    return CLI_OK;
}
