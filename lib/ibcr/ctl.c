/* ctl.c - the control thread (see ctl.h).
 *
 * One request at a time, answered in order; the thread blocks only in
 * proto_recv, never while the gate is closed for anything but the next
 * request.  If the coordinator goes away with the gate closed, the
 * application must not hang forever: the gate is reopened and the loss is
 * logged (a generation in progress is then void).
 */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "common/proto.h"
#include "ibcr.h"
#include "ckpt.h"
#include "ckpt_proto.h"
#include "gate.h"
#include "mpi.h"

static int ctl_fd = -1;
/* Held by the control thread from quiesce to resume, so that a process
 * exiting in the middle of a cycle waits for it to end rather than tearing
 * the process down while the backend is half rebuilt. */
static pthread_mutex_t cycle_lock = PTHREAD_MUTEX_INITIALIZER;
static bool in_cycle;
static pid_t owner_pid;

static void cycle_end (void)
{
    if (in_cycle) {
        in_cycle = false;
        pthread_mutex_unlock (&cycle_lock);
    }
}

/* exit(): let a running cycle finish, then hang up, so the coordinator
 * sees this process leave between cycles (it stops cleanly then). */
static void ctl_atexit (void)
{
    struct timespec ts;
    if (getpid () != owner_pid)
        return; /* a forked child: not ours to close */
    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    if (pthread_mutex_timedlock (&cycle_lock, &ts) != 0)
        ibcr_log ("exiting in the middle of a checkpoint that does not end");
    int fd = ctl_fd;
    if (fd >= 0)
        shutdown (fd, SHUT_RDWR);
    /* cycle_lock stays held: no new cycle may start in a dying process. */
}

static int reply (json_object *req, json_object *msg)
{
    json_object *gen;
    if (!msg)
        return -1;
    if (json_object_object_get_ex (req, "gen", &gen))
        json_object_object_add (msg, "gen", json_object_get (gen));
    int rc = proto_send (ctl_fd, msg);
    json_object_put (msg);
    return rc;
}

static json_object *fail (const char *what)
{
    int e = errno ? errno : EIO;
    return proto_error (what, e, "libibcr rank %d pid %d: %s failed: %s", ibcr_rank, (int)getpid (),
                        what, strerror (e));
}

static int serve (json_object *req)
{
    const char *t = proto_type (req);
    json_object *m;

    if (strcmp (t, CKPT_QUIESCE) == 0) {
        if (!in_cycle) {
            pthread_mutex_lock (&cycle_lock);
            in_cycle = true;
        }
        ckpt_quiesce ();
        const char *mpi = mpi_busy ();
        if (mpi) {
            /* Refused, with nothing touched: the gate opens again and the
             * cycle is over (a resume the coordinator sends next is one
             * more no-op). */
            ckpt_resume ();
            cycle_end ();
            return reply (req,
                          proto_error (t, EAGAIN,
                                       "libibcr rank %d pid %d: inside %s: "
                                       "a checkpoint taken now could not be restored; "
                                       "the job runs on, take the next one once %s "
                                       "returned",
                                       ibcr_rank, (int)getpid (), mpi, mpi));
        }
        return reply (req, proto_new (CKPT_QUIESCED));
    }
    if (strcmp (t, CKPT_DRAIN) == 0) {
        m = proto_new (CKPT_DRAIN_REPORT);
        proto_set_int (m, "round", proto_get_int (req, "round", 0));
        if (ckpt_drain (m) < 0) {
            json_object_put (m);
            m = fail (t);
        }
        return reply (req, m);
    }
    if (strcmp (t, CKPT_RELEASE) == 0) {
        if (ckpt_release () < 0)
            return reply (req, fail (t));
        m = proto_new (CKPT_RELEASED);
        proto_set_int (m, "fds", ckpt_count_fds ());
        /* A backend left mapped would have to match at restore time. */
        int maps = ckpt_count_maps ("libibverbs");
        proto_set_int (m, "verbs_maps", maps);
        proto_set_int (m, "backend_maps", maps - ibcr_base_maps);
        proto_set_int (m, "rss_kb", ckpt_rss_kb ());
        return reply (req, m);
    }
    if (strcmp (t, CKPT_REBUILD) == 0) {
        m = proto_new (CKPT_IDS);
        if (ckpt_rebuild (proto_get_str (req, "backend", NULL), m) < 0) {
            json_object_put (m);
            m = fail (t);
        }
        return reply (req, m);
    }
    if (strcmp (t, CKPT_CONNECT) == 0) {
        json_object *procs = NULL;
        json_object_object_get_ex (req, "procs", &procs);
        if (ckpt_connect (procs) < 0)
            return reply (req, fail (t));
        return reply (req, proto_new (CKPT_CONNECTED));
    }
    if (strcmp (t, CKPT_RESUME) == 0) {
        if (ckpt_is_released ()) {
            errno = EPROTO;
            return reply (req,
                          proto_error (t, EPROTO,
                                       "libibcr rank %d pid %d: cannot "
                                       "resume: verbs resources are released and not "
                                       "rebuilt; send ckpt-rebuild and ckpt-connect "
                                       "first",
                                       ibcr_rank, (int)getpid ()));
        }
        int rc = ckpt_resume () < 0 ? reply (req, fail (t)) : reply (req, proto_new (CKPT_RESUMED));
        cycle_end ();
        return rc;
    }
    if (strcmp (t, CKPT_STAT) == 0) {
        m = proto_new (CKPT_STAT);
        ckpt_stat (m);
        return reply (req, m);
    }
    return reply (req,
                  proto_error (t, EPROTO,
                               "libibcr: unknown request type '%s'; "
                               "expected one of ckpt_proto.h",
                               t));
}

static void *ctl_main (void *arg)
{
    for (;;) {
        json_object *req = NULL;
        if (proto_recv (ctl_fd, 0, &req) < 0 || !req) {
            if (errno != 0 && req == NULL)
                ibcr_log ("control channel lost (%s); no more checkpoints", strerror (errno));
            break;
        }
        int rc = serve (req);
        json_object_put (req);
        if (rc < 0) {
            ibcr_log ("control channel: reply failed: %m; no more checkpoints");
            break;
        }
    }
    if (atomic_load (&gate_closed)) {
        if (ckpt_is_released ()) {
            /* Letting the application run on objects with no real
             * counterpart would corrupt its data or crash it later, far
             * from the cause: stop here, loudly.  The job restarts from
             * its last committed image. */
            ibcr_log ("coordinator left (or rebuild failed) after the verbs resources "
                      "were released: this process cannot continue; restart the job "
                      "from its last checkpoint");
            abort ();
        }
        ibcr_log ("coordinator left during a checkpoint: resuming the application");
        /* as a resume does: sends owed since a connect are posted first */
        ckpt_resume ();
    }
    cycle_end ();
    /* ctl_atexit reads ctl_fd under cycle_lock: without it, an exiting
     * thread could read the number just before this close and shut down
     * whatever the application opened under that number next.  If exit
     * holds the lock, it keeps it, and this thread waits here to die. */
    pthread_mutex_lock (&cycle_lock);
    int fd = ctl_fd;
    ctl_fd = -1;
    pthread_mutex_unlock (&cycle_lock);
    close (fd);
    return NULL;
}

int ctl_start (void)
{
    const char *path = getenv ("IBCR_SOCKET");
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;

    if (!path || !*path)
        return 0;
    if (strlen (path) >= sizeof (sa.sun_path)) {
        ibcr_log ("IBCR_SOCKET is too long for a unix socket path: %s", path);
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy (sa.sun_path, path);
    ctl_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ctl_fd < 0)
        return -1;
    if (connect (ctl_fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        ibcr_log ("cannot connect to the checkpoint coordinator at IBCR_SOCKET=%s: %m; "
                  "start ibcrd or unset IBCR_SOCKET",
                  path);
        goto error;
    }
    json_object *hello = proto_new (CKPT_HELLO);
    proto_set_int (hello, "pid", getpid ());
    proto_set_int (hello, "rank", ibcr_rank);
    int rc = proto_send (ctl_fd, hello);
    json_object_put (hello);
    if (rc < 0)
        goto error;
    owner_pid = getpid ();
    atexit (ctl_atexit);
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &old);
    pthread_attr_init (&a);
    pthread_attr_setdetachstate (&a, PTHREAD_CREATE_DETACHED);
    rc = pthread_create (&t, &a, ctl_main, NULL);
    pthread_attr_destroy (&a);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (rc) {
        errno = rc;
        goto error;
    }
    return 0;
error:;
    int saved = errno;
    close (ctl_fd);
    ctl_fd = -1;
    errno = saved;
    return -1;
}
