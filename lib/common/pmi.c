/* pmi.c - see pmi.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pmi.h"

/* At most this many processes of a task's tree are looked at. */
#define PMI_MAX_PROCS 256

/* PMI_FD of pid's environment, or -1.  The environment is the task's own
 * (its user may have changed it): it only says which of its own sockets
 * is the launcher's, and the fd must be a socket. */
static int pmi_env_fd (pid_t pid)
{
    char path[64], buf[65536];
    ssize_t n;
    size_t got = 0;
    int fd, out = -1;

    snprintf (path, sizeof (path), "/proc/%ld/environ", (long)pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    while (got < sizeof (buf) - 1 && (n = read (fd, buf + got, sizeof (buf) - 1 - got)) > 0)
        got += (size_t)n;
    close (fd);
    buf[got] = '\0';
    for (size_t off = 0; off < got; off += strlen (buf + off) + 1)
        if (!strncmp (buf + off, "PMI_FD=", 7)) {
            char *end;
            long v = strtol (buf + off + 7, &end, 10);
            if (end != buf + off + 7 && *end == '\0' && v >= 0 && v < INT_MAX)
                out = (int)v;
        }
    return out;
}

/* The inode of pid's fd when it is a socket; 0 otherwise. */
static uint64_t pmi_sock_ino (pid_t pid, int fd)
{
    char path[64], target[64];
    unsigned long long ino;
    ssize_t n;

    snprintf (path, sizeof (path), "/proc/%ld/fd/%d", (long)pid, fd);
    if ((n = readlink (path, target, sizeof (target) - 1)) < 0)
        return 0;
    target[n] = '\0';
    if (sscanf (target, "socket:[%llu]", &ino) != 1)
        return 0;
    return (uint64_t)ino;
}

/* The children of pid (all its threads'), appended to list. */
static void pmi_children (pid_t pid, pid_t *list, int *n, int max)
{
    char path[96];
    FILE *f;
    long c;

    snprintf (path, sizeof (path), "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    if (!(f = fopen (path, "re")))
        return;
    while (*n < max && fscanf (f, "%ld", &c) == 1)
        list[(*n)++] = (pid_t)c;
    fclose (f);
}

int pmi_find (pid_t root, int *fd, uint64_t *ino)
{
    pid_t list[PMI_MAX_PROCS];
    int n = 0;

    pmi_children (root, list, &n, PMI_MAX_PROCS);
    for (int i = 0; i < n; i++) {
        int f = pmi_env_fd (list[i]);
        uint64_t in;
        if (f >= 0 && (in = pmi_sock_ino (list[i], f)) != 0) {
            *fd = f;
            *ino = in;
            return 0;
        }
        pmi_children (list[i], list, &n, PMI_MAX_PROCS);
    }
    return -1;
}

static double pmi_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int pmi_greet (int fd, int timeout_ms, char *err, size_t len)
{
    const char *line = PMI_INIT_LINE;
    double deadline = pmi_now_ms () + timeout_ms;
    char buf[256];
    size_t got = 0;
    ssize_t n;
    int rc;

    do
        n = send (fd, line, strlen (line), MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)strlen (line)) {
        snprintf (err, len, "cannot greet the step's PMI server on fd %d: %s", fd,
                  n < 0 ? strerror (errno) : "short write");
        return -1;
    }
    /* One line back; nothing more comes before the client speaks again. */
    while (!memchr (buf, '\n', got)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int left = (int)(deadline - pmi_now_ms ());
        if (got >= sizeof (buf) - 1 || left <= 0 || poll (&p, 1, left) == 0) {
            snprintf (err, len, "the step's PMI server did not answer the init line on fd "
                      "%d within %d ms", fd, timeout_ms);
            return -1;
        }
        if ((n = recv (fd, buf + got, sizeof (buf) - 1 - got, MSG_DONTWAIT)) < 0
            && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            snprintf (err, len, "the step's PMI server closed fd %d at the init line: %s", fd,
                      n < 0 ? strerror (errno) : "end of file");
            return -1;
        }
        got += (size_t)n;
        buf[got] = '\0';
    }
    buf[strcspn (buf, "\n")] = '\0';
    if (sscanf (buf, "cmd=response_to_init rc=%d", &rc) != 1 || rc != 0) {
        snprintf (err, len, "the step's PMI server refused the init line: '%.200s'", buf);
        return -1;
    }
    return 0;
}
