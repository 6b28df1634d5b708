/* verbs_stream.c - a two-process verbs workload that verifies every byte.
 *
 *   server:  verbs_stream -p 0 -P portfile
 *   client:  verbs_stream -p PORT -o write -n 1000 -s 65536 -q 4 SERVER
 *
 * The client streams sequence-numbered messages of one opcode; the server
 * (or, for READ and atomics, the client) verifies each exactly once, in
 * order, byte for byte.  At the end both sides compare message count,
 * bytes and a checksum over everything verified; each prints
 * "OK msgs=N bytes=B checksum=X" and exits 0, or names the first
 * difference on stderr and exits 1 (2 on timeout).
 *
 * With -C the TCP connection only carries the start (workload, endpoints,
 * GO) and is closed before the first message: CRIU cannot dump an
 * established TCP socket, nor restore one on another host, and a restored
 * client has no server port to come back to.  The totals then travel over
 * verbs (the server's FIN per QP) and each side prints its own line.
 *
 * Pure public verbs: it runs unchanged on softib, a real HCA, or under
 * libibcr, whose checkpoint tests reuse it as the application.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vw_oob.h"
#include "vw_pattern.h"
#include "vw_stream.h"

#define VW_PROTO "verbs_stream/1"

static struct vw_run run;

/* -F: the listener made before the fork (the server's), and the forked
 * server's pid (the client's). */
static int fork_lfd = -1;
static pid_t fork_child;
static char fork_port[16];

static double now_s (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The watchdog turns a hang into a failure that says where each QP stood. */
static void *watchdog (void *arg)
{
    struct vw_run *r = arg;
    int waited = 0;

    /* The server learns the client's -T only after the handshake. */
    while (waited < __atomic_load_n (&r->o.timeout, __ATOMIC_RELAXED)) {
        sleep (1);
        waited++;
    }
    fflush (stdout);
    fprintf (stderr, "verbs_stream: %s: timeout after %d s (-T)\n", r->role, r->o.timeout);
    for (int i = 0; r->qps && i < r->o.nqp; i++) {
        struct vw_qp *q = &r->qps[i];
        fprintf (stderr,
                 "verbs_stream: %s: qp %d (qpn %u, state %s): "
                 "posted %llu done %llu credit %llu wr %llu/%llu\n",
                 r->role, i, q->qp ? q->qp->qp_num : 0,
                 q->qp ? vw_qp_state_str ((enum ibv_qp_state)vw_qp_state (q->qp)) : "-",
                 (unsigned long long)q->posted, (unsigned long long)q->done,
                 (unsigned long long)q->credit, (unsigned long long)q->wr_done,
                 (unsigned long long)q->wr_posted);
    }
    fflush (stderr);
    _exit (2);
}

static void oob_send (struct vw_run *r, int fd, const char *line)
{
    if (vw_oob_send (fd, "%s", line) < 0)
        vw_die (r, "sending to the peer: %s (did it fail? see its output)", strerror (errno));
}

static void oob_recv (struct vw_run *r, int fd, char *buf, size_t len, const char *what)
{
    if (vw_oob_recv (fd, buf, len, r->o.timeout * 1000) < 0)
        vw_die (r, "waiting for %s from the peer: %s%s", what, strerror (errno),
                errno == ECONNRESET ? " (the peer exited: see its output)" : "");
}

static void write_port_file (struct vw_run *r, const char *path, int port)
{
    char tmp[4096];
    FILE *f;

    /* Write then rename: a test polling for the file never reads half. */
    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    if (!(f = fopen (tmp, "w")) || fprintf (f, "%d\n", port) < 0 || fclose (f) != 0
        || rename (tmp, path) < 0)
        vw_die (r, "writing port file %s: %s", path, strerror (errno));
}

static int handshake (struct vw_run *r)
{
    char line[1024], err[512];
    int fd;

    if (r->server) {
        int port,
            lfd = fork_lfd >= 0 ? fork_lfd : vw_oob_listen (r->o.port, &port, err, sizeof (err));
        if (fork_lfd >= 0)
            port = atoi (fork_port);
        if (lfd < 0)
            vw_die (r, "%s", err);
        if (r->o.port_file)
            write_port_file (r, r->o.port_file, port);
        if (r->o.verbose)
            fprintf (stderr, "verbs_stream: server: listening on port %d\n", port);
        if ((fd = vw_oob_accept (lfd, r->o.timeout * 1000, err, sizeof (err))) < 0)
            vw_die (r, "%s", err);
        close (lfd);
        oob_recv (r, fd, line, sizeof (line), "the workload");
        if (strncmp (line, VW_PROTO " ", strlen (VW_PROTO) + 1) != 0)
            vw_die (r, "the client speaks '%.40s', not " VW_PROTO, line);
        if (vw_opts_load (&r->o, line + strlen (VW_PROTO) + 1, err, sizeof (err)) < 0)
            vw_die (r, "%s", err);
    } else {
        /* Half the run's time for the server to come up, so that the
         * failure names the connection, not the watchdog. */
        fd = vw_oob_connect (r->o.host, r->o.port, r->o.timeout * 500, err, sizeof (err));
        if (fd < 0)
            vw_die (r, "%s", err);
        vw_opts_format (&r->o, err, sizeof (err));
        snprintf (line, sizeof (line), VW_PROTO " %s", err);
        oob_send (r, fd, line);
    }
    return fd;
}

/* Client sends all its endpoints first, then the server: neither side
 * ever writes while the other is also writing, so no buffer fills. */
static void exchange_endpoints (struct vw_run *r, int fd)
{
    char line[512], ep[400];

    for (int pass = 0; pass < 2; pass++) {
        int sending = (pass == 0) != r->server;
        for (int i = 0; i < r->o.nqp; i++) {
            struct vw_qp *q = &r->qps[i];
            int idx;
            if (sending) {
                vw_ep_format (&q->local, ep, sizeof (ep));
                snprintf (line, sizeof (line), "EP %d %s", i, ep);
                oob_send (r, fd, line);
                continue;
            }
            oob_recv (r, fd, line, sizeof (line), "QP endpoints");
            if (sscanf (line, "EP %d", &idx) != 1 || idx != i
                || vw_ep_parse (&q->remote, strchr (line + 3, ' ') + 1) < 0)
                vw_die (r, "bad endpoint line for qp %d: '%s'", i, line);
        }
    }
}

static void connect_qps (struct vw_run *r)
{
    char err[512];

    for (int i = 0; i < r->o.nqp; i++) {
        struct vw_qp *q = &r->qps[i];
        int rc = r->o.ud ? vw_qp_ud_ready (q->qp, &r->dev, q->local.psn, err, sizeof (err))
                         : vw_qp_rc_connect (q->qp, &r->dev, &q->local, &q->remote, r->rd_atomic,
                                             err, sizeof (err));
        if (rc < 0)
            vw_die (r, "%s", err);
        if (r->o.ud && !r->server
            && !(q->ah = vw_ah_create (&r->dev, &q->remote, err, sizeof (err))))
            vw_die (r, "qp %d: %s", i, err);
        if (r->o.verbose) {
            char l[400], rm[400];
            vw_ep_format (&q->local, l, sizeof (l));
            vw_ep_format (&q->remote, rm, sizeof (rm));
            fprintf (stderr,
                     "verbs_stream: %s: qp %d local %s\n"
                     "verbs_stream: %s: qp %d remote %s\n",
                     r->role, i, l, r->role, i, rm);
        }
    }
}

/* Wait for the workers; meanwhile, a peer that dies makes us fail at once
 * instead of waiting for the watchdog. */
static void wait_workers (struct vw_run *r, int fd)
{
    int watching = 1;

    while (__atomic_load_n (&r->threads_done, __ATOMIC_SEQ_CST) < r->o.nthread) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        char c;

        if (fd < 0)
            watching = 0; /* -C: no connection; the watchdog watches */
        if (!watching || poll (&pfd, 1, 50) <= 0) {
            if (!watching)
                usleep (20000);
            continue;
        }
        if (recv (fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
            vw_die (r,
                    "the peer closed the connection mid-run (it failed: "
                    "see its output)");
        watching = 0; /* its final line arrived early; stop peeking */
    }
    vw_threads_join (r);
}

static void summary (struct vw_run *r, uint64_t *msgs, uint64_t *bytes, uint64_t *sum)
{
    *msgs = 0;
    *bytes = 0;
    *sum = 0;
    for (int i = 0; i < r->o.nqp; i++) {
        struct vw_qp *q = &r->qps[i];
        uint64_t h = q->hash;
        if (vw_op_is_atomic (r->o.op)) {
            /* Both sides sum up the counters' final values: the client
             * the values it expects, the server those in its memory. */
            uint64_t v = vw_atomic_value (r->o.op, i, r->o.count);
            if (r->server) {
                memcpy (&v, q->buf + q->data_off, 8);
                uint64_t want = vw_atomic_value (r->o.op, i, r->o.count);
                if (v != want)
                    vw_die (r,
                            "qp %d: %s counter ends at 0x%016llx, expected "
                            "0x%016llx after %llu operations",
                            i, vw_op_name (r->o.op), (unsigned long long)v,
                            (unsigned long long)want, (unsigned long long)r->o.count);
            }
            h = vw_hash (VW_HASH_INIT, &v, 8);
        }
        *msgs += vw_op_is_atomic (r->o.op) ? r->o.count : q->done;
        *bytes += vw_op_is_atomic (r->o.op) ? 8 * r->o.count : q->bytes;
        *sum += vw_mix64 (h ^ (uint64_t)i);
    }
}

/* -C, client: the server's FIN per QP must say what we counted. */
static void check_fin (struct vw_run *r)
{
    if (r->server)
        return;
    for (int i = 0; i < r->o.nqp; i++) {
        struct vw_qp *q = &r->qps[i];
        if (q->fin_done != q->done || q->fin_hash != q->hash)
            vw_die (r,
                    "qp %d: the server verified %llu messages (checksum "
                    "%016llx), the client completed %llu (checksum %016llx)",
                    i, (unsigned long long)q->fin_done, (unsigned long long)q->fin_hash,
                    (unsigned long long)q->done, (unsigned long long)q->hash);
    }
}

int main (int argc, char **argv)
{
    struct vw_run *r = &run;
    char err[512], line[1024];
    uint64_t msgs, bytes, sum;
    unsigned long long pm, pb, ps;
    pthread_t wd;
    double t0, secs;
    int fd;

    if (vw_opts_parse (&r->o, argc, argv, err, sizeof (err)) < 0) {
        fprintf (stderr, "verbs_stream: %s\n", err);
        vw_opts_usage (argv[0]);
        return 2;
    }
    r->server = r->o.host == NULL;
    if (r->o.fork_server) {
        /* Before any verbs call and any thread: both processes then open
         * the device on their own, as two programs would. */
        int port;
        if ((fork_lfd = vw_oob_listen ("0", &port, err, sizeof (err))) < 0)
            vw_die (r, "%s", err);
        snprintf (fork_port, sizeof (fork_port), "%d", port);
        r->o.port = fork_port;
        fflush (stdout);
        fflush (stderr);
        if ((fork_child = fork ()) < 0)
            vw_die (r, "cannot fork the server: %s", strerror (errno));
        if (fork_child == 0) {
            r->server = 1;
            r->o.host = NULL;
        } else {
            close (fork_lfd);
            fork_lfd = -1;
        }
    }
    r->corrupt_seq =
        getenv ("VW_CORRUPT_SEQ") ? strtoull (getenv ("VW_CORRUPT_SEQ"), NULL, 0) : UINT64_MAX;
    r->role = r->server ? "server" : "client";
    srandom ((unsigned)(getpid () ^ time (NULL)));
    if (pthread_create (&wd, NULL, watchdog, r) != 0)
        vw_die (r, "cannot start the watchdog thread");
    pthread_detach (wd);

    fd = handshake (r);
    if (vw_dev_open (&r->dev, r->o.dev, r->o.ib_port, r->o.gid_index, err, sizeof (err)) < 0)
        vw_die (r, "%s", err);
    vw_setup (r);
    exchange_endpoints (r, fd);
    connect_qps (r);
    /* The server's receives and memory are ready before the client may
     * send: it says GO only after that. */
    if (r->server) {
        for (int i = 0; i < r->o.nqp; i++)
            vw_server_start (r, &r->qps[i]);
        oob_send (r, fd, "GO");
    } else {
        for (int i = 0; i < r->o.nqp; i++)
            vw_client_start (r, &r->qps[i]);
        oob_recv (r, fd, line, sizeof (line), "GO");
        if (strcmp (line, "GO") != 0)
            vw_die (r, "expected GO from the server, got '%s'", line);
    }
    if (r->o.ckpt) {
        close (fd);
        fd = -1;
        /* Tests wait for this line before they checkpoint. */
        fprintf (stderr,
                 "verbs_stream: %s: checkpointable: out-of-band "
                 "connection closed, %d QP(s) connected\n",
                 r->role, r->o.nqp);
        fflush (stderr);
    }
    t0 = now_s ();
    vw_threads_start (r);
    wait_workers (r, fd);
    secs = r->t_end - t0;

    if (r->o.ckpt) {
        check_fin (r);
        summary (r, &msgs, &bytes, &sum);
    } else if (r->server) {
        /* Atomics land in our memory with no completion here: only the
         * client's DONE says they all happened. */
        oob_recv (r, fd, line, sizeof (line), "the client's totals");
        if (sscanf (line, "DONE msgs=%llu bytes=%llu checksum=%llx", &pm, &pb, &ps) != 3)
            vw_die (r, "bad totals line from the client: '%s'", line);
        summary (r, &msgs, &bytes, &sum);
        if (pm != msgs || pb != bytes || ps != sum) {
            snprintf (err, sizeof (err),
                      "totals differ: client msgs=%llu "
                      "bytes=%llu checksum=%016llx, server msgs=%llu bytes=%llu "
                      "checksum=%016llx",
                      pm, pb, ps, (unsigned long long)msgs, (unsigned long long)bytes,
                      (unsigned long long)sum);
            snprintf (line, sizeof (line), "RESULT FAIL %s", err);
            oob_send (r, fd, line);
            vw_die (r, "%s", err);
        }
        oob_send (r, fd, "RESULT OK");
    } else {
        summary (r, &msgs, &bytes, &sum);
        snprintf (line, sizeof (line), "DONE msgs=%llu bytes=%llu checksum=%016llx",
                  (unsigned long long)msgs, (unsigned long long)bytes, (unsigned long long)sum);
        oob_send (r, fd, line);
        oob_recv (r, fd, line, sizeof (line), "the server's verdict");
        if (strcmp (line, "RESULT OK") != 0)
            vw_die (r, "server says: %s", line);
    }
    vw_teardown (r);
    vw_dev_close (&r->dev);
    if (fd >= 0)
        close (fd);
    printf ("OK msgs=%llu bytes=%llu checksum=%016llx secs=%.3f MBps=%.1f "
            "op=%s role=%s\n",
            (unsigned long long)msgs, (unsigned long long)bytes, (unsigned long long)sum, secs,
            secs > 0 ? (double)bytes / secs / 1e6 : 0.0, vw_op_name (r->o.op), r->role);
    if (fork_child > 0) {
        /* -F: the run passed only if the server verified everything too. */
        int status;
        fflush (stdout);
        while (waitpid (fork_child, &status, 0) < 0)
            if (errno != EINTR)
                vw_die (r, "cannot wait for the forked server: %s", strerror (errno));
        if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            fprintf (stderr, "verbs_stream: client: the forked server failed (%s %d)\n",
                     WIFEXITED (status) ? "exit code" : "signal",
                     WIFEXITED (status) ? WEXITSTATUS (status) : WTERMSIG (status));
            return 1;
        }
    }
    return 0;
}
