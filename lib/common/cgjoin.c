/* cgjoin.c - see cgjoin.c. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgjoin.h"

/* Does the comma-separated list 'opts' hold every item of 'want'? */
static int cgjoin_has_all (const char *opts, const char *want)
{
    char w[256], *save = NULL, *item;
    char o[1040];

    snprintf (w, sizeof (w), "%s", want);
    for (item = strtok_r (w, ",", &save); item; item = strtok_r (NULL, ",", &save)) {
        size_t n = strlen (item);
        const char *p = o;
        int found = 0;
        snprintf (o, sizeof (o), ",%s,", opts);
        while ((p = strstr (p, item))) {
            if (p[-1] == ',' && p[n] == ',') {
                found = 1;
                break;
            }
            p++;
        }
        if (!found)
            return 0;
    }
    return 1;
}

/* The folder of hierarchy 'ctrls' ("" for v2) holding 'path', through a
 * mount of it, into dir.  0, or -1 when no mount reaches it. */
static int cgjoin_dir (const char *ctrls, const char *path, char *dir, size_t len)
{
    FILE *f = fopen ("/proc/self/mountinfo", "r");
    char line[4096];
    int rc = -1;

    if (!f)
        return -1;
    while (rc < 0 && fgets (line, sizeof (line), f)) {
        char root[PATH_MAX], mnt[PATH_MAX], fstype[64], opts[1024];
        const char *sep = strstr (line, " - ");
        size_t rl;

        if (!sep || sscanf (line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2
            || sscanf (sep + 3, "%63s %*s %1023s", fstype, opts) != 2)
            continue;
        if (*ctrls ? strcmp (fstype, "cgroup") || !cgjoin_has_all (opts, ctrls)
                   : strcmp (fstype, "cgroup2"))
            continue;
        rl = strlen (root);
        if (!strcmp (root, "/"))
            rl = 0;
        else if (strncmp (path, root, rl) || (path[rl] != '/' && path[rl] != '\0'))
            continue;
        if ((size_t)snprintf (dir, len, "%s%s", mnt, path + rl) < len)
            rc = 0;
    }
    fclose (f);
    return rc;
}

static int cgjoin_write_pid (const char *dir, pid_t pid)
{
    char file[PATH_MAX + 16], buf[32];
    int fd, n, rc = 0;

    snprintf (file, sizeof (file), "%s/cgroup.procs", dir);
    if ((fd = open (file, O_WRONLY | O_CLOEXEC)) < 0)
        return -1;
    n = snprintf (buf, sizeof (buf), "%ld\n", (long)pid);
    if (write (fd, buf, (size_t)n) != n)
        rc = -1;
    if (close (fd) < 0)
        rc = -1;
    return rc;
}

int cgjoin_join (pid_t pid, char *err, size_t errlen)
{
    char file[64], line[4096], dir[PATH_MAX];
    FILE *f;
    int rc = 0;

    snprintf (file, sizeof (file), "/proc/%ld/cgroup", (long)pid);
    if (!(f = fopen (file, "r"))) {
        snprintf (err, errlen, "cannot read %s: %s", file, strerror (errno));
        return -1;
    }
    while (rc == 0 && fgets (line, sizeof (line), f)) {
        char *c1 = strchr (line, ':'), *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
        char ctrls[256];
        int must;

        if (!c2)
            continue;
        line[strcspn (line, "\n")] = '\0';
        snprintf (ctrls, sizeof (ctrls), "%.*s", (int)(c2 - c1 - 1), c1 + 1);
        /* Only hierarchies with real controllers decide whether Slurm can
         * track the process; name=systemd and v2 are Slurm's business
         * only with other plugins, so trying is enough. */
        must = *ctrls && strncmp (ctrls, "name=", 5);
        if (cgjoin_dir (ctrls, c2 + 1, dir, sizeof (dir)) < 0) {
            if (must) {
                snprintf (err, errlen,
                          "no mount of cgroup hierarchy %s reaches %s "
                          "(/proc/self/mountinfo)",
                          ctrls, c2 + 1);
                rc = -1;
            }
            continue;
        }
        if (cgjoin_write_pid (dir, getpid ()) < 0 && must) {
            snprintf (err, errlen, "cannot join cgroup %s/cgroup.procs: %s", dir, strerror (errno));
            rc = -1;
        }
    }
    fclose (f);
    return rc;
}

static char *cgjoin_read (pid_t pid)
{
    char file[64];
    FILE *f;
    char *buf = NULL;
    size_t len = 0;

    snprintf (file, sizeof (file), "/proc/%ld/cgroup", (long)pid);
    if (!(f = open_memstream (&buf, &len)))
        return NULL;
    {
        FILE *in = fopen (file, "r");
        int c;
        if (!in) {
            fclose (f);
            free (buf);
            return NULL;
        }
        while ((c = fgetc (in)) != EOF)
            fputc (c, f);
        fclose (in);
    }
    fclose (f);
    return buf;
}

int cgjoin_same (pid_t a, pid_t b)
{
    char *x = cgjoin_read (a), *y = cgjoin_read (b);
    int rc = x && y ? !strcmp (x, y) : -1;

    free (x);
    free (y);
    return rc;
}
