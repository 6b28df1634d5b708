/* vw_opts.h - command line of verbs_stream and the workload it sends.
 *
 * The client's options define the workload; they travel to the server as
 * one text line ("op=write n=1000 ..."), so a test starts the server with
 * only a port and both sides agree by construction.
 */
#ifndef VW_OPTS_H
#define VW_OPTS_H

#include <stddef.h>
#include <stdint.h>

enum vw_op {
    VW_OP_SEND,
    VW_OP_SEND_IMM,
    VW_OP_WRITE,
    VW_OP_WRITE_IMM,
    VW_OP_READ,
    VW_OP_FADD,
    VW_OP_CSWAP,
};

enum vw_wait {
    VW_WAIT_BUSY,  /* spin on ibv_poll_cq */
    VW_WAIT_EVENT, /* block in ibv_get_cq_event */
    VW_WAIT_POLL,  /* poll() on the completion channel's fd, then get event */
};

struct vw_opts {
    /* local: each side its own */
    const char *host;      /* NULL: this is the server */
    const char *port;      /* out-of-band TCP port; "0" = any (server) */
    const char *port_file; /* server: write the bound port here */
    const char *dev;       /* device name, NULL = first */
    int ib_port;
    int gid_index; /* -1: address by LID only (sent to the server) */
    int timeout;   /* seconds before the watchdog fails the run */
    int verbose;
    uint64_t progress; /* server: print a progress line every N
                             * messages verified on a QP; 0 = never */

    /* workload: set on the client, sent to the server */
    enum vw_op op;
    uint64_t count; /* messages per QP */
    uint32_t size;  /* bytes per message */
    int inline_data;
    int nsge;
    int sig_every; /* signal every Nth WR (1 = every WR) */
    int nqp;
    int ncq;
    int nthread;
    int ud;
    int srq;
    enum vw_wait wait;
    int window;      /* messages in flight per QP */
    uint32_t rate;   /* client: messages per second per QP, 0 = no limit */
    int ex;          /* ibv_create_qp_ex + ibv_wr_*, ibv_create_cq_ex + ibv_start_poll */
    int ckpt;        /* -C: out-of-band TCP only for the start, so a
                             * whole-process checkpoint can take the run */
    int fork_server; /* -F (local): fork the server before any verb,
                             * then be its client over loopback */
};

const char *vw_op_name (enum vw_op op);
int vw_op_is_atomic (enum vw_op op);

/* Parse argv.  Returns 0, or -1 with a message for the user in err. */
int vw_opts_parse (struct vw_opts *o, int argc, char **argv, char *err, size_t errlen);
void vw_opts_usage (const char *prog);

/* Check the workload is self-consistent (also run on the server after
 * loading it).  Returns 0 or -1 with err. */
int vw_opts_check (struct vw_opts *o, char *err, size_t errlen);

/* Workload to/from one text line (without newline). */
void vw_opts_format (const struct vw_opts *o, char *buf, size_t len);
int vw_opts_load (struct vw_opts *o, const char *line, char *err, size_t errlen);

#endif
