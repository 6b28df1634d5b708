/* sp_restore.c - see sp_restore.h.
 *
 * The restorer is a child of the task process, forked while it is still
 * root; slurmstepd then makes the task the user for good (setuid), so the
 * restorer is the only way back to root once the task is in its cgroups
 * and has its stdio.  It is not a subreaper: when criu (its child) exits,
 * the restored init goes to the task process, which is.
 *
 * Wire between task and restorer (a SOCK_SEQPACKET pair):
 *   task -> restorer   "go": the task's pid and a word saying what follows
 *                      (bits 8-15: how many control sockets for libibcr,
 *                      2: the new step's PMI socket, 4: the task's end of
 *                      a new PMIx relay), with fds 0, 1, 2 attached, then
 *                      those in that order
 *   restorer -> task   "O<pid>" the restored init, or "E<why>"
 * A restorer whose task closes the socket without "go" exits at once.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/manifest.h"
#include "common/proto.h"
#include "common/proc.h"
#include "common/safedir.h"
#include "common/store.h"
#include "common/taskns.h"
#include "common/zimg.h"
#include "common/criu.h"
#include "common/cgjoin.h"
#include "common/tasktree.h"
#include "sp_restore.h"

/* Exit code of a restorer that failed (as env(1) for "cannot run"). */
#define SP_RESTORE_EXIT 125

/* Check the chosen generation's layout against this step: a checkpoint
 * restores only into the step it was taken of, with as many tasks.  0,
 * or -1 with err. */
static int sp_restore_layout (const struct sp_restore_in *in, int g, json_object *m, char *err,
                              size_t errlen)
{
    const char *step = proto_get_str (m, "step", NULL);
    int64_t size = proto_get_int (m, "size", -1);

    if (step && strcmp (step, in->step)) {
        snprintf (err, errlen,
                  "job %s generation %d is a checkpoint of step %s, and this "
                  "is step %s: not restoring it, not starting afresh either; run the "
                  "checkpointed step first (or remove the job's checkpoints with "
                  "'ibcr prune')",
                  in->job, g, step, in->step);
        return -1;
    }
    if (size >= 0 && size != (int64_t)in->ntasks) {
        snprintf (err, errlen,
                  "job %s generation %d holds %lld tasks and step %s now has "
                  "%u: a checkpoint restores only into the same number of tasks; requeue "
                  "with -n %lld (or remove the job's checkpoints with 'ibcr prune')",
                  in->job, g, (long long)size, in->step, in->ntasks, (long long)size);
        return -1;
    }
    return 0;
}

int sp_restore_pick (const struct sp_restore_in *in, struct restore_plan *plan, char *note,
                     size_t notelen, char *err, size_t errlen)
{
    json_object *m = NULL;
    struct conf *c;
    char cerr[1024];
    int rc;

    note[0] = '\0';
    memset (plan, 0, sizeof (*plan));
    c = conf_load (in->conf, in->node, cerr, sizeof (cerr));
    /* As ibcrd does: no file at the default place, the built-in values. */
    if (!c && errno == ENOENT && !in->conf_given)
        c = conf_create (in->node);
    if (!c) {
        snprintf (err, errlen,
                  "cannot read ibcrd's configuration to find the job's "
                  "checkpoints: %s (plugstack.conf conf=)",
                  cerr);
        return -1;
    }
    struct store st = { .root = c->storage, .cluster = c->cluster };
    rc = restore_pick (&st, in->job, 0, in->rank, plan, &m, note, notelen, err, errlen);
    if (rc == 1 && sp_restore_layout (in, plan->gen, m, err, errlen) < 0)
        rc = -1;
    if (rc == 1) {
        snprintf (plan->criu, sizeof (plan->criu), "%s", c->criu);
        snprintf (plan->workdir, sizeof (plan->workdir), "%s/restore", c->staging);
        if ((size_t)snprintf (plan->log, sizeof (plan->log), "%.3900s/%.40s.%.40s.%u.log",
                              plan->workdir, in->job, in->step, in->rank)
            >= sizeof (plan->log)) {
            snprintf (err, errlen, "ibcrd.conf staging= is too long a path");
            rc = -1;
        }
    }
    json_object_put (m);
    conf_destroy (c);
    return rc;
}

static void sp_restore_reply (int sock, char kind, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void sp_restore_reply (int sock, char kind, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    int n;

    buf[0] = kind;
    va_start (ap, fmt);
    n = vsnprintf (buf + 1, sizeof (buf) - 1, fmt, ap);
    va_end (ap);
    if (n < 0)
        n = 0;
    if (n > (int)sizeof (buf) - 2)
        n = (int)sizeof (buf) - 2;
    (void)send (sock, buf, (size_t)n + 1, MSG_NOSIGNAL);
}

/* "go"'s second word: the PMI socket comes, the task's end of a PMIx
 * relay comes, and how many control sockets (one per process that used
 * verbs). */
#define SP_GO_PMI 0x2
#define SP_GO_PMIX 0x4
#define SP_GO_NCTL_SHIFT 8

/* Receive "go": the task's pid and its fds 0..2 into fds[], the PMI
 * socket into fds[4] and the PMIx relay's end into fds[5] (-1 when none;
 * fds[3] is -1), the control sockets into ctl[] (*nctl of them).  0, or
 * -1. */
static int sp_restore_recv_go (int sock, pid_t *task, int fds[6], int ctl[RESTORE_MAX_CTL],
                               int *nctl)
{
    char cbuf[CMSG_SPACE ((RESTORE_MAX_CTL + 5) * sizeof (int))];
    struct msghdr mh = { 0 };
    struct cmsghdr *cm;
    struct iovec iov;
    int32_t word[2];
    int got[RESTORE_MAX_CTL + 5], n_fds, want = 3;
    ssize_t n;

    iov.iov_base = word;
    iov.iov_len = sizeof (word);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof (cbuf);
    do
        n = recvmsg (sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof (word) || !(cm = CMSG_FIRSTHDR (&mh)) || cm->cmsg_type != SCM_RIGHTS
        || (word[1] & ~(SP_GO_PMI | SP_GO_PMIX | (0xff << SP_GO_NCTL_SHIFT)))
        || ((word[1] >> SP_GO_NCTL_SHIFT) & 0xff) > RESTORE_MAX_CTL)
        return -1;
    *nctl = (word[1] >> SP_GO_NCTL_SHIFT) & 0xff;
    want += *nctl + !!(word[1] & SP_GO_PMI) + !!(word[1] & SP_GO_PMIX);
    n_fds = (int)((cm->cmsg_len - CMSG_LEN (0)) / sizeof (int));
    if (n_fds != want)
        return -1;
    memcpy (got, CMSG_DATA (cm), (size_t)n_fds * sizeof (int));
    memcpy (fds, got, 3 * sizeof (int));
    fds[3] = fds[4] = fds[5] = -1;
    n_fds = 3;
    for (int i = 0; i < *nctl; i++)
        ctl[i] = got[n_fds++];
    if (word[1] & SP_GO_PMI)
        fds[4] = got[n_fds++];
    if (word[1] & SP_GO_PMIX)
        fds[5] = got[n_fds++];
    *task = (pid_t)word[0];
    return 0;
}

/* The real uid and gid of the task process, which is the job's user by
 * now (slurmstepd made it so); -1 when it is gone. */
static int sp_restore_ids (pid_t task, uid_t *uid, gid_t *gid)
{
    char path[64], line[256];
    FILE *f;

    *uid = (uid_t)-1;
    *gid = (gid_t)-1;
    snprintf (path, sizeof (path), "/proc/%ld/status", (long)task);
    if (!(f = fopen (path, "re")))
        return -1;
    while (fgets (line, sizeof (line), f)) {
        unsigned long v;
        if (sscanf (line, "Uid: %lu", &v) == 1)
            *uid = (uid_t)v;
        else if (sscanf (line, "Gid: %lu", &v) == 1)
            *gid = (gid_t)v;
    }
    fclose (f);
    return *uid == (uid_t)-1 || *gid == (gid_t)-1 ? -1 : 0;
}

/* The restorer, as root: never returns. */
static void __attribute__ ((noreturn))
sp_restore_restorer (const struct restore_plan *plan, int sock)
{
    char err[2048] = "";
    int fds[6], ctl[RESTORE_MAX_CTL], nctl = 0, nul, fd;
    pid_t task, holder;
    uid_t uid;
    gid_t gid;

    (void)prctl (PR_SET_NAME, "ibcr-restorer", 0, 0, 0);
    (void)prctl (PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    /* Nothing of slurmstepd's stays open here, and 0..2 are taken so the
     * task's fds arrive above them. */
    if ((nul = open ("/dev/null", O_RDWR)) < 0)
        _exit (SP_RESTORE_EXIT);
    for (fd = 0; fd <= 2; fd++)
        if (fd != nul)
            (void)dup2 (nul, fd);
    if (nul > 2)
        (void)close (nul);
    {
        DIR *d = opendir ("/proc/self/fd");
        struct dirent *e;
        if (d) {
            while ((e = readdir (d))) {
                fd = atoi (e->d_name);
                if (fd > 2 && fd != sock && fd != dirfd (d))
                    (void)close (fd);
            }
            closedir (d);
        }
    }
    for (int i = 1; i < NSIG; i++)
        (void)signal (i, SIG_DFL);
    {
        sigset_t none;
        sigemptyset (&none);
        (void)sigprocmask (SIG_SETMASK, &none, NULL);
    }
    if (sp_restore_recv_go (sock, &task, fds, ctl, &nctl) < 0)
        _exit (0); /* the task did not ask: nothing to do */
    if (cgjoin_join (task, err, sizeof (err)) < 0) {
        sp_restore_reply (sock, 'E', "cannot put the restore into the step's cgroups: %s", err);
        _exit (SP_RESTORE_EXIT);
    }
    if (sp_restore_ids (task, &uid, &gid) < 0) {
        sp_restore_reply (sock, 'E', "the task process %ld is gone", (long)task);
        _exit (SP_RESTORE_EXIT);
    }
    {
        /* The task's gid and groups are taken from it, as CRIU's restore
         * needs the image's groups, which are the task's. */
        struct taskns_as as = { .cred_pid = task, .uid = uid };
        (void)gid;
        holder = restore_tree_ctl (plan, &as, fds, ctl, nctl, 0, err, sizeof (err));
    }
    for (fd = 0; fd <= 5; fd++)
        if (fds[fd] >= 0)
            (void)close (fds[fd]);
    for (int i = 0; i < nctl; i++)
        (void)close (ctl[i]);
    if (holder < 0) {
        sp_restore_reply (sock, 'E', "%s", err);
        _exit (SP_RESTORE_EXIT);
    }
    /* and what the restore changed (restore.h), for the task's stderr */
    sp_restore_reply (sock, 'O', "%ld %s", (long)holder, err);
    _exit (0);
}

int sp_restore_prepare (const struct restore_plan *plan, char *err, size_t errlen)
{
    int sv[2];
    pid_t pid;

    if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf (err, errlen, "cannot make a socket pair: %s", strerror (errno));
        return -1;
    }
    if ((pid = fork ()) < 0) {
        snprintf (err, errlen, "cannot fork the restorer: %s", strerror (errno));
        (void)close (sv[0]);
        (void)close (sv[1]);
        return -1;
    }
    if (pid == 0) {
        (void)close (sv[0]);
        sp_restore_restorer (plan, sv[1]);
    }
    (void)close (sv[1]);
    return sv[0];
}

pid_t sp_restore_run (int fd, const struct restore_plan *plan, const int *ctl_fds, int nctl,
                      int pmi_fd, int pmix_fd, char *err, size_t errlen)
{
    char cbuf[CMSG_SPACE ((RESTORE_MAX_CTL + 5) * sizeof (int))], buf[4096];
    struct msghdr mh = { 0 };
    struct cmsghdr *cm;
    struct iovec iov;
    int32_t word[2] = { (int32_t)getpid (), 0 };
    int fds[RESTORE_MAX_CTL + 5] = { 0, 1, 2 };
    size_t nfds = 3;
    ssize_t n;
    long pid;
    int used = 0;

    (void)plan;
    if (nctl < 0 || nctl > RESTORE_MAX_CTL) {
        snprintf (err, errlen, "%d control sockets to hand in (at most %d)", nctl, RESTORE_MAX_CTL);
        (void)close (fd);
        return -1;
    }
    for (int i = 0; i < nctl; i++)
        fds[nfds++] = ctl_fds[i];
    word[1] |= nctl << SP_GO_NCTL_SHIFT;
    if (pmi_fd >= 0) {
        fds[nfds++] = pmi_fd;
        word[1] |= SP_GO_PMI;
    }
    if (pmix_fd >= 0) {
        fds[nfds++] = pmix_fd;
        word[1] |= SP_GO_PMIX;
    }
    /* The restored init must become our child, and stay a zombie until we
     * wait for it. */
    (void)signal (SIGCHLD, SIG_DFL);
    if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        snprintf (err, errlen, "cannot become a child subreaper: %s", strerror (errno));
        goto error;
    }
    iov.iov_base = word;
    iov.iov_len = sizeof (word);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE (nfds * sizeof (int));
    cm = CMSG_FIRSTHDR (&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN (nfds * sizeof (int));
    memcpy (CMSG_DATA (cm), fds, nfds * sizeof (int));
    if (sendmsg (fd, &mh, MSG_NOSIGNAL) < 0) {
        snprintf (err, errlen, "the restorer is gone before the restore: %s", strerror (errno));
        goto error;
    }
    do
        n = recv (fd, buf, sizeof (buf) - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        snprintf (err, errlen, "the restorer ended without a word: %s",
                  n < 0 ? strerror (errno) : "closed");
        goto error;
    }
    buf[n] = '\0';
    (void)close (fd);
    if (buf[0] != 'O' || sscanf (buf + 1, "%ld%n", &pid, &used) != 1 || pid <= 0) {
        snprintf (err, errlen, "%s", buf[0] == 'E' ? buf + 1 : "the restorer said nonsense");
        return -1;
    }
    snprintf (err, errlen, "%s", buf + 1 + used + (buf[1 + used] == ' '));
    return (pid_t)pid;
error:
    (void)close (fd);
    return -1;
}
