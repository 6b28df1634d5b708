/* sp_pmix.c - see sp_pmix.h.
 *
 * The relay copies bytes both ways and understands only the first
 * message of a fresh connection, the client's connect message (header:
 * pindex, tag, length of the body, padding): it keeps a copy before
 * passing it on.  It ends when either side closes, closing the other.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/pmi.h"
#include "sp_pmix.h"

/* The step's PMIx server from the task's environment: 0, or -1. */
static int sp_pmix_server (spank_t sp, struct sockaddr_in *srv)
{
    char uri[1024];

    for (int i = 0; pmix_uri_vars[i]; i++)
        if (spank_getenv (sp, pmix_uri_vars[i], uri, sizeof (uri)) == ESPANK_SUCCESS
            && pmix_uri_addr (uri, srv) == 0)
            return 0;
    return -1;
}

static int sp_pmix_pair (struct sp_pmix *px, char *err, size_t errlen)
{
    int sv[2];

    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0
        || (px->memfd = memfd_create (PMIX_HELLO_NAME, MFD_CLOEXEC)) < 0) {
        snprintf (err, errlen, "cannot make the task's PMIx relay: %s", strerror (errno));
        return -1;
    }
    px->relay_end = sv[0];
    px->task_end = sv[1];
    return 0;
}

int sp_pmix_prepare (spank_t sp, struct sp_pmix *px, char *err, size_t errlen)
{
    char val[32];

    if (sp_pmix_server (sp, &px->srv) < 0)
        return 0;
    if (sp_pmix_pair (px, err, errlen) < 0)
        return -1;
    /* The application keeps its end across exec. */
    snprintf (val, sizeof (val), "%d", px->task_end);
    if (fcntl (px->task_end, F_SETFD, 0) < 0
        || spank_setenv (sp, PMIX_RELAY_ENV, val, 1) != ESPANK_SUCCESS) {
        snprintf (err, errlen, "cannot give the task its PMIx relay");
        return -1;
    }
    return 1;
}

static int sp_pmix_write_all (int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send (fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int sp_pmix_read_all (int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = recv (fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int sp_pmix_connect (const struct sockaddr_in *srv)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    while (connect (fd, (const struct sockaddr *)srv, sizeof (*srv)) < 0)
        if (errno != EINTR) {
            (void)close (fd);
            return -1;
        }
    return fd;
}

static int sp_pmix_record (int memfd, const unsigned char *hello, size_t len)
{
    return ftruncate (memfd, 0) == 0 && pwrite (memfd, hello, len, 0) == (ssize_t)len ? 0 : -1;
}

int sp_pmix_reconnect (spank_t sp, struct sp_pmix *px, const unsigned char *hello, size_t len,
                       int timeout_ms, char *err, size_t errlen)
{
    if (!len) {
        snprintf (err, errlen,
                  "the checkpointed rank talked to Slurm's PMIx and its image "
                  "holds no record of its connect message");
        return -1;
    }
    if (sp_pmix_server (sp, &px->srv) < 0) {
        snprintf (err, errlen,
                  "the checkpointed rank talked to Slurm's PMIx (srun "
                  "--mpi=pmix) and this step has no PMIx server: run it with --mpi=pmix "
                  "again");
        return -1;
    }
    if ((px->srv_fd = sp_pmix_connect (&px->srv)) < 0) {
        snprintf (err, errlen, "cannot connect to the step's PMIx server: %s", strerror (errno));
        return -1;
    }
    if (pmix_replay (px->srv_fd, hello, len, timeout_ms, err, errlen) < 0
        || sp_pmix_pair (px, err, errlen) < 0)
        return -1;
    if (sp_pmix_record (px->memfd, hello, len) < 0) {
        snprintf (err, errlen, "cannot record the rank's PMIx connect message: %s",
                  strerror (errno));
        return -1;
    }
    return 0;
}

/* The relay: owns relay_end, srv_fd (-1: connect on the first message)
 * and memfd.  Never returns. */
static void __attribute__ ((noreturn)) sp_pmix_relay (struct sp_pmix px)
{
    static char buf[65536];
    unsigned char hello[PMIX_HELLO_MAX];
    size_t len;

    if (px.srv_fd < 0) {
        if (sp_pmix_read_all (px.relay_end, hello, 16) < 0 || !(len = pmix_hello_size (hello))
            || sp_pmix_read_all (px.relay_end, hello + 16, len - 16) < 0)
            _exit (0);
        (void)sp_pmix_record (px.memfd, hello, len);
        if ((px.srv_fd = sp_pmix_connect (&px.srv)) < 0
            || sp_pmix_write_all (px.srv_fd, hello, len) < 0)
            _exit (1);
    }
    for (;;) {
        struct pollfd p[2] = { { .fd = px.relay_end, .events = POLLIN },
                               { .fd = px.srv_fd, .events = POLLIN } };
        if (poll (p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit (1);
        }
        for (int i = 0; i < 2; i++) {
            ssize_t n;
            if (!p[i].revents)
                continue;
            if ((n = recv (p[i].fd, buf, sizeof (buf), MSG_DONTWAIT)) < 0
                && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0 || sp_pmix_write_all (p[1 - i].fd, buf, (size_t)n) < 0)
                _exit (0); /* either side gone: the other sees it closed */
        }
    }
}

int sp_pmix_start (struct sp_pmix *px, int *keep)
{
    sigset_t all;
    pid_t pid;
    int n = 0;

    if (px->task_end >= 0) {
        (void)close (px->task_end);
        px->task_end = -1;
    }
    if (px->relay_end < 0)
        return 0;
    /* A process, not a thread: the waiter made the task's PID namespace,
     * and a process whose children go to another PID namespace than its
     * own cannot make threads (clone answers EINVAL).  As the waiter's
     * child it is outside the dumped tree, and goes when the waiter does. */
    if ((pid = fork ()) == 0) {
        struct sp_pmix mine = *px;
        int own[3] = { mine.relay_end, mine.srv_fd, mine.memfd };

        sigfillset (&all);
        (void)sigprocmask (SIG_SETMASK, &all, NULL);
        (void)prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        (void)prctl (PR_SET_NAME, "ibcr-pmix", 0, 0, 0);
        /* Keep only its own fds (and 0..2): the waiter holds pipes whose
         * end of file others wait for. */
        fds_close_except (own, 3);
        if (getppid () == 1)
            _exit (0);
        sp_pmix_relay (mine);
    }
    /* Its ends are the relay's alone; the record stays here too, where
     * ibcrd reads it at a dump (pmix_hello_read). */
    (void)close (px->relay_end);
    px->relay_end = -1;
    if (px->srv_fd >= 0) {
        (void)close (px->srv_fd);
        px->srv_fd = -1;
    }
    if (pid < 0)
        return 0; /* nobody at the other end: the rank's PMIx sees it closed */
    if (px->memfd >= 0)
        keep[n++] = px->memfd;
    return n;
}
