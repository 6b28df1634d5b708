/* worker.c - see worker.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "worker.h"
#include "common/fds.h"

static int log_syslog, log_level = LOG_INFO;

void worker_set_log (int to_syslog, int level)
{
    log_syslog = to_syslog;
    log_level = level;
}

/* In the child: signals as a plain process, only our fds, our log. */
static void child_setup (int asker_fd, const int *keep, int nkeep)
{
    struct sigaction sa = { .sa_handler = SIG_DFL };
    sigset_t none;

    /* The daemon's handlers only set its flags; here they would hide a
     * SIGTERM meant to stop this worker. */
    sigaction (SIGHUP, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGCHLD, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction (SIGPIPE, &sa, NULL);
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    int kept[nkeep + 1];
    for (int i = 0; i < nkeep; i++)
        kept[i] = keep[i];
    kept[nkeep] = asker_fd;
    fds_close_except (kept, nkeep + 1);
    log_open ("ibcrd", log_syslog ? LOG_TO_SYSLOG : LOG_TO_STDERR, log_level);
}

/* In the child: no phase reported yet.  The reports are a few dozen
 * short frames per generation, far below the socket pair's buffer, so
 * sending them never waits for the daemon to read. */
static void worker_report_setup (struct gen *g)
{
    g->phase = -1;
}

pid_t worker_start (struct gen *g, int asker_fd, const int *keep, int nkeep)
{
    pid_t pid = fork ();
    int rc;

    if (pid != 0)
        return pid;
    child_setup (asker_fd, keep, nkeep);
    worker_report_setup (g);
    rc = gen_run (g);
    gen_report_end (g, rc);
    if (asker_fd >= 0) {
        json_object *rep = gen_reply (g, rc);
        if (rep && proto_send (asker_fd, rep) < 0)
            log_msg (LOG_WARNING, "job %s: the asker left before the reply: %s", g->job,
                     strerror (errno));
        json_object_put (rep);
    }
    _exit (rc == 0 ? 0 : 1);
}

pid_t worker_start_member (struct gen *g, const int *keep, int nkeep)
{
    pid_t pid = fork ();
    int rc;

    if (pid != 0)
        return pid;
    child_setup (g->member_lfd, keep, nkeep);
    worker_report_setup (g);
    rc = gen_member_serve (g);
    gen_report_end (g, rc);
    _exit (rc == 0 ? 0 : 1);
}

pid_t worker_fork (int asker_fd)
{
    pid_t pid = fork ();

    if (pid == 0)
        child_setup (asker_fd, NULL, 0);
    return pid;
}
