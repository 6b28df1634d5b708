/* nofds.c - run a command with no descriptor above stderr, as ibcr run's
 * init does for a task: a descriptor inherited from whoever started the
 * test (a CI runner's socket, say) would lead out of the process tree and
 * make CRIU refuse to dump it.
 *
 * Usage: nofds CMD [ARGS...]
 */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/close_range.h>

int main (int argc, char *argv[])
{
    if (argc < 2) {
        fprintf (stderr, "usage: nofds CMD [ARGS...]\n");
        return 2;
    }
    if (syscall (SYS_close_range, 3U, ~0U, 0U) < 0) {
        fprintf (stderr, "nofds: close_range: %s\n", strerror (errno));
        return 127;
    }
    execvp (argv[1], argv + 1);
    fprintf (stderr, "nofds: %s: %s\n", argv[1], strerror (errno));
    return 127;
}
