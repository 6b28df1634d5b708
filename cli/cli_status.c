/* cli_status.c - "ibcr status [JOB] [--json]": what this node's ibcrd has
 * registered.  ibcrd decides what the caller may see (SO_PEERCRED). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "common/proto.h"

static void print_job (json_object *job)
{
    json_object *tasks;

    printf ("job %s  uid %lld  tasks %lld\n", proto_get_str (job, "job", "?"),
            (long long)proto_get_int (job, "uid", -1), (long long)proto_get_int (job, "ntasks", 0));
    /* What the daemon's generation workers reported (ibcr(1)). */
    if (proto_get_str (job, "phase", NULL)) {
        int64_t running = proto_get_int (job, "running_gen", 0);
        if (running > 0)
            printf ("  checkpointing: generation %lld, phase %s\n", (long long)running,
                    proto_get_str (job, "phase", "?"));
        else
            printf ("  checkpointing: phase %s\n", proto_get_str (job, "phase", "?"));
    } else if (proto_get_bool (job, "checkpointing", 0))
        printf ("  checkpointing: starting\n");
    if (proto_get_int (job, "last_gen", 0) > 0)
        printf ("  last generation: %lld\n", (long long)proto_get_int (job, "last_gen", 0));
    else
        printf ("  last generation: none committed since ibcrd started\n");
    if (proto_get_str (job, "last_error", NULL))
        printf ("  last error: %s\n", proto_get_str (job, "last_error", ""));
    if (!json_object_object_get_ex (job, "tasks", &tasks))
        return;
    printf ("  %-6s %-8s %-10s %-10s %s\n", "RANK", "STEP", "PID", "NODE", "VERBS PIDS");
    for (size_t i = 0; i < json_object_array_length (tasks); i++) {
        json_object *t = json_object_array_get_idx (tasks, i), *procs = NULL;
        printf ("  %-6lld %-8s %-10lld %-10s", (long long)proto_get_int (t, "rank", -1),
                proto_get_str (t, "step", "?"), (long long)proto_get_int (t, "pid", -1),
                proto_get_str (t, "node", "?"));
        /* The task's processes that use verbs ("-": none yet). */
        if (!json_object_object_get_ex (t, "verbs_pids", &procs)
            || json_object_array_length (procs) == 0)
            printf (" -");
        for (size_t k = 0; procs && k < json_object_array_length (procs); k++)
            printf ("%s%lld", k ? "," : " ",
                    (long long)json_object_get_int64 (json_object_array_get_idx (procs, k)));
        printf ("\n");
    }
}

int cli_status (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    json_object *req, *rep, *v, *d;
    int json = 0, ch, rc;

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        if (ch != 'j') {
            cli_error ("usage: ibcr status [JOB] [--json]");
            return CLI_USAGE;
        }
        json = 1;
    }
    if (argc - optind > 1) {
        cli_error ("usage: ibcr status [JOB] [--json]: one job at most");
        return CLI_USAGE;
    }
    if (!(req = proto_new ("status")))
        return CLI_ERR;
    if (optind < argc)
        proto_set_str (req, "job", argv[optind]);
    rep = cli_request (c, req, &rc);
    json_object_put (req);
    if (!rep)
        return rc;
    if (json) {
        /* The reply without the protocol envelope. */
        json_object_object_del (rep, "version");
        json_object_object_del (rep, "type");
        json_object_object_del (rep, "request");
        printf ("%s\n", json_object_to_json_string_ext (rep, JSON_C_TO_STRING_PLAIN));
    } else {
        if (json_object_object_get_ex (rep, "daemon", &d)) {
            printf ("node %s  ibcrd %s (pid %lld)  storage %s/%s\n", proto_get_str (d, "node", "?"),
                    proto_get_str (d, "version", "?"), (long long)proto_get_int (d, "pid", -1),
                    proto_get_str (d, "storage", "?"), proto_get_str (d, "cluster", "?"));
            if (json_object_object_get_ex (d, "reload_error", &v))
                printf ("last SIGHUP refused, running configuration kept: %s\n",
                        json_object_get_string (v));
            if (json_object_object_get_ex (d, "system", &v)
                && json_object_object_get_ex (v, "advice", &v))
                for (size_t i = 0; i < json_object_array_length (v); i++)
                    printf ("system setting: %s\n",
                            json_object_get_string (json_object_array_get_idx (v, i)));
            if (json_object_object_get_ex (d, "slurm", &v)) {
                if (proto_get_bool (v, "watching", 0))
                    printf ("Slurm watched as node %s\n", proto_get_str (v, "node", "?"));
                else
                    printf ("Slurm triggers off (no time-limit, drain or preemption "
                            "checkpoints): %s\n",
                            proto_get_str (v, "error", "?"));
            }
        }
        if (json_object_object_get_ex (rep, "job", &v))
            print_job (v);
        else if (json_object_object_get_ex (rep, "jobs", &v)) {
            if (json_object_array_length (v) == 0)
                printf ("no job registered\n");
            for (size_t i = 0; i < json_object_array_length (v); i++)
                print_job (json_object_array_get_idx (v, i));
        }
    }
    json_object_put (rep);
    return CLI_OK;
}
