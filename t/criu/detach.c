/* detach.c - run a command the way CRIU can dump it on its own, as ibcr
 * run's init starts a task: in a session of its own and with no
 * descriptor above stderr.
 *
 * Both come from whoever runs the tests.  A CI runner may start them in a
 * session whose leader lies outside the PID namespace (CRIU: "A session
 * leader of N is outside of its pid namespace"), and may pass down a
 * socket whose peer lives outside the tree ("External socket is used").
 *
 * Usage: detach CMD [ARGS...]
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
        fprintf (stderr, "usage: detach CMD [ARGS...]\n");
        return 2;
    }
    /* Fails only for a process group leader: start us from a shell
     * pipeline or under timeout(1), never as a job leader. */
    if (setsid () < 0) {
        fprintf (stderr,
                 "detach: setsid: %s (a process group leader cannot "
                 "start a session; run detach as another process's child)\n",
                 strerror (errno));
        return 127;
    }
    if (syscall (SYS_close_range, 3U, ~0U, 0U) < 0) {
        fprintf (stderr, "detach: close_range: %s\n", strerror (errno));
        return 127;
    }
    execvp (argv[1], argv + 1);
    fprintf (stderr, "detach: %s: %s\n", argv[1], strerror (errno));
    return 127;
}
