/* fds.c - see fds.h. */
#include "config.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

#include "fds.h"

static int kept (int fd, const int *keep, int nkeep)
{
    for (int i = 0; i < nkeep; i++)
        if (keep[i] == fd)
            return 1;
    return 0;
}

/* Kernels before 5.9 have no close_range: walk /proc/self/fd. */
static void close_by_listing (const int *keep, int nkeep)
{
    DIR *d = opendir ("/proc/self/fd");
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir (d))) {
        int fd = atoi (e->d_name);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd > 2 && fd != dirfd (d)
            && !kept (fd, keep, nkeep))
            close (fd);
    }
    closedir (d);
}

void fds_close_except (const int *keep, int nkeep)
{
    unsigned lo = 3;

    /* Close the gaps between the kept fds, lowest first. */
    for (;;) {
        int next = -1;
        for (int i = 0; i < nkeep; i++)
            if (keep[i] >= (int)lo && (next < 0 || keep[i] < next))
                next = keep[i];
        unsigned hi = next < 0 ? ~0U : (unsigned)next - 1;
        if (hi >= lo && syscall (SYS_close_range, lo, hi, 0) < 0) {
            close_by_listing (keep, nkeep);
            return;
        }
        if (next < 0)
            return;
        lo = (unsigned)next + 1;
    }
}
