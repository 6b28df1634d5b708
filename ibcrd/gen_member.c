/* gen_member.c - a member node's worker for one generation: it owns this
 * node's tasks' control connections and serves the leader's phase
 * requests ("gen-phase" {phase}) on one connection to its own TCP port,
 * the generation's session: every message on it carries the HMAC of the
 * key the leader sent inside its MUNGE-authenticated gen-begin
 * (peerauth.h).  The first connection whose first message checks out is
 * the leader's; no other is heard after it.
 *
 * It never decides to commit or abort by itself, with these exceptions,
 * so that the job is never left frozen at the gate waiting for a leader
 * that will not come back: a leader silent for longer than any phase may
 * take (it died, or lost the network), a session closed before "end" or
 * "abort" (the leader gave up on this node, or died), a message that
 * fails its check, or no session opened in time, make it undo its part.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/store.h"
#include "fanout.h"
#include "gen_int.h"

/* The longest this node may wait on its children in phase (the leader's
 * own timeouts, gen.c). */
uint64_t genm_timeout (const struct gen *g, enum gen_phase phase)
{
    switch (phase) {
    case PHASE_DRAIN:
        return g->conf->timeout_drain;
    case PHASE_DUMP:
        return g->conf->timeout_dump;
    case PHASE_REBUILD:
    case PHASE_CONNECT:
    case PHASE_ABORT:
        return g->conf->timeout_rebuild;
    case PHASE_COPY:
        return g->conf->timeout_commit;
    case PHASE_BEGIN:
    case PHASE_END:
        return g->conf->timeout_request;
    default:
        return g->conf->timeout_quiesce;
    }
}

/* The keys of the parent's request that its children get too. */
static json_object *relay_extra (json_object *m)
{
    static const char *const own[] = { "type", "job", "gen", "phase", "rid", "to" };
    json_object *x = json_object_new_object ();

    json_object_object_foreach (m, key, val)
    {
        int skip = 0;
        for (size_t i = 0; i < sizeof (own) / sizeof (own[0]); i++)
            skip |= !strcmp (key, own[i]);
        if (!skip && x)
            json_object_object_add (x, key, json_object_get (val));
    }
    return x;
}

/* Append the elements of the children's replies' arrays 'key' to o's. */
static void merge_arrays (struct gen *g, json_object **rep, const char *key, json_object *o)
{
    json_object *mine = NULL, *a;

    if (!json_object_object_get_ex (o, key, &mine))
        json_object_object_add (o, key, mine = json_object_new_array ());
    for (int i = 0; mine && i < g->nmembers; i++)
        if (rep[i] && json_object_object_get_ex (rep[i], key, &a)
            && json_object_is_type (a, json_type_array))
            for (size_t k = 0; k < json_object_array_length (a); k++)
                json_object_array_add (mine, json_object_get (json_object_array_get_idx (a, k)));
}

/* This node's part of phase (the leader's request m). */
static int local_phase (struct gen *g, enum gen_phase phase, json_object *m, json_object *o)
{
    json_object *arr;
    int rc = 0;

    switch (phase) {
    case PHASE_QUIESCE:
        rc = genl_quiesce (g);
        break;
    case PHASE_DRAIN:
        arr = json_object_new_array ();
        rc = genl_drain_round (g, (int)proto_get_int (m, "round", 0), arr);
        json_object_object_add (o, "reports", arr);
        break;
    case PHASE_RELEASE:
        rc = genl_release (g);
        break;
    case PHASE_DUMP:
        rc = genl_dump (g) < 0 || gen_daemon_gone (g, PHASE_DUMP) ? -1 : 0;
        break;
    case PHASE_REBUILD:
        arr = json_object_new_array ();
        rc = genl_rebuild_ids (g, arr);
        json_object_object_add (o, "ids", arr);
        break;
    case PHASE_CONNECT: {
        json_object *procs = NULL;
        json_object_object_get_ex (m, "procs", &procs);
        rc = genl_connect (g, procs);
        break;
    }
    case PHASE_RESUME:
        rc = genl_resume (g);
        break;
    case PHASE_COPY:
        rc = genl_copy (g) < 0 || gen_daemon_gone (g, PHASE_COPY) ? -1 : 0;
        break;
    default:
        break;
    }
    return rc;
}

/* One phase on this node and, at once, on the nodes it leads (fanout.h):
 * the reply, with theirs merged in, and *state when the generation ends. */
static json_object *serve_phase (struct gen *g, json_object *m, int *state)
{
    const char *name = proto_get_str (m, "phase", "");
    int phase = phase_from_name (name);
    json_object *o = NULL, *x, *rep[g->nmembers + 1];
    double t0 = mono_ms_f ();
    int rc = 0, relayed = 0;

    if (strcmp (proto_get_str (m, "job", ""), g->job) || proto_get_int (m, "gen", -1) != g->gen)
        return proto_error (name, EINVAL, "node %s: this worker serves job %s generation %d",
                            g->conf->node, g->job, g->gen);
    if (phase < 0 || phase == PHASE_COMMIT || phase == PHASE_RESTORE)
        return proto_error (name, EINVAL, "node %s: no phase \"%.64s\" here", g->conf->node, name);
    if (!(o = proto_new ("ok")))
        return NULL;
    for (int i = 0; i < g->nmembers; i++)
        rep[i] = NULL;
    proto_set_str (o, "request", name);
    gen_enter (g, (enum gen_phase)phase);
    x = relay_extra (m);
    switch ((enum gen_phase)phase) {
    case PHASE_BEGIN:
        rc = genm_begin (g, o, &relayed);
        break;
    case PHASE_END:
        genm_end (g, state);
        break;
    case PHASE_ABORT:
        genm_abort (g, m, x, state);
        break;
    default:
        /* The children first, this node meanwhile, then their answers. */
        if (fan_send (g, (enum gen_phase)phase, x) < 0)
            rc = -1, relayed = 1;
        else if ((rc = local_phase (g, (enum gen_phase)phase, m, o)) == 0
                 && (rc = fan_wait (g, (enum gen_phase)phase, rep,
                                    genm_timeout (g, (enum gen_phase)phase)))
                     < 0)
            relayed = 1;
        if (rc == 0 && phase == PHASE_DRAIN)
            merge_arrays (g, rep, "reports", o);
        if (rc == 0 && phase == PHASE_REBUILD)
            merge_arrays (g, rep, "ids", o);
        if (phase == PHASE_COPY) {
            uint64_t bytes = g->bytes;
            for (int i = 0; i < g->nmembers; i++)
                bytes += (uint64_t)proto_get_int (rep[i], "bytes", 0);
            proto_set_int (o, "bytes", (int64_t)bytes);
        }
        fan_put (g, rep);
        break;
    }
    json_object_put (x);
    if (rc < 0) {
        json_object *e;
        json_object_put (o);
        log_msg (LOG_ERR, "job %s gen %d: %s", g->job, g->gen, g->err);
        /* the leader names the node: this one, or one below that it named */
        e = proto_error (name, EIO, "%s", g->err);
        if (e && relayed)
            proto_set_bool (e, "relayed", 1);
        if (e && g->nmembers) {
            json_object_object_add (e, "tl", fan_tl_json (g, t0));
            fan_untouch (g);
        }
        return e;
    }
    /* This node's own time in the phase, for the leader's timeline; and
     * what changed below since it last told (about one span per node: a
     * whole generation's at once would pass PEERAUTH_MAX_BODY at about
     * a thousand nodes). */
    json_object_object_add (o, "ms", json_object_new_double (mono_ms_f () - t0));
    if (g->nmembers) {
        json_object_object_add (o, "tl", fan_tl_json (g, t0));
        fan_untouch (g);
    }
    return o;
}

/* One message of the session: check it, serve it, answer it.  0, or -1
 * with why filled when the session cannot go on. */
static int serve_message (struct gen *g, int fd, json_object *env, int *state, char *why,
                          size_t len)
{
    json_object *m = NULL, *rep, *sealed;
    char err[512];

    if (peerauth_open (&g->ses, env, &m, err, sizeof (err)) < 0) {
        snprintf (why, len, "the leader's session broke: %s", err);
        return -1;
    }
    if (strcmp (proto_get_str (m, "to", ""), g->conf->node))
        rep = proto_error ("gen-phase", EACCES, "message for another node refused");
    else
        rep = serve_phase (g, m, state);
    /* Which request this answers: the leader drops late answers. */
    if (rep)
        proto_set_int (rep, "rid", proto_get_int (m, "rid", 0));
    if (rep && (sealed = peerauth_seal (&g->ses, rep, err, sizeof (err)))) {
        if (proto_send (fd, sealed) < 0 && *state == MEMBER_OK)
            log_msg (LOG_WARNING, "job %s gen %d: cannot answer the leader: %s", g->job, g->gen,
                     strerror (errno));
        json_object_put (sealed);
    }
    json_object_put (rep);
    json_object_put (m);
    return 0;
}

#define MEMBER_MAX_CANDIDATES 8

/* A connection that has not shown the session's key yet. */
struct cand {
    int fd;
    double deadline;
    struct proto_reader rd;
};

static void cand_drop (struct cand *c, int *n, int i)
{
    proto_reader_fini (&c[i].rd);
    close (c[i].fd);
    c[i] = c[--*n];
}

int gen_member_serve (struct gen *g)
{
    /* The longest a parent may stay silent: any one phase's timeout, and
     * what the levels of the tree add to it (fanout.h). */
    double hop = (double)g->conf->timeout_connect,
           begin_hop =
               2.0 * (double)g->conf->timeout_request + 2.0 * (double)g->conf->timeout_connect;
    double idle =
        (double)(g->conf->timeout_dump > g->conf->timeout_commit ? g->conf->timeout_dump
                                                                 : g->conf->timeout_commit);
    if (idle < (g->levels + 1) * begin_hop)
        idle = (g->levels + 1) * begin_hop;
    idle += (g->levels + 1) * hop;
    /* The parent opens its session once every child of its answered
     * gen-begin (each within timeout_request), after its own parent's. */
    double start_by = mono_ms_f () + (g->levels + 1) * begin_hop;
    struct cand cand[MEMBER_MAX_CANDIDATES];
    struct proto_reader srd;
    int state = MEMBER_OK, ncand = 0, sfd = -1;
    char why[1024];

    snprintf (g->staging, sizeof (g->staging), "%s/%s/gen-%d", g->conf->staging, g->job, g->gen);
    store_rmtree (g->staging);
    log_msg (LOG_INFO, "job %s gen %d: member worker for %d task%s, leading %d node%s", g->job,
             g->gen, g->ntasks, g->ntasks == 1 ? "" : "s", g->nmembers,
             g->nmembers == 1 ? "" : "s");
    g->member = 1;
    fan_shape (g);
    fan_init (g);
    while (state == MEMBER_OK) {
        struct pollfd pfd[MEMBER_MAX_CANDIDATES + 1];
        double now = mono_ms_f (), until = sfd >= 0 ? now + (double)idle : start_by;
        int n = 0;

        /* The daemon's word that the leader aborted (fanout.h) */
        if (fan_abort_heard (g))
            return genm_give_up (g,
                                 "the leader aborted the generation (it lost the node "
                                 "above this one); undoing this node's part");
        int rfd = g->abort_asked == 0 && g->report_fd >= 0 ? g->report_fd : -1;
        if (sfd >= 0)
            pfd[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        else {
            pfd[n++] = (struct pollfd){ .fd = g->member_lfd, .events = POLLIN };
            for (int i = 0; i < ncand; i++) {
                pfd[n++] = (struct pollfd){ .fd = cand[i].fd, .events = POLLIN };
                if (cand[i].deadline < until)
                    until = cand[i].deadline;
            }
        }
        struct pollfd all[MEMBER_MAX_CANDIDATES + 2];
        memcpy (all, pfd, (size_t)n * sizeof (*pfd));
        all[n] = (struct pollfd){ .fd = rfd, .events = POLLIN };
        if (poll (all, (nfds_t)n + 1, until > now ? (int)(until - now) + 1 : 0) < 0) {
            if (errno == EINTR)
                continue;
            return genm_give_up (g, "poll failed; undoing this node's part");
        }
        memcpy (pfd, all, (size_t)n * sizeof (*pfd));
        if (all[n].revents)
            continue; /* fan_abort_heard reads it */
        now = mono_ms_f ();
        if (sfd >= 0) {
            if (!pfd[0].revents) {
                if (now >= until)
                    return genm_give_up (g,
                                         "the leader went silent; undoing this node's "
                                         "part");
                continue;
            }
            for (;;) {
                json_object *env = NULL;
                int rc = proto_reader_read (&srd, sfd, &env);
                if (rc == 0 || (rc < 0 && errno == EMSGSIZE))
                    break;
                if (rc < 0) {
                    /* The leader closes the session of a node it gave up on:
                     * that is this node's abort. */
                    proto_reader_fini (&srd);
                    close (sfd);
                    return genm_give_up (g,
                                         "the leader closed the session (it aborted "
                                         "the generation, or died); undoing this node's "
                                         "part");
                }
                rc = serve_message (g, sfd, env, &state, why, sizeof (why));
                json_object_put (env);
                if (rc < 0) {
                    proto_reader_fini (&srd);
                    close (sfd);
                    return genm_give_up (g, why);
                }
                if (state != MEMBER_OK)
                    break;
            }
            continue;
        }
        if (now >= start_by) {
            while (ncand)
                cand_drop (cand, &ncand, 0);
            return genm_give_up (g,
                                 "the leader never opened its session; undoing this "
                                 "node's part");
        }
        /* Candidates: the first whose message checks out is the leader. */
        for (int k = n - 1; k >= 1; k--) {
            int i = k - 1;
            json_object *env = NULL;
            int rc;

            if (!pfd[k].revents) {
                if (now >= cand[i].deadline)
                    cand_drop (cand, &ncand, i);
                continue;
            }
            rc = proto_reader_read (&cand[i].rd, cand[i].fd, &env);
            if (rc == 0 || (rc < 0 && errno == EMSGSIZE))
                continue;
            if (rc < 0) {
                cand_drop (cand, &ncand, i);
                continue;
            }
            sfd = cand[i].fd;
            srd = cand[i].rd;
            cand[i] = cand[--ncand];
            rc = serve_message (g, sfd, env, &state, why, sizeof (why));
            json_object_put (env);
            if (rc < 0) {
                log_msg (LOG_WARNING, "job %s gen %d: refused a connection: %s", g->job, g->gen,
                         why);
                proto_reader_fini (&srd);
                close (sfd);
                sfd = -1;
                continue;
            }
            /* The session is the leader's: nobody else is heard. */
            while (ncand)
                cand_drop (cand, &ncand, 0);
            close (g->member_lfd);
            g->member_lfd = -1;
            break;
        }
        if (sfd < 0 && pfd[0].revents) {
            int fd = accept4 (g->member_lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof (int));
                /* Full: the oldest waits longest for nothing. */
                if (ncand == MEMBER_MAX_CANDIDATES)
                    cand_drop (cand, &ncand, 0);
                cand[ncand].fd = fd;
                cand[ncand].deadline = now + (double)g->conf->timeout_request;
                proto_reader_init (&cand[ncand].rd, PROTO_DEFAULT_CAP);
                ncand++;
            }
        }
    }
    if (sfd >= 0) {
        proto_reader_fini (&srd);
        close (sfd);
    }
    fan_fini (g);
    peerauth_session_wipe (&g->ses);
    return state == MEMBER_ENDED ? 0 : -1;
}
