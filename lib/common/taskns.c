/* taskns.c - see taskns.h.
 *
 * Must never: give CRIU more than the task's own user has (plus the two
 * capabilities it needs), act on a namespace it did not check, or let a
 * restored tree run before its credentials were checked.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "taskns.h"
#include "errbuf.h"

#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

int taskns_unshare_mnt (char *err, size_t len)
{
    if (unshare (CLONE_NEWNS) < 0) {
        snprintf (err, len, "cannot create a mount namespace for the task: %s%s", strerror (errno),
                  errno == EPERM ? " (needs CAP_SYS_ADMIN)" : "");
        return -1;
    }
    /* Mounts made on the host later (a new file system) still reach the
     * task; the task's /proc never reaches the host. */
    if (mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
        snprintf (err, len, "cannot make the task's mounts private: %s", strerror (errno));
        return -1;
    }
    return 0;
}

int taskns_unshare_pid (char *err, size_t len)
{
    if (unshare (CLONE_NEWPID) < 0) {
        snprintf (err, len, "cannot create a PID namespace for the task: %s%s", strerror (errno),
                  errno == EINVAL ? " (another plugin made one already?)" : "");
        return -1;
    }
    return 0;
}

int taskns_setup_proc (int reserve, char *err, size_t len)
{
    char buf[32];
    int fd, n;

    if (mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        snprintf (err, len, "cannot mount the task's /proc: %s", strerror (errno));
        return -1;
    }
    if (!reserve)
        return 0;
    fd = open ("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
    n = snprintf (buf, sizeof (buf), "%d", TASKNS_FIRST_PID - 1);
    if (fd < 0 || write (fd, buf, (size_t)n) != n) {
        snprintf (err, len, "cannot set the task's first pid: %s", strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    close (fd);
    return 0;
}

/* Field 'key' of /proc/PID/status into buf; 0 or -1. */
static int status_field (pid_t pid, const char *key, char *buf, size_t len)
{
    char path[64], line[4096];
    size_t klen = strlen (key);
    FILE *f;
    int rc = -1;

    snprintf (path, sizeof (path), "/proc/%ld/status", (long)pid);
    if (!(f = fopen (path, "re")))
        return -1;
    while (fgets (line, sizeof (line), f))
        if (!strncmp (line, key, klen) && line[klen] == ':') {
            char *v = line + klen + 1;
            v += strspn (v, " \t");
            v[strcspn (v, "\n")] = '\0';
            snprintf (buf, len, "%s", v);
            rc = 0;
            break;
        }
    fclose (f);
    if (rc < 0)
        errno = ESRCH;
    return rc;
}

/* The four ids of an Uid: or Gid: line; 0 when all equal want. */
static int ids_are (const char *line, unsigned long want)
{
    unsigned long v[4];

    if (sscanf (line, "%lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) != 4)
        return -1;
    for (int i = 0; i < 4; i++)
        if (v[i] != want)
            return -1;
    return 0;
}

pid_t taskns_nspid (pid_t pid)
{
    char buf[256], *last;

    if (status_field (pid, "NSpid", buf, sizeof (buf)) < 0)
        return -1;
    for (last = buf + strlen (buf); last > buf && last[-1] != ' ' && last[-1] != '\t'; last--)
        ;
    return (pid_t)atol (last);
}

/* Is pid's namespace of kind ns ("mnt", "user", ...) ours?  1, 0, or -1. */
static int same_ns (pid_t pid, const char *ns)
{
    char path[64], self[64];
    struct stat a, b;

    snprintf (path, sizeof (path), "/proc/%ld/ns/%s", (long)pid, ns);
    snprintf (self, sizeof (self), "/proc/self/ns/%s", ns);
    if (stat (path, &a) < 0 || stat (self, &b) < 0)
        return -1;
    return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

int taskns_own_mnt (pid_t pid)
{
    int same = same_ns (pid, "mnt");

    return same < 0 ? -1 : !same;
}

int taskns_load_ids (struct taskns_as *as, char *err, size_t len)
{
    char buf[4096], *p, *end;

    if (as->have_ids)
        return 0;
    if (status_field (as->cred_pid, "Uid", buf, sizeof (buf)) < 0 || ids_are (buf, as->uid) < 0) {
        snprintf (err, len, "process %ld is not (or no longer) wholly uid %lu", (long)as->cred_pid,
                  (unsigned long)as->uid);
        return -1;
    }
    if (status_field (as->cred_pid, "Gid", buf, sizeof (buf)) < 0) {
        snprintf (err, len, "cannot read the groups of process %ld", (long)as->cred_pid);
        return -1;
    }
    as->gid = (gid_t)strtoul (buf, NULL, 10);
    as->ngroups = 0;
    if (status_field (as->cred_pid, "Groups", buf, sizeof (buf)) < 0)
        buf[0] = '\0';
    for (p = buf; *p && as->ngroups < sizeof (as->groups) / sizeof (as->groups[0]); p = end) {
        unsigned long g = strtoul (p, &end, 10);
        if (end == p)
            break;
        as->groups[as->ngroups++] = (gid_t)g;
    }
    as->have_ids = 1;
    return 0;
}

/* Become c's ids, keeping CRIU's capabilities. */
static int take_creds (const struct taskns_as *c, char *err, size_t len)
{
    cap_value_t caps[] = { CAP_CHECKPOINT_RESTORE, CAP_SETPCAP };
    cap_t cp;

    if (setgroups (c->ngroups, c->groups) < 0 || prctl (PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0
        || setresgid (c->gid, c->gid, c->gid) < 0 || setresuid (c->uid, c->uid, c->uid) < 0) {
        snprintf (err, len, "cannot become uid %lu gid %lu: %s", (unsigned long)c->uid,
                  (unsigned long)c->gid, strerror (errno));
        return -1;
    }
    if (!(cp = cap_init ()) || cap_set_flag (cp, CAP_PERMITTED, 2, caps, CAP_SET) < 0
        || cap_set_flag (cp, CAP_EFFECTIVE, 2, caps, CAP_SET) < 0
        || cap_set_flag (cp, CAP_INHERITABLE, 2, caps, CAP_SET) < 0 || cap_set_proc (cp) < 0
        || cap_set_ambient (CAP_CHECKPOINT_RESTORE, CAP_SET) < 0
        || cap_set_ambient (CAP_SETPCAP, CAP_SET) < 0) {
        snprintf (err, len,
                  "cannot give criu CAP_CHECKPOINT_RESTORE (kernel >= 5.9 "
                  "needed): %s",
                  strerror (errno));
        if (cp)
            cap_free (cp);
        return -1;
    }
    cap_free (cp);
    return 0;
}

int taskns_drop (const struct taskns_as *ids, char *err, size_t len)
{
    struct taskns_as as = *ids;
    cap_t c;

    if (as.uid == 0)
        return 0;
    if (taskns_load_ids (&as, err, len) < 0 || take_creds (&as, err, len) < 0)
        return -1;
    /* Nothing kept: an empty set, ambient cleared with it. */
    if (!(c = cap_init ()) || cap_set_proc (c) < 0 || cap_reset_ambient () < 0) {
        snprintf (err, len, "cannot drop capabilities: %s", strerror (errno));
        if (c)
            cap_free (c);
        return -1;
    }
    cap_free (c);
    (void)prctl (PR_SET_KEEPCAPS, 0, 0, 0, 0);
    return 0;
}

int taskns_become (const struct taskns_as *as, char *err, size_t len)
{
    int own = as->ns_pid > 0 ? taskns_own_mnt (as->ns_pid) : 0;
    struct taskns_as cr = *as;

    if (own < 0) {
        snprintf (err, len, "process %ld is gone", (long)as->ns_pid);
        return -1;
    }
    if (as->uid != 0 && taskns_load_ids (&cr, err, len) < 0)
        return -1;
    /* Only namespaces root made (the plugin's) are entered: one under a
     * user namespace is the user's to arrange (mounts, the criu path),
     * and root must not act inside it. */
    if (own && same_ns (as->ns_pid, "user") != 1) {
        return errnprintf (err, len, EPERM,
                           "process %ld is in a user namespace (made by its user, or it "
                           "left the task's namespaces): refusing to run criu inside it",
                           (long)as->ns_pid);
    }
    if (own) {
        char path[64];
        int pfd, mfd, status;
        pid_t child;

        snprintf (path, sizeof (path), "/proc/%ld/ns/pid", (long)as->ns_pid);
        pfd = open (path, O_RDONLY | O_CLOEXEC);
        snprintf (path, sizeof (path), "/proc/%ld/ns/mnt", (long)as->ns_pid);
        mfd = open (path, O_RDONLY | O_CLOEXEC);
        if (pfd < 0 || mfd < 0 || setns (pfd, CLONE_NEWPID) < 0 || setns (mfd, CLONE_NEWNS) < 0
            || chdir ("/") < 0) {
            snprintf (err, len, "cannot enter the namespaces of process %ld: %s", (long)as->ns_pid,
                      strerror (errno));
            return -1;
        }
        close (pfd);
        close (mfd);
        if ((child = fork ()) < 0) {
            snprintf (err, len, "cannot fork into the task's namespace: %s", strerror (errno));
            return -1;
        }
        if (child > 0) {
            /* The intermediate: killed on a timeout, it takes criu along
             * (PR_SET_PDEATHSIG below). */
            while (waitpid (child, &status, 0) < 0)
                if (errno != EINTR)
                    _exit (125);
            _exit (WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
        }
    }
    if (as->uid != 0 && take_creds (&cr, err, len) < 0)
        return -1;
    /* After the credentials: changing them clears it. */
    (void)prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    return 0;
}

/* Call f on every process of the tree rooted at root (root first). */
static int walk_tree (pid_t root, int (*f) (pid_t, void *), void *arg, int depth)
{
    char path[320];
    struct dirent *e;
    DIR *d;
    int rc;

    if ((rc = f (root, arg)) != 0 || depth > 64)
        return rc;
    snprintf (path, sizeof (path), "/proc/%ld/task", (long)root);
    if (!(d = opendir (path)))
        return 0;
    while ((e = readdir (d))) {
        FILE *fp;
        long c;

        if (e->d_name[0] == '.')
            continue;
        snprintf (path, sizeof (path), "/proc/%ld/task/%s/children", (long)root, e->d_name);
        if (!(fp = fopen (path, "re")))
            continue;
        while (rc == 0 && fscanf (fp, "%ld", &c) == 1)
            rc = walk_tree ((pid_t)c, f, arg, depth + 1);
        fclose (fp);
        if (rc)
            break;
    }
    closedir (d);
    return rc;
}

struct check_arg {
    uid_t uid;
    gid_t gid;
    char *err;
    size_t len;
};

/* One thread's ids and capabilities (credentials are per thread). */
static int check_thread (pid_t pid, const char *tid, struct check_arg *a)
{
    static const char *const caps[] = { "CapInh", "CapPrm", "CapEff", "CapAmb" };
    char path[320], line[256];
    FILE *f;
    int rc = 0;

    snprintf (path, sizeof (path), "/proc/%ld/task/%s/status", (long)pid, tid);
    if (!(f = fopen (path, "re")))
        return 0; /* gone: nothing it can do */
    while (rc == 0 && fgets (line, sizeof (line), f)) {
        char *v = strchr (line, ':');
        if (!v)
            continue;
        *v++ = '\0';
        v += strspn (v, " \t");
        v[strcspn (v, "\n")] = '\0';
        /* A zombie runs nothing, and CRIU restores one by forking it
         * from itself and exiting at once, with CRIU's own credentials
         * (the user's, with the two capabilities it holds), not the
         * image's: a task whose child had ended unwaited for at the dump
         * would never be restored.  The kernel writes State before the
         * ids and capabilities; a thread that has ended stays so. */
        if (!strcmp (line, "State") && (v[0] == 'Z' || v[0] == 'X'))
            break;
        if ((!strcmp (line, "Uid") && ids_are (v, a->uid) < 0)
            || (!strcmp (line, "Gid") && ids_are (v, a->gid) < 0)) {
            snprintf (a->err, a->len,
                      "restored process %ld (thread %s) has %s %.64s, not the "
                      "job's %lu",
                      (long)pid, tid, !strcmp (line, "Uid") ? "uids" : "gids", v,
                      (unsigned long)(!strcmp (line, "Uid") ? a->uid : a->gid));
            rc = -1;
        }
        for (size_t i = 0; rc == 0 && a->uid != 0 && i < sizeof (caps) / sizeof (caps[0]); i++)
            if (!strcmp (line, caps[i]) && strtoull (v, NULL, 16) != 0) {
                snprintf (a->err, a->len,
                          "restored process %ld (thread %s) has capabilities "
                          "(%s %.32s) that the job's user does not",
                          (long)pid, tid, caps[i], v);
                rc = -1;
            }
    }
    fclose (f);
    return rc;
}

static int check_one (pid_t pid, void *arg)
{
    char path[64];
    struct dirent *e;
    DIR *d;
    int rc = 0;

    snprintf (path, sizeof (path), "/proc/%ld/task", (long)pid);
    if (!(d = opendir (path)))
        return 0;
    while (rc == 0 && (e = readdir (d)))
        if (e->d_name[0] != '.')
            rc = check_thread (pid, e->d_name, arg);
    closedir (d);
    return rc;
}

int taskns_check_tree (pid_t root, uid_t uid, gid_t gid, char *err, size_t len)
{
    struct check_arg a = { uid, gid, err, len };

    return walk_tree (root, check_one, &a, 0);
}

static int signal_one (pid_t pid, void *arg)
{
    (void)kill (pid, *(int *)arg);
    return 0;
}

void taskns_signal_tree (pid_t root, int sig)
{
    (void)walk_tree (root, signal_one, &sig, 0);
}
