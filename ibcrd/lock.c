/* lock.c - see lock.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "lock.h"

long lock_read_pidfile (const char *pidfile)
{
    FILE *f = fopen (pidfile, "r");
    long pid = -1;

    if (f) {
        if (fscanf (f, "%ld", &pid) != 1)
            pid = -1;
        fclose (f);
    }
    return pid;
}

int lock_acquire (const char *socket, const char *pidfile, char *err, size_t len)
{
    char path[PATH_MAX];
    int fd;

    if (snprintf (path, sizeof (path), "%s.lock", socket) >= (int)sizeof (path))
        return errnprintf (err, len, ENAMETOOLONG, "lock file name for %s is too long", socket);
    if ((fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
        return errprintf (err, len, "cannot open lock file %s: %s", path, strerror (errno));
    if (flock (fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        long pid = lock_read_pidfile (pidfile);
        close (fd);
        if (e != EWOULDBLOCK)
            return errnprintf (err, len, e, "cannot lock %s: %s", path, strerror (e));
        if (pid > 0)
            return errnprintf (err, len, EADDRINUSE,
                               "another ibcrd (pid %ld) is already "
                               "serving %s; stop it first or give this one another socket",
                               pid, socket);
        return errnprintf (err, len, EADDRINUSE,
                           "another ibcrd holds %s, so it is serving %s; "
                           "stop it first or give this one another socket",
                           path, socket);
    }
    return fd;
}

int lock_write_pidfile (const char *pidfile, char *err, size_t len)
{
    char tmp[PATH_MAX];
    FILE *f;

    if (snprintf (tmp, sizeof (tmp), "%s.tmp", pidfile) >= (int)sizeof (tmp))
        return errnprintf (err, len, ENAMETOOLONG, "pid file name %s is too long", pidfile);
    if (!(f = fopen (tmp, "w")))
        return errprintf (err, len, "cannot write pid file %s: %s", tmp, strerror (errno));
    fprintf (f, "%ld\n", (long)getpid ());
    if (fclose (f) != 0 || rename (tmp, pidfile) < 0) {
        int e = errno;
        unlink (tmp);
        return errnprintf (err, len, e, "cannot write pid file %s: %s", pidfile, strerror (e));
    }
    return 0;
}
