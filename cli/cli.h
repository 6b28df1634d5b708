/* cli.h - what the ibcr subcommands share: global options, how to reach
 * ibcrd and the storage, exit codes, output helpers.
 *
 * Exit codes (documented in ibcr(1); scripts rely on them):
 */
#ifndef IBCRD_CLI_H
#define IBCRD_CLI_H

#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "common/store.h"

enum {
    CLI_OK = 0,       /* success */
    CLI_ERR = 1,      /* the operation failed (details on stderr) */
    CLI_USAGE = 2,    /* bad command line */
    CLI_NODAEMON = 3, /* ibcrd cannot be reached */
    CLI_NOTFOUND = 4, /* no such job or generation */
    CLI_DAMAGED = 5,  /* verify found a damaged generation */
    CLI_DENIED = 6,   /* the job belongs to another user */
    CLI_NOTYET = 7,   /* command not implemented in this release */
};

struct cli {
    const char *socket;  /* --socket, IBCR_SOCKET, or the configured one */
    const char *config;  /* -c FILE */
    const char *storage; /* --storage DIR: read images without ibcrd */
    const char *cluster; /* --cluster NAME */
    int timeout_ms;
    struct store st; /* resolved by cli_store */
    char *st_root, *st_cluster;
};

/* Print "ibcr: error: ..." on stderr. */
void cli_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* One request to ibcrd.  Returns the reply (type "ok"), or NULL after
 * printing the error; *rc gets the exit code to use. */
json_object *cli_request (struct cli *c, json_object *req, int *rc);
json_object *cli_request_on (struct cli *c, int fd, const char *path, json_object *req, int *rc);

/* Resolve where checkpoints are: --storage, else what ibcrd reports, else
 * the configuration file.  0, or an exit code after printing why. */
int cli_store (struct cli *c);

/* Exit code for an errno from a store or daemon operation. */
int cli_rc_for_errno (int errnum);

/* --- progress of long operations on a terminal (cli_progress.c) --- */

/* True when stderr is a terminal: only then is progress drawn. */
int cli_progress_wanted (void);

/* Redraw the progress line: "WHAT: PHASE done of total (pct, rate)";
 * done and total 0 for a phase that moves no bytes. */
void cli_progress_show (const char *what, const char *phase, uint64_t done, uint64_t total);

/* Erase the line, before other output. */
void cli_progress_end (void);

/* "1.5 GiB" */
const char *cli_bytes (uint64_t n, char *buf, size_t len);

/* The socket of ibcrd this command uses (--socket, IBCR_SOCKET, the
 * configuration's), or NULL after printing why. */
const char *cli_socket_path (struct cli *c);

/* --- a task this command supervises (cli_task.c): ibcr run, restart --- */
struct cli_task {
    pid_t init;          /* the task's init (the pid CRIU dumps), host view */
    pid_t app;           /* the application under it, or 0 */
    int out_r, err_r;    /* read ends of the task's stdout/stderr, or -1 */
    int regfd;           /* registration with ibcrd, open for the task's life */
    json_object *regreq; /* the registration, sent again to a restarted ibcrd */
    char *sock;          /* ibcrd's socket */
    int relay;           /* ibcrd's relay that runs the task (tasks.h) */
};

/* Ask ibcrd (tasks.h) for a relay: send req over a new connection and
 * wait for a reply of type 'ready'.  The connection, with *reply; or -1
 * after printing why, with the exit code in *rc (and *reply the error
 * when ibcrd sent one, else NULL). */
int cli_relay_open (struct cli *c, json_object *req, const char *ready, json_object **reply,
                    int *rc);

/* Send n fds to the relay.  0, or -1 after printing why. */
int cli_relay_send_fds (int fd, const int *fds, int n);

/* The relay's next message, of type 'want'; NULL after printing why
 * (*rc the exit code). */
json_object *cli_relay_recv (int fd, const char *want, int *rc);

/* ibcr-init: IBCR_INIT, else the installed one. */
const char *cli_init_path (void);

/* Register the task (t->init) with ibcrd over a connection kept in
 * t->regfd.  fields: job, rank, size, ... (taken over).  0 or an exit code. */
int cli_task_register (struct cli *c, struct cli_task *t, json_object *fields);

/* Relay the task's output to ours, forward SIGINT/SIGTERM/SIGHUP to the
 * task's init, and return its exit code (the application's, as the relay
 * reports it). */
int cli_task_wait (struct cli_task *t);

/* True while pid is stopped or traced (restart --stopped). */
int cli_task_stopped (pid_t pid);

/* Add "leader" (NODE@HOST or HOST) and "leader_port" from --leader
 * [NODE@]HOST[:PORT] to a registration.  0, or -1 after printing why. */
int cli_add_leader (json_object *f, const char *spec);

int cli_run (struct cli *c, int argc, char **argv);
int cli_checkpoint (struct cli *c, int argc, char **argv);
int cli_restart (struct cli *c, int argc, char **argv);
int cli_status (struct cli *c, int argc, char **argv);
int cli_list (struct cli *c, int argc, char **argv);
int cli_verify (struct cli *c, int argc, char **argv);
int cli_prune (struct cli *c, int argc, char **argv);

#endif
