/* coord.c - the test suite's checkpoint coordinator: plays ibcrd's leader
 * for libibcr's tests, speaking lib/ibcr/ckpt_proto.h over IBCR_SOCKET.
 *
 *   coord -s SOCK -n NPROCS [-c CYCLES] [-w MIN_MS:MAX_MS] [-b LIB1,LIB2,...]
 *         [-g FILE] [-p FILE] [-k MS] [-K MS] [-r]
 *
 * Waits for NPROCS libibcr processes to connect, then runs CYCLES
 * quiesce/drain/release/rebuild/connect/resume generations at random
 * moments, relaying drain reports (drain_done) and id tables.  With -b the
 * backend named for each rebuild cycles through the list.
 * With -g, each cycle starts only once FILE exists (the test creates it
 * when its workload is where it wants the checkpoint), and removes it.
 * With -p, each cycle waits after the release until FILE exists (the test
 * dumps the released processes with CRIU meanwhile), and removes it.
 * With -K, rank 0 is told to connect MS milliseconds before the others:
 * its QPs are connected while theirs are not yet.
 * With -r, each cycle rebuilds and connects every process twice, as an
 * aborted generation's undo does to processes that had connected, then
 * resumes them.
 * With -k, rank 0 is told to resume MS milliseconds before the others, as
 * nodes of a real job resume at different moments: its traffic reaches
 * peers that are rebuilt and connected but not resumed yet.
 * It stops when the cycles are done or a process disconnects (finished),
 * prints one line per cycle and a final "stat" JSON line per process
 * (virtual and real QPNs and rkeys), and exits non-zero on any protocol
 * error.
 */
#include "config.h"
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "common/proto.h"
#include "ibcr/ckpt_proto.h"
#include "ibcr/drain.h"

#define MAXP 64
static int fds[MAXP], ranks[MAXP], np;
static const char *pause_file;
static int resume_skew_ms;
static int rebuild_twice;
static int connect_skew_ms;
static int gone;

static double now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Send req (a fresh object per process) to all, collect replies of type
 * 'want'.  With refused, an EAGAIN error reply (a quiesce refused inside
 * MPI_Init, libibcr's mpi.c) sets *refused instead of failing.  0, 1 when
 * a process has gone (finished), -1 on error. */
static int round_trip_r (const char *type, json_object *extra, const char *want, json_object **out,
                         int *refused)
{
    /* -k (-K): a resume (a connect) goes to rank 0 first, then, MS
     * later, to the others. */
    int skew_ms = strcmp (type, CKPT_RESUME) == 0 ? resume_skew_ms
        : strcmp (type, CKPT_CONNECT) == 0        ? connect_skew_ms
                                                  : 0;
    bool skew = skew_ms > 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && skew)
            usleep (skew_ms * 1000);
        for (int i = 0; i < np; i++) {
            if (skew ? (ranks[i] == 0) != (pass == 0) : pass == 1)
                continue;
            json_object *m = proto_new (type);
            if (extra) {
                json_object_object_foreach (extra, key, val)
                    json_object_object_add (m, key, json_object_get (val));
            }
            int rc = proto_send (fds[i], m);
            json_object_put (m);
            if (rc < 0)
                return 1;
        }
    }
    for (int i = 0; i < np; i++) {
        json_object *r = NULL;
        if (proto_recv_timeout (fds[i], 0, 30000, &r) < 0 || !r) {
            if (!r && (errno == 0 || errno == ECONNRESET)) {
                gone = 1;
                return 1;
            }
            fprintf (stderr, "coord: no reply to %s from process %d: %s\n", type, i,
                     strerror (errno));
            return -1;
        }
        if (refused && !strcmp (proto_type (r), "error")
            && proto_get_int (r, "errno", 0) == EAGAIN) {
            if (!*refused)
                fprintf (stderr, "coord: %s\n", proto_get_str (r, "message", "refused"));
            *refused = 1;
            json_object_put (r);
            continue;
        }
        if (strcmp (proto_type (r), want) != 0) {
            fprintf (stderr, "coord: %s: process %d answered %s\n", type, i,
                     json_object_to_json_string (r));
            json_object_put (r);
            return -1;
        }
        if (out)
            out[i] = r;
        else
            json_object_put (r);
    }
    return 0;
}

static int round_trip (const char *type, json_object *extra, const char *want, json_object **out)
{
    return round_trip_r (type, extra, want, out, NULL);
}

/* Quiesce all.  A refusal (EAGAIN: a process inside MPI_Init or
 * MPI_Finalize) is undone on all with a resume and asked again 0.2 s
 * later, for a minute at most.  0, 1 when a process has gone, -1 on
 * error. */
static int quiesce_all (void)
{
    for (int tries = 0; tries < 300; tries++) {
        int refused = 0, rc;
        if ((rc = round_trip_r (CKPT_QUIESCE, NULL, CKPT_QUIESCED, NULL, &refused)) || !refused)
            return rc;
        if ((rc = round_trip (CKPT_RESUME, NULL, CKPT_RESUMED, NULL)))
            return rc;
        usleep (200000);
    }
    fprintf (stderr, "coord: the quiesce was refused for a minute\n");
    return -1;
}

static void put_all (json_object **r)
{
    for (int i = 0; i < np; i++) {
        json_object_put (r[i]);
        r[i] = NULL;
    }
}

/* Rebuild every process, then connect them with the ids they gave. */
static int rebuild_connect (const char *backend)
{
    json_object *rep[MAXP] = { 0 };
    json_object *x = json_object_new_object ();
    if (backend)
        json_object_object_add (x, "backend", json_object_new_string (backend));
    int rc = round_trip (CKPT_REBUILD, x, CKPT_IDS, rep);
    json_object_put (x);
    if (rc)
        return rc;
    json_object *procs = json_object_new_array ();
    for (int i = 0; i < np; i++)
        json_object_array_add (procs, json_object_get (rep[i]));
    put_all (rep);
    x = json_object_new_object ();
    json_object_object_add (x, "procs", procs);
    rc = round_trip (CKPT_CONNECT, x, CKPT_CONNECTED, NULL);
    json_object_put (x);
    return rc;
}

static int cycle (int k, const char *backend)
{
    json_object *rep[MAXP] = { 0 };
    char why[512] = "";
    double t0 = now_ms ();
    int rc, rounds = 0, done = 0;
    struct drain_state ds;

    drain_state_init (&ds);
    if ((rc = quiesce_all ()))
        return rc;
    while (!done) {
        json_object *x = json_object_new_object ();
        json_object_object_add (x, "round", json_object_new_int (rounds));
        rc = round_trip (CKPT_DRAIN, x, CKPT_DRAIN_REPORT, rep);
        json_object_put (x);
        if (rc)
            return rc;
        done = drain_round (&ds, rep, np, now_ms (), why, sizeof (why));
        put_all (rep);
        if (done < 0) {
            fprintf (stderr, "coord: malformed drain report\n");
            return -1;
        }
        if (!done && ++rounds > 20000) {
            fprintf (stderr, "coord: drain did not converge: %s\n", why);
            return -1;
        }
        if (!done)
            usleep (rounds < 10 ? 100 : 1000);
    }
    if (ds.ud_lost)
        printf ("cycle %d: UD datagrams taken as lost: %s\n", k, why);
    double t1 = now_ms ();
    if ((rc = round_trip (CKPT_RELEASE, NULL, CKPT_RELEASED, rep)))
        return rc;
    for (int i = 0; i < np; i++)
        printf ("released %d fds %ld verbs_maps %ld backend_maps %ld rss_kb %ld\n", i,
                (long)proto_get_int (rep[i], "fds", -1),
                (long)proto_get_int (rep[i], "verbs_maps", -1),
                (long)proto_get_int (rep[i], "backend_maps", -1),
                (long)proto_get_int (rep[i], "rss_kb", -1));
    put_all (rep);
    fflush (stdout);
    /* -p: the test dumps the released processes now (CRIU), then lets
     * the rebuild go on by creating the file. */
    while (pause_file && access (pause_file, F_OK) != 0)
        usleep (2000);
    if (pause_file)
        unlink (pause_file);
    double t2 = now_ms ();
    /* -r: twice, as an aborted generation's undo rebuilds processes that
     * had connected already. */
    for (int again = 0; again <= rebuild_twice; again++)
        if ((rc = rebuild_connect (backend)))
            return rc;
    if ((rc = round_trip (CKPT_RESUME, NULL, CKPT_RESUMED, NULL)))
        return rc;
    double t3 = now_ms ();
    printf ("cycle %d: drain %.2f ms (%d extra rounds) release %.2f ms rebuild+resume %.2f ms "
            "total %.2f ms%s%s\n",
            k, t1 - t0, rounds, t2 - t1, t3 - t2, t3 - t0, backend ? " backend " : "",
            backend ? backend : "");
    fflush (stdout);
    return 0;
}

int main (int argc, char **argv)
{
    const char *sock = NULL, *trigger = NULL;
    char *backends[16];
    int nb = 0, n = 0, cycles = 1, wmin = 10, wmax = 100, opt;
    while ((opt = getopt (argc, argv, "s:n:c:w:b:g:p:k:K:r")) != -1) {
        switch (opt) {
        case 's':
            sock = optarg;
            break;
        case 'n':
            n = atoi (optarg);
            break;
        case 'c':
            cycles = atoi (optarg);
            break;
        case 'w':
            if (sscanf (optarg, "%d:%d", &wmin, &wmax) != 2 || wmin < 0 || wmax < wmin) {
                fprintf (stderr, "coord: -w wants MIN_MS:MAX_MS, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'g':
            trigger = optarg;
            break;
        case 'p':
            pause_file = optarg;
            break;
        case 'K':
            connect_skew_ms = atoi (optarg);
            break;
        case 'r':
            rebuild_twice = 1;
            break;
        case 'k':
            resume_skew_ms = atoi (optarg);
            break;
        case 'b':
            for (char *s = strtok (optarg, ","); s && nb < 16; s = strtok (NULL, ","))
                backends[nb++] = s;
            break;
        default:
            fprintf (stderr,
                     "usage: coord -s SOCK -n NPROCS [-c CYCLES] [-w MIN:MAX] "
                     "[-b LIB,...] [-g FILE] [-p FILE] [-k MS] [-K MS] [-r]\n");
            return 2;
        }
    }
    if (!sock || n < 1 || n > MAXP) {
        fprintf (stderr, "coord: -s SOCK and -n 1..%d are required\n", MAXP);
        return 2;
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf (sa.sun_path, sizeof (sa.sun_path), "%s", sock);
    int lfd = socket (AF_UNIX, SOCK_STREAM, 0);
    unlink (sock);
    if (lfd < 0 || bind (lfd, (struct sockaddr *)&sa, sizeof (sa)) < 0 || listen (lfd, n) < 0) {
        fprintf (stderr, "coord: cannot listen on %s: %s\n", sock, strerror (errno));
        return 1;
    }
    printf ("listening\n");
    fflush (stdout);
    for (np = 0; np < n; np++) {
        json_object *h = NULL;
        fds[np] = accept (lfd, NULL, NULL);
        if (fds[np] < 0 || proto_recv_timeout (fds[np], 0, 60000, &h) < 0 || !h
            || strcmp (proto_type (h), CKPT_HELLO) != 0) {
            fprintf (stderr, "coord: process %d did not say hello\n", np);
            return 1;
        }
        ranks[np] = (int)proto_get_int (h, "rank", -1);
        printf ("hello rank %d pid %ld\n", ranks[np], (long)proto_get_int (h, "pid", -1));
        json_object_put (h);
    }
    fflush (stdout);
    srand (getpid ());
    int k, rc = 0;
    for (k = 0; k < cycles; k++) {
        int w = wmin + (wmax > wmin ? rand () % (wmax - wmin + 1) : 0);
        usleep (w * 1000);
        while (trigger && access (trigger, F_OK) != 0)
            usleep (2000);
        if (trigger)
            unlink (trigger);
        rc = cycle (k, nb ? backends[k % nb] : NULL);
        if (rc)
            break;
    }
    printf ("cycles done: %d\n", k);
    if (rc < 0)
        return 1;
    if (!gone) {
        json_object *st[MAXP] = { 0 };
        if (round_trip (CKPT_STAT, NULL, CKPT_STAT, st) == 0)
            for (int i = 0; i < np; i++)
                printf ("stat %s\n", json_object_to_json_string (st[i]));
        put_all (st);
    }
    return 0;
}
