/* gen_member.c - a member node's worker for one generation: it owns this
 * node's tasks' control connections and serves the leader's phase
 * requests ("gen-phase" {phase}) on its own TCP port, each one MUNGE
 * authenticated like every peer message (peerauth.h).
 *
 * It never decides to commit or abort by itself, with one exception: a
 * leader silent for longer than any phase may take (it died, or lost the
 * network) makes it undo its part, so that the job is never left frozen
 * at the gate waiting for a leader that will not come back.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/store.h"
#include "gen.h"

enum { MEMBER_OK, MEMBER_ENDED, MEMBER_ABORTED };

/* One phase on this node; the reply, and *state when the generation ends. */
static json_object *serve_phase (struct gen *g, json_object *m, int *state)
{
    const char *phase = proto_get_str (m, "phase", "");
    json_object *o = NULL, *arr;
    double t0 = gen_now_ms ();
    int rc = 0;

    if (strcmp (proto_get_str (m, "job", ""), g->job) || proto_get_int (m, "gen", -1) != g->gen)
        return proto_error (phase, EINVAL, "node %s: this worker serves job %s generation %d",
                            g->conf->node, g->job, g->gen);
    if (!(o = proto_new ("ok")))
        return NULL;
    proto_set_str (o, "request", phase);
    if (!strcmp (phase, "quiesce"))
        rc = genl_quiesce (g);
    else if (!strcmp (phase, "drain")) {
        arr = json_object_new_array ();
        rc = genl_drain_round (g, (int)proto_get_int (m, "round", 0), arr);
        json_object_object_add (o, "reports", arr);
    } else if (!strcmp (phase, "release"))
        rc = genl_release (g);
    else if (!strcmp (phase, "dump"))
        rc = genl_dump (g) < 0 || gen_daemon_gone (g, "dump") ? -1 : 0;
    else if (!strcmp (phase, "rebuild")) {
        arr = json_object_new_array ();
        rc = genl_rebuild_ids (g, arr);
        json_object_object_add (o, "ids", arr);
    } else if (!strcmp (phase, "connect")) {
        json_object *procs = NULL;
        json_object_object_get_ex (m, "procs", &procs);
        rc = genl_connect (g, procs);
    } else if (!strcmp (phase, "resume"))
        rc = genl_resume (g);
    else if (!strcmp (phase, "copy")) {
        rc = genl_copy (g) < 0 || gen_daemon_gone (g, "copy to storage") ? -1 : 0;
        proto_set_int (o, "bytes", (int64_t)g->bytes);
    } else if (!strcmp (phase, "end")) {
        genl_cleanup (g, 1);
        *state = MEMBER_ENDED;
    } else if (!strcmp (phase, "abort")) {
        genl_undo (g);
        genl_cleanup (g, 0);
        *state = MEMBER_ABORTED;
    } else
        rc = gen_fail (g, phase, "unknown phase");
    if (rc < 0) {
        json_object_put (o);
        log_msg (LOG_ERR, "job %s gen %d: %s", g->job, g->gen, g->err);
        return proto_error (phase, EIO, "%s", g->err);  /* the leader names the node */
    }
    /* This node's own time in the phase, for the leader's timeline. */
    json_object_object_add (o, "ms", json_object_new_double (gen_now_ms () - t0));
    return o;
}

int gen_member_serve (struct gen *g)
{
    /* The longest a leader may stay silent: any one phase's timeout. */
    uint64_t idle = g->conf->timeout_dump > g->conf->timeout_commit ? g->conf->timeout_dump
                    : g->conf->timeout_commit;
    int state = MEMBER_OK;

    snprintf (g->staging, sizeof (g->staging), "%s/%s/gen-%d", g->conf->staging, g->job,
              g->gen);
    store_rmtree (g->staging);
    log_msg (LOG_INFO, "job %s gen %d: member worker for %d task%s", g->job, g->gen,
             g->ntasks, g->ntasks == 1 ? "" : "s");
    while (state == MEMBER_OK) {
        struct pollfd pfd = { .fd = g->member_lfd, .events = POLLIN };
        json_object *env = NULL, *m = NULL, *rep, *wrapped;
        char err[512];
        uid_t uid;
        int fd;

        if (poll (&pfd, 1, (int)idle) <= 0) {
            gen_fail (g, "member", "the leader went silent; undoing this node's part");
            log_msg (LOG_ERR, "job %s gen %d: %s", g->job, g->gen, g->err);
            genl_undo (g);
            genl_cleanup (g, 0);
            return -1;
        }
        if ((fd = accept4 (g->member_lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            continue;
        if (proto_recv_timeout (fd, 0, (int)g->conf->timeout_request, &env) < 0 || !env) {
            close (fd);
            continue;
        }
        if (peerauth_unwrap (g->pa, env, &m, &uid, err, sizeof (err)) < 0
            || (uid != 0 && uid != geteuid ())) {
            log_msg (LOG_WARNING, "job %s gen %d: refused a phase request: %s", g->job,
                     g->gen, m ? "credential of another uid" : err);
            rep = proto_error ("gen-phase", EACCES, "refused: %s", m ? "not ibcrd's uid" : err);
        } else if (strcmp (proto_get_str (m, "to", ""), g->conf->node))
            rep = proto_error ("gen-phase", EACCES, "message for another node refused");
        else
            rep = serve_phase (g, m, &state);
        /* Which request this answers: the leader drops late answers. */
        if (rep && m)
            proto_set_int (rep, "rid", proto_get_int (m, "rid", 0));
        if (rep && (wrapped = peerauth_wrap (g->pa, rep, err, sizeof (err)))) {
            proto_send (fd, wrapped);
            json_object_put (wrapped);
        }
        json_object_put (rep);
        json_object_put (m);
        json_object_put (env);
        close (fd);
    }
    return state == MEMBER_ENDED ? 0 : -1;
}
