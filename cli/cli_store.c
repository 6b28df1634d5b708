/* cli_store.c - "ibcr list", "ibcr verify", "ibcr prune": commands on a
 * job's committed generations in the storage.
 *
 * They run with the caller's own rights: a job's folder is root's, 0750,
 * with the job's group (store.h), so the kernel, not this code, keeps
 * other users out; removing generations takes root.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/manifest.h"
#include "common/proto.h"

static int list_gens (struct cli *c, const char *job, int with_partial, json_object **gens)
{
    char err[1024];
    int rc;

    if ((rc = cli_store (c)))
        return rc;
    if (store_list (&c->st, job, with_partial, gens, err, sizeof (err)) < 0) {
        rc = cli_rc_for_errno (errno);
        cli_error ("%s", err);
        return rc == CLI_USAGE ? CLI_USAGE : rc;
    }
    return CLI_OK;
}

static const char *when (int64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    strftime (buf, len, "%Y-%m-%d %H:%M:%S", localtime_r (&tt, &tm));
    return buf;
}

int cli_list (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    json_object *gens;
    int json = 0, ch, rc;

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        if (ch != 'j') {
            cli_error ("usage: ibcr list JOB [--json]");
            return CLI_USAGE;
        }
        json = 1;
    }
    if (argc - optind != 1) {
        cli_error ("usage: ibcr list JOB [--json]: give one job");
        return CLI_USAGE;
    }
    if ((rc = list_gens (c, argv[optind], 0, &gens)))
        return rc;
    if (json) {
        json_object *o = json_object_new_object (), *arr = json_object_new_array ();
        json_object_object_add (o, "job", json_object_new_string (argv[optind]));
        json_object_object_add (o, "storage", json_object_new_string (c->st.root));
        json_object_object_add (o, "cluster", json_object_new_string (c->st.cluster));
        for (size_t i = 0; i < json_object_array_length (gens); i++) {
            json_object *m, *e = json_object_array_get_idx (gens, i);
            json_object_object_get_ex (e, "manifest", &m);
            /* The per-file list is for verify; a listing stays small. */
            json_object *copy = NULL;
            json_object_deep_copy (m, &copy, NULL);
            json_object_object_del (copy, "files");
            if (json_object_object_get_ex (e, "damaged", NULL))
                json_object_object_add (copy, "damaged",
                                        json_object_new_string (proto_get_str (e, "damaged", "")));
            json_object_array_add (arr, copy);
        }
        json_object_object_add (o, "generations", arr);
        printf ("%s\n", json_object_to_json_string_ext (o, JSON_C_TO_STRING_PLAIN));
        json_object_put (o);
    } else if (json_object_array_length (gens) == 0) {
        printf ("job %s has no committed generation\n", argv[optind]);
    } else {
        printf ("%-5s %-19s %-6s %-11s %s\n", "GEN", "COMMITTED", "TASKS", "SIZE", "TRIGGER");
        for (size_t i = 0; i < json_object_array_length (gens); i++) {
            json_object *m, *e = json_object_array_get_idx (gens, i), *t;
            char tb[32], bb[32];
            int ntasks = 0;
            json_object_object_get_ex (e, "manifest", &m);
            if (json_object_object_get_ex (m, "tasks", &t)
                && json_object_is_type (t, json_type_array))
                ntasks = json_object_array_length (t);
            printf ("%-5lld %-19s %-6d %-11s %s%s%s%s\n",
                    (long long)proto_get_int (m, "generation", 0),
                    when (proto_get_int (m, "committed", 0), tb, sizeof (tb)), ntasks,
                    cli_bytes (proto_get_int (m, "bytes", 0), bb, sizeof (bb)),
                    proto_get_str (m, "trigger", "-"),
                    json_object_object_get_ex (e, "damaged", NULL) ? "  DAMAGED (" : "",
                    proto_get_str (e, "damaged", ""),
                    json_object_object_get_ex (e, "damaged", NULL) ? "): never restored" : "");
        }
    }
    json_object_put (gens);
    return CLI_OK;
}

int cli_verify (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "gen", required_argument, NULL, 'g' },
        { NULL, 0, NULL, 0 },
    };
    json_object *gens;
    int ch, rc, want = 0, found = 0, damaged = 0;
    char *end;

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        if (ch != 'g') {
            cli_error ("usage: ibcr verify JOB [--gen N]");
            return CLI_USAGE;
        }
        want = (int)strtol (optarg, &end, 10);
        if (*end || want < 1) {
            cli_error ("--gen %s: give a generation number from 1 (see 'ibcr list')", optarg);
            return CLI_USAGE;
        }
    }
    if (argc - optind != 1) {
        cli_error ("usage: ibcr verify JOB [--gen N]: give one job");
        return CLI_USAGE;
    }
    const char *job = argv[optind];
    if ((rc = list_gens (c, job, 1, &gens)))
        return rc;
    for (size_t i = 0; i < json_object_array_length (gens); i++) {
        json_object *e = json_object_array_get_idx (gens, i), *m, *problems;
        int g = (int)proto_get_int (e, "generation", 0);
        char dir[4096], bb[32];
        uint64_t bytes = 0;
        int n;

        if (want && g != want)
            continue;
        if (!proto_get_bool (e, "committed", 0)) {
            if (want) {
                printf ("gen-%d: not committed: %s\n", g, proto_get_str (e, "why", "?"));
                found = -1;
            }
            continue;
        }
        found++;
        json_object_object_get_ex (e, "manifest", &m);
        store_gen_path (&c->st, job, g, dir, sizeof (dir));
        problems = json_object_new_array ();
        n = manifest_verify (dir, m, problems, &bytes);
        if (n < 0) {
            cli_error ("gen-%d: cannot verify %s: %s", g, dir, strerror (errno));
            damaged++;
        } else if (n == 0 && json_object_object_get_ex (e, "damaged", NULL)) {
            /* The bytes are right now (put back from a copy, say), but a
             * restore found them wrong: root removes the mark to use it. */
            damaged++;
            printf ("gen-%d: DAMAGED\n  a restore found: %s; its files check out now: root "
                    "removes %s/" MANIFEST_DAMAGE_NAME " to restore from it again\n",
                    g, proto_get_str (e, "damaged", "?"), dir);
        } else if (n == 0) {
            json_object *files;
            json_object_object_get_ex (m, "files", &files);
            printf ("gen-%d: ok (%zu files, %s)\n", g, json_object_array_length (files),
                    cli_bytes (bytes, bb, sizeof (bb)));
        } else {
            damaged++;
            printf ("gen-%d: DAMAGED\n", g);
            for (size_t j = 0; j < json_object_array_length (problems); j++) {
                json_object *p = json_object_array_get_idx (problems, j);
                printf ("  %s: %s\n", proto_get_str (p, "path", "?"),
                        proto_get_str (p, "problem", "?"));
            }
            if (json_object_object_get_ex (e, "damaged", NULL))
                printf ("  (marked by a restore: %s)\n", proto_get_str (e, "damaged", "?"));
        }
        json_object_put (problems);
    }
    json_object_put (gens);
    if (found == 0) {
        if (want)
            cli_error ("job %s has no generation %d (see 'ibcr list %s')", job, want, job);
        else
            cli_error ("job %s has no committed generation to verify", job);
        return CLI_NOTFOUND;
    }
    if (found < 0)
        return CLI_NOTFOUND;
    if (damaged) {
        cli_error ("job %s: %d damaged generation%s: do not restart from %s; 'ibcr prune' "
                   "will not remove %s by itself",
                   job, damaged, damaged > 1 ? "s" : "", damaged > 1 ? "them" : "it",
                   damaged > 1 ? "them" : "it");
        return CLI_DAMAGED;
    }
    return CLI_OK;
}

/* ibcr prune for a user: the "prune" request; prints what was removed. */
static int prune_by_daemon (struct cli *c, const char *job, int keep)
{
    json_object *req = proto_new ("prune"), *rep, *removed = NULL;
    int rc = CLI_OK, n;

    proto_set_str (req, "job", job);
    proto_set_int (req, "keep", keep);
    rep = cli_request (c, req, &rc);
    json_object_put (req);
    if (!rep)
        return rc;
    json_object_object_get_ex (rep, "removed", &removed);
    n = removed ? (int)json_object_array_length (removed) : 0;
    for (int i = 0; i < n; i++)
        printf ("removed gen-%d\n", json_object_get_int (json_object_array_get_idx (removed, i)));
    if (n == 0)
        printf ("nothing to remove: job %s keeps its generations\n", job);
    json_object_put (rep);
    return CLI_OK;
}

int cli_prune (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "keep", required_argument, NULL, 'k' },
        { NULL, 0, NULL, 0 },
    };
    json_object *removed;
    int ch, rc, keep = -1, n;
    char *end, err[1024];

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        if (ch != 'k') {
            cli_error ("usage: ibcr prune JOB --keep K");
            return CLI_USAGE;
        }
        keep = (int)strtol (optarg, &end, 10);
        if (*end || !*optarg || keep < 0) {
            cli_error ("--keep %s: give how many of the newest generations to keep (0 or more)",
                       optarg);
            return CLI_USAGE;
        }
    }
    if (argc - optind != 1 || keep < 0) {
        cli_error ("usage: ibcr prune JOB --keep K: give one job and --keep");
        return CLI_USAGE;
    }
    /* Storage is root's: anyone else asks ibcrd, which checks that the
     * job is theirs. */
    if (geteuid () != 0)
        return prune_by_daemon (c, argv[optind], keep);
    if ((rc = cli_store (c)))
        return rc;
    removed = json_object_new_array ();
    if ((n = store_prune (&c->st, argv[optind], keep, removed, err, sizeof (err))) < 0) {
        rc = cli_rc_for_errno (errno);
        cli_error ("%s", err);
        json_object_put (removed);
        return rc;
    }
    for (int i = 0; i < n; i++)
        printf ("removed gen-%d\n", json_object_get_int (json_object_array_get_idx (removed, i)));
    if (n == 0)
        printf ("nothing to remove: job %s keeps its generations\n", argv[optind]);
    json_object_put (removed);
    return CLI_OK;
}
