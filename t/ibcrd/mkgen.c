/* mkgen - test helper: make one checkpoint generation through the same
 * store calls ibcrd uses (store_gen_begin, store_gen_commit), filled with
 * deterministic data instead of CRIU images, and print its number.
 *
 * Usage: mkgen STORAGE JOB [--cluster C] [--uid U] [--gid G] [--tasks N]
 *              [--bytes B] [--partial] [--trigger T]
 * --partial stops before the commit, leaving the generation partial.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/store.h"

static int write_file (const char *path, size_t bytes, unsigned seed)
{
    char buf[65536];
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    unsigned x = seed * 2654435761u + 1;

    if (fd < 0)
        return -1;
    while (bytes) {
        size_t n = bytes < sizeof (buf) ? bytes : sizeof (buf);
        for (size_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (char)(x >> 16);
        }
        if (write (fd, buf, n) != (ssize_t)n) {
            close (fd);
            return -1;
        }
        bytes -= n;
    }
    return close (fd);
}

int main (int argc, char **argv)
{
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' }, { "uid", required_argument, NULL, 'u' },
        { "gid", required_argument, NULL, 'g' },     { "tasks", required_argument, NULL, 't' },
        { "bytes", required_argument, NULL, 'b' },   { "partial", no_argument, NULL, 'p' },
        { "trigger", required_argument, NULL, 'r' }, { NULL, 0, NULL, 0 },
    };
    struct store st = { .cluster = "local" };
    uid_t uid = getuid ();
    gid_t gid = getgid ();
    int tasks = 2, partial = 0, gen, ch;
    size_t bytes = 100000;
    const char *trigger = "manual";
    char dir[4096], err[1024];

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            st.cluster = optarg;
            break;
        case 'u':
            uid = atoi (optarg);
            break;
        case 'g':
            gid = atoi (optarg);
            break;
        case 't':
            tasks = atoi (optarg);
            break;
        case 'b':
            bytes = strtoul (optarg, NULL, 10);
            break;
        case 'p':
            partial = 1;
            break;
        case 'r':
            trigger = optarg;
            break;
        default:
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf (stderr, "Usage: mkgen STORAGE JOB [options]\n");
        return 2;
    }
    st.root = argv[optind];
    const char *job = argv[optind + 1];
    if (store_gen_begin (&st, job, uid, gid, &gen, dir, sizeof (dir), err, sizeof (err)) < 0) {
        fprintf (stderr, "mkgen: %s\n", err);
        return 1;
    }
    json_object *meta = json_object_new_object (), *ta = json_object_new_array ();
    for (int r = 0; r < tasks; r++) {
        char td[4200], f[4300];
        snprintf (td, sizeof (td), "%s/task-%d", dir, r);
        if (mkdir (td, 0755) < 0) {
            perror (td);
            return 1;
        }
        snprintf (f, sizeof (f), "%s/pages-1.img", td);
        if (write_file (f, bytes, gen * 1000 + r) < 0) {
            perror (f);
            return 1;
        }
        snprintf (f, sizeof (f), "%s/core-1.img", td);
        if (write_file (f, 1234, gen * 1000 + r + 500) < 0) {
            perror (f);
            return 1;
        }
        json_object *t = json_object_new_object ();
        proto_set_int (t, "rank", r);
        proto_set_str (t, "node", "n1");
        proto_set_str (t, "dir", strrchr (td, '/') + 1);
        json_object_array_add (ta, t);
    }
    json_object_object_add (meta, "tasks", ta);
    proto_set_str (meta, "step", "0");
    proto_set_str (meta, "trigger", trigger);
    if (!partial && store_gen_commit (&st, job, gen, uid, gid, meta, err, sizeof (err)) < 0) {
        fprintf (stderr, "mkgen: %s\n", err);
        return 1;
    }
    json_object_put (meta);
    printf ("%d\n", gen);
    return 0;
}
