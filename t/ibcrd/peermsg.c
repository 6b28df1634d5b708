/* peermsg - test helper: speak ibcrd's peer protocol to 127.0.0.1:PORT,
 * with good, missing, broken and replayed MUNGE credentials, and print
 * every reply ("auth {...}" when the reply's credential checks out,
 * "plain {...}" otherwise).
 *
 * Usage: peermsg [--munge-socket S] PORT ACTION...
 *   ping:NODE     a ping addressed to NODE, properly wrapped
 *   type:T:NODE   a wrapped message of type T to NODE
 *   replay        the previous wrapped envelope again, byte for byte
 *   nocred        an envelope without a credential
 *   plain:NODE    a ping without any envelope
 *   badcred:NODE  a wrapped ping whose credential has one character changed
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/peerauth.h"
#include "common/proto.h"

static json_object *body (const char *type, const char *node)
{
    json_object *b = proto_new (type);
    proto_set_str (b, "to", node);
    proto_set_str (b, "from", "peermsg");
    return b;
}

int main (int argc, char **argv)
{
    static const struct option opts[] = {
        { "munge-socket", required_argument, NULL, 'm' },
        { NULL, 0, NULL, 0 },
    };
    const char *msock = NULL;
    struct sockaddr_in sa = { .sin_family = AF_INET };
    json_object *last = NULL;
    struct peerauth *pa;
    char err[512];
    int ch, fd;

    while ((ch = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        if (ch != 'm')
            return 2;
        msock = optarg;
    }
    if (argc - optind < 2) {
        fprintf (stderr, "Usage: peermsg [--munge-socket S] PORT ACTION...\n");
        return 2;
    }
    sa.sin_port = htons (atoi (argv[optind]));
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (!(pa = peerauth_create (msock)) || (fd = socket (AF_INET, SOCK_STREAM, 0)) < 0
        || connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        fprintf (stderr, "peermsg: connect: %s\n", strerror (errno));
        return 1;
    }
    for (int i = optind + 1; i < argc; i++) {
        const char *a = argv[i];
        json_object *env = NULL, *rep, *inner;
        uid_t uid;

        if (!strncmp (a, "ping:", 5) || !strncmp (a, "badcred:", 8) || !strncmp (a, "type:", 5)) {
            json_object *b;
            if (!strncmp (a, "type:", 5)) {
                char t[64];
                const char *colon = strchr (a + 5, ':');
                snprintf (t, sizeof (t), "%.*s", colon ? (int)(colon - a - 5) : 0, a + 5);
                b = body (t, colon ? colon + 1 : "");
            } else
                b = body ("ping", strchr (a, ':') + 1);
            if (!(env = peerauth_wrap (pa, b, err, sizeof (err)))) {
                fprintf (stderr, "peermsg: %s\n", err);
                return 1;
            }
            json_object_put (b);
            if (!strncmp (a, "badcred:", 8)) {
                char *c = strdup (proto_get_str (env, "cred", ""));
                size_t mid = strlen (c) / 2;
                c[mid] = c[mid] == 'A' ? 'B' : 'A';
                proto_set_str (env, "cred", c);
                free (c);
            } else {
                json_object_put (last);
                last = json_object_get (env);
            }
        } else if (!strcmp (a, "replay")) {
            env = json_object_get (last);
        } else if (!strcmp (a, "nocred")) {
            env = proto_new ("peer");
        } else if (!strncmp (a, "plain:", 6)) {
            env = body ("ping", a + 6);
        } else {
            fprintf (stderr, "peermsg: unknown action %s\n", a);
            return 2;
        }
        if (!env || proto_send (fd, env) < 0 || proto_recv_timeout (fd, 0, 10000, &rep) < 0
            || !rep) {
            fprintf (stderr, "peermsg: no reply to %s: %s\n", a, strerror (errno));
            return 1;
        }
        json_object_put (env);
        if (peerauth_unwrap (pa, rep, &inner, &uid, err, sizeof (err)) == 0) {
            printf ("auth %s\n", json_object_to_json_string_ext (inner, JSON_C_TO_STRING_PLAIN));
            json_object_put (inner);
        } else
            printf ("plain %s\n", json_object_to_json_string_ext (rep, JSON_C_TO_STRING_PLAIN));
        fflush (stdout);
        json_object_put (rep);
    }
    json_object_put (last);
    peerauth_destroy (pa);
    close (fd);
    return 0;
}
