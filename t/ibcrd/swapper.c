/* swapper - test helper: the job user's side of a race against root's
 * commit.  Until STOP exists (or SECONDS passed), for every generation
 * of JOBDIR not yet committed (no manifest.json) and every task folder in
 * it, atomically exchange the folder with a symbolic link to VICTIM
 * (renameat2 RENAME_EXCHANGE), over and over, so that a path walk of
 * root's meets a folder when it looks and the link when it acts.  Prints
 * how many exchanges it made.  It only ever works with its caller's own
 * rights: run it as the user.
 *
 * Usage: swapper JOBDIR VICTIM STOP SECONDS
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int exchange (int dfd, const char *a, const char *b)
{
    return (int)syscall (SYS_renameat2, dfd, a, dfd, b, RENAME_EXCHANGE);
}

/* One pass over the task folders of the open generation gfd. */
static long pass (int gfd, const char *victim)
{
    DIR *d;
    struct dirent *e;
    long n = 0;
    int fd = openat (gfd, ".", O_RDONLY | O_DIRECTORY);

    if (fd < 0 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        return 0;
    }
    while ((e = readdir (d))) {
        char lnk[300];
        if (strncmp (e->d_name, "task-", 5) || strchr (e->d_name, '.'))
            continue;
        snprintf (lnk, sizeof (lnk), ".%s.lnk", e->d_name);
        (void)symlinkat (victim, gfd, lnk);
        for (int i = 0; i < 50; i++)
            if (exchange (gfd, e->d_name, lnk) == 0)
                n++;
    }
    closedir (d);
    return n;
}

int main (int argc, char **argv)
{
    long n = 0;
    time_t end;

    if (argc != 5) {
        fprintf (stderr, "Usage: swapper JOBDIR VICTIM STOP SECONDS\n");
        return 2;
    }
    end = time (NULL) + atoi (argv[4]);
    while (access (argv[3], F_OK) < 0 && time (NULL) < end) {
        DIR *d = opendir (argv[1]);
        struct dirent *e;

        if (!d) {
            usleep (1000);
            continue;
        }
        while ((e = readdir (d))) {
            int gfd;
            if (strncmp (e->d_name, "gen-", 4))
                continue;
            if ((gfd = openat (dirfd (d), e->d_name, O_RDONLY | O_DIRECTORY)) < 0)
                continue;
            if (faccessat (gfd, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                n += pass (gfd, argv[2]);
            close (gfd);
        }
        closedir (d);
    }
    printf ("%ld\n", n);
    return 0;
}
