/* request.h - the request layer's interface for the modules that handle
 * requests of the local socket (schedule.c, member.c, tasks.c,
 * slurm_hook.c): the client and server structures, and how a module adds
 * request types and hears of registrations.  server.c owns both
 * structures; a handler reads them and answers through its return value
 * (or NO_REPLY and a later proto_send on c->fd).  server.c calls no
 * module above it: what it dispatches to was added with
 * server_add_handler and server_on_register at start-up (ibcrd.c). */
#ifndef IBCRD_REQUEST_H
#define IBCRD_REQUEST_H

#include <json-c/json.h>

#include "common/conf.h"
#include "common/ident.h"
#include "common/peerauth.h"
#include "common/proto.h"
#include "common/clock.h"
#include "jobs.h"

#define SERVER_MAX_CLIENTS 1024
#define SERVER_MAX_HANDLERS 32
#define SERVER_MAX_ON_REGISTER 4
#define SERVER_MAX_INFO 4

struct server;
struct client;
typedef json_object *(*handler_f) (struct server *s, struct client *c, json_object *req);
/* After a task registered (h_register): job, and the request. */
typedef void (*on_register_f) (struct server *s, struct job *job, json_object *req);
/* A part of the daemon's state for status replies (a new object, or NULL
 * for nothing), as the client of uid may see it. */
typedef json_object *(*info_f) (uid_t uid);

/* A client's identity (uid, gid, pid) is whom it acts for: SO_PEERCRED
 * at accept, except on a connection made for a restored task (ctl-attach),
 * which from then on acts for that task's user, whoever connected it, and
 * may only be that task's libibcr control channel ('attached'). */
struct client {
    int fd;
    int id;
    uid_t uid; /* (uid_t)-1: an attached one, not bound yet */
    gid_t gid;
    pid_t pid;
    int attached;    /* ctl-attach made it a control channel only */
    uid_t attach_by; /* SO_PEERCRED uid of who attached it */
    pid_t lent;      /* a generation's worker owns this connection */
    int handed;      /* a worker answers it: close our copy now */
    int attach_rank; /* ctl-attach: the restored task's rank, or -1 */
    char attach_job[IDENT_MAX + 1];
    char resume_job[IDENT_MAX + 1]; /* waits for resume-restored of this job */
    long resume_deadline;           /* CLOCK_MONOTONIC ms: timeout_restore ends the wait */
    int resume_held;                /* the rebuild failed; answered once Slurm has the
                                       job back (slurm_hook.c), or at the deadline */
    struct proto_reader rd;
    struct client *next;
};

struct server {
    struct conf *conf;
    struct jobs *jobs;
    int lfd;
    long accept_paused_until; /* CLOCK_MONOTONIC ms: EMFILE, listener rests */
    long accept_log_at;       /* last EMFILE / limit log line (ms) */
    int accept_log_quiet;     /* lines not logged since */
    int next_id;
    int nclients;
    int peer_port;
    struct peerauth *pa;
    time_t started;
    int reloads;        /* SIGHUPs handled */
    char *reload_error; /* why the last one was refused; NULL: taken */
    struct client *clients;
    struct {
        const char *type;
        handler_f fn;
    } handlers[SERVER_MAX_HANDLERS];
    int nhandlers;
    on_register_f on_register[SERVER_MAX_ON_REGISTER];
    int non_register;
    struct {
        const char *key;
        info_f fn;
    } info[SERVER_MAX_INFO];
    int ninfo;
};

/* Returned by a handler that must not answer (libibcr's hello: libibcr
 * only answers requests, it does not read replies). */
extern char server_no_reply_marker; /* one object for both files */
#define NO_REPLY ((json_object *)(void *)&server_no_reply_marker)

/* Add a request type to the local socket (type must live as long as s);
 * and a function called after every registration, in the order added.
 * 0, or -1 (EEXIST, ENOSPC). */
int server_add_handler (struct server *s, const char *type, handler_f fn);
int server_on_register (struct server *s, on_register_f fn);
/* And a part of the "daemon" object of status replies, under key (which
 * must live as long as s).  0, or -1 (ENOSPC). */
int server_add_info (struct server *s, const char *key, info_f fn);

void client_close (struct server *s, struct client *c);
json_object *ok_reply (const char *request);

#endif
