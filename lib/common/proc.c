/* proc.c - see proc.h. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "proc.h"

/* /proc/PID/stat from just after the command name, into buf; NULL when
 * unreadable.  The name may hold spaces and parentheses: it ends at the
 * last ')'. */
static const char *stat_fields (pid_t pid, char *buf, size_t len)
{
    char path[64], *p;
    size_t n;
    FILE *f;

    snprintf (path, sizeof (path), "/proc/%ld/stat", (long)pid);
    if (!(f = fopen (path, "re")))
        return NULL;
    n = fread (buf, 1, len - 1, f);
    fclose (f);
    buf[n] = '\0';
    return (p = strrchr (buf, ')')) && p[1] == ' ' ? p + 2 : NULL;
}

char proc_state (pid_t pid)
{
    char buf[512];
    const char *p = stat_fields (pid, buf, sizeof (buf));

    return p ? p[0] : 0;
}

pid_t proc_ppid (pid_t pid)
{
    char buf[512];
    const char *p = stat_fields (pid, buf, sizeof (buf));
    long ppid = 0;

    if (!p || sscanf (p, "%*c %ld", &ppid) != 1)
        return 0;
    return (pid_t)ppid;
}

pid_t proc_first_child (pid_t pid)
{
    return proc_first_child_at (-1, pid);
}

pid_t proc_first_child_at (int procfd, pid_t pid)
{
    char path[96];
    long child = 0;
    FILE *f;
    int fd;

    snprintf (path, sizeof (path), "%s%ld/task/%ld/children", procfd < 0 ? "/proc/" : "",
              (long)pid, (long)pid);
    if ((fd = openat (procfd < 0 ? AT_FDCWD : procfd, path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    if (!(f = fdopen (fd, "r"))) {
        close (fd);
        return 0;
    }
    if (fscanf (f, "%ld", &child) != 1)
        child = 0;
    fclose (f);
    return (pid_t)child;
}
