/* member.c - node membership (member.h): a member node joins its
 * job's leader ("join"), the leader records it, and the peer requests
 * about jobs are routed ("join", "gen-begin", "gen-abort"). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/log.h"
#include "common/proto.h"
#include "member.h"
#include "peer.h"
#include "request.h"
#include "schedule.h"

void member_registered (struct server *s, struct job *job, json_object *req)
{
    if (job->leader[0] && !jobs_task (job, 0))
        member_join_leader (s, job, (int)proto_get_int (req, "rank", -1));
}
/* A member node tells the job's leader (rank 0's ibcrd) that it holds a
 * rank, so that the leader's generations include it.  In a short-lived
 * child, retried while the leader has not registered rank 0 yet, so the
 * ranks of a job may start in any order. */
void member_join_leader (struct server *s, struct job *job, int rank)
{
    char node[IDENT_MAX + 1], host[256], err[1024];
    int port = job->leader_port ? job->leader_port : 7195;
    const char *at = strchr (job->leader, '@');
    pid_t pid;

    if (!s->pa) {
        log_msg (LOG_ERR,
                 "job %s: rank %d cannot join leader %s: this ibcrd has no peer "
                 "listener (set peer_port)",
                 job->id, rank, job->leader);
        return;
    }
    if (at) {
        snprintf (node, sizeof (node), "%.*s", (int)(at - job->leader), job->leader);
        snprintf (host, sizeof (host), "%s", at + 1);
    } else {
        snprintf (node, sizeof (node), "%.*s", IDENT_MAX, job->leader);
        snprintf (host, sizeof (host), "%s", job->leader);
    }
    if ((pid = fork ()) != 0) {
        if (pid < 0)
            log_err (errno, "job %s: cannot fork to join the leader", job->id);
        return;
    }
    fds_close_except (NULL, 0);
    for (int attempt = 0; attempt < 300; attempt++) {
        json_object *m = proto_new ("join"), *rep = NULL;
        proto_set_str (m, "from", s->conf->node);
        proto_set_str (m, "job", job->id);
        proto_set_int (m, "rank", rank);
        proto_set_int (m, "uid", job->uid);
        proto_set_int (m, "port", s->peer_port);
        int rc = peer_request (s->pa, host, port, node, m, (int)s->conf->timeout_request, &rep, err,
                               sizeof (err));
        json_object_put (m);
        if (rc == 0 && !strcmp (proto_type (rep), "ok")) {
            log_msg (LOG_INFO, "job %s: rank %d joined leader %s (%s:%d)", job->id, rank, node,
                     host, port);
            _exit (0);
        }
        if (rc == 0) {
            snprintf (err, sizeof (err), "%s", proto_get_str (rep, "message", "?"));
            if (proto_get_int (rep, "errno", 0) != ENOENT)
                attempt = 1000; /* refused for good */
        }
        json_object_put (rep);
        usleep (200000);
    }
    log_msg (LOG_ERR,
             "job %s: rank %d could not join leader %s (%s:%d): %s; its generations "
             "will not include this node",
             job->id, rank, node, host, port, err);
    _exit (1);
}

/* Peer "join" {job, rank, uid, port, from}: a member node holds a rank
 * of a job led here. */
static json_object *p_join (struct server *s, json_object *m, const char *addr)
{
    const char *id = proto_get_str (m, "job", ""), *from = proto_get_str (m, "from", "");
    int64_t uid = proto_get_int (m, "uid", -1);
    struct job *job = ident_ok (id) && uid >= 0 ? jobs_find_owned (s->jobs, id, (uid_t)uid) : NULL;
    struct job_member *mb = NULL;
    json_object *o;

    if (!job || !jobs_task (job, 0))
        return proto_error ("join", ENOENT,
                            "rank 0 of job %s is not registered on node %s "
                            "(yet)",
                            id, s->conf->node);
    if ((int64_t)job->uid != proto_get_int (m, "uid", -1))
        return proto_error ("join", EPERM, "job %s belongs to another user on node %s", id,
                            s->conf->node);
    if (!ident_ok (from))
        return proto_error ("join", EINVAL, "\"from\" is not a node name");
    for (int i = 0; i < job->nmembers; i++)
        if (!strcmp (job->members[i].node, from))
            mb = &job->members[i];
    if (!mb) {
        if (job->nmembers + 1 >= s->conf->max_nodes)
            return proto_error ("join", ENOSPC,
                                "job %s has too many nodes: node %s allows %d "
                                "(max_nodes in ibcrd.conf)",
                                id, s->conf->node, s->conf->max_nodes);
        if (job->nmembers == job->members_cap) {
            int cap = job->members_cap ? 2 * job->members_cap : 1;
            struct job_member *more = realloc (job->members, (size_t)cap * sizeof (*more));
            if (!more)
                return proto_error ("join", ENOMEM, "node %s is out of memory", s->conf->node);
            job->members = more;
            job->members_cap = cap;
        }
        mb = &job->members[job->nmembers++];
        memset (mb, 0, sizeof (*mb));
        snprintf (mb->node, sizeof (mb->node), "%s", from);
    }
    /* The address the join came from: identity is MUNGE's, this is only
     * where to reach that node's ibcrd. */
    snprintf (mb->host, sizeof (mb->host), "%.*s", (int)strcspn (addr, ":"), addr);
    mb->port = (int)proto_get_int (m, "port", 7195);
    int rank = (int)proto_get_int (m, "rank", -1), known = 0;
    for (int i = 0; i < mb->nranks; i++)
        known |= mb->ranks[i] == rank;
    if (!known && mb->nranks < MEMBER_MAX_RANKS)
        mb->ranks[mb->nranks++] = rank;
    mb->joins++;
    log_msg (LOG_INFO, "job %s: node %s (%s:%d) joined with rank %lld", id, from, mb->host,
             mb->port, (long long)proto_get_int (m, "rank", -1));
    sched_try_resume (s, job);
    if ((o = proto_new ("ok")))
        proto_set_str (o, "request", "join");
    return o;
}

/* Peer "gen-begin" {job, gen, trigger, leave_running}: the leader starts a
 * generation; a worker here will serve its phases. */
static json_object *p_gen_begin (struct server *s, json_object *m)
{
    const char *id = proto_get_str (m, "job", "");
    struct job *job = ident_ok (id) ? jobs_find (s->jobs, id, 0) : NULL;

    if (!job)
        return proto_error ("gen-begin", ENOENT, "job %s has no task on node %s", id,
                            s->conf->node);
    return sched_member_begin (s, m, job);
}

json_object *member_peer_request (void *arg, json_object *m, const char *addr)
{
    struct server *s = arg;
    const char *type = proto_type (m);

    if (!strcmp (type, "join"))
        return p_join (s, m, addr);
    if (!strcmp (type, "gen-begin"))
        return p_gen_begin (s, m);
    if (!strcmp (type, "gen-abort")) {
        const char *id = proto_get_str (m, "job", "");
        struct job *job = ident_ok (id) ? jobs_find (s->jobs, id, 0) : NULL;
        if (!job)
            return proto_error ("gen-abort", ENOENT, "job %s has no task on node %s", id,
                                s->conf->node);
        return sched_member_abort (s, m, job);
    }
    return NULL;
}
