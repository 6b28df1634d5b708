/* proc.c - see proc.h. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>

#include <errno.h>
#include <stdlib.h>
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

    snprintf (path, sizeof (path), "%s%ld/task/%ld/children", procfd < 0 ? "/proc/" : "", (long)pid,
              (long)pid);
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

/* Has pid an fd whose link reads target? */
static int proc_has_fd (pid_t pid, const char *target)
{
    char path[64], link[64];
    struct dirent *e;
    int found = 0;
    DIR *d;

    snprintf (path, sizeof (path), "/proc/%ld/fd", (long)pid);
    if (!(d = opendir (path)))
        return 0;
    while (!found && (e = readdir (d))) {
        ssize_t n;
        if (e->d_name[0] == '.')
            continue;
        n = readlinkat (dirfd (d), e->d_name, link, sizeof (link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        found = !strcmp (link, target);
    }
    closedir (d);
    return found;
}

/* Append the children of every thread of pid to list (of *n, at most
 * max). */
static void proc_children (pid_t pid, pid_t *list, int *n, int max)
{
    char path[64];
    struct dirent *e;
    DIR *d;

    snprintf (path, sizeof (path), "/proc/%ld/task", (long)pid);
    if (!(d = opendir (path)))
        return;
    while (*n < max && (e = readdir (d))) {
        char cpath[128];
        long child;
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf (cpath, sizeof (cpath), "/proc/%ld/task/%.20s/children", (long)pid, e->d_name);
        if (!(f = fopen (cpath, "re")))
            continue;
        while (*n < max && fscanf (f, "%ld", &child) == 1)
            list[(*n)++] = (pid_t)child;
        fclose (f);
    }
    closedir (d);
}

pid_t proc_tree_find_fd (pid_t root, const char *target)
{
    enum { MAX = 4096, DEPTH = 64 };
    pid_t *list = malloc (MAX * sizeof (*list)), found = 0;
    int n = 0, level_start = 0;

    if (!list || root <= 0)
        goto out;
    list[n++] = root;
    /* Breadth first, a level at a time: bounded in depth and in count
     * through a /proc that changes under us. */
    for (int depth = 0; depth < DEPTH && level_start < n && !found; depth++) {
        int level_end = n;
        for (int i = level_start; i < level_end && !found; i++)
            if (proc_has_fd (list[i], target))
                found = list[i];
        for (int i = level_start; i < level_end && !found; i++)
            proc_children (list[i], list, &n, MAX);
        level_start = level_end;
    }
out:
    free (list);
    return found;
}

int proc_ident (pid_t pid, struct proc_ident *id)
{
    char buf[1024], path[64], line[256];
    const char *p = stat_fields (pid, buf, sizeof (buf));
    unsigned long u[4];
    int found = 0;
    FILE *f;

    /* Field 22 (starttime) is the 20th after the command name. */
    if (!p
        || sscanf (p,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                   "%*d %*d %*d %*d %llu",
                   &id->start)
            != 1) {
        errno = ESRCH;
        return -1;
    }
    snprintf (path, sizeof (path), "/proc/%ld/status", (long)pid);
    if (!(f = fopen (path, "re"))) {
        errno = ESRCH;
        return -1;
    }
    while (!found && fgets (line, sizeof (line), f))
        found = sscanf (line, "Uid: %lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]) == 4;
    fclose (f);
    if (!found) {
        errno = ESRCH;
        return -1;
    }
    for (int i = 0; i < 4; i++)
        id->uid[i] = (uid_t)u[i];
    return 0;
}

int proc_ident_all_uid (const struct proc_ident *id, uid_t uid)
{
    for (int i = 0; i < 4; i++)
        if (id->uid[i] != uid)
            return 0;
    return 1;
}
