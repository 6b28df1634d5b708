/* vw_opts.c - verbs_stream's command line and workload line (vw_opts.h).
 *
 * Every rejected value is named in the message with what is allowed, so a
 * test author never has to read this file to fix a command line.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vw_opts.h"

static const char *op_names[] = {
    [VW_OP_SEND] = "send",           [VW_OP_SEND_IMM] = "send_imm", [VW_OP_WRITE] = "write",
    [VW_OP_WRITE_IMM] = "write_imm", [VW_OP_READ] = "read",         [VW_OP_FADD] = "fadd",
    [VW_OP_CSWAP] = "cswap",
};

static const char *wait_names[] = {
    [VW_WAIT_BUSY] = "busy",
    [VW_WAIT_EVENT] = "event",
    [VW_WAIT_POLL] = "poll",
};

#define NELEM(a) (sizeof (a) / sizeof ((a)[0]))

const char *vw_op_name (enum vw_op op)
{
    return (unsigned)op < NELEM (op_names) ? op_names[op] : "?";
}

int vw_op_is_atomic (enum vw_op op)
{
    return op == VW_OP_FADD || op == VW_OP_CSWAP;
}

void vw_opts_usage (const char *prog)
{
    fprintf (stderr,
             "usage: %s [options] [SERVER]     (no SERVER: be the server)\n"
             "  -p PORT     out-of-band TCP port (server: 0 = any free port)\n"
             "  -P FILE     server: write the port it listens on to FILE\n"
             "  -d DEV      verbs device (default: the first)\n"
             "  -i PORT     device port (default 1)\n"
             "  -x INDEX    GID index to address peers by GID (default: LID only)\n"
             "  -T SECONDS  fail when the run takes longer (default 60)\n"
             "  -v          verbose\n"
             "  -L N        server: print 'progress qp Q msgs M' on stdout each time a\n"
             "              QP has verified N more messages (M counts from the first\n"
             "              message, so a restored run shows where it went on)\n"
             "workload (client side; the server receives it):\n"
             "  -o OP       send|send_imm|write|write_imm|read|fadd|cswap (default send)\n"
             "  -n COUNT    messages per QP (default 1000)\n"
             "  -s SIZE     bytes per message (default 4096; atomics: 8)\n"
             "  -I          post data inline (send, send_imm, write, write_imm)\n"
             "  -g SGE      scatter/gather entries per message (default 1)\n"
             "  -u N        signal only every Nth work request (default 1 = all)\n"
             "  -q QPS      queue pairs (default 1)\n"
             "  -c CQS      completion queues per side (default 1; a multiple of -t)\n"
             "  -t THREADS  threads per side, each driving its own QPs (default 1)\n"
             "  -U          UD queue pairs with address handles (send, send_imm)\n"
             "  -S          receiver uses shared receive queues\n"
             "  -w MODE     wait for completions: busy|event|poll (default busy)\n"
             "  -W WINDOW   messages in flight per QP (default 16)\n"
             "  -X          extended verbs on both sides: ibv_create_qp_ex + ibv_wr_*,\n"
             "              ibv_create_cq_ex + ibv_start_poll (perftest's default path)\n"
             "  -r RATE     post at most RATE messages per second per QP (default: no\n"
             "              limit); with a large -n, a stream that outlasts a checkpoint\n"
             "  -C          checkpointable: close the out-of-band TCP connection once the\n"
             "              QPs are connected; each side then checks its own totals (the\n"
             "              server sends its per-QP totals to the client over verbs), so\n"
             "              CRIU can dump and restore both processes, on other hosts too\n"
             "              (not with fadd|cswap: nothing tells the server they ended)\n"
             "  -F          no SERVER: fork the server before the first verbs call and\n"
             "              be its client over loopback (one program, two processes that\n"
             "              both use verbs); exits non-zero if either side failed\n"
             "prints 'OK msgs=N bytes=B checksum=X' when every message was verified.\n"
             "environment: VW_CORRUPT_SEQ=N makes the client flip one byte of QP 0's\n"
             "message N (send, send_imm, write, write_imm): the run must then fail.\n",
             prog);
}

static int parse_num (const char *s, uint64_t min, uint64_t max, uint64_t *v, const char *what,
                      char *err, size_t errlen)
{
    char *end;
    unsigned long long n;

    errno = 0;
    n = strtoull (s, &end, 0);
    if (errno || end == s || *end != '\0' || s[0] == '-' || n < min || n > max) {
        snprintf (err, errlen, "%s: '%s' is not a number from %llu to %llu", what, s,
                  (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    *v = n;
    return 0;
}

static int parse_name (const char *s, const char **names, size_t n, int *v, const char *what,
                       char *err, size_t errlen)
{
    char list[128] = "";

    for (size_t i = 0; i < n; i++) {
        if (strcmp (s, names[i]) == 0) {
            *v = (int)i;
            return 0;
        }
        snprintf (list + strlen (list), sizeof (list) - strlen (list), "%s%s", i ? "|" : "",
                  names[i]);
    }
    snprintf (err, errlen, "%s: unknown '%s' (use %s)", what, s, list);
    return -1;
}

static void opts_defaults (struct vw_opts *o)
{
    memset (o, 0, sizeof (*o));
    o->port = "18600";
    o->ib_port = 1;
    o->gid_index = -1;
    o->timeout = 60;
    o->op = VW_OP_SEND;
    o->count = 1000;
    o->size = 0; /* 0 = default for the op, resolved in check */
    o->nsge = 1;
    o->sig_every = 1;
    o->nqp = 1;
    o->ncq = 1;
    o->nthread = 1;
    o->wait = VW_WAIT_BUSY;
    o->window = 16;
}

int vw_opts_parse (struct vw_opts *o, int argc, char **argv, char *err, size_t errlen)
{
    uint64_t v;
    int c, iv;

    opts_defaults (o);
    optind = 1;
    while ((c = getopt (argc, argv, "p:P:d:i:x:T:vL:o:n:s:Ig:u:q:c:t:USw:W:r:XCFh")) != -1) {
        switch (c) {
        case 'p':
            o->port = optarg;
            break;
        case 'P':
            o->port_file = optarg;
            break;
        case 'd':
            o->dev = optarg;
            break;
        case 'i':
            if (parse_num (optarg, 1, 255, &v, "-i (device port)", err, errlen) < 0)
                return -1;
            o->ib_port = (int)v;
            break;
        case 'x':
            if (parse_num (optarg, 0, 255, &v, "-x (GID index)", err, errlen) < 0)
                return -1;
            o->gid_index = (int)v;
            break;
        case 'T':
            if (parse_num (optarg, 1, 3600, &v, "-T (timeout seconds)", err, errlen) < 0)
                return -1;
            o->timeout = (int)v;
            break;
        case 'v':
            o->verbose++;
            break;
        case 'L':
            if (parse_num (optarg, 1, UINT64_MAX, &v, "-L (progress every N messages)", err, errlen)
                < 0)
                return -1;
            o->progress = v;
            break;
        case 'o':
            if (parse_name (optarg, op_names, NELEM (op_names), &iv, "-o (opcode)", err, errlen)
                < 0)
                return -1;
            o->op = (enum vw_op)iv;
            break;
        case 'n':
            if (parse_num (optarg, 1, 1ULL << 40, &v, "-n (count)", err, errlen) < 0)
                return -1;
            o->count = v;
            break;
        case 's':
            if (parse_num (optarg, 1, 1U << 30, &v, "-s (size)", err, errlen) < 0)
                return -1;
            o->size = (uint32_t)v;
            break;
        case 'I':
            o->inline_data = 1;
            break;
        case 'g':
            if (parse_num (optarg, 1, 64, &v, "-g (sg entries)", err, errlen) < 0)
                return -1;
            o->nsge = (int)v;
            break;
        case 'u':
            if (parse_num (optarg, 1, 1 << 20, &v, "-u (signal every)", err, errlen) < 0)
                return -1;
            o->sig_every = (int)v;
            break;
        case 'q':
            if (parse_num (optarg, 1, 4095, &v, "-q (QPs)", err, errlen) < 0)
                return -1;
            o->nqp = (int)v;
            break;
        case 'c':
            if (parse_num (optarg, 1, 1024, &v, "-c (CQs)", err, errlen) < 0)
                return -1;
            o->ncq = (int)v;
            break;
        case 't':
            if (parse_num (optarg, 1, 64, &v, "-t (threads)", err, errlen) < 0)
                return -1;
            o->nthread = (int)v;
            break;
        case 'U':
            o->ud = 1;
            break;
        case 'S':
            o->srq = 1;
            break;
        case 'w':
            if (parse_name (optarg, wait_names, NELEM (wait_names), &iv, "-w (wait mode)", err,
                            errlen)
                < 0)
                return -1;
            o->wait = (enum vw_wait)iv;
            break;
        case 'W':
            if (parse_num (optarg, 1, 4096, &v, "-W (window)", err, errlen) < 0)
                return -1;
            o->window = (int)v;
            break;
        case 'r':
            if (parse_num (optarg, 1, 100000000, &v, "-r (rate)", err, errlen) < 0)
                return -1;
            o->rate = (uint32_t)v;
            break;
        case 'X':
            o->ex = 1;
            break;
        case 'C':
            o->ckpt = 1;
            break;
        case 'F':
            o->fork_server = 1;
            break;
        case 'h':
            vw_opts_usage (argv[0]);
            exit (0);
        default:
            snprintf (err, errlen, "unknown option (see -h)");
            return -1;
        }
    }
    if (optind < argc)
        o->host = argv[optind++];
    if (optind < argc) {
        snprintf (err, errlen, "unexpected argument '%s' (only one SERVER)", argv[optind]);
        return -1;
    }
    if (o->fork_server) {
        if (o->host) {
            snprintf (err, errlen, "-F forks its own server: give no SERVER");
            return -1;
        }
        /* The real port replaces this once the server listens. */
        o->host = "127.0.0.1";
        return vw_opts_check (o, err, errlen);
    }
    if (!o->host && o->port_file == NULL && strcmp (o->port, "0") == 0) {
        snprintf (err, errlen, "-p 0 picks a random port: also give -P FILE to learn it");
        return -1;
    }
    if (o->host && strcmp (o->port, "0") == 0) {
        snprintf (err, errlen, "the client needs the server's real port, not -p 0");
        return -1;
    }
    return o->host ? vw_opts_check (o, err, errlen) : 0;
}

int vw_opts_check (struct vw_opts *o, char *err, size_t errlen)
{
    if (o->size == 0)
        o->size = vw_op_is_atomic (o->op) ? 8 : 4096;
    if (vw_op_is_atomic (o->op) && o->size != 8) {
        snprintf (err, errlen, "-o %s works on 8 bytes: use -s 8 (got %u)", vw_op_name (o->op),
                  o->size);
        return -1;
    }
    if (o->ud && o->op != VW_OP_SEND && o->op != VW_OP_SEND_IMM) {
        snprintf (err, errlen, "-U (UD) supports only -o send or send_imm, not %s",
                  vw_op_name (o->op));
        return -1;
    }
    if (o->inline_data && (o->op == VW_OP_READ || vw_op_is_atomic (o->op))) {
        snprintf (err, errlen,
                  "-I (inline) makes no sense with -o %s: it "
                  "carries no local data out",
                  vw_op_name (o->op));
        return -1;
    }
    if (vw_op_is_atomic (o->op) && o->nsge != 1) {
        snprintf (err, errlen, "-o %s takes one sg entry: drop -g", vw_op_name (o->op));
        return -1;
    }
    if ((uint32_t)o->nsge > o->size) {
        snprintf (err, errlen, "-g %d is more sg entries than -s %u bytes", o->nsge, o->size);
        return -1;
    }
    if (o->ckpt && vw_op_is_atomic (o->op)) {
        snprintf (err, errlen,
                  "-C (checkpointable) cannot run -o %s: atomics "
                  "complete nowhere on the server, so only the out-of-band "
                  "connection could tell it the run ended; drop -C or use "
                  "send|send_imm|write|write_imm|read",
                  vw_op_name (o->op));
        return -1;
    }
    if (o->ncq % o->nthread != 0) {
        snprintf (err, errlen,
                  "-c %d must be a multiple of -t %d so that each "
                  "CQ is polled by one thread",
                  o->ncq, o->nthread);
        return -1;
    }
    if (o->nthread > o->nqp) {
        snprintf (err, errlen, "-t %d threads need at least as many QPs (-q %d)", o->nthread,
                  o->nqp);
        return -1;
    }
    return 0;
}

void vw_opts_format (const struct vw_opts *o, char *buf, size_t len)
{
    snprintf (buf, len,
              "op=%s n=%llu s=%u inline=%d sge=%d sig=%d qp=%d cq=%d thr=%d "
              "ud=%d srq=%d wait=%s win=%d gid=%d tmo=%d ex=%d ckpt=%d",
              vw_op_name (o->op), (unsigned long long)o->count, o->size, o->inline_data, o->nsge,
              o->sig_every, o->nqp, o->ncq, o->nthread, o->ud, o->srq, wait_names[o->wait],
              o->window, o->gid_index, o->timeout, o->ex, o->ckpt);
}

int vw_opts_load (struct vw_opts *o, const char *line, char *err, size_t errlen)
{
    char op[32], wait[32];
    unsigned long long n;
    int got, gid, tmo;

    got = sscanf (line,
                  "op=%31s n=%llu s=%u inline=%d sge=%d sig=%d qp=%d cq=%d "
                  "thr=%d ud=%d srq=%d wait=%31s win=%d gid=%d tmo=%d ex=%d ckpt=%d",
                  op, &n, &o->size, &o->inline_data, &o->nsge, &o->sig_every, &o->nqp, &o->ncq,
                  &o->nthread, &o->ud, &o->srq, wait, &o->window, &gid, &tmo, &o->ex, &o->ckpt);
    if (got != 17) {
        snprintf (err, errlen,
                  "bad workload line from client: '%s' "
                  "(client and server versions differ?)",
                  line);
        return -1;
    }
    o->count = n;
    /* Both sides address by GID or neither: the server follows the
     * client unless it was given its own -x. */
    if (o->gid_index < 0 && gid >= 0 && gid <= 255)
        o->gid_index = gid;
    /* Never give up before the client does. */
    if (tmo > o->timeout && tmo <= 3600)
        o->timeout = tmo;
    if (parse_name (op, op_names, NELEM (op_names), &got, "client op", err, errlen) < 0)
        return -1;
    o->op = (enum vw_op)got;
    if (parse_name (wait, wait_names, NELEM (wait_names), &got, "client wait", err, errlen) < 0)
        return -1;
    o->wait = (enum vw_wait)got;
    if (o->nqp < 1 || o->nqp > 4095 || o->ncq < 1 || o->nthread < 1 || o->nthread > 64
        || o->window < 1 || o->window > 4096 || o->nsge < 1 || o->nsge > 64 || o->sig_every < 1
        || o->count < 1) {
        snprintf (err, errlen, "workload line from client out of range: '%s'", line);
        return -1;
    }
    return vw_opts_check (o, err, errlen);
}
