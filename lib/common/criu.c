/* criu.c - see criu.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criu.h"
#include "taskns.h"
#include "errbuf.h"
#include "clock.h"
#include "fds.h"

void criu_log_errors (const char *log, int max, char *buf, size_t len)
{
    char line[1024];
    size_t off = 0;
    int n = 0;
    FILE *f;

    if (len)
        buf[0] = '\0';
    if (!log || !(f = fopen (log, "r")))
        return;
    while (n < max && fgets (line, sizeof (line), f)) {
        if (!strstr (line, "Error") && !strstr (line, "error:"))
            continue;
        /* Logged by every run without CAP_SYS_RESOURCE, and harmless. */
        if (strstr (line, "RLIMIT_NOFILE"))
            continue;
        line[strcspn (line, "\n")] = '\0';
        /* CRIU prefixes "(00.012345) Error (criu/file.c:123): ": keep
         * the message, which is what the user reads. */
        char *msg = strstr (line, "): ");
        msg = msg ? msg + 3 : line;
        int w = snprintf (buf + off, len - off, "%s%s", n ? " | " : "", msg);
        if (w < 0 || (size_t)w >= len - off)
            break;
        off += w;
        n++;
    }
    fclose (f);
}

static char *dump_script;

void criu_set_dump_script (const char *path)
{
    free (dump_script);
    dump_script = path ? strdup (path) : NULL;
}

pid_t criu_start_as (char *const argv[], const char *log, const int *keep, int nkeep,
                     const struct taskns_as *as)
{
    pid_t pid = fork ();

    if (pid != 0)
        return pid;
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    signal (SIGPIPE, SIG_DFL);
    int nul = open ("/dev/null", O_RDWR);
    /* Root writes the log, never following a link planted in its place. */
    int lfd = log ? open (log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    if (nul >= 0) {
        dup2 (nul, 0);
        /* A user's criu cannot open root's log: "-o -" (below) makes it
         * write to its stdout, which is that log. */
        dup2 (as && as->uid != 0 && lfd >= 0 ? lfd : nul, 1);
        dup2 (lfd >= 0 ? lfd : nul, 2);
    }
    fds_close_except (keep, nkeep);
    for (int i = 0; i < nkeep; i++)
        if (keep[i] > 2)
            fcntl (keep[i], F_SETFD, 0); /* criu inherits them */
    /* The binary is found here, before any namespace is entered: inside
     * one, the path could name something else. */
    int xfd = open (argv[0], O_PATH | O_CLOEXEC);
    if (xfd < 0) {
        fprintf (stderr, "cannot run %s: %s\n", argv[0], strerror (errno));
        _exit (127);
    }
    if (as) {
        char err[512];
        if (taskns_become (as, err, sizeof (err)) < 0) {
            fprintf (stderr, "Error (ibcr): %s\n", err);
            _exit (126);
        }
    }
    {
        int n = 0;
        while (argv[n])
            n++;
        char *av[n + 4];
        int ac = 0, user = as && as->uid != 0;
        for (int i = 0; i < n; i++) {
            av[ac++] = argv[i];
            if (user && !strcmp (argv[i], "-o") && i + 1 < n) {
                av[ac++] = "-";
                i++;
            }
        }
        if (user)
            av[ac++] = "--unprivileged";
        if (dump_script && n > 1 && !strcmp (argv[1], "dump")) {
            av[ac++] = "--action-script";
            av[ac++] = dump_script;
        }
        av[ac] = NULL;
        execveat (xfd, "", av, environ, AT_EMPTY_PATH);
    }
    fprintf (stderr, "cannot run %s: %s\n", argv[0], strerror (errno));
    _exit (127);
}

pid_t criu_start (char *const argv[], const char *log, const int *keep, int nkeep)
{
    return criu_start_as (argv, log, keep, nkeep, NULL);
}

int criu_run (char *const argv[], const char *log, const int *keep, int nkeep, int timeout_ms,
              char *err, size_t len)
{
    return criu_run_as (argv, log, keep, nkeep, NULL, timeout_ms, err, len);
}

int criu_run_as (char *const argv[], const char *log, const int *keep, int nkeep,
                 const struct taskns_as *as, int timeout_ms, char *err, size_t len)
{
    long deadline = mono_ms () + timeout_ms;
    char errs[1024];
    int status, saved;
    pid_t pid, w;

    if (access (argv[0], X_OK) < 0) {
        saved = errno;
        return errnprintf (err, len, ENOENT,
                           "cannot run criu '%s': %s (set criu = PATH in ibcrd.conf; CRIU "
                           ">= 4.1 is needed on kernels >= 6.13)",
                           argv[0], strerror (saved));
    }
    if ((pid = criu_start_as (argv, log, keep, nkeep, as)) < 0) {
        return errprintf (err, len, "cannot fork criu: %s", strerror (errno));
    }
    for (long sleep_us = 1000;;) {
        w = waitpid (pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            return errprintf (err, len, "lost track of criu (pid %ld): %s", (long)pid,
                              strerror (errno));
        }
        if (timeout_ms >= 0 && mono_ms () > deadline) {
            kill (pid, SIGKILL);
            waitpid (pid, &status, 0);
            criu_log_errors (log, 3, errs, sizeof (errs));
            return errnprintf (err, len, ETIMEDOUT,
                               "criu %s did not finish within %d ms and was killed%s%s; "
                               "log: %s (raise timeout_dump in ibcrd.conf if the job is large)",
                               argv[1], timeout_ms, errs[0] ? ": " : "", errs, log ? log : "-");
        }
        usleep (sleep_us);
        if (sleep_us < 20000)
            sleep_us *= 2;
    }
    if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        return 0;
    criu_log_errors (log, 3, errs, sizeof (errs));
    if (WIFEXITED (status))
        return errnprintf (err, len, EIO, "criu %s failed (exit code %d): %s; log: %s", argv[1],
                           WEXITSTATUS (status), errs[0] ? errs : "no error line in its log",
                           log ? log : "-");
    return errnprintf (err, len, EIO, "criu %s was killed by signal %d%s%s; log: %s", argv[1],
                       WTERMSIG (status), errs[0] ? ": " : "", errs, log ? log : "-");
}
