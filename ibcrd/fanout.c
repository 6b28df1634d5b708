/* fanout.c - see fanout.h.  "gen-begin" is one MUNGE-authenticated
 * request to each member's daemon (its peer port), carrying a fresh
 * session key for that member; then the leader opens one connection to
 * each member's generation worker and every phase of the generation goes
 * over it, each message under the session's HMAC (peerauth.h): one MUNGE
 * credential per member and generation, not one per request.  What the
 * leader waits on is the set of those connections, in one epoll.
 *
 * Closing a member's session is the abort for it: a member that failed
 * is never waited for again, and its worker, when it reads the end of
 * the connection, undoes its part.
 *
 * Never blocks on one member for longer than the phase's timeout: the
 * connections are made with timeout_connect, requests sent with a send
 * timeout, replies read only when poll says so. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sys/epoll.h>
#include <syslog.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "fanout.h"
#include "peer.h"

/* This process's CPU time: what the fan-out costs the leader, apart from
 * the waiting (timeline.h, the benchmark's per-message cost). */
static double cpu_ms (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void link_close (struct gen_member *m)
{
    if (m->fd >= 0) {
        proto_reader_fini (&m->rd);
        close (m->fd);
    }
    if (m->session)
        peerauth_session_wipe (&m->ses);
    m->fd = -1;
    m->rid = 0;
    m->session = 0;
}

/* The request awaited was answered: a session stays open for the next. */
static void link_done (struct gen_member *m)
{
    if (m->session)
        m->rid = 0;
    else
        link_close (m);
}

void fan_init (struct gen *g)
{
    for (int i = 0; i < g->nmembers; i++) {
        g->members[i].fd = -1;
        g->members[i].session = 0;
        g->members[i].rid = 0;
        g->members[i].lost = 0;
        memset (g->members[i].span, 0, sizeof (g->members[i].span));
    }
    memset (g->span, 0, sizeof (g->span));
    g->fan_cpu_ms = g->begin_cpu_ms = 0;
    g->rid = 0;
    g->epfd = epoll_create1 (EPOLL_CLOEXEC);
}

void fan_fini (struct gen *g)
{
    for (int i = 0; i < g->nmembers; i++)
        link_close (&g->members[i]);
    if (g->epfd >= 0)
        close (g->epfd);
    g->epfd = -1;
}

/* Wait on m's connection (fan_wait); its index is the event's data.
 * Closing the fd takes it out again. */
static void watch (struct gen *g, struct gen_member *m)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)(m - g->members) };

    if (g->epfd >= 0 && epoll_ctl (g->epfd, EPOLL_CTL_ADD, m->fd, &ev) < 0)
        log_err (errno, "job %s gen %d: cannot watch node %s's connection", g->job, g->gen,
                 m->node);
}

/* m failed in phase (died, hung, unreachable, unauthenticated): named in
 * g->err, and left out of every later request of this generation. */
static int member_lost (struct gen *g, struct gen_member *m, enum gen_phase phase,
                        const char *why)
{
    char msg[1400];
    double now = mono_ms_f ();

    timeline_open (m->span, phase, now);
    timeline_close (m->span, phase, now, 0, 1);
    m->lost = 1;
    link_close (m);
    snprintf (msg, sizeof (msg), "node %s: %s", m->node, why);
    return gen_fail (g, phase, msg);
}

/* Send body (its "to" and "rid" set here) to m: on its session when it
 * has one, else on a fresh connection to port in a MUNGE envelope; its
 * reply is then awaited. */
static int post (struct gen *g, struct gen_member *m, int port, enum gen_phase phase,
                 json_object *body)
{
    struct timeval tv = { .tv_sec = g->conf->timeout_request / 1000,
                          .tv_usec = (g->conf->timeout_request % 1000) * 1000 };
    char err[1024], why[1200];
    json_object *env;

    if (proto_set_int (body, "rid", ++g->rid) < 0 || proto_set_str (body, "to", m->node) < 0)
        return gen_fail (g, phase, "out of memory");
    if (m->session) {
        if (!(env = peerauth_seal (&m->ses, body, err, sizeof (err))))
            return gen_fail (g, phase, err);
        if (proto_send (m->fd, env) < 0) {
            snprintf (why, sizeof (why), "cannot send the %s request: %s",
                      phase_name (phase), strerror (errno));
            json_object_put (env);
            return member_lost (g, m, phase, why);
        }
        json_object_put (env);
        m->rid = g->rid;
        m->t_sent = mono_ms_f ();
        timeline_open (m->span, phase, m->t_sent);
        return 0;
    }
    link_close (m);
    /* No credential to be had is this node's fault, not the member's. */
    if (!(env = peerauth_wrap (g->pa, body, err, sizeof (err))))
        return gen_fail (g, phase, err);
    if ((m->fd = peer_connect (m->host, port, (int)g->conf->timeout_connect, err,
                               sizeof (err))) < 0) {
        json_object_put (env);
        return member_lost (g, m, phase, err);
    }
    watch (g, m);
    proto_reader_init (&m->rd, PROTO_DEFAULT_CAP);
    /* A member that stopped reading cannot hold us past the timeout. */
    setsockopt (m->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
    if (proto_send (m->fd, env) < 0) {
        snprintf (why, sizeof (why), "cannot send the %s request to %s:%d: %s",
                  phase_name (phase), m->host, port, strerror (errno));
        json_object_put (env);
        return member_lost (g, m, phase, why);
    }
    json_object_put (env);
    m->rid = g->rid;
    m->t_sent = mono_ms_f ();
    timeline_open (m->span, phase, m->t_sent);
    return 0;
}

/* Read what m sent: 1 and *rep when its reply to the request awaited is
 * complete, 2 when it answered gen-begin "busy" (m->busy), 0 when more is
 * to come, -1 (g->err) when it failed. */
static int take_reply (struct gen *g, struct gen_member *m, enum gen_phase phase,
                       json_object **rep)
{
    char err[1024], why[1200];

    for (;;) {
        json_object *env = NULL, *in = NULL;
        uid_t uid;
        int rc = proto_reader_read (&m->rd, m->fd, &env);

        if (rc == 0 || (rc < 0 && errno == EMSGSIZE))
            return 0;
        if (rc < 0) {
            if (errno == 0)
                return member_lost (g, m, phase, "it closed the connection before answering "
                                    "(its ibcrd or worker died?)");
            snprintf (why, sizeof (why), "its connection failed: %s", strerror (errno));
            return member_lost (g, m, phase, why);
        }
        if (m->session) {
            if (peerauth_open (&m->ses, env, &in, err, sizeof (err)) < 0) {
                snprintf (why, sizeof (why), "its session broke: %s", err);
                json_object_put (env);
                return member_lost (g, m, phase, why);
            }
        } else if (peerauth_unwrap (g->pa, env, &in, &uid, err, sizeof (err)) < 0
                   || (uid != 0 && uid != geteuid ())) {
            if (!in && proto_type (env) && !strcmp (proto_type (env), "error"))
                snprintf (why, sizeof (why), "refused: %s", proto_get_str (env, "message", "?"));
            else if (!in)
                snprintf (why, sizeof (why), "its reply cannot be authenticated (%s): do both "
                          "nodes use the same MUNGE key?", err);
            else
                snprintf (why, sizeof (why), "its reply carries a credential of uid %u, not "
                          "ibcrd's", (unsigned)uid);
            json_object_put (env);
            json_object_put (in);
            return member_lost (g, m, phase, why);
        }
        json_object_put (env);
        /* A late answer to a request we stopped waiting for. */
        if (proto_get_int (in, "rid", (int64_t)m->rid) != (int64_t)m->rid) {
            json_object_put (in);
            continue;
        }
        link_done (m);
        /* A reply without a type is no answer: never a NULL to strcmp. */
        const char *itype = proto_type (in) ? proto_type (in) : "";
        /* Its worker of the last generation has answered "end" but not
         * exited yet: fan_begin asks again. */
        if (phase == PHASE_BEGIN && !strcmp (itype, "error")
            && proto_get_int (in, "errno", 0) == EBUSY) {
            m->busy = 1;
            json_object_put (in);
            return 2;
        }
        json_object *ms = NULL;
        json_object_object_get_ex (in, "ms", &ms);
        timeline_close (m->span, phase, mono_ms_f (), ms ? json_object_get_double (ms) : 0,
                        !strcmp (itype, "error"));
        if (!strcmp (itype, "error")) {
            snprintf (why, sizeof (why), "node %s: %s", m->node,
                      proto_get_str (in, "message", "?"));
            json_object_put (in);
            return gen_fail (g, phase, why);
        }
        *rep = in;
        return 1;
    }
}

static int fan_wait_ (struct gen *g, enum gen_phase phase, json_object **replies,
                      uint64_t timeout_ms);

int fan_wait (struct gen *g, enum gen_phase phase, json_object **replies, uint64_t timeout_ms)
{
    double c0 = cpu_ms ();
    int rc = fan_wait_ (g, phase, replies, timeout_ms);

    g->fan_cpu_ms += cpu_ms () - c0;
    return rc;
}

static int fan_wait_ (struct gen *g, enum gen_phase phase, json_object **replies,
                      uint64_t timeout_ms)
{
    double deadline = mono_ms_f () + (double)timeout_ms;
    int pending = 0;

    for (int i = 0; i < g->nmembers; i++) {
        if (replies)
            replies[i] = NULL;
        pending += g->members[i].rid && g->members[i].fd >= 0;
    }
    if (pending && g->epfd < 0)
        return gen_fail (g, phase, "no epoll instance to wait on the members with");
    /* epoll: a wake-up costs the replies it brings, not the members. */
    while (pending > 0) {
        struct epoll_event ev[64];
        double left = deadline - mono_ms_f ();
        int n;

        if (left <= 0) {
            char why[256];
            int first = 1;
            snprintf (why, sizeof (why), "no reply to %s within %llu ms (hung, or its "
                      "network is down)%s", phase_name (phase), (unsigned long long)timeout_ms,
                      pending > 1 ? "; other nodes were silent too" : "");
            for (int i = 0; i < g->nmembers; i++) {
                struct gen_member *m = &g->members[i];
                if (!m->rid || m->fd < 0)
                    continue;
                if (first)
                    member_lost (g, m, phase, why);
                else {
                    timeline_close (m->span, phase, mono_ms_f (), 0, 1);
                    m->lost = 1;
                    link_close (m);
                }
                first = 0;
            }
            return -1;
        }
        if ((n = epoll_wait (g->epfd, ev, 64, (int)left + 1)) < 0) {
            if (errno == EINTR)
                continue;
            return gen_fail (g, phase, strerror (errno));
        }
        for (int k = 0; k < n; k++) {
            struct gen_member *m = &g->members[ev[k].data.u32];
            json_object *rep = NULL;
            int awaited = m->rid != 0, rc;

            if (m->fd < 0)
                continue;
            /* Not asked anything now: only its end can come, and a member
             * gone during the generation fails it. */
            if (!awaited) {
                char b;
                ssize_t r = recv (m->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                    continue;
                if (r == 1) {
                    /* A late answer: read and dropped (no rid matches). */
                    m->rid = UINT_MAX;
                    rc = take_reply (g, m, phase, &rep);
                    json_object_put (rep);
                    if (m->fd >= 0)
                        m->rid = 0;
                    if (rc >= 0)
                        continue;
                    return -1;
                }
                member_lost (g, m, phase, "it closed the connection (its ibcrd or worker "
                             "died?)");
                return -1;
            }
            if ((rc = take_reply (g, m, phase, &rep)) < 0)
                return -1;
            if (rc == 2)
                pending--;
            if (rc == 1) {
                pending--;
                if (replies)
                    replies[ev[k].data.u32] = rep;
                else
                    json_object_put (rep);
            }
        }
    }
    return 0;
}

void fan_put (struct gen *g, json_object **replies)
{
    for (int i = 0; i < g->nmembers; i++) {
        json_object_put (replies[i]);
        replies[i] = NULL;
    }
}

static int fan_send_ (struct gen *g, enum gen_phase phase, json_object *extra);

int fan_send (struct gen *g, enum gen_phase phase, json_object *extra)
{
    double c0 = cpu_ms ();
    int rc = fan_send_ (g, phase, extra);

    g->fan_cpu_ms += cpu_ms () - c0;
    return rc;
}

static int fan_send_ (struct gen *g, enum gen_phase phase, json_object *extra)
{
    for (int i = 0; i < g->nmembers; i++) {
        struct gen_member *m = &g->members[i];
        json_object *body;
        int rc;

        if (m->lost || !m->wport)
            continue;
        if (!(body = proto_new ("gen-phase")))
            return gen_fail (g, phase, "out of memory");
        proto_set_str (body, "job", g->job);
        proto_set_int (body, "gen", g->gen);
        proto_set_str (body, "phase", phase_name (phase));
        if (extra) {
            json_object_object_foreach (extra, key, val)
                json_object_object_add (body, key, json_object_get (val));
        }
        rc = post (g, m, m->wport, phase, body);
        json_object_put (body);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The session with m's worker: connected, not yet used (the worker takes
 * it as the leader's when its first message checks out). */
static int session_open (struct gen *g, struct gen_member *m, const unsigned char *key)
{
    struct timeval tv = { .tv_sec = g->conf->timeout_request / 1000,
                          .tv_usec = (g->conf->timeout_request % 1000) * 1000 };
    char err[1024];

    if ((m->fd = peer_connect (m->host, m->wport, (int)g->conf->timeout_connect, err,
                               sizeof (err))) < 0)
        return member_lost (g, m, PHASE_BEGIN, err);
    watch (g, m);
    proto_reader_init (&m->rd, PROTO_DEFAULT_CAP);
    setsockopt (m->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
    /* Request, reply: nothing to gain from Nagle's delay. */
    setsockopt (m->fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof (int));
    peerauth_session_init (&m->ses, key, 1);
    m->session = 1;
    return 0;
}

static int fan_begin_ (struct gen *g, uint64_t timeout_ms);

int fan_begin (struct gen *g, uint64_t timeout_ms)
{
    double c0 = cpu_ms (), f0 = g->fan_cpu_ms;
    int rc = fan_begin_ (g, timeout_ms);

    /* fan_wait counted its part already. */
    g->begin_cpu_ms = cpu_ms () - c0;
    g->fan_cpu_ms = f0 + g->begin_cpu_ms;
    return rc;
}

/* gen-begin to m, with its session key (inside the credential: only
 * root's ibcrd on a node with the cluster's MUNGE key can read it). */
static int begin_post (struct gen *g, struct gen_member *m, const unsigned char *key)
{
    char hex[2 * PEERAUTH_KEY_LEN + 1];
    json_object *body = proto_new ("gen-begin");
    int rc;

    if (!body)
        return gen_fail (g, PHASE_BEGIN, "out of memory");
    proto_set_str (body, "job", g->job);
    proto_set_int (body, "gen", g->gen);
    proto_set_str (body, "trigger", g->trigger);
    proto_set_bool (body, "restored", g->kind == GEN_RESTORED);
    proto_set_bool (body, "leave_running", g->leave_running);
    peerauth_key_hex (key, hex);
    proto_set_str (body, "session_key", hex);
    rc = post (g, m, m->port, PHASE_BEGIN, body);
    explicit_bzero (hex, sizeof (hex));
    json_object_put (body);
    return rc;
}

/* m's worker's port and its tasks' manifest entries. */
static void begin_reply (struct gen *g, struct gen_member *m, json_object *rep)
{
    json_object *t;

    (void)g;
    m->wport = (int)proto_get_int (rep, "port", 0);
    if (json_object_object_get_ex (rep, "tasks", &t)) {
        json_object_put (m->tasks);
        m->tasks = json_object_get (t);
    }
}

static int fan_begin_ (struct gen *g, uint64_t timeout_ms)
{
    json_object *rep[g->nmembers + 1];
    unsigned char (*keys)[PEERAUTH_KEY_LEN] = calloc ((size_t)g->nmembers + 1,
                                                      PEERAUTH_KEY_LEN);
    int rc = 0;

    for (int i = 0; i < g->nmembers; i++)
        rep[i] = NULL;
    if (!keys)
        return gen_fail (g, PHASE_BEGIN, "out of memory");
    /* A session key per member and generation. */
    for (int i = 0; i < g->nmembers; i++) {
        if (peerauth_key_new (keys[i]) < 0) {
            free (keys);
            return gen_fail (g, PHASE_BEGIN, "cannot make a session key");
        }
        g->members[i].busy = 1;     /* not asked yet */
    }
    /* A member still busy with the last generation's worker (it answered
     * "end", it has not exited yet) is asked again, until timeout_ms. */
    for (double until = mono_ms_f () + (double)timeout_ms; rc == 0;) {
        int asked = 0;
        for (int i = 0; i < g->nmembers && rc == 0; i++)
            if (g->members[i].busy) {
                g->members[i].busy = 0;
                asked++;
                rc = begin_post (g, &g->members[i], keys[i]);
            }
        if (!asked || rc < 0)
            break;
        rc = fan_wait (g, PHASE_BEGIN, rep, timeout_ms);
        for (int i = 0; i < g->nmembers; i++)
            if (rep[i]) {
                begin_reply (g, &g->members[i], rep[i]);
                json_object_put (rep[i]);
                rep[i] = NULL;
            }
        int busy = 0;
        for (int i = 0; i < g->nmembers; i++)
            busy += g->members[i].busy;
        if (rc < 0 || !busy)
            break;
        if (mono_ms_f () >= until) {
            for (int i = 0; i < g->nmembers; i++)
                if (g->members[i].busy) {
                    char why[256];
                    snprintf (why, sizeof (why), "still busy with another generation after "
                              "%llu ms", (unsigned long long)timeout_ms);
                    member_lost (g, &g->members[i], PHASE_BEGIN, why);
                    break;
                }
            rc = -1;
            break;
        }
        usleep (20000);
    }
    /* Those that answered before one failed have a worker the abort
     * must reach: they get their session too. */
    for (int i = 0; i < g->nmembers; i++) {
        struct gen_member *m = &g->members[i];
        m->busy = 0;
        if (m->wport && !m->lost && m->fd < 0 && session_open (g, m, keys[i]) < 0)
            rc = -1;
    }
    explicit_bzero (keys, (size_t)(g->nmembers + 1) * PEERAUTH_KEY_LEN);
    free (keys);
    return rc;
}
