/* gen_common.c - what the phases of a generation share (gen_int.h): the
 * errors, the reports to the daemon and the asker, the leader's way of
 * running one phase on every node at once, and the requests to this
 * node's libibcr control connections. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/taskns.h"
#include "fanout.h"
#include "gen_int.h"
#include "libctl.h"

/* --- the leader: one phase on every node at once -------------------- */

/* This node's part of a phase, in its timeline. */
int gen_local_part (struct gen *g, enum gen_phase phase, int (*fn) (struct gen *))
{
    double t = mono_ms_f ();
    int rc;

    timeline_open (g->span, phase, t);
    rc = fn (g);
    timeline_close (g->span, phase, mono_ms_f (), mono_ms_f () - t, rc < 0);
    return rc;
}

/* One phase on every node at once: the members' requests go out first,
 * this node's part (local, if any) runs while they work, then their
 * replies are awaited together; replies[i] (if not NULL) gets member i's
 * (fan_put them, also on failure).  -1 with g->err naming the node on the
 * first failure. */
int gen_phase_all (struct gen *g, enum gen_phase phase, int (*local) (struct gen *),
                   json_object *extra, json_object **replies, uint64_t timeout_ms)
{
    for (int i = 0; replies && i < g->nmembers; i++)
        replies[i] = NULL;
    if (fan_send (g, phase, extra) < 0 || (local && gen_local_part (g, phase, local) < 0))
        return -1;
    return fan_wait (g, phase, replies, timeout_ms);
}

/* Append every element of member replies' array 'key' to out. */
void gen_gather (struct gen *g, json_object **replies, const char *key, json_object *out)
{
    for (int i = 0; i < g->nmembers; i++) {
        json_object *a;
        if (replies[i] && json_object_object_get_ex (replies[i], key, &a))
            for (size_t k = 0; k < json_object_array_length (a); k++)
                json_object_array_add (out, json_object_get (json_object_array_get_idx (a, k)));
        json_object_put (replies[i]);
        replies[i] = NULL;
    }
}

/* A phase that asks every process for one thing and gathers nothing, on
 * every node at once; its duration into *took. */
int gen_step (struct gen *g, enum gen_phase phase, int (*local) (struct gen *), uint64_t timeout_ms,
              double *took)
{
    double t0 = mono_ms_f ();

    gen_enter (g, phase);
    gen_progress (g, phase, 0, 0, 1);
    if (gen_phase_all (g, phase, local, NULL, NULL, timeout_ms) < 0)
        return -1;
    *took = mono_ms_f () - t0;
    return 0;
}

/* --- this node's libibcr control connections ------------------------ */

/* Every process of this node's tasks that uses verbs: its libibcr
 * control connection, its task's rank and its pid.  A task may have
 * several (a forked second rank, a script starting two verbs programs),
 * and each takes part in every phase. */
struct ctl_set {
    int n;
    int *fds;
    int *ranks;
    pid_t *pids;
    json_object **rep; /* a reply per process, for the rounds that gen_gather */
};

static void ctl_set_free (struct ctl_set *cs)
{
    free (cs->fds);
    free (cs->ranks);
    free (cs->pids);
    free (cs->rep);
}

/* 0, or -1 with g->err (out of memory) naming phase. */
static int ctl_set_get (struct gen *g, struct ctl_set *cs, enum gen_phase phase)
{
    int max = 1;

    memset (cs, 0, sizeof (*cs));
    for (int i = 0; i < g->ntasks; i++)
        max += g->tasks[i].nctl;
    cs->fds = calloc ((size_t)max, sizeof (*cs->fds));
    cs->ranks = calloc ((size_t)max, sizeof (*cs->ranks));
    cs->pids = calloc ((size_t)max, sizeof (*cs->pids));
    cs->rep = calloc ((size_t)max, sizeof (*cs->rep));
    if (!cs->fds || !cs->ranks || !cs->pids || !cs->rep) {
        ctl_set_free (cs);
        return gen_fail (g, phase, "ibcrd's worker is out of memory");
    }
    for (int i = 0; i < g->ntasks; i++)
        for (int k = 0; k < g->tasks[i].nctl; k++) {
            cs->fds[cs->n] = g->tasks[i].ctl_fd[k];
            cs->ranks[cs->n] = g->tasks[i].rank;
            cs->pids[cs->n++] = g->tasks[i].ctl_pid[k];
        }
    return 0;
}

/* One request to every process, replies into cs->rep when gen_gather. */
static int ctl_round (struct gen *g, enum gen_phase phase, struct ctl_set *cs, const char *type,
                      json_object *extra, const char *want, int gen_gather, uint64_t timeout_ms)
{
    char err[1024];

    if (cs->n
        && libctl_round (cs->fds, cs->ranks, cs->pids, cs->n, type, extra, g->gen, want,
                         gen_gather ? cs->rep : NULL, (int)timeout_ms, err, sizeof (err))
            < 0)
        return gen_fail (g, phase, err);
    return 0;
}

/* A phase that asks every process one thing and gathers nothing. */
int ctl_phase (struct gen *g, enum gen_phase phase, const char *type, json_object *extra,
               const char *want, uint64_t timeout_ms)
{
    struct ctl_set cs;
    int rc;

    if (ctl_set_get (g, &cs, phase) < 0)
        return -1;
    rc = ctl_round (g, phase, &cs, type, extra, want, 0, timeout_ms);
    ctl_set_free (&cs);
    return rc;
}

/* A phase whose replies are appended to out. */
int ctl_gather (struct gen *g, enum gen_phase phase, const char *type, json_object *extra,
                const char *want, uint64_t timeout_ms, json_object *out)
{
    struct ctl_set cs;
    int rc;

    if (ctl_set_get (g, &cs, phase) < 0)
        return -1;
    rc = ctl_round (g, phase, &cs, type, extra, want, 1, timeout_ms);
    for (int i = 0; rc == 0 && i < cs.n; i++)
        json_object_array_add (out, cs.rep[i]);
    ctl_set_free (&cs);
    return rc;
}

/* --- errors and reports ---------------------------------------------- */

/* Append s to dst (size len, holding *off bytes), cutting it to fit. */
void gen_append (char *dst, size_t len, size_t *off, const char *s)
{
    size_t n = strlen (s);
    if (*off + 1 >= len)
        return;
    if (n > len - 1 - *off)
        n = len - 1 - *off;
    memmove (dst + *off, s, n);
    *off += n;
    dst[*off] = '\0';
}

int gen_fail (struct gen *g, enum gen_phase phase, const char *why)
{
    char tmp[sizeof (g->err)];
    size_t off = 0;

    g->err_phase = phase;
    gen_append (tmp, sizeof (tmp), &off, phase_name (phase));
    gen_append (tmp, sizeof (tmp), &off, ": ");
    gen_append (tmp, sizeof (tmp), &off, why);
    memcpy (g->err, tmp, off + 1);
    return -1;
}

void gen_enter (struct gen *g, enum gen_phase phase)
{
    json_object *o;

    if (g->phase == (int)phase)
        return;
    g->phase = phase;
    if (g->report_fd < 0 || !(o = proto_new ("worker-phase")))
        return;
    proto_set_str (o, "job", g->job);
    proto_set_int (o, "gen", g->gen);
    proto_set_str (o, "phase", phase_name (phase));
    /* A daemon gone only stops hearing from us: the generation goes on. */
    if (proto_send (g->report_fd, o) < 0)
        g->report_fd = -1;
    json_object_put (o);
}

void gen_progress (struct gen *g, enum gen_phase phase, uint64_t done, uint64_t total, int force)
{
    double now = mono_ms_f ();
    json_object *o;

    if (g->progress_fd < 0 || (!force && now - g->progress_last < 200))
        return;
    g->progress_last = now;
    if (!(o = proto_new ("progress")))
        return;
    proto_set_str (o, "job", g->job);
    proto_set_int (o, "generation", g->gen);
    proto_set_str (o, "phase", phase_name (phase));
    proto_set_int (o, "done", (int64_t)done);
    proto_set_int (o, "total", (int64_t)total);
    /* A client that left or stopped reading only loses its progress. */
    if (proto_send (g->progress_fd, o) < 0)
        g->progress_fd = -1;
    json_object_put (o);
}

/* The daemon that owns the job's registrations died (kill -9, crash): its
 * successor knows nothing of this generation, so it must not commit. */
int gen_daemon_gone (struct gen *g, enum gen_phase phase)
{
    char why[256];

    if (!g->daemon || getppid () == g->daemon)
        return 0;
    snprintf (why, sizeof (why),
              "ibcrd (pid %ld) died during the %s; the generation is "
              "void (restart ibcrd; the job runs on)",
              (long)g->daemon, phase_name (phase));
    return gen_fail (g, phase, why);
}

/* --- this node's tasks ------------------------------------------------ */

/* "file[MNT:INO]", CRIU's name for an open file it must leave out of the
 * image (--external) and take back from the restorer (--inherit-fd), for
 * fd of pid when that is a file or a device; 0, or -1 (a pipe, a socket). */
int stdio_file_key (pid_t pid, int fd, char *buf, size_t len)
{
    char path[64], line[256];
    unsigned long mnt = 0;
    struct stat sb;
    FILE *f;
    int have = 0;

    snprintf (path, sizeof (path), "/proc/%ld/fd/%d", (long)pid, fd);
    if (stat (path, &sb) < 0 || !(S_ISREG (sb.st_mode) || S_ISCHR (sb.st_mode)))
        return -1;
    snprintf (path, sizeof (path), "/proc/%ld/fdinfo/%d", (long)pid, fd);
    if (!(f = fopen (path, "re")))
        return -1;
    while (fgets (line, sizeof (line), f))
        if (sscanf (line, "mnt_id: %lu", &mnt) == 1)
            have = 1;
    fclose (f);
    if (!have)
        return -1;
    snprintf (buf, len, "file[%lx:%llx]", mnt, (unsigned long long)sb.st_ino);
    return 0;
}

/* A task in a mount namespace of its own (taskns.h) is dumped from
 * inside it, as its user; 1 when so. */
int task_in_ns (const struct gen_task *t)
{
    return taskns_own_mnt (t->pid) == 1;
}
