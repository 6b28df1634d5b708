/* Unit test of the sessions of lib/common/peerauth.c (no munged needed):
 * a message sealed by one side opens on the other, in order, in both
 * directions; a message altered, replayed, dropped (the next one opened
 * in its place), reflected back to its sender, or sealed with another
 * key is refused, and a refusal does not move the session on. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/peerauth.h"
#include "common/proto.h"
#include "tap.h"

static json_object *msg (const char *phase)
{
    json_object *m = proto_new ("gen-phase");
    proto_set_str (m, "phase", phase);
    return m;
}

/* Open env on s; the phase it carries, or NULL (errno kept). */
static const char *opened (struct peerauth_session *s, json_object *env)
{
    static char phase[64];
    json_object *b = NULL;
    char err[256];

    if (peerauth_open (s, env, &b, err, sizeof (err)) < 0)
        return NULL;
    snprintf (phase, sizeof (phase), "%s", proto_get_str (b, "phase", "?"));
    json_object_put (b);
    return phase;
}

static json_object *seal (struct peerauth_session *s, const char *phase)
{
    char err[256];
    json_object *m = msg (phase), *env = peerauth_seal (s, m, err, sizeof (err));
    json_object_put (m);
    return env;
}

int main (void)
{
    unsigned char key[PEERAUTH_KEY_LEN], other[PEERAUTH_KEY_LEN], back[PEERAUTH_KEY_LEN];
    char hex[2 * PEERAUTH_KEY_LEN + 1];
    struct peerauth_session L, M, X;
    json_object *e1, *e2, *e3, *r1, *bad;
    const char *p;

    plan (17);
    ok (peerauth_key_new (key) == 0 && peerauth_key_new (other) == 0
            && memcmp (key, other, sizeof (key)),
        "two new keys differ");
    peerauth_key_hex (key, hex);
    ok (strlen (hex) == 64 && peerauth_key_parse (hex, back) == 0
            && !memcmp (key, back, sizeof (key)),
        "a key survives hex and back");
    ok (peerauth_key_parse ("abc", back) < 0 && peerauth_key_parse (NULL, back) < 0,
        "a short or missing key is refused");
    hex[5] = 'g';
    ok (peerauth_key_parse (hex, back) < 0, "a key with a non-hex digit is refused");

    peerauth_session_init (&L, key, 1);
    peerauth_session_init (&M, key, 0);
    peerauth_session_init (&X, other, 0);
    e1 = seal (&L, "quiesce");
    e2 = seal (&L, "drain");
    e3 = seal (&L, "dump");
    ok (e1 && e2 && e3 && proto_get_int (e1, "seq", 0) == 1 && proto_get_int (e3, "seq", 0) == 3,
        "the leader seals three messages, numbered 1 to 3");

    errno = 0;
    ok (!opened (&X, e1) && errno == EACCES, "another key does not open it");
    ok (!opened (&M, e2) && errno == EACCES, "message 2 before message 1 is refused");
    p = opened (&M, e1);
    ok (p && !strcmp (p, "quiesce"), "message 1 opens: quiesce (the refusals moved nothing on)");
    ok (!opened (&M, e1) && errno == EACCES, "message 1 again (replay) is refused");

    {
        /* Message 2 with one character of its body changed, MAC kept. */
        char *txt = strdup (proto_get_str (e2, "body", ""));
        strstr (txt, "drain")[0] = 'D';
        bad = proto_new ("peer-s");
        proto_set_int (bad, "seq", 2);
        proto_set_str (bad, "body", txt);
        proto_set_str (bad, "mac", proto_get_str (e2, "mac", ""));
        free (txt);
    }
    ok (!opened (&M, bad) && errno == EACCES, "an altered body is refused");
    ok (!opened (&M, e3) && errno == EACCES, "message 3 in place of 2 (one dropped) is refused");
    p = opened (&M, e2);
    ok (p && !strcmp (p, "drain"), "message 2 opens: drain");

    r1 = seal (&M, "ok");
    ok (r1 && proto_get_int (r1, "seq", 0) == 1, "the member's answers are numbered on their own");
    ok (!opened (&M, r1) && errno == EACCES, "the member's own message reflected back is refused");
    p = opened (&L, r1);
    ok (p && !strcmp (p, "ok"), "the leader opens the member's answer");
    ok (!opened (&L, e3) && errno == EACCES, "the leader's own message reflected back is refused");
    p = opened (&M, e3);
    ok (p && !strcmp (p, "dump"), "message 3 opens: dump");

    json_object_put (e1);
    json_object_put (e2);
    json_object_put (e3);
    json_object_put (r1);
    json_object_put (bad);
    peerauth_session_wipe (&L);
    peerauth_session_wipe (&M);
    peerauth_session_wipe (&X);
    done_testing ();
    return exit_status ();
}
