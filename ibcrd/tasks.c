/* tasks.c - see tasks.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "common/cgjoin.h"
#include "common/errbuf.h"
#include "common/fds.h"
#include "common/ident.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/proto.h"
#include "common/restore.h"
#include "common/taskns.h"
#include "common/tasktree.h"
#include "imgcopy.h"
#include "jobs.h"
#include "request.h"
#include "tasks.h"
#include "worker.h"

#ifndef PKGLIBEXECDIR
#define PKGLIBEXECDIR "/usr/local/libexec/ibcr"
#endif

/* Exit code of a task that could not be started (as env(1)). */
#define TASKS_EXIT_FAILURE 125

/* How long a relay waits for the client's fds. */
#define TASKS_FDS_TIMEOUT_MS 10000

/* At most this many argv or env strings in a spawn request. */
#define TASKS_MAX_STRINGS 4096

/* The relays alive, with their user: a user may hold at most
 * max_registrations_per_uid of them, as of registered tasks. */
#define TASKS_MAX_RELAYS 1024
static struct {
    pid_t pid;
    uid_t uid;
    int request; /* a tasks_in_child child, not a relay */
} relays[TASKS_MAX_RELAYS];

/* tasks_in_child's children at once: of one user, of all. */
#define TASKS_MAX_REQUESTS_PER_UID 4
#define TASKS_MAX_REQUESTS 64
static int nrelays;

int tasks_relay_done (pid_t pid)
{
    for (int i = 0; i < nrelays; i++)
        if (relays[i].pid == pid) {
            relays[i] = relays[--nrelays];
            return 1;
        }
    return 0;
}

/* Children of uid ((uid_t)-1: of all); requests: tasks_in_child's only. */
static int children_of (uid_t uid, int requests)
{
    int n = 0;

    for (int i = 0; i < nrelays; i++)
        n += (!requests || relays[i].request) && (uid == (uid_t)-1 || relays[i].uid == uid);
    return n;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/* The process that connected, pinned by a pidfd (close-on-exec) in the
 * relay: -1 when neither way below worked. */
static int client_pidfd = -1;

/* In the relay, first: SO_PEERPIDFD names the process that connected
 * even once its pid is another's; before Linux 6.5, a pidfd of the
 * SO_PEERCRED pid while the connection lives is the next best. */
static void relay_pin_client (int fd, pid_t client)
{
    socklen_t len = sizeof (client_pidfd);

    if (getsockopt (fd, SOL_SOCKET, SO_PEERPIDFD, &client_pidfd, &len) < 0)
        client_pidfd = (int)syscall (SYS_pidfd_open, client, 0);
}

/* Into the cgroups of the process that asked, and of no other: the pid
 * is read from /proc, so only if that process still lives afterwards
 * (its pidfd says so) was it its.  0; -1 (err) when not joined: the
 * task stays in ibcrd's cgroups; -2 (err) when the asker is gone, and
 * the cgroups joined may be another process's: refuse. */
static int relay_cgjoin (pid_t client, char *err, size_t len)
{
    if (client_pidfd < 0) {
        snprintf (err, len, "the process that asked (pid %ld) cannot be pinned: %s", (long)client,
                  strerror (errno));
        return -2;
    }
    if (cgjoin_join (client, err, len) < 0)
        return -1;
    if (syscall (SYS_pidfd_send_signal, client_pidfd, 0, NULL, 0) < 0) {
        snprintf (err, len,
                  "the process that asked (pid %ld) has exited, and its pid may "
                  "be another process's now",
                  (long)client);
        return -2;
    }
    return 0;
}

/* Send msg (taken over) on fd; errors are the client's loss. */
static void relay_send (int fd, json_object *msg)
{
    if (msg && proto_send (fd, msg) < 0)
        log_msg (LOG_INFO, "relay: the client left: %s", strerror (errno));
    json_object_put (msg);
}

/* Receive one byte with between min and max fds attached, within the
 * relay's timeout.  The number of fds (into fds[], close-on-exec), or -1
 * with err. */
static int relay_recv_fds (int fd, int *fds, int min, int max, char *err, size_t len)
{
    char cbuf[CMSG_SPACE ((RESTORE_MAX_CTL + 4) * sizeof (int))], byte;
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    struct msghdr mh = { 0 };
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    struct cmsghdr *cm;
    ssize_t n;
    int nfds;

    if (poll (&pfd, 1, TASKS_FDS_TIMEOUT_MS) <= 0) {
        snprintf (err, len, "the client sent no file descriptors within %d s",
                  TASKS_FDS_TIMEOUT_MS / 1000);
        return -1;
    }
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof (cbuf);
    do
        n = recvmsg (fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    cm = n == 1 ? CMSG_FIRSTHDR (&mh) : NULL;
    if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS
        || (mh.msg_flags & MSG_CTRUNC)) {
        if (cm && cm->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++)
                (void)close (((int *)CMSG_DATA (cm))[i]);
        snprintf (err, len, "expected one byte with %d to %d file descriptors", min, max);
        return -1;
    }
    nfds = (int)((cm->cmsg_len - CMSG_LEN (0)) / sizeof (int));
    /* Counted before they are copied: fds holds max of them only. */
    if (nfds < min || nfds > max) {
        for (int i = 0; i < nfds; i++)
            (void)close (((int *)CMSG_DATA (cm))[i]);
        snprintf (err, len, "%d file descriptors sent, expected %d to %d", nfds, min, max);
        return -1;
    }
    memcpy (fds, CMSG_DATA (cm), (size_t)nfds * sizeof (int));
    return nfds;
}

/* The ids a task of uid runs with: gid, and uid's groups from the user
 * database (as a login gets them).  0, or -1 with err. */
static int user_ids (uid_t uid, gid_t gid, struct taskns_as *as, char *err, size_t len)
{
    struct passwd pw, *pp = NULL;
    char buf[16384];
    int n = (int)(sizeof (as->groups) / sizeof (as->groups[0]));

    memset (as, 0, sizeof (*as));
    as->uid = uid;
    as->gid = gid;
    if (getpwuid_r (uid, &pw, buf, sizeof (buf), &pp) != 0 || !pp) {
        snprintf (err, len, "uid %u has no entry in the user database", (unsigned)uid);
        return -1;
    }
    if (gid == (gid_t)-1)
        as->gid = pw.pw_gid;
    if (getgrouplist (pw.pw_name, as->gid, as->groups, &n) < 0) {
        snprintf (err, len, "user %s is in more than %d groups", pw.pw_name, n);
        return -1;
    }
    as->ngroups = (size_t)n;
    as->have_ids = 1;
    return 0;
}

/* Wait for our child 'child' (the task's waiter or holder) to end, while
 * the client may hang up: then the task is asked to end (SIGTERM, as a
 * terminal's hang-up would).  Then "exited" with its wait status. */
static void __attribute__ ((noreturn)) relay_wait (int fd, pid_t child, pid_t init)
{
    int status = 0, told = 0;
    json_object *o;

    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = told ? 0 : POLLIN };
        pid_t w = waitpid (child, &status, WNOHANG);

        if (w == child || (w < 0 && errno != EINTR))
            break;
        if (poll (&pfd, 1, 200) > 0 && !told) {
            char junk[256];
            ssize_t n = recv (fd, junk, sizeof (junk), MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                log_msg (LOG_INFO,
                         "relay: the client of task init %ld left: ending the "
                         "task",
                         (long)init);
                (void)kill (init, SIGTERM);
                told = 1;
            }
        }
    }
    o = proto_new ("exited");
    proto_set_int (o, "status", status);
    relay_send (fd, o);
    _exit (0);
}

/* Pipe from the task's waiter to the relay: 'P' with the init's and the
 * application's pids, or 'E' with why the task did not start. */
struct spawn_report {
    char tag;
    int32_t init, app;
};

/* The pipes between the task's waiter and the relay. */
struct spawn_pipes {
    int rep; /* waiter -> relay: struct spawn_report */
    int go;  /* relay -> waiter: 'g' once the client registered the task */
};

/* In the waiter, before the application may run: say its pids, then
 * wait for the client's registration (so not one instruction of it runs
 * unprotected, and a short program cannot end before it is known). */
static int spawn_started (pid_t init, pid_t app, void *arg)
{
    struct spawn_report r = { .tag = 'P', .init = (int32_t)init, .app = (int32_t)app };
    const struct spawn_pipes *p = arg;
    char c = 0;

    if (write (p->rep, &r, sizeof (r)) != (ssize_t)sizeof (r))
        return -1;
    while (read (p->go, &c, 1) < 0 && errno == EINTR)
        ;
    return c == 'g' ? 0 : -1;
}

static void __attribute__ ((noreturn)) spawn_fail (int fd, const char *fmt, const char *why)
{
    char buf[1200];
    int n = snprintf (buf, sizeof (buf), "E");

    n += snprintf (buf + n, sizeof (buf) - (size_t)n, fmt, why);
    (void)write (fd, buf, (size_t)(n < (int)sizeof (buf) ? n : (int)sizeof (buf) - 1));
    _exit (TASKS_EXIT_FAILURE);
}

/* fchdir to fd with the permission checks of the user in as (an O_PATH
 * fd needs no right on the folder itself): file-system ids and groups
 * are the user's meanwhile, which also drops root's file capabilities
 * from the effective set.  0, or -1 with errno. */
static int user_chdir (const struct taskns_as *as, int fd)
{
    int rc, saved;

    if (setgroups (as->ngroups, as->groups) < 0)
        return -1;
    (void)setfsgid (as->gid);
    (void)setfsuid (as->uid);
    rc = fchdir (fd);
    saved = errno;
    (void)setfsuid (0);
    (void)setfsgid (0);
    (void)setgroups (0, NULL);
    errno = saved;
    return rc;
}

/* The task process, forked by the relay as root: into the client's
 * cgroups, new namespaces, the user's ids, then split into holder, init
 * and application (tasktree.h); the application execs argv in its
 * working folder, with its environment. */
static void __attribute__ ((noreturn))
spawn_task (pid_t client, const struct taskns_as *as, const int fds[3], char **argv, char **envp,
            const char *init, const struct spawn_pipes *p)
{
    int rep = p->rep;
    char err[1024];
    int nul;

    switch (relay_cgjoin (client, err, sizeof (err))) {
    case -2:
        spawn_fail (rep, "%s", err);
    case -1:
        log_msg (LOG_INFO, "task of client pid %ld stays in ibcrd's cgroups: %s", (long)client,
                 err);
    }
    (void)close (client_pidfd);
    /* Before the new mount namespace: unshare moves the working folder
     * into it, while a folder entered later by an fd from outside would
     * stay on a mount the task's namespace does not have (CRIU cannot
     * dump that).  fchdir follows nothing: the fd is what the user
     * opened. */
    if (user_chdir (as, fds[0]) < 0)
        spawn_fail (rep, "cannot enter the working folder: %s", strerror (errno));
    /* The whole tree (holder, init, application) has the user's stdio
     * and nothing of the daemon's: 0..2 were ibcrd's (its log). */
    if ((nul = open ("/dev/null", O_RDONLY)) < 0 || dup2 (nul, 0) < 0 || dup2 (fds[1], 1) < 0
        || dup2 (fds[2], 2) < 0)
        spawn_fail (rep, "cannot set up the task's stdio: %s", strerror (errno));
    for (int i = 0; i < 3; i++)
        if (fds[i] > 2)
            (void)close (fds[i]);
    if (nul > 2)
        (void)close (nul);
    if (tasktree_prepare (err, sizeof (err)) < 0)
        spawn_fail (rep, "cannot make the task's namespaces: %s", err);
    if (taskns_drop (as, err, sizeof (err)) < 0)
        spawn_fail (rep, "%s", err);
    tasktree_set_init (init);
    int keep[2] = { p->rep, p->go };
    if (tasktree_start (spawn_started, (void *)p, keep, 2, err, sizeof (err)) < 0)
        spawn_fail (rep, "cannot start the task: %s", err);
    /* The application, as the user: its folder, its stdio, its
     * environment; nothing else of ours. */
    fds_close_except (NULL, 0);
    /* The command is looked up in the user's PATH, not ibcrd's. */
    environ = envp;
    execvp (argv[0], argv);
    fprintf (stderr, "ibcr: cannot run %s: %s\n", argv[0], strerror (errno));
    _exit (errno == ENOENT ? 127 : 126);
}

/* A JSON array of strings as a NULL-terminated vector (pointing into
 * the request), or NULL with err. */
static char **string_vector (json_object *req, const char *key, int need_one, char *err, size_t len)
{
    json_object *a;
    size_t n;
    char **v;

    if (!json_object_object_get_ex (req, key, &a) || !json_object_is_type (a, json_type_array)
        || (n = json_object_array_length (a)) > TASKS_MAX_STRINGS || (need_one && n == 0)) {
        snprintf (err, len, "\"%s\" must be an array of %d to %d strings", key, need_one,
                  TASKS_MAX_STRINGS);
        return NULL;
    }
    if (!(v = calloc (n + 1, sizeof (*v)))) {
        snprintf (err, len, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx (a, i);
        if (!json_object_is_type (e, json_type_string)) {
            snprintf (err, len, "\"%s\"[%zu] is not a string", key, i);
            free (v);
            return NULL;
        }
        v[i] = (char *)json_object_get_string (e);
    }
    return v;
}

static void __attribute__ ((noreturn))
spawn_relay (int fd, uid_t uid, gid_t gid, pid_t client, json_object *req)
{
    char err[1024], **argv, **envp;
    const char *init = proto_get_str (req, "init", PKGLIBEXECDIR "/ibcr-init");
    struct spawn_report r;
    struct taskns_as as;
    int fds[3], rep[2], go[2];
    struct stat sb;
    json_object *o;
    pid_t task;
    ssize_t n;

    if (!(argv = string_vector (req, "argv", 1, err, sizeof (err)))
        || !(envp = string_vector (req, "env", 0, err, sizeof (err)))) {
        relay_send (fd, proto_error ("spawn", EINVAL, "%s", err));
        _exit (1);
    }
    if (user_ids (uid, gid, &as, err, sizeof (err)) < 0) {
        relay_send (fd, proto_error ("spawn", EPERM, "%s", err));
        _exit (1);
    }
    relay_send (fd, proto_new ("spawn-ready"));
    if (relay_recv_fds (fd, fds, 3, 3, err, sizeof (err)) < 0) {
        relay_send (fd,
                    proto_error ("spawn", EINVAL,
                                 "%s: send the working folder, "
                                 "stdout and stderr",
                                 err));
        _exit (1);
    }
    if (fstat (fds[0], &sb) < 0 || !S_ISDIR (sb.st_mode)) {
        relay_send (fd,
                    proto_error ("spawn", ENOTDIR,
                                 "the first fd sent is not a folder: "
                                 "send the working folder, stdout and stderr"));
        _exit (1);
    }
    if (pipe2 (rep, O_CLOEXEC) < 0 || pipe2 (go, O_CLOEXEC) < 0 || (task = fork ()) < 0) {
        relay_send (fd, proto_error ("spawn", errno, "cannot fork the task: %s", strerror (errno)));
        _exit (1);
    }
    if (task == 0) {
        struct spawn_pipes p = { .rep = rep[1], .go = go[0] };
        (void)close (fd);
        (void)close (rep[0]);
        (void)close (go[1]);
        spawn_task (client, &as, fds, argv, envp, init, &p);
    }
    (void)close (rep[1]);
    (void)close (go[0]);
    for (int i = 0; i < 3; i++)
        (void)close (fds[i]);
    do
        n = read (rep[0], &r, sizeof (r));
    while (n < 0 && errno == EINTR);
    if (n <= 0 || r.tag != 'P' || n != (ssize_t)sizeof (r)) {
        char why[1200] = "";
        if (n > 1 && ((char *)&r)[0] == 'E') {
            memcpy (why, (char *)&r + 1, (size_t)n - 1);
            ssize_t m = read (rep[0], why + n - 1, sizeof (why) - (size_t)n);
            why[n - 1 + (m > 0 ? m : 0)] = '\0';
        }
        (void)waitpid (task, NULL, 0);
        relay_send (fd,
                    proto_error ("spawn", EIO, "job %s: the task did not start: %s",
                                 proto_get_str (req, "job", "?"),
                                 why[0] ? why : "its init failed (see ibcrd's log)"));
        _exit (1);
    }
    (void)close (rep[0]);
    log_msg (LOG_INFO, "job %s rank %lld: started for uid %u (init %ld, application %ld)",
             proto_get_str (req, "job", "?"), (long long)proto_get_int (req, "rank", 0),
             (unsigned)uid, (long)r.init, (long)r.app);
    o = proto_new ("spawned");
    proto_set_int (o, "init", r.init);
    proto_set_int (o, "app", r.app);
    relay_send (fd, o);
    /* The client registers the task, then says "go" (or anything else:
     * the task ends before it ran). */
    o = NULL;
    if (proto_recv_timeout (fd, 0, TASKS_FDS_TIMEOUT_MS * 6, &o) == 0 && o
        && !strcmp (proto_type (o), "go"))
        (void)write (go[1], "g", 1);
    json_object_put (o);
    (void)close (go[1]);
    relay_wait (fd, task, r.init);
}

/* Answer an error to the asking client of a relay request that is
 * refused before any fork; NULL when it may go on. */
static json_object *relay_refused (struct server *s, struct client *c, json_object *req)
{
    const char *type = proto_type (req), *job = proto_get_str (req, "job", "");
    int64_t rank = proto_get_int (req, "rank", -1);

    if (!ident_ok (job))
        return proto_error (type, EINVAL,
                            "\"job\" is missing or not a job name (1-%d "
                            "letters, digits, '.', '_', '-')",
                            IDENT_MAX);
    if (rank < 0 || rank >= s->conf->max_ranks)
        return proto_error (type, EINVAL,
                            "\"rank\" must be 0 to %d (max_ranks in "
                            "ibcrd.conf)",
                            s->conf->max_ranks - 1);
    /* A user may restore their Slurm job's generation (for a debugger:
     * the manifest names its owner), never start a task under its id. */
    if (c->uid != 0 && jobs_is_slurm_id (job) && !strcmp (type, "spawn"))
        return proto_error (type, EPERM,
                            "job %s: a name of digits only is a Slurm job id, "
                            "and only Slurm starts or restores those (requeue the job); "
                            "give another name",
                            job);
    if (nrelays >= TASKS_MAX_RELAYS
        || (c->uid != 0 && s->conf->max_registrations_per_uid > 0
            && children_of (c->uid, 0) >= s->conf->max_registrations_per_uid))
        return proto_error (type, EUSERS,
                            "limit reached: uid %u runs %d tasks through this "
                            "ibcrd (max_registrations_per_uid in ibcrd.conf)",
                            (unsigned)c->uid, children_of (c->uid, 0));
    return NULL;
}

json_object *tasks_in_child (struct server *s, struct client *c, json_object *req,
                             json_object *(*fn) (struct server *, struct client *, json_object *))
{
    const char *type = proto_type (req);
    pid_t pid;

    /* The connection goes to the child: one that holds anything else of
     * the daemon's (tasks registered over it, a restart's wait, a
     * generation's use) must not be handed over. */
    if (jobs_conn_tasks (s->jobs, c->id) || c->resume_job[0] || c->lent)
        return proto_error (type, EBUSY,
                            "this connection has tasks registered or a request waiting: "
                            "send \"%s\" over a connection of its own",
                            type);
    /* A bound of their own, below the relays': a user's requests never
     * keep another's tasks from starting or restoring. */
    if (nrelays >= TASKS_MAX_RELAYS || children_of ((uid_t)-1, 1) >= TASKS_MAX_REQUESTS
        || (c->uid != 0 && children_of (c->uid, 1) >= TASKS_MAX_REQUESTS_PER_UID))
        return proto_error (type, EUSERS,
                            "limit reached: uid %u has %d \"%s\" requests running through this "
                            "ibcrd (at most %d a user, %d in all); try again when one ends",
                            (unsigned)c->uid, children_of (c->uid, 1), type,
                            TASKS_MAX_REQUESTS_PER_UID, TASKS_MAX_REQUESTS);
    if ((pid = worker_fork (c->fd)) < 0)
        return proto_error (type, errno, "cannot fork: %s", strerror (errno));
    if (pid == 0) {
        json_object *o = fn (s, c, req);
        int rc = o && proto_send (c->fd, o) == 0 ? 0 : 1;
        json_object_put (o);
        _exit (rc);
    }
    relays[nrelays].pid = pid;
    relays[nrelays].request = 1;
    relays[nrelays++].uid = c->uid;
    c->handed = 1; /* the child answers it: serve_client closes ours */
    return NO_REPLY;
}

/* Fork the relay for c's request; the daemon forgets the connection. */
static json_object *relay_start (struct server *s, struct client *c, json_object *req, int restore);

json_object *h_spawn (struct server *s, struct client *c, json_object *req)
{
    return relay_start (s, c, req, 0);
}

json_object *h_restore (struct server *s, struct client *c, json_object *req)
{
    return relay_start (s, c, req, 1);
}

/* A restore for the client: the generation must be its user's (root may
 * restore any, as its owner). */
static void __attribute__ ((noreturn))
restore_relay (struct server *s, int fd, uid_t uid, gid_t gid, pid_t client, json_object *req)
{
    const char *job = proto_get_str (req, "job", "");
    uint32_t rank = (uint32_t)proto_get_int (req, "rank", 0);
    int want = (int)proto_get_int (req, "gen", 0), nfds, fds[6] = { -1, -1, -1, -1, -1, -1 }, rc;
    int got[RESTORE_MAX_CTL + 2], nctl = 0;
    int hostproc;
    struct store st = { .root = s->conf->storage, .cluster = s->conf->cluster };
    static struct restore_plan plan;
    char err[4096], note[2048];
    json_object *m = NULL, *o;
    struct taskns_as as;
    int64_t owner;
    pid_t holder, init, app;

    rc = restore_pick_for (&st, job, want, rank, uid == 0 ? -1 : (int64_t)uid, &plan, &m, note,
                           sizeof (note), err, sizeof (err));
    if (rc == 0) {
        errnprintf (err, sizeof (err), ENOENT,
                    "no checkpoint of job %s under %.2000s (see 'ibcr list')", job, plan.looked);
    }
    if (rc <= 0) {
        relay_send (fd, proto_error ("restore", errno, "%s", err));
        _exit (1);
    }
    owner = proto_get_int (m, "uid", -1);
    if (uid != 0 && owner != (int64_t)uid) {
        log_msg (LOG_WARNING,
                 "job %s: uid %u asked to restore generation %d of uid %lld: "
                 "refused",
                 job, (unsigned)uid, plan.gen, (long long)owner);
        relay_send (fd,
                    proto_error ("restore", EPERM,
                                 "job %s generation %d belongs to "
                                 "another user: only its owner (or root) restores it",
                                 job, plan.gen));
        _exit (1);
    }
    if (!plan.in_ns) {
        relay_send (fd,
                    proto_error ("restore", EMEDIUMTYPE,
                                 "job %s generation %d rank %u "
                                 "was dumped outside a task's namespaces (by an ibcr "
                                 "before 'ibcr run' started tasks in their own, or a "
                                 "task registered by hand): this release restores "
                                 "only tasks dumped inside them; restore it with the "
                                 "ibcr that wrote it, or remove it ('ibcr prune')",
                                 job, plan.gen, rank));
        _exit (1);
    }
    if (uid == 0 && owner > 0)
        rc = user_ids ((uid_t)owner, (gid_t)-1, &as, err, sizeof (err));
    else
        rc = user_ids (uid, uid == 0 ? 0 : gid, &as, err, sizeof (err));
    if (rc < 0) {
        relay_send (fd, proto_error ("restore", EPERM, "%s", err));
        _exit (1);
    }
    snprintf (plan.criu, sizeof (plan.criu), "%s", s->conf->criu);
    snprintf (plan.workdir, sizeof (plan.workdir), "%.4000s/restore", s->conf->staging);
    snprintf (plan.log, sizeof (plan.log), "%.4000s/%.40s.restart.%u.log", plan.workdir, job, rank);
    o = proto_new ("restore-ready");
    proto_set_int (o, "gen", plan.gen);
    proto_set_int (o, "ctl_ino", plan.ctl_ino);
    /* One fresh control connection per process that used verbs. */
    proto_set_int (o, "nctl", plan.nctl);
    /* What CRIU reads back, for the client's progress line. */
    proto_set_int (o, "bytes", (int64_t)imgcopy_dir_size (plan.imgdir));
    proto_set_str (o, "note", note);
    relay_send (fd, o);
    if ((nfds = relay_recv_fds (fd, got, 2, 2 + plan.nctl, err, sizeof (err))) < 0) {
        relay_send (fd,
                    proto_error ("restore", EINVAL,
                                 "%s: send stdout, stderr and, when "
                                 "nctl > 0, nctl control connections for libibcr",
                                 err));
        _exit (1);
    }
    fds[1] = got[0];
    fds[2] = got[1];
    nctl = nfds - 2;
    if (nctl < plan.nctl) {
        relay_send (fd,
                    proto_error ("restore", EINVAL,
                                 "job %s generation %d uses verbs in "
                                 "%d process%s: send as many control connections for "
                                 "libibcr (ctl-attach), not %d",
                                 job, plan.gen, plan.nctl, plan.nctl == 1 ? "" : "es", nctl));
        _exit (1);
    }
    switch (relay_cgjoin (client, err, sizeof (err))) {
    case -2:
        relay_send (fd, proto_error ("restore", ESRCH, "job %s: %s: not restored", job, err));
        _exit (1);
    case -1:
        log_msg (LOG_INFO, "job %s: restore stays in ibcrd's cgroups: %s", job, err);
    }
    /* The holder mounts the new namespace's /proc over ours (we share
     * its mount namespace): the tree is found through the host's. */
    if ((hostproc = open ("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        relay_send (fd, proto_error ("restore", errno, "cannot open /proc: %s", strerror (errno)));
        _exit (1);
    }
    if ((fds[0] = open ("/dev/null", O_RDONLY | O_CLOEXEC)) < 0
        || (holder = restore_tree_ctl (&plan, &as, fds, got + 2, nctl,
                                       proto_get_bool (req, "stopped", 0) ? RESTORE_STOPPED : 0,
                                       err, sizeof (err)))
            < 0) {
        log_msg (LOG_WARNING, "job %s generation %d rank %u: restore failed: %s", job, plan.gen,
                 rank, err);
        relay_send (fd,
                    proto_error ("restore", EIO,
                                 "job %s generation %d rank %u was not "
                                 "restored: %s",
                                 job, plan.gen, rank, err));
        _exit (1);
    }
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0)
            (void)close (fds[i]);
    for (int i = 0; i < nctl; i++)
        (void)close (got[2 + i]);
    init = proc_first_child_at (hostproc, holder);
    app = init > 0 ? proc_first_child_at (hostproc, init) : 0;
    log_msg (LOG_INFO,
             "job %s rank %u: restored from generation %d as uid %u (init %ld, "
             "application %ld)",
             job, rank, plan.gen, (unsigned)as.uid, (long)init, (long)app);
    if (err[0]) /* what the restore had to change (restore.h) */
        log_msg (LOG_INFO, "job %s rank %u: %s", job, rank, err);
    o = proto_new ("restored");
    proto_set_int (o, "gen", plan.gen);
    proto_set_int (o, "size", proto_get_int (m, "size", 1));
    proto_set_int (o, "uid", as.uid);
    proto_set_int (o, "init", init);
    proto_set_int (o, "app", app);
    relay_send (fd, o);
    json_object_put (m);
    relay_wait (fd, holder, init);
}

static json_object *relay_start (struct server *s, struct client *c, json_object *req, int restore)
{
    json_object *no = relay_refused (s, c, req);
    pid_t pid;

    if (no)
        return no;
    if ((pid = worker_fork (c->fd)) < 0)
        return proto_error (proto_type (req), errno, "cannot fork: %s", strerror (errno));
    if (pid == 0) {
        relay_pin_client (c->fd, c->pid);
        if (restore)
            restore_relay (s, c->fd, c->uid, c->gid, c->pid, req);
        spawn_relay (c->fd, c->uid, c->gid, c->pid, req);
    }
    relays[nrelays].pid = pid;
    relays[nrelays].request = 0;
    relays[nrelays++].uid = c->uid;
    c->handed = 1; /* the relay answers it: serve_client closes ours */
    return NO_REPLY;
}
