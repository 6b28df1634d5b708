/* phase_begin.c - the begin phase: every node of the job starts a worker
 * for the generation and tells the leader its tasks' manifest entries.
 * The leader numbers the generation (gen_run, store_gen_begin) and sends
 * "gen-begin" down the tree (gen_begin; the request, its session keys and
 * the retries of a busy node are fanout.c's fan_begin); each node
 * describes its own tasks (genl_tasks_json); a member that leads nodes
 * sends begin on to them and answers their tasks with its own
 * (genm_begin). */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "common/pmi.h"
#include "common/proto.h"
#include "gen_int.h"
#include "fanout.h"
#include "sockdiag.h"

/* Begin: every member starts a worker for this generation and tells us
 * its port and its tasks' manifest entries. */
int gen_begin (struct gen *g)
{
    gen_enter (g, PHASE_BEGIN);
    return fan_begin (g, g->conf->timeout_request);
}

/* Member: this node's own begin was its daemon's answer; now the nodes it
 * leads, with their subtrees' tasks into o's "tasks".  *relayed when the
 * failure is of a node below. */
int genm_begin (struct gen *g, json_object *o, int *relayed)
{
    json_object *tasks = json_object_new_array ();
    int rc;

    rc = g->nmembers ? fan_begin (g, g->conf->timeout_request) : 0;
    *relayed = rc < 0;
    for (int i = 0; tasks && i < g->nmembers; i++)
        for (size_t k = 0; g->members[i].child && g->members[i].tasks
             && k < json_object_array_length (g->members[i].tasks);
             k++)
            json_object_array_add (
                tasks, json_object_get (json_object_array_get_idx (g->members[i].tasks, k)));
    json_object_object_add (o, "tasks", tasks);
    return rc;
}

/* What a restart must hand back for each standard fd of the task's init:
 * "pipe:[INO]", "socket:[INO]" or a path. */
static json_object *task_stdio (pid_t pid, int in_ns)
{
    json_object *o = json_object_new_object ();

    for (int fd = 0; fd <= 2; fd++) {
        char path[64], target[PATH_MAX], key[4];
        ssize_t n;

        snprintf (key, sizeof (key), "%d", fd);
        /* Dumped as external (dump_start): always handed back. */
        if (in_ns && stdio_file_key (pid, fd, target, sizeof (target)) == 0) {
            json_object_object_add (o, key, json_object_new_string (target));
            continue;
        }
        snprintf (path, sizeof (path), "/proc/%ld/fd/%d", (long)pid, fd);
        if ((n = readlink (path, target, sizeof (target) - 1)) < 0)
            continue;
        target[n] = '\0';
        json_object_object_add (o, key, json_object_new_string (target));
    }
    return o;
}

/* Manifest entries of this node's tasks, taken before the dump: what a
 * restart must hand back fresh (libibcr's socket, stdout, stderr). */
json_object *genl_tasks_json (struct gen *g)
{
    json_object *tasks = json_object_new_array ();

    for (int i = 0; i < g->ntasks; i++) {
        json_object *t = json_object_new_object ();
        uint64_t ino = 0;
        proto_set_int (t, "rank", g->tasks[i].rank);
        proto_set_str (t, "node", g->tasks[i].node);
        proto_set_int (t, "pid", g->tasks[i].pid);
        if (g->tasks[i].restored_gen > 0)
            proto_set_int (t, "restored_gen", g->tasks[i].restored_gen);
        /* One per verbs process: a restart hands each a fresh connection
         * (restore.h).  "ctl_ino", the first, for readers of one. */
        json_object *inos = json_object_new_array ();
        for (int k = 0; k < g->tasks[i].nctl; k++)
            if (sockdiag_unix_peer (g->tasks[i].ctl_fd[k], &ino) == 0) {
                if (json_object_array_length (inos) == 0)
                    proto_set_int (t, "ctl_ino", (int64_t)ino);
                json_object_array_add (inos, json_object_new_int64 ((int64_t)ino));
            }
        if (json_object_array_length (inos) > 0)
            json_object_object_add (t, "ctl_inos", inos);
        else
            json_object_put (inos);
        int in_ns = task_in_ns (&g->tasks[i]), pmi_fd;
        json_object_object_add (t, "stdio", task_stdio (g->tasks[i].pid, in_ns));
        /* Dumped as external (dump_start): a restore hands the new
         * step's PMI socket in at that fd (pmi.h). */
        if (in_ns && pmi_find (g->tasks[i].pid, &pmi_fd, &ino) == 0) {
            proto_set_int (t, "pmi_fd", pmi_fd);
            proto_set_int (t, "pmi_ino", (int64_t)ino);
        }
        /* So is the task's end of its PMIx relay; the rank's connect
         * message, recorded by the relay, is said again to the new
         * step's server at a restore (pmi.h). */
        if (in_ns && pmix_find (g->tasks[i].pid, &pmi_fd, &ino) == 0) {
            unsigned char hello[PMIX_HELLO_MAX];
            char hex[2 * PMIX_HELLO_MAX + 1];
            ssize_t n = pmix_hello_read (g->tasks[i].pid, g->uid, hello, sizeof (hello));
            proto_set_int (t, "pmix_fd", pmi_fd);
            proto_set_int (t, "pmix_ino", (int64_t)ino);
            for (ssize_t k = 0; k < n; k++)
                snprintf (hex + 2 * k, 3, "%02x", hello[k]);
            if (n > 0)
                proto_set_str (t, "pmix_hello", hex);
        }
        /* How a restore must bring it back (taskns.h). */
        json_object_object_add (t, "in_ns", json_object_new_boolean (in_ns));
        json_object_array_add (tasks, t);
        /* The dump adds its interval to it (genl_dump). */
        json_object_put (g->tasks[i].entry);
        g->tasks[i].entry = json_object_get (t);
    }
    return tasks;
}
