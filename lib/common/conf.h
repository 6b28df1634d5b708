/* conf.h - ibcrd.conf: the per-node configuration of ibcrd and ibcr.
 *
 * "key = value" lines, '#' or ';' comments, no sections.  Strict: an unknown
 * key, a repeated key, a bad value or a syntax error is an error naming the
 * file, the line and the key, and saying what is expected.  Paths may use
 * %n (node name) and %h (host name); they are expanded once, at load.
 * Parsed with inih; see ibcrd.conf(5) for every key.
 */
#ifndef IBCR_COMMON_CONF_H
#define IBCR_COMMON_CONF_H

#include <stddef.h>
#include <stdint.h>

struct conf {
    char *path;               /* file loaded; NULL when only defaults */
    char *node;               /* node name used for %n */
    char *socket;             /* unix socket of ibcrd (absolute) */
    char *pidfile;            /* default: ibcrd.pid next to the socket */
    char *storage;            /* root of committed images */
    char *staging;            /* node-local dump area */
    char *cluster;            /* level under storage; "local" without Slurm */
    char *criu;               /* criu binary */
    char *munge_socket;       /* munged socket for peer credentials; NULL = default */
    char *peer_address;       /* address the peer listener binds */
    int peer_port;            /* TCP port of the peer protocol; 0 = disabled,
                               -1 = any free port */
    int peer_port_set;        /* peer_port was given in the file */
    int retention;            /* committed generations kept per job (>= 1) */
    int fanout;               /* a generation's tree: children per node (>= 1) */
    int compression;          /* 0/1: zstd on image files */
    int log_level;            /* syslog level */
    uint64_t timeout_connect; /* ms: reaching a peer ibcrd */
    uint64_t timeout_request; /* ms: one request/reply exchange */
    uint64_t timeout_quiesce; /* ms: phases of one generation ... */
    uint64_t timeout_drain;
    uint64_t timeout_dump;
    uint64_t timeout_rebuild;
    uint64_t timeout_commit;
    uint64_t timeout_restore; /* ms: a restart waits this long for every
                                   rank to be restored (resume-restored) */
    /* Slurm triggers (ibcrd/slurm_hook.c): one of CONF_ACT_*. */
    int on_timelimit;          /* default requeue */
    int on_drain;              /* default requeue */
    int on_preempt;            /* default requeue */
    int on_cancel;             /* default nothing */
    uint64_t timelimit_margin; /* ms before the end time, plus the last
                                   measured checkpoint duration */
    uint64_t slurm_poll;       /* ms between two looks at slurmctld */
    /* Limits on what one client may ask of ibcrd (root is held only to
     * max_registrations_per_conn and max_ranks). */
    int max_conns_per_uid;          /* local connections open at once, per uid */
    int max_registrations_per_conn; /* tasks registered over one connection */
    int max_registrations_per_uid;  /* tasks registered at once, per uid */
    int max_ranks;                  /* ranks ("size") of one job */
    int max_nodes;                  /* nodes of one job, the leader's included */
    uint64_t interval_min;          /* ms: bounds of a periodic checkpoint */
    uint64_t interval_max;          /*     interval asked on the socket */
    uint64_t peer_idle_timeout;     /* ms: an idle peer TCP connection is closed */
    char *peers;                    /* hosts (IPv4 addresses or names, separated by
                                   spaces or commas) to which a job that is
                                   not a Slurm job may have ibcrd send MUNGE
                                   credentials (its leader); NULL = none */
};

/* What ibcrd does on a Slurm trigger (the values of on_timelimit, ...);
 * the same numbers as ibcrd/slurm_watch.h's enum slurm_watch_action. */
enum conf_action {
    CONF_ACT_NOTHING = 0,    /* "nothing": only log it */
    CONF_ACT_CHECKPOINT = 1, /* "checkpoint": a final checkpoint */
    CONF_ACT_REQUEUE = 2,    /* "requeue": a final checkpoint, then requeue */
};

/* Defaults only (built-in paths, node = short host name unless 'node'). */
struct conf *conf_create (const char *node);

/* Load 'path' over the defaults.  node (may be NULL) overrides the file's
 * 'node' key, as ibcrd -N does.  On error returns NULL with errno set and
 * a message for the user in err ("FILE:LINE: key: why; what to do"). */
struct conf *conf_load (const char *path, const char *node, char *err, size_t errlen);

void conf_destroy (struct conf *c);

/* The default configuration file (SYSCONFDIR/ibcr/ibcrd.conf), overridden
 * by the IBCR_CONF environment variable. */
const char *conf_default_path (void);

/* Parse a yes/no value: 1, 0, or -1 when it is neither. */
int conf_parse_bool (const char *s);

#endif
