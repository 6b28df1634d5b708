/* timeline.c - see timeline.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/ident.h"
#include "common/log.h"
#include "common/safedir.h"
#include "gen.h"
#include "timeline.h"

/* <staging>/.timelines/<job>.json: beside the jobs' folders, not in them,
 * whose leftovers tests look for. */
#define TIMELINE_DIR ".timelines"
/* A restart's (gen.h's GEN_RESTORED), beside them. */
#define RESTORE_DIR ".restores"
#define TIMELINE_CAP (64 * 1024 * 1024)

void timeline_open (struct gen_span *spans, enum gen_phase p, double now)
{
    if ((int)p < 0 || p >= PHASE_COUNT)
        return;
    if (!spans[p].n && !spans[p].open)
        spans[p].start = now;
    spans[p].open = 1;
}

void timeline_close (struct gen_span *spans, enum gen_phase p, double now, double node_ms,
                     int failed)
{
    if ((int)p < 0 || p >= PHASE_COUNT || !spans[p].open)
        return;
    spans[p].open = 0;
    spans[p].end = now;
    spans[p].node_ms += node_ms;
    spans[p].failed |= failed;
    spans[p].n += !failed;
}

static json_object *node_json (const struct gen *g, const char *node, int leader,
                               const char *parent, const struct gen_span *spans)
{
    json_object *o = json_object_new_object (), *ph = json_object_new_object ();

    json_object_object_add (o, "node", json_object_new_string (node));
    json_object_object_add (o, "leader", json_object_new_boolean (leader));
    /* Which node relayed the leader's requests to it (fanout.h). */
    if (parent)
        json_object_object_add (o, "parent", json_object_new_string (parent));
    for (int p = 0; p < PHASE_COUNT; p++) {
        const struct gen_span *s = &spans[p];
        json_object *e;
        if (!s->n && !s->failed && !s->open)
            continue;
        e = json_object_new_object ();
        json_object_object_add (e, "start_ms", json_object_new_double (s->start - g->t0));
        /* Still open: it never answered. */
        if (!s->open)
            json_object_object_add (e, "end_ms", json_object_new_double (s->end - g->t0));
        json_object_object_add (e, "node_ms", json_object_new_double (s->node_ms));
        json_object_object_add (e, "count", json_object_new_int (s->n));
        if (s->failed || s->open)
            json_object_object_add (e, "failed", json_object_new_boolean (1));
        json_object_object_add (ph, phase_name (p), e);
    }
    json_object_object_add (o, "phases", ph);
    return o;
}

json_object *timeline_json (const struct gen *g)
{
    json_object *o = json_object_new_object (), *nodes = json_object_new_array ();
    char wall[64];
    time_t secs = (time_t)g->t0_wall;
    struct tm tm;

    gmtime_r (&secs, &tm);
    snprintf (wall, sizeof (wall), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
              tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
              (int)((g->t0_wall - (double)secs) * 1000));
    json_object_object_add (o, "start_wall", json_object_new_string (wall));
    json_object_object_add (o, "start_epoch", json_object_new_double (g->t0_wall));
    json_object_object_add (o, "start_mono_ms", json_object_new_double (g->t0));
    json_object_object_add (o, "total_ms", json_object_new_double (mono_ms_f () - g->t0));
    /* What the fan-out cost the leader's CPU, and for how many requests. */
    json_object_object_add (o, "requests", json_object_new_int ((int)g->rid));
    json_object_object_add (o, "fanout_cpu_ms", json_object_new_double (g->fan_cpu_ms));
    json_object_object_add (o, "begin_cpu_ms", json_object_new_double (g->begin_cpu_ms));
    json_object_object_add (o, "fanout", json_object_new_int (g->fanout));
    json_object_object_add (o, "levels", json_object_new_int (g->levels));
    json_object_array_add (nodes, node_json (g, g->conf->node, 1, NULL, g->span));
    for (int i = 0; i < g->nmembers; i++) {
        const struct gen_member *m = &g->members[i];
        json_object_array_add (
            nodes,
            node_json (g, m->node, 0, m->parent >= 0 ? g->members[m->parent].node : g->conf->node,
                       m->span));
    }
    json_object_object_add (o, "nodes", nodes);
    return o;
}

void timeline_save (const struct gen *g, int committed)
{
    char dir[PATH_MAX], why[1024], name[IDENT_MAX + 16], tmp[IDENT_MAX + 16];
    json_object *o = json_object_new_object ();
    const char *s;
    size_t n;
    int dfd = -1, fd = -1;

    int restore = g->kind == GEN_RESTORED;

    snprintf (dir, sizeof (dir), "%s/%s", g->conf->staging, restore ? RESTORE_DIR : TIMELINE_DIR);
    snprintf (name, sizeof (name), "%s.json", g->job);
    snprintf (tmp, sizeof (tmp), "%s.new", g->job);
    json_object_object_add (o, "generation", json_object_new_int (g->gen));
    json_object_object_add (o, "result",
                            json_object_new_string (restore ? (committed ? "resumed" : "failed")
                                                        : committed ? "committed"
                                                                    : "aborted"));
    if (!committed)
        json_object_object_add (o, "error", json_object_new_string (g->err));
    json_object_object_add (o, "timeline", timeline_json (g));
    s = json_object_to_json_string_length (o, JSON_C_TO_STRING_PLAIN, &n);
    if (safedir_ensure (dir, 0700, why, sizeof (why)) < 0
        || (dfd = safedir_open (dir, why, sizeof (why))) < 0) {
        log_msg (LOG_WARNING, "job %s gen %d: timeline not kept: %s", g->job, g->gen, why);
        goto out;
    }
    unlinkat (dfd, tmp, 0);
    fd = openat (dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write (fd, s, n) != (ssize_t)n || renameat (dfd, tmp, dfd, name) < 0)
        log_err (errno, "job %s gen %d: timeline not kept in %s", g->job, g->gen, dir);
out:
    if (fd >= 0)
        close (fd);
    if (dfd >= 0)
        close (dfd);
    json_object_put (o);
}

json_object *timeline_load (const char *staging, const char *job, int restore)
{
    char dir[PATH_MAX], why[1024], name[IDENT_MAX + 16], *buf = NULL;
    json_object *o = NULL;
    size_t len = 0, cap = 0;
    int dfd, fd;

    snprintf (dir, sizeof (dir), "%s/%s", staging, restore ? RESTORE_DIR : TIMELINE_DIR);
    snprintf (name, sizeof (name), "%s.json", job);
    if ((dfd = safedir_open (dir, why, sizeof (why))) < 0)
        return NULL;
    fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    close (dfd);
    if (fd < 0)
        return NULL;
    for (;;) {
        ssize_t r;
        if (len + 1 >= cap) {
            char *nb;
            if (cap >= TIMELINE_CAP || !(nb = realloc (buf, cap ? cap * 2 : 65536)))
                break;
            buf = nb;
            cap = cap ? cap * 2 : 65536;
        }
        if ((r = read (fd, buf + len, cap - len - 1)) <= 0) {
            if (r == 0) {
                buf[len] = '\0';
                o = json_tokener_parse (buf);
            }
            break;
        }
        len += (size_t)r;
    }
    close (fd);
    free (buf);
    return o;
}
