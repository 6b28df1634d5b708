/* cli.h - what the ibcr subcommands share: global options, how to reach
 * ibcrd and the storage, exit codes, output helpers.
 *
 * Exit codes (documented in ibcr(1); scripts rely on them):
 */
#ifndef IBCRD_CLI_H
#define IBCRD_CLI_H

#include <stdint.h>
#include <json-c/json.h>

#include "common/store.h"

enum {
    CLI_OK = 0,             /* success */
    CLI_ERR = 1,            /* the operation failed (details on stderr) */
    CLI_USAGE = 2,          /* bad command line */
    CLI_NODAEMON = 3,       /* ibcrd cannot be reached */
    CLI_NOTFOUND = 4,       /* no such job or generation */
    CLI_DAMAGED = 5,        /* verify found a damaged generation */
    CLI_DENIED = 6,         /* the job belongs to another user */
    CLI_NOTYET = 7,         /* command not implemented in this release */
};

struct cli {
    const char *socket;     /* --socket, IBCR_SOCKET, or the configured one */
    const char *config;     /* -c FILE */
    const char *storage;    /* --storage DIR: read images without ibcrd */
    const char *cluster;    /* --cluster NAME */
    int timeout_ms;
    struct store st;        /* resolved by cli_store */
    char *st_root, *st_cluster;
};

/* Print "ibcr: error: ..." on stderr. */
void cli_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* One request to ibcrd.  Returns the reply (type "ok"), or NULL after
 * printing the error; *rc gets the exit code to use. */
json_object *cli_request (struct cli *c, json_object *req, int *rc);

/* Resolve where checkpoints are: --storage, else what ibcrd reports, else
 * the configuration file.  0, or an exit code after printing why. */
int cli_store (struct cli *c);

/* Exit code for an errno from a store or daemon operation. */
int cli_rc_for_errno (int errnum);

/* "1.5 GiB" */
const char *cli_bytes (uint64_t n, char *buf, size_t len);

int cli_status (struct cli *c, int argc, char **argv);
int cli_list (struct cli *c, int argc, char **argv);
int cli_verify (struct cli *c, int argc, char **argv);
int cli_prune (struct cli *c, int argc, char **argv);

#endif
