/* server_int.h - what server.c (the local socket) and server_gen.c (the
 * requests that start generations, and the peer requests about jobs)
 * share: the client and server structures.  Private to those two files. */
#ifndef IBCRD_SERVER_INT_H
#define IBCRD_SERVER_INT_H

#include <json-c/json.h>

#include "common/conf.h"
#include "common/ident.h"
#include "common/peerauth.h"
#include "common/proto.h"
#include "common/clock.h"
#include "jobs.h"

#define SERVER_MAX_CLIENTS 1024

/* A client's identity (uid, gid, pid) is whom it acts for: SO_PEERCRED
 * at accept, except on a connection made for a restored task (ctl-attach),
 * which from then on acts for that task's user, whoever connected it, and
 * may only be that task's libibcr control channel ('attached'). */
struct client {
    int fd;
    int id;
    uid_t uid;              /* (uid_t)-1: an attached one, not bound yet */
    gid_t gid;
    pid_t pid;
    int attached;           /* ctl-attach made it a control channel only */
    uid_t attach_by;        /* SO_PEERCRED uid of who attached it */
    pid_t lent;             /* a generation's worker owns this connection */
    int handed;             /* a worker answers it: close our copy now */
    int attach_rank;        /* ctl-attach: the restored task's rank, or -1 */
    char attach_job[IDENT_MAX + 1];
    char resume_job[IDENT_MAX + 1]; /* waits for resume-restored of this job */
    long resume_deadline;   /* CLOCK_MONOTONIC ms: timeout_restore ends the wait */
    struct proto_reader rd;
    struct client *next;
};

struct server {
    struct conf *conf;
    struct jobs *jobs;
    int lfd;
    long accept_paused_until;   /* CLOCK_MONOTONIC ms: EMFILE, listener rests */
    long accept_log_at;         /* last EMFILE / limit log line (ms) */
    int accept_log_quiet;       /* lines not logged since */
    int next_id;
    int nclients;
    int peer_port;
    struct peerauth *pa;
    time_t started;
    struct client *clients;
};

/* Returned by a handler that must not answer (libibcr's hello: libibcr
 * only answers requests, it does not read replies). */
extern char server_no_reply_marker;     /* one object for both files */
#define NO_REPLY ((json_object *)(void *)&server_no_reply_marker)

typedef json_object *(*handler_f) (struct server *s, struct client *c, json_object *req);
void client_close (struct server *s, struct client *c);
json_object *ok_reply (const char *request);

/* Handlers of server_gen.c, in server.c's table. */
json_object *h_checkpoint (struct server *s, struct client *c, json_object *req);
json_object *h_ctl_attach (struct server *s, struct client *c, json_object *req);
json_object *h_resume_restored (struct server *s, struct client *c, json_object *req);

/* Start the rebuild of a restarted job once every rank is back and
 * someone asked (server_gen.c); called whenever a rank registers. */
void try_resume_restored (struct server *s, struct job *job);

/* Read what job's worker reported (its phase, its end) into job; the
 * channel is closed at its end (server_gen.c). */
void server_worker_report (struct server *s, struct job *job);

/* A member node tells the leader it holds a rank (server_gen.c). */
void join_leader (struct server *s, struct job *job, int rank);

#endif
