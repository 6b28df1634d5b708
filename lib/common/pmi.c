/* pmi.c - see pmi.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "pmi.h"

/* At most this many processes of a task's tree are looked at. */
#define PMI_MAX_PROCS 256

/* Variable var (with its '=') of pid's environment, as an fd number, or -1.  The environment is the task's own
 * (its user may have changed it): it only says which of its own sockets
 * is the launcher's, and the fd must be a socket. */
static int pmi_env_fd (pid_t pid, const char *var)
{
    size_t vlen = strlen (var);
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
        if (!strncmp (buf + off, var, vlen)) {
            char *end;
            long v = strtol (buf + off + vlen, &end, 10);
            if (end != buf + off + vlen && *end == '\0' && v >= 0 && v < INT_MAX)
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

static int pmi_find_var (pid_t root, const char *var, int *fd, uint64_t *ino)
{
    pid_t list[PMI_MAX_PROCS];
    int n = 0;

    pmi_children (root, list, &n, PMI_MAX_PROCS);
    for (int i = 0; i < n; i++) {
        int f = pmi_env_fd (list[i], var);
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

int pmi_find (pid_t root, int *fd, uint64_t *ino)
{
    return pmi_find_var (root, "PMI_FD=", fd, ino);
}

int pmix_find (pid_t root, int *fd, uint64_t *ino)
{
    return pmi_find_var (root, PMIX_RELAY_ENV "=", fd, ino);
}

int pmi_greet (int fd, int timeout_ms, char *err, size_t len)
{
    const char *line = PMI_INIT_LINE;
    double deadline = mono_ms_f () + timeout_ms;
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
        int left = (int)(deadline - mono_ms_f ());
        if (got >= sizeof (buf) - 1 || left <= 0 || poll (&p, 1, left) == 0) {
            snprintf (err, len,
                      "the step's PMI server did not answer the init line on fd "
                      "%d within %d ms",
                      fd, timeout_ms);
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

size_t pmix_hello_size (const unsigned char *hdr)
{
    uint32_t nbytes;

    /* pindex (int32), tag (uint32), nbytes (uint32), padding */
    memcpy (&nbytes, hdr + 8, sizeof (nbytes));
    if (nbytes == 0 || nbytes > PMIX_HELLO_MAX - 16)
        return 0;
    return 16 + (size_t)nbytes;
}

/* pid's parent, or -1. */
static pid_t pmix_ppid (pid_t pid)
{
    char path[64], buf[1024], *p;
    long pp;
    ssize_t n;
    int fd;

    snprintf (path, sizeof (path), "/proc/%ld/stat", (long)pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (!(p = strrchr (buf, ')')) || sscanf (p + 1, " %*c %ld", &pp) != 1)
        return -1;
    return (pid_t)pp;
}

/* pid's fd, duplicated into ours (pidfd_getfd, Linux 5.6), or -1. */
static int pmix_getfd (pid_t pid, int fd)
{
    int pfd = (int)syscall (SYS_pidfd_open, pid, 0), out;

    if (pfd < 0)
        return -1;
    out = (int)syscall (SYS_pidfd_getfd, pfd, fd, 0);
    close (pfd);
    return out;
}

/* The memfd PMIX_HELLO_NAME among pid's fds, read into buf: its length,
 * 0 when pid holds none, -1 on error.  The user owns pid and may swap
 * its fds at any time: what is taken is checked, not what was listed. */
static ssize_t pmix_hello_at (pid_t pid, unsigned char *buf, size_t len)
{
    char path[320], target[128], self[64];
    const char *want = "/memfd:" PMIX_HELLO_NAME " (deleted)";
    struct dirent *e;
    ssize_t n, out = 0;
    struct stat sb;
    DIR *d;

    snprintf (path, sizeof (path), "/proc/%ld/fd", (long)pid);
    if (!(d = opendir (path)))
        return 0;
    while (out == 0 && (e = readdir (d))) {
        int fd;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf (path, sizeof (path), "/proc/%ld/fd/%s", (long)pid, e->d_name);
        if ((n = readlink (path, target, sizeof (target) - 1)) < 0)
            continue;
        target[n] = '\0';
        if (strcmp (target, want))
            continue;
        /* A copy of the process's own fd, not an open of what it names
         * (which the user may have swapped by now: opening a device or a
         * FIFO as root is not harmless). */
        if ((fd = pmix_getfd (pid, atoi (e->d_name))) < 0)
            continue;
        snprintf (self, sizeof (self), "/proc/self/fd/%d", fd);
        if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || sb.st_size <= 0
            || (size_t)sb.st_size > len || (n = readlink (self, target, sizeof (target) - 1)) < 0
            || (target[n] = '\0', strcmp (target, want))) {
            close (fd);
            out = -1;
            break;
        }
        n = pread (fd, buf, (size_t)sb.st_size, 0);
        close (fd);
        out = n == sb.st_size && pmix_hello_size (buf) == (size_t)n ? n : -1;
    }
    closedir (d);
    return out;
}

ssize_t pmix_hello_read (pid_t root, uid_t uid, unsigned char *buf, size_t len)
{
    pid_t p = root;

    /* The init's parent is the namespace's holder, its parent the waiter
     * (tasktree.h); a restored init has a restore's holder between. */
    for (int up = 0; up < 3; up++) {
        char path[64];
        struct stat sb;
        ssize_t n;

        if ((p = pmix_ppid (p)) <= 1)
            return 0;
        snprintf (path, sizeof (path), "/proc/%ld", (long)p);
        if (stat (path, &sb) < 0 || sb.st_uid != uid)
            continue;
        if ((n = pmix_hello_at (p, buf, len)) != 0)
            return n;
    }
    return 0;
}

/* Read exactly len bytes from fd before deadline.  0, or -1 with errno
 * (ETIMEDOUT, EPIPE at end of file). */
static int pmix_read_all (int fd, void *buf, size_t len, double deadline)
{
    char *p = buf;

    while (len > 0) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int left = (int)(deadline - mono_ms_f ());
        ssize_t n;
        if (left <= 0 || poll (&pf, 1, left) == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if ((n = recv (fd, p, len, MSG_DONTWAIT)) < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EPIPE;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int pmix_replay (int fd, const unsigned char *hello, size_t len, int timeout_ms, char *err,
                 size_t errlen)
{
    double deadline = mono_ms_f () + timeout_ms;
    uint32_t word[2];
    size_t off = 0;

    while (off < len) {
        ssize_t n = send (fd, hello + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf (err, errlen,
                      "cannot say the rank's PMIx connect message to the step's "
                      "PMIx server: %s",
                      n < 0 ? strerror (errno) : "short write");
            return -1;
        }
        off += (size_t)n;
    }
    if (pmix_read_all (fd, &word[0], sizeof (word[0]), deadline) < 0) {
        snprintf (err, errlen,
                  "the step's PMIx server did not answer the rank's connect "
                  "message: %s",
                  errno == EPIPE ? "it closed the connection (an nspace or "
                                   "rank it does not serve?)"
                                 : strerror (errno));
        return -1;
    }
    if (ntohl (word[0]) != 0) {
        snprintf (err, errlen,
                  "the step's PMIx server refused the rank's connect message "
                  "(status %d)",
                  (int)ntohl (word[0]));
        return -1;
    }
    if (pmix_read_all (fd, &word[1], sizeof (word[1]), deadline) < 0) {
        snprintf (err, errlen,
                  "the step's PMIx server accepted the rank but sent no index: "
                  "%s",
                  strerror (errno));
        return -1;
    }
    return 0;
}
