/* cli_restart.c - "ibcr restart JOB [--gen G] [--rank R] [--stopped]":
 * bring one task of JOB back from its newest intact committed generation,
 * as our child, and wait for it like "ibcr run".
 *
 * Order: verify the generation's checksums (a damaged one is skipped for
 * the previous, saying so); attach a fresh control connection to ibcrd
 * for libibcr; run "ibcr-init --restored -- criu restore" with the task's
 * stdout/stderr pipes and that connection handed in fresh (--inherit-fd);
 * register the restored task; have ibcrd rebuild its verbs objects and
 * release its threads; relay and wait.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "imgcopy.h"
#include "common/criu.h"
#include "common/manifest.h"
#include "common/proto.h"
#include "common/taskns.h"
#include "common/usock.h"
#include "common/zimg.h"

#ifndef IBCR_CRIU_DEFAULT
#define IBCR_CRIU_DEFAULT "criu"
#endif

/* The newest committed generation that is want (0: any), or below
 * 'below' (0: no limit); with verify, the newest of those whose checksums
 * hold, saying which were skipped. */
static int pick_gen (struct cli *c, const char *job, int want, int below, int verify,
                     json_object **manifest, int *gen)
{
    json_object *gens;
    char err[1024];
    int rc;

    if ((rc = cli_store (c)))
        return rc;
    if (store_list (&c->st, job, 0, &gens, err, sizeof (err)) < 0) {
        rc = cli_rc_for_errno (errno);
        cli_error ("%s", err);
        return rc;
    }
    for (int i = (int)json_object_array_length (gens) - 1; i >= 0; i--) {
        json_object *e = json_object_array_get_idx (gens, i), *m, *problems;
        int g = (int)proto_get_int (e, "generation", 0), n;
        char dir[4096];

        if ((want && g != want) || (below && g >= below))
            continue;
        json_object_object_get_ex (e, "manifest", &m);
        store_gen_path (&c->st, job, g, dir, sizeof (dir));
        problems = json_object_new_array ();
        n = verify ? manifest_verify (dir, m, problems, NULL) : 0;
        if (n == 0) {
            json_object_put (problems);
            *manifest = json_object_get (m);
            *gen = g;
            json_object_put (gens);
            return CLI_OK;
        }
        json_object *p = json_object_array_get_idx (problems, 0);
        if (want) {
            cli_error ("job %s generation %d is damaged (%s: %s); not restoring it (see "
                       "'ibcr verify %s'; leave out --gen to fall back to an older one)",
                       job, g, proto_get_str (p, "path", "?"), proto_get_str (p, "problem",
                       n < 0 ? strerror (errno) : "?"), job);
            json_object_put (problems);
            json_object_put (gens);
            return CLI_DAMAGED;
        }
        fprintf (stderr, "ibcr: warning: job %s generation %d is damaged (%s: %s); falling "
                 "back to the previous generation\n", job, g, proto_get_str (p, "path", "?"),
                 proto_get_str (p, "problem", n < 0 ? strerror (errno) : "?"));
        json_object_put (problems);
    }
    json_object_put (gens);
    if (want)
        cli_error ("job %s has no committed generation %d (see 'ibcr list %s')", job, want, job);
    else
        cli_error ("job %s has no intact committed generation to restart from", job);
    return CLI_NOTFOUND;
}

/* Check generation dir's checksums in a child, while CRIU restores from
 * it: the restore reads the images anyway, and the two reads share the
 * page cache.  The child exits 0 when intact, 5 when damaged, writing its
 * first problem to *fd.  Its pid, or -1 (then the caller verifies). */
static pid_t verify_start (const char *dir, json_object *m, int *fd)
{
    int p[2];
    pid_t pid;

    if (pipe2 (p, O_CLOEXEC) < 0)
        return -1;
    if ((pid = fork ()) < 0) {
        close (p[0]);
        close (p[1]);
        return -1;
    }
    if (pid == 0) {
        json_object *problems = json_object_new_array (), *pr;
        int n = manifest_verify (dir, m, problems, NULL);
        if (n != 0) {
            char line[1024];
            pr = json_object_array_get_idx (problems, 0);
            snprintf (line, sizeof (line), "%s: %s", pr ? proto_get_str (pr, "path", "?") : "?",
                      pr ? proto_get_str (pr, "problem", "?") : strerror (errno));
            if (write (p[1], line, strlen (line)) < 0)
                _exit (5);
        }
        _exit (n == 0 ? 0 : 5);
    }
    close (p[1]);
    *fd = p[0];
    return pid;
}

/* Continue every process of the tree rooted at pid (CRIU left them all
 * stopped with --leave-stopped). */
static void continue_tree (pid_t pid, int depth)
{
    char path[128];
    long child;
    FILE *f;

    kill (pid, SIGCONT);
    snprintf (path, sizeof (path), "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    if (depth > 32 || !(f = fopen (path, "r")))
        return;
    while (fscanf (f, "%ld", &child) == 1)
        continue_tree ((pid_t)child, depth + 1);
    fclose (f);
}

/* Generation gen of job (manifest m): the task entry of rank, the
 * generation's folder into dir and that task's image folder into imgdir.
 * NULL, said, when the generation has no such rank. */
static json_object *gen_task (struct cli *c, const char *job, int gen, json_object *m, int rank,
                              char *dir, size_t dlen, char *imgdir, size_t ilen)
{
    json_object *tasks;

    if (json_object_object_get_ex (m, "tasks", &tasks)) {
        for (size_t i = 0; i < json_object_array_length (tasks); i++) {
            json_object *t = json_object_array_get_idx (tasks, i);
            if (proto_get_int (t, "rank", -1) == rank) {
                store_gen_path (&c->st, job, gen, dir, dlen);
                snprintf (imgdir, ilen, "%s/task-%d", dir, rank);
                return t;
            }
        }
    }
    cli_error ("job %s generation %d has no rank %d (give --rank)", job, gen, rank);
    return NULL;
}

/* The restart through ibcrd's restore pipeline (tasks.h, restore.h): it
 * chooses and verifies the generation, restores it as its user in new
 * namespaces and checks it; we hand it our pipes and libibcr's control
 * connection, register the task and wait for it.  An exit code, or -1
 * when the generation predates that pipeline (dumped outside a task's
 * namespaces) and root may restore it the old way. */
static int restart_by_daemon (struct cli *c, const char *job, int want, int rank, int stopped,
                              const char *leader)
{
    struct cli_task t = { .out_r = -1, .err_r = -1, .regfd = -1, .relay = -1 };
    json_object *req = proto_new ("restore"), *rep = NULL, *f;
    int fd, rc, gen, ctlfd = -1, out[2], err[2], fds[3];
    char what[160];
    long long ctl_ino;
    uint64_t bytes;

    proto_set_str (req, "job", job);
    proto_set_int (req, "rank", rank);
    proto_set_int (req, "gen", want);
    proto_set_bool (req, "stopped", stopped);
    fd = cli_relay_open (c, req, "restore-ready", &rep, &rc);
    json_object_put (req);
    if (fd < 0) {
        if (rep && proto_get_int (rep, "errno", 0) == EMEDIUMTYPE && geteuid () == 0) {
            json_object_put (rep);
            return -1;
        }
        if (rep)
            cli_error ("%s", proto_get_str (rep, "message", "?"));
        json_object_put (rep);
        return rc;
    }
    gen = (int)proto_get_int (rep, "gen", 0);
    ctl_ino = (long long)proto_get_int (rep, "ctl_ino", 0);
    bytes = (uint64_t)proto_get_int (rep, "bytes", 0);
    if (*proto_get_str (rep, "note", ""))
        fprintf (stderr, "ibcr: warning: job %s %s\n", job, proto_get_str (rep, "note", ""));
    json_object_put (rep);
    snprintf (what, sizeof (what), "job %s gen %d rank %d", job, gen, rank);
    /* libibcr's control socket: a fresh connection, ours, that ibcrd
     * binds to this rank when the restored task registers. */
    if (ctl_ino > 0) {
        const char *sock = cli_socket_path (c);
        json_object *a = proto_new ("ctl-attach");
        proto_set_str (a, "job", job);
        proto_set_int (a, "rank", rank);
        rep = NULL;
        if (!sock || (ctlfd = usock_connect (sock)) < 0
            || usock_request (ctlfd, a, c->timeout_ms, &rep) < 0
            || strcmp (proto_type (rep), "ok")) {
            cli_error ("cannot attach libibcr's control connection at ibcrd %s: %s", sock
                       ? sock : "?", rep ? proto_get_str (rep, "message", "?")
                       : strerror (errno));
            json_object_put (a);
            json_object_put (rep);
            close (fd);
            return CLI_NODAEMON;
        }
        json_object_put (a);
        json_object_put (rep);
    }
    if (pipe2 (out, O_CLOEXEC) < 0 || pipe2 (err, O_CLOEXEC) < 0) {
        cli_error ("cannot make pipes: %s", strerror (errno));
        close (fd);
        return CLI_ERR;
    }
    fds[0] = out[1];
    fds[1] = err[1];
    fds[2] = ctlfd;
    cli_progress_show (what, "restore", 0, bytes);
    rc = cli_relay_send_fds (fd, fds, ctlfd >= 0 ? 3 : 2);
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close (fds[i]);
    if (rc < 0 || !(rep = cli_relay_recv (fd, "restored", &rc))) {
        cli_progress_end ();
        close (out[0]);
        close (err[0]);
        close (fd);
        return rc ? rc : CLI_ERR;
    }
    cli_progress_show (what, "restore", bytes, bytes);
    t.init = (pid_t)proto_get_int (rep, "init", 0);
    t.app = (pid_t)proto_get_int (rep, "app", 0);
    t.relay = fd;
    t.out_r = out[0];
    t.err_r = err[0];
    f = json_object_new_object ();
    json_object_object_add (f, "job", json_object_new_string (job));
    json_object_object_add (f, "rank", json_object_new_int (rank));
    json_object_object_add (f, "size", json_object_new_int ((int)proto_get_int (rep, "size", 1)));
    json_object_object_add (f, "restored", json_object_new_boolean (ctlfd >= 0));
    json_object_object_add (f, "source", json_object_new_string ("restart"));
    json_object_object_add (f, "ns_pid", json_object_new_int (TASKNS_FIRST_PID));
    json_object_put (rep);
    if (leader)
        cli_add_leader (f, leader);     /* checked with the options */
    if ((rc = cli_task_register (c, &t, f)))
        fprintf (stderr, "ibcr: warning: the restored task runs, but not registered\n");
    cli_progress_end ();
    fprintf (stderr, "ibcr: job %s rank %d restored from generation %d (init pid %ld, "
             "application pid %ld)\n", job, rank, gen, (long)t.init, (long)t.app);
    if (stopped) {
        printf ("job %s rank %d stopped: init %ld application %ld\n", job, rank,
                (long)t.init, (long)t.app);
        printf ("attach with 'gdb -p %ld'; after detaching, continue it with 'kill -CONT "
                "%ld'\n", (long)t.app, (long)t.app);
        fflush (stdout);
        while (cli_task_stopped (t.app ? t.app : t.init))
            usleep (50000);
        continue_tree (t.init, 0);
    }
    if (ctlfd >= 0 && !rc) {
        json_object *r = proto_new ("resume-restored"), *o;
        int rrc;
        /* ibcrd waits for every rank, then rebuilds and resumes them. */
        cli_progress_show (what, "rebuild", 0, 0);
        proto_set_str (r, "job", job);
        c->timeout_ms = -1;
        o = cli_request (c, r, &rrc);
        json_object_put (r);
        cli_progress_end ();
        if (!o) {
            cli_error ("the restored task cannot go on; ending it");
            if (t.init > 0)
                kill (t.init, SIGKILL);
            cli_task_wait (&t);
            return rrc ? rrc : CLI_ERR;
        }
        json_object_put (o);
    }
    return cli_task_wait (&t);
}

int cli_restart (struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        { "gen", required_argument, NULL, 'g' },
        { "rank", required_argument, NULL, 'r' },
        { "stopped", no_argument, NULL, 's' },
        { "leader", required_argument, NULL, 'l' },
        /* internal: the fallback after a generation was found damaged */
        { "before-gen", required_argument, NULL, 'b' },
        { NULL, 0, NULL, 0 },
    };
    struct cli_task t = { .out_r = -1, .err_r = -1, .regfd = -1, .relay = -1 };
    int before = 0, vfd = -1;
    pid_t vpid = -1;
    int ch, want = 0, rank = 0, stopped = 0, gen = 0, rc, ctlfd = -1;
    json_object *m = NULL, *task, *stdio, *f;
    char dir[4096], imgdir[4400], pidfile[256], log[256], inherit[3][512], *end;
    char ztmp[4096] = "", zerr[1100] = "", adopted[256], tdir[] = "/tmp/ibcr-restart.XXXXXX";
    const char *job, *criu = getenv ("IBCR_CRIU"), *leader = NULL;
    int keep[4], nkeep = 0, ninh = 0;
    uint64_t out_ino = 0, err_ino = 0, imgbytes = 0;
    char what[160] = "";

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        long v;
        switch (ch) {
        case 'g': case 'r':
            v = strtol (optarg, &end, 10);
            if (*end || !*optarg || v < (ch == 'g' ? 1 : 0)) {
                cli_error ("--%s %s: give a number (see 'ibcr list')", ch == 'g' ? "gen"
                           : "rank", optarg);
                return CLI_USAGE;
            }
            if (ch == 'g')
                want = (int)v;
            else
                rank = (int)v;
            break;
        case 's': stopped = 1; break;
        case 'b': before = atoi (optarg); break;
        case 'l': {
            json_object *tmp = json_object_new_object ();
            int bad = cli_add_leader (tmp, optarg);
            json_object_put (tmp);
            if (bad)
                return CLI_USAGE;
            leader = optarg;
            break;
        }
        default:
            cli_error ("usage: ibcr restart JOB [--gen G] [--rank R] [--leader [NODE@]HOST[:PORT]] [--stopped]");
            return CLI_USAGE;
        }
    }
    if (argc - optind != 1) {
        cli_error ("usage: ibcr restart JOB [--gen G] [--rank R] [--stopped]: give one job");
        return CLI_USAGE;
    }
    job = argv[optind];
    if (!before && (rc = restart_by_daemon (c, job, want, rank, stopped, leader)) >= 0)
        return rc;
    /* The newest generation is restored while its checksums are checked;
     * a fallback (before) checks first, as it goes. */
    if ((rc = pick_gen (c, job, want, before, before != 0, &m, &gen)))
        return rc;
    if (!(task = gen_task (c, job, gen, m, rank, dir, sizeof (dir), imgdir, sizeof (imgdir)))) {
        json_object_put (m);
        return CLI_NOTFOUND;
    }
    if (!before && (vpid = verify_start (dir, m, &vfd)) < 0) {
        json_object_put (m);
        if ((rc = pick_gen (c, job, want, 0, 1, &m, &gen)))
            return rc;
        if (!(task = gen_task (c, job, gen, m, rank, dir, sizeof (dir), imgdir,
                               sizeof (imgdir)))) {
            json_object_put (m);
            return CLI_NOTFOUND;
        }
    }
    /* Root's own files in a folder of its own: a name in /tmp that any
     * user could have made first (a link) would choose what root writes. */
    if (!mkdtemp (tdir)) {
        cli_error ("cannot make a private folder in /tmp: %s", strerror (errno));
        json_object_put (m);
        return CLI_ERR;
    }
    snprintf (pidfile, sizeof (pidfile), "%s/pid", tdir);
    /* ibcr-init writes adopted only once criu has exited: criu writes
     * pidfile before it has let go of the tree, and a SIGCONT sent before
     * that would be undone by its --leave-stopped. */
    snprintf (adopted, sizeof (adopted), "%s/adopted", tdir);
    snprintf (log, sizeof (log), "%s/%s.log", tdir, job);
    /* Compressed images (compression = yes): CRIU reads a private,
     * decompressed copy, removed once it has restored from it. */
    if (zimg_dir_compressed (imgdir)) {
        char err[1024], sub[4300];
        snprintf (ztmp, sizeof (ztmp), "%s/ibcr-restart.XXXXXX",
                  getenv ("TMPDIR") && *getenv ("TMPDIR") ? getenv ("TMPDIR") : "/var/tmp");
        if (!mkdtemp (ztmp)) {
            cli_error ("cannot make a folder to decompress the images into (%s): %s", ztmp,
                       strerror (errno));
            json_object_put (m);
            return CLI_ERR;
        }
        snprintf (sub, sizeof (sub), "%s/task-%d", ztmp, rank);
        if (zimg_decompress_dir (imgdir, sub, err, sizeof (err)) < 0) {
            store_rmtree (ztmp);
            ztmp[0] = '\0';
            snprintf (zerr, sizeof (zerr), "%s", err);
            rc = CLI_ERR;
            goto verdict;   /* a damaged image may be why: the checksums say */
        }
        snprintf (imgdir, sizeof (imgdir), "%s", sub);
    }
    unlink (log);

    /* stdout and stderr: fresh pipes in place of the dumped ones. */
    if (json_object_object_get_ex (task, "stdio", &stdio)) {
        const char *o = proto_get_str (stdio, "1", ""), *e = proto_get_str (stdio, "2", "");
        sscanf (o, "pipe:[%llu]", (unsigned long long *)&out_ino);
        sscanf (e, "pipe:[%llu]", (unsigned long long *)&err_ino);
    }
    for (int k = 0; k < 2; k++) {
        uint64_t ino = k ? err_ino : out_ino;
        int p[2];
        if (!ino || (k && ino == out_ino))
            continue;
        if (pipe (p) < 0) {
            cli_error ("cannot make a pipe: %s", strerror (errno));
            return CLI_ERR;
        }
        if (k)
            t.err_r = p[0];
        else
            t.out_r = p[0];
        fcntl (p[0], F_SETFD, FD_CLOEXEC);
        keep[nkeep++] = p[1];
        snprintf (inherit[ninh++], sizeof (inherit[0]), "fd[%d]:pipe:[%llu]", p[1],
                  (unsigned long long)ino);
    }
    /* libibcr's control socket: a fresh connection ibcrd knows is theirs. */
    if (proto_get_int (task, "ctl_ino", 0) > 0) {
        const char *sock = cli_socket_path (c);
        json_object *req = proto_new ("ctl-attach"), *rep = NULL;
        proto_set_str (req, "job", job);
        proto_set_int (req, "rank", rank);
        if (!sock || (ctlfd = usock_connect (sock)) < 0
            || usock_request (ctlfd, req, c->timeout_ms, &rep) < 0
            || strcmp (proto_type (rep), "ok")) {
            cli_error ("cannot attach libibcr's control connection at ibcrd %s: %s", sock ? sock
                       : "?", rep ? proto_get_str (rep, "message", "?") : strerror (errno));
            json_object_put (req);
            json_object_put (rep);
            return CLI_NODAEMON;
        }
        json_object_put (req);
        json_object_put (rep);
        fcntl (ctlfd, F_SETFD, 0);
        keep[nkeep++] = ctlfd;
        snprintf (inherit[ninh++], sizeof (inherit[0]), "fd[%d]:socket:[%lld]", ctlfd,
                  (long long)proto_get_int (task, "ctl_ino", 0));
    }
    if (!criu || !*criu)
        criu = IBCR_CRIU_DEFAULT;
    if ((t.launcher = fork ()) < 0) {
        cli_error ("cannot fork: %s", strerror (errno));
        return CLI_ERR;
    }
    if (t.launcher == 0) {
        char *av[40];
        int ac = 0;
        av[ac++] = (char *)cli_init_path ();
        av[ac++] = "--restored";
        av[ac++] = pidfile;
        av[ac++] = "--pidfile";
        av[ac++] = adopted;
        av[ac++] = "--";
        av[ac++] = (char *)criu;
        av[ac++] = "restore";
        av[ac++] = "-D";
        av[ac++] = imgdir;
        av[ac++] = "-o";
        av[ac++] = log;
        av[ac++] = "--restore-detached";
        av[ac++] = "--pidfile";
        av[ac++] = pidfile;
        for (int i = 0; i < ninh; i++) {
            av[ac++] = "--inherit-fd";
            av[ac++] = inherit[i];
        }
        /* Stopped until its checksums are known good (and for --stopped). */
        av[ac++] = "--leave-stopped";
        av[ac] = NULL;
        int nul = open ("/dev/null", O_RDWR);
        dup2 (nul, 0);
        dup2 (nul, 1);      /* ibcr-init's own messages go to stderr */
        /* criu gets only the fds it hands in (--inherit-fd). */
        for (int fd = 3; fd < 1024; fd++) {
            int kept = 0;
            for (int i = 0; i < nkeep; i++)
                kept |= keep[i] == fd;
            if (!kept)
                close (fd);
        }
        execv (av[0], av);
        fprintf (stderr, "ibcr: error: cannot run %s: %s (set IBCR_INIT)\n", av[0],
                 strerror (errno));
        _exit (125);
    }
    for (int i = 0; i < nkeep; i++)
        close (keep[i]);
    snprintf (what, sizeof (what), "job %s gen %d rank %d", job, gen, rank);
    imgbytes = imgcopy_dir_size (imgdir);  /* what CRIU reads back */
    cli_progress_show (what, "restore", 0, imgbytes);
    rc = cli_task_wait_pid (&t, adopted, "criu restore");
    if (rc == 0)
        cli_progress_show (what, "restore", imgbytes, imgbytes);
    if (vpid > 0)
        cli_progress_show (what, "verify", 0, 0);
    if (ztmp[0])
        store_rmtree (ztmp);    /* CRIU has read it all by now, or failed */
verdict:
    if (vpid > 0) {
        char why[1024] = "";
        int vst = 0;
        ssize_t n;
        while (waitpid (vpid, &vst, 0) < 0 && errno == EINTR)
            ;
        if ((n = read (vfd, why, sizeof (why) - 1)) > 0)
            why[n] = '\0';
        close (vfd);
        if (!WIFEXITED (vst) || WEXITSTATUS (vst) != 0) {
            /* Never let a damaged image run: end what was restored. */
            if (rc == 0 && t.init > 0) {
                kill (t.init, SIGKILL);
                while (waitpid (t.launcher, NULL, 0) < 0 && errno == EINTR)
                    ;
            }
            if (t.out_r >= 0)
                close (t.out_r);
            if (t.err_r >= 0)
                close (t.err_r);
            unlink (pidfile);
            json_object_put (m);
            if (want) {
                cli_error ("job %s generation %d is damaged (%s); not restoring it (see "
                           "'ibcr verify %s'; leave out --gen to fall back to an older one)",
                           job, want, why, job);
                return CLI_DAMAGED;
            }
            cli_progress_end ();
            fprintf (stderr, "ibcr: warning: job %s generation %d is damaged (%s); falling "
                     "back to the previous generation\n", job, gen, why);
            char bbuf[32], *nargv[argc + 3];
            int nargc = 0;
            snprintf (bbuf, sizeof (bbuf), "--before-gen=%d", gen);
            for (int i = 0; i < argc; i++)
                nargv[nargc++] = argv[i];
            nargv[nargc++] = bbuf;
            nargv[nargc] = NULL;
            optind = 0;
            return cli_restart (c, nargc, nargv);
        }
    }
    if (zerr[0]) {
        cli_error ("job %s generation %d: %s", job, gen, zerr);
        json_object_put (m);
        return CLI_ERR;
    }
    if (rc) {
        char errs[1024];
        if (rc < 0 && !(WIFEXITED (t.status) && WEXITSTATUS (t.status) == 125)) {
            /* Restored, and ended before we looked: its status is ours. */
            json_object_put (m);
            return cli_task_wait (&t);
        }
        if (rc < 0)
            rc = CLI_ERR;
        criu_log_errors (log, 3, errs, sizeof (errs));
        cli_error ("job %s generation %d rank %d was not restored: %s; log: %s", job, gen,
                   rank, errs[0] ? errs : "see the log", log);
        json_object_put (m);
        return rc;
    }
    f = json_object_new_object ();
    json_object_object_add (f, "job", json_object_new_string (job));
    json_object_object_add (f, "rank", json_object_new_int (rank));
    json_object_object_add (f, "size", json_object_new_int ((int)proto_get_int (m, "size", 1)));
    json_object_object_add (f, "restored", json_object_new_boolean (ctlfd >= 0));
    json_object_object_add (f, "source", json_object_new_string ("restart"));
    if (leader)
        cli_add_leader (f, leader);     /* checked with the options */
    if ((rc = cli_task_register (c, &t, f)))
        fprintf (stderr, "ibcr: warning: the restored task runs, but not registered\n");
    cli_progress_end ();
    fprintf (stderr, "ibcr: job %s rank %d restored from generation %d (init pid %ld, "
             "application pid %ld)\n", job, rank, gen, (long)t.init, (long)t.app);
    if (!stopped && rc == 0)
        continue_tree (t.init, 0);
    if (stopped) {
        printf ("job %s rank %d stopped: init %ld application %ld launcher %ld\n", job, rank,
                (long)t.init, (long)t.app, (long)t.launcher);
        printf ("attach with 'gdb -p %ld'; after detaching, continue it with 'kill -CONT "
                "%ld'\n", (long)t.app, (long)t.launcher);
        fflush (stdout);
        while (cli_task_stopped (t.app ? t.app : t.init))
            usleep (50000);
    }
    if (ctlfd >= 0 && !rc) {
        json_object *req = proto_new ("resume-restored"), *rep;
        int rrc;
        /* ibcrd waits for every rank, then rebuilds and resumes them. */
        cli_progress_show (what, "rebuild", 0, 0);
        proto_set_str (req, "job", job);
        c->timeout_ms = -1;
        rep = cli_request (c, req, &rrc);
        json_object_put (req);
        if (!rep) {
            cli_error ("the restored task cannot go on; ending it");
            if (t.init > 0)
                kill (t.init, SIGKILL);     /* its PID namespace goes with it */
            kill (t.launcher, SIGKILL);
            cli_task_wait (&t);
            json_object_put (m);
            return rrc ? rrc : CLI_ERR;
        }
        json_object_put (rep);
    }
    json_object_put (m);
    unlink (log);
    rc = cli_task_wait (&t);
    unlink (pidfile);
    unlink (adopted);
    rmdir (tdir);
    return rc;
}
