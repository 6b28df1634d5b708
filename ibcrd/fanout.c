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
#include "gen_int.h"
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

/* The shape of the tree below a node whose descendants are
 * members[lo, hi): up to k children, each the first of a contiguous run
 * of members whose rest are its own descendants, the runs as even as can
 * be.  Marks the children when top; the node's height. */
static int shape (struct gen *g, int lo, int hi, int top, int parent)
{
    int n = hi - lo, k = g->fanout > 0 ? g->fanout : 1, c = n < k ? n : k, h = 0;

    for (int j = 0, at = lo; j < c; j++) {
        int size = n / k + (j < n % k);
        struct gen_member *m = &g->members[at];

        m->child = top;
        m->parent = parent;
        m->sub_lo = at + 1;
        m->sub_hi = at + size;
        m->height = shape (g, at + 1, at + size, 0, at);
        if (m->height + 1 > h)
            h = m->height + 1;
        at += size;
    }
    return h;
}

void fan_shape (struct gen *g)
{
    g->height = shape (g, 0, g->nmembers, 1, -1);
}

/* How much longer a node waits for a child whose subtree is one level
 * deeper: time for the child to name its own lost child first. */
static double hop_ms (const struct gen *g, enum gen_phase phase)
{
    if (phase == PHASE_BEGIN)
        return 2.0 * (double)g->conf->timeout_request + 2.0 * (double)g->conf->timeout_connect;
    return (double)g->conf->timeout_connect;
}

double fan_margin_ms (const struct gen *g, enum gen_phase phase)
{
    return g->height > 1 ? (g->height - 1) * hop_ms (g, phase) : 0;
}

static void touch (struct gen_member *m, enum gen_phase phase)
{
    m->touched |= 1u << phase;
}

void fan_init (struct gen *g)
{
    for (int i = 0; i < g->nmembers; i++) {
        g->members[i].fd = -1;
        g->members[i].session = 0;
        g->members[i].rid = 0;
        g->members[i].lost = 0;
        g->members[i].touched = 0;
        memset (g->members[i].span, 0, sizeof (g->members[i].span));
    }
    memset (g->span, 0, sizeof (g->span));
    g->fan_cpu_ms = g->begin_cpu_ms = 0;
    g->rid = 0;
    g->epfd = epoll_create1 (EPOLL_CLOEXEC);
    /* A member's daemon may tell it to abort (the node above it is lost). */
    if (g->member && g->report_fd >= 0 && g->epfd >= 0) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = UINT32_MAX };
        epoll_ctl (g->epfd, EPOLL_CTL_ADD, g->report_fd, &ev);
    }
}

/* Read what the daemon wrote on the report channel: "A" is abort. */
static void report_drain (struct gen *g)
{
    char b[64];
    ssize_t r;

    if (!g->member || g->report_fd < 0 || g->abort_asked < 0)
        return;
    while ((r = recv (g->report_fd, b, sizeof (b), MSG_DONTWAIT)) > 0)
        if (memchr (b, 'A', (size_t)r))
            g->abort_asked = 1;
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        /* The daemon is gone: nobody will tell us; stop listening. */
        if (!g->abort_asked)
            g->abort_asked = -1;
        if (g->epfd >= 0)
            epoll_ctl (g->epfd, EPOLL_CTL_DEL, g->report_fd, NULL);
    }
}

int fan_abort_heard (struct gen *g)
{
    if (!g->abort_asked)
        report_drain (g);
    return g->abort_asked > 0;
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

/* m is lost in phase: so is every node below it, reached through it
 * only (their own workers undo their part when m's worker, or their
 * session with it, ends). */
static void lost_mark (struct gen_member *m, enum gen_phase phase, double now)
{
    timeline_open (m->span, phase, now);
    timeline_close (m->span, phase, now, 0, 1);
    touch (m, phase);
    m->lost = 1;
    link_close (m);
}

static void lost_below (struct gen *g, struct gen_member *m, enum gen_phase phase, double now)
{
    for (int i = m->sub_lo; i < m->sub_hi; i++)
        if (!g->members[i].lost)
            lost_mark (&g->members[i], phase, now);
}

/* m failed in phase (died, hung, unreachable, unauthenticated): named in
 * g->err, and left out of every later request of this generation. */
static int member_lost (struct gen *g, struct gen_member *m, enum gen_phase phase, const char *why)
{
    char msg[1400];
    double now = mono_ms_f ();

    lost_mark (m, phase, now);
    lost_below (g, m, phase, now);
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
            snprintf (why, sizeof (why), "cannot send the %s request: %s", phase_name (phase),
                      strerror (errno));
            json_object_put (env);
            return member_lost (g, m, phase, why);
        }
        json_object_put (env);
        m->rid = g->rid;
        m->t_sent = mono_ms_f ();
        timeline_open (m->span, phase, m->t_sent);
        touch (m, phase);
        return 0;
    }
    link_close (m);
    /* No credential to be had is this node's fault, not the member's. */
    if (!(env = peerauth_wrap (g->pa, body, err, sizeof (err))))
        return gen_fail (g, phase, err);
    if ((m->fd = peer_connect (m->host, port, (int)g->conf->timeout_connect, err, sizeof (err)))
        < 0) {
        json_object_put (env);
        return member_lost (g, m, phase, err);
    }
    watch (g, m);
    proto_reader_init (&m->rd, PROTO_DEFAULT_CAP);
    /* A member that stopped reading cannot hold us past the timeout. */
    setsockopt (m->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
    if (proto_send (m->fd, env) < 0) {
        snprintf (why, sizeof (why), "cannot send the %s request to %s:%d: %s", phase_name (phase),
                  m->host, port, strerror (errno));
        json_object_put (env);
        return member_lost (g, m, phase, why);
    }
    json_object_put (env);
    m->rid = g->rid;
    m->t_sent = mono_ms_f ();
    timeline_open (m->span, phase, m->t_sent);
    touch (m, phase);
    return 0;
}

/* --- what a child tells of the nodes below it ------------------------ */

json_object *fan_tl_json (const struct gen *g, double base)
{
    json_object *a = json_object_new_array ();

    for (int i = 0; a && i < g->nmembers; i++) {
        const struct gen_member *m = &g->members[i];
        for (int p = 0; p < PHASE_COUNT; p++) {
            const struct gen_span *s = &m->span[p];
            json_object *e;
            if (!(m->touched & (1u << p)) || !(e = json_object_new_array ()))
                continue;
            json_object_array_add (e, json_object_new_int (i));
            json_object_array_add (e, json_object_new_string (phase_name (p)));
            json_object_array_add (e, json_object_new_double (s->start - base));
            json_object_array_add (e, s->open ? NULL : json_object_new_double (s->end - base));
            json_object_array_add (e, json_object_new_double (s->node_ms));
            json_object_array_add (e, json_object_new_int (s->n));
            json_object_array_add (e, json_object_new_boolean (s->failed));
            json_object_array_add (a, e);
        }
    }
    return a;
}

void fan_untouch (struct gen *g)
{
    for (int i = 0; i < g->nmembers; i++)
        g->members[i].touched = 0;
}

/* Child c's "tl" (fan_tl_json, relative to when it got the request we
 * sent at c->t_sent): the spans of the nodes below it, taken as they are
 * (they are whole: a drain's rounds are summed below already).  Each
 * answer brings those that changed since the last (gen_member.c). */
static void tl_apply (struct gen *g, struct gen_member *c, json_object *tl)
{
    size_t n = tl && json_object_is_type (tl, json_type_array) ? json_object_array_length (tl) : 0;

    for (size_t k = 0; k < n; k++) {
        json_object *e = json_object_array_get_idx (tl, k);
        if (!json_object_is_type (e, json_type_array) || json_object_array_length (e) != 7)
            continue;
        int i = json_object_get_int (json_object_array_get_idx (e, 0));
        int p = phase_from_name (json_object_get_string (json_object_array_get_idx (e, 1)));
        if (i < 0 || i >= c->sub_hi - c->sub_lo || p < 0)
            continue;
        struct gen_member *d = &g->members[c->sub_lo + i];
        struct gen_span *s = &d->span[p];
        json_object *end = json_object_array_get_idx (e, 3);
        s->start = c->t_sent + json_object_get_double (json_object_array_get_idx (e, 2));
        s->open = !end;
        if (end)
            s->end = c->t_sent + json_object_get_double (end);
        s->node_ms = json_object_get_double (json_object_array_get_idx (e, 4));
        s->n = json_object_get_int (json_object_array_get_idx (e, 5));
        s->failed = json_object_get_boolean (json_object_array_get_idx (e, 6));
        touch (d, (enum gen_phase)p);
    }
}

/* A node's own restore (restart): [start, end] ms before its answer. */
static void restore_apply (struct gen_member *m, json_object *rep, double now)
{
    json_object *r, *a0, *a1;

    if (!json_object_object_get_ex (rep, "restore", &r)
        || !json_object_object_get_ex (r, "start_ago_ms", &a0)
        || !json_object_object_get_ex (r, "end_ago_ms", &a1))
        return;
    struct gen_span *s = &m->span[PHASE_RESTORE];
    double t0 = now - json_object_get_double (a0), t1 = now - json_object_get_double (a1);
    if (t1 < t0 || t1 > now)
        return;
    s->start = t0;
    s->end = t1;
    s->node_ms = t1 - t0;
    s->n = 1;
    s->open = s->failed = 0;
    m->restore_t0 = t0;
    m->restore_t1 = t1;
    touch (m, PHASE_RESTORE);
}

/* Read what m sent: 1 and *rep when its reply to the request awaited is
 * complete, 2 when it answered gen-begin "busy" (m->busy), 0 when more is
 * to come, -1 (g->err) when it failed. */
static int take_reply (struct gen *g, struct gen_member *m, enum gen_phase phase, json_object **rep)
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
                return member_lost (g, m, phase,
                                    "it closed the connection before answering "
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
                snprintf (why, sizeof (why),
                          "its reply cannot be authenticated (%s): do both "
                          "nodes use the same MUNGE key?",
                          err);
            else
                snprintf (why, sizeof (why),
                          "its reply carries a credential of uid %u, not "
                          "ibcrd's",
                          (unsigned)uid);
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
        json_object *tl = NULL;
        if (json_object_object_get_ex (in, "tl", &tl))
            tl_apply (g, m, tl);
        /* Its worker of the last generation has answered "end" but not
         * exited yet: fan_begin asks again. */
        if (phase == PHASE_BEGIN && !m->session && !strcmp (itype, "error")
            && proto_get_int (in, "errno", 0) == EBUSY) {
            m->busy = 1;
            json_object_put (in);
            return 2;
        }
        json_object *ms = NULL;
        /* Its error is of a node below it, which it names. */
        int relayed = proto_get_bool (in, "relayed", 0);
        json_object_object_get_ex (in, "ms", &ms);
        timeline_close (m->span, phase, mono_ms_f (), ms ? json_object_get_double (ms) : 0,
                        !strcmp (itype, "error") && !relayed);
        touch (m, phase);
        if (!strcmp (itype, "error")) {
            const char *msg = proto_get_str (in, "message", "?"), *colon = strstr (msg, ": ");
            char pre[32];
            if (relayed && colon && colon - msg < (ptrdiff_t)sizeof (pre)) {
                /* "PHASE: node X: why": gen_fail puts the phase back. */
                snprintf (pre, sizeof (pre), "%.*s", (int)(colon - msg), msg);
                if (phase_from_name (pre) >= 0)
                    msg = colon + 2;
            }
            if (relayed)
                snprintf (why, sizeof (why), "%s", msg);
            else
                snprintf (why, sizeof (why), "node %s: %s", m->node, msg);
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
    /* From when the requests went: a node's own part meanwhile does not
     * lengthen the members' time; a child with levels below it gets time
     * to name a lost node of its own first. */
    double deadline = g->t_fan + (double)timeout_ms + fan_margin_ms (g, phase);
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

        /* Past the deadline: what came meanwhile still counts. */
        if (left <= 0 && (n = epoll_wait (g->epfd, ev, 64, 0)) > 0)
            goto got;
        if (left <= 0) {
            char why[256];
            int first = 1;
            snprintf (why, sizeof (why),
                      "no reply to %s within %llu ms (hung, or its "
                      "network is down)%s",
                      phase_name (phase), (unsigned long long)timeout_ms,
                      pending > 1 ? "; other nodes were silent too" : "");
            for (int i = 0; i < g->nmembers; i++) {
                struct gen_member *m = &g->members[i];
                if (!m->rid || m->fd < 0)
                    continue;
                if (first)
                    member_lost (g, m, phase, why);
                else {
                    lost_mark (m, phase, mono_ms_f ());
                    lost_below (g, m, phase, mono_ms_f ());
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
    got:
        for (int k = 0; k < n; k++) {
            if (ev[k].data.u32 == UINT32_MAX) {
                int before = g->abort_asked;
                report_drain (g);
                if (before == 0 && g->abort_asked > 0)
                    return gen_fail (g, phase,
                                     "the leader aborted the generation (it lost "
                                     "the node above this one)");
                continue;
            }
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
                /* It answered its end or abort: its worker ends now. */
                if (phase == PHASE_END || phase == PHASE_ABORT) {
                    link_close (m);
                    continue;
                }
                member_lost (g, m, phase,
                             "it closed the connection (its ibcrd or worker "
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
    g->t_fan = mono_ms_f ();
    for (int i = 0; i < g->nmembers; i++) {
        struct gen_member *m = &g->members[i];
        json_object *body;
        int rc;

        if (!m->child || m->lost || !m->wport)
            continue;
        /* begin goes on only to the children that lead nodes of their own */
        if (phase == PHASE_BEGIN && m->sub_lo >= m->sub_hi)
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

    if ((m->fd = peer_connect (m->host, m->wport, (int)g->conf->timeout_connect, err, sizeof (err)))
        < 0)
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
    /* The nodes it leads, and how: the same shape below it. */
    proto_set_int (body, "fanout", g->fanout);
    proto_set_int (body, "levels", g->levels);
    if (m->sub_hi > m->sub_lo) {
        json_object *sub = json_object_new_array ();
        for (int i = m->sub_lo; sub && i < m->sub_hi; i++) {
            json_object *d = json_object_new_object ();
            json_object_object_add (d, "node", json_object_new_string (g->members[i].node));
            json_object_object_add (d, "host", json_object_new_string (g->members[i].host));
            json_object_object_add (d, "port", json_object_new_int (g->members[i].port));
            json_object_array_add (sub, d);
        }
        json_object_object_add (body, "subtree", sub);
    }
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
    restore_apply (m, rep, mono_ms_f ());
}

/* Append the entries of rep's "tasks" (a child's subtree's) to m's. */
static void tasks_append (struct gen_member *m, json_object *rep)
{
    json_object *t;

    if (!rep || !json_object_object_get_ex (rep, "tasks", &t)
        || !json_object_is_type (t, json_type_array))
        return;
    if (!m->tasks)
        m->tasks = json_object_new_array ();
    for (size_t k = 0; m->tasks && k < json_object_array_length (t); k++)
        json_object_array_add (m->tasks, json_object_get (json_object_array_get_idx (t, k)));
}

static int fan_begin_ (struct gen *g, uint64_t timeout_ms)
{
    json_object *rep[g->nmembers + 1];
    unsigned char (*keys)[PEERAUTH_KEY_LEN] = calloc ((size_t)g->nmembers + 1, PEERAUTH_KEY_LEN);
    int rc = 0;

    for (int i = 0; i < g->nmembers; i++)
        rep[i] = NULL;
    if (!keys)
        return gen_fail (g, PHASE_BEGIN, "out of memory");
    /* A session key per child and generation. */
    for (int i = 0; i < g->nmembers; i++) {
        if (!g->members[i].child)
            continue;
        if (peerauth_key_new (keys[i]) < 0) {
            free (keys);
            return gen_fail (g, PHASE_BEGIN, "cannot make a session key");
        }
        g->members[i].busy = 1; /* not asked yet */
    }
    /* A member still busy with the last generation's worker (it answered
     * "end", it has not exited yet) is asked again, until timeout_ms. */
    for (double until = mono_ms_f () + (double)timeout_ms; rc == 0;) {
        int asked = 0;
        g->t_fan = mono_ms_f ();
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
                    snprintf (why, sizeof (why),
                              "still busy with another generation after "
                              "%llu ms",
                              (unsigned long long)timeout_ms);
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
        if (m->child && m->wport && !m->lost && m->fd < 0 && session_open (g, m, keys[i]) < 0)
            rc = -1;
    }
    explicit_bzero (keys, (size_t)(g->nmembers + 1) * PEERAUTH_KEY_LEN);
    free (keys);
    /* Then the children that lead nodes of their own begin with them, at
     * once; their subtrees' tasks come back with their answers. */
    if (rc == 0 && g->height > 1) {
        int asked = 0;
        for (int i = 0; i < g->nmembers; i++)
            asked += g->members[i].child && g->members[i].sub_hi > g->members[i].sub_lo;
        if (asked && (rc = fan_send (g, PHASE_BEGIN, NULL)) == 0)
            rc = fan_wait (g, PHASE_BEGIN, rep, timeout_ms);
        for (int i = 0; i < g->nmembers; i++)
            if (rep[i]) {
                tasks_append (&g->members[i], rep[i]);
                json_object_put (rep[i]);
                rep[i] = NULL;
            }
    }
    return rc;
}

/* "gen-abort" to m's daemon: the node above m is lost, so no abort will
 * reach its worker through the tree. */
static int abort_post (struct gen *g, struct gen_member *m)
{
    json_object *body = proto_new ("gen-abort");
    int rc;

    if (!body)
        return gen_fail (g, PHASE_ABORT, "out of memory");
    proto_set_str (body, "job", g->job);
    proto_set_int (body, "gen", g->gen);
    rc = post (g, m, m->port, PHASE_ABORT, body);
    json_object_put (body);
    return rc;
}

void fan_abort_orphans (struct gen *g)
{
    int asked = 0;

    g->t_fan = mono_ms_f ();
    /* The children answered their abort: their workers end now, which
     * is no failure to wait on. */
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i].child && !g->members[i].rid)
            link_close (&g->members[i]);
    for (int i = 0; i < g->nmembers; i++) {
        struct gen_member *m = &g->members[i];
        /* lost, not for its own fault: its parent was */
        if (m->child || !m->lost || !g->members[m->parent].lost)
            continue;
        m->lost = 0;
        if (abort_post (g, m) == 0)
            asked++;
        m->lost = 1;
    }
    if (asked && fan_wait (g, PHASE_ABORT, NULL, g->conf->timeout_request) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: abort: %s", g->job, g->gen, g->err);
}
