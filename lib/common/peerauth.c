/* peerauth.c - see peerauth.h.
 *
 * Credentials are restricted to our own uid (MUNGE_OPT_UID_RESTRICTION):
 * only root's ibcrd (our uid) may decode them, so a credential sent to a
 * listener some user runs is of no use to that user, neither to read nor
 * to replay elsewhere as its own. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctype.h>
#include <sys/random.h>

#include <munge.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "peerauth.h"
#include "proto.h"
#include "errbuf.h"

struct peerauth {
    munge_ctx_t ctx;
};

struct peerauth *peerauth_create (const char *munge_socket)
{
    struct peerauth *pa = calloc (1, sizeof (*pa));

    if (!pa)
        return NULL;
    if (!(pa->ctx = munge_ctx_create ())) {
        free (pa);
        errno = ENOMEM;
        return NULL;
    }
    if ((munge_socket && munge_ctx_set (pa->ctx, MUNGE_OPT_SOCKET, munge_socket) != EMUNGE_SUCCESS)
        || munge_ctx_set (pa->ctx, MUNGE_OPT_UID_RESTRICTION, (uid_t)geteuid ())
            != EMUNGE_SUCCESS) {
        munge_ctx_destroy (pa->ctx);
        free (pa);
        errno = EINVAL;
        return NULL;
    }
    return pa;
}

void peerauth_destroy (struct peerauth *pa)
{
    if (pa) {
        munge_ctx_destroy (pa->ctx);
        free (pa);
    }
}

json_object *peerauth_wrap (struct peerauth *pa, json_object *body, char *err, size_t len)
{
    const char *s;
    size_t n;
    char *cred = NULL;
    munge_err_t e;
    json_object *env;

    if (!proto_type (body)) {
        errnprintf (err, len, EINVAL, "peer message without a type");
        return NULL;
    }
    s = json_object_to_json_string_length (body, JSON_C_TO_STRING_PLAIN, &n);
    if (n > PEERAUTH_MAX_BODY) {
        errnprintf (err, len, EMSGSIZE, "peer message of %zu bytes is over the %d-byte limit", n,
                    PEERAUTH_MAX_BODY);
        return NULL;
    }
    if ((e = munge_encode (&cred, pa->ctx, s, (int)n)) != EMUNGE_SUCCESS) {
        errnprintf (err, len, EIO, "cannot get a MUNGE credential: %s (is munged running?)",
                    munge_ctx_strerror (pa->ctx) ? munge_ctx_strerror (pa->ctx)
                                                 : munge_strerror (e));
        free (cred);
        return NULL;
    }
    if (!(env = proto_new ("peer")) || proto_set_str (env, "cred", cred) < 0) {
        json_object_put (env);
        free (cred);
        errnprintf (err, len, ENOMEM, "out of memory");
        return NULL;
    }
    free (cred);
    return env;
}

int peerauth_unwrap (struct peerauth *pa, json_object *env, json_object **body, uid_t *uid,
                     char *err, size_t len)
{
    const char *cred = proto_get_str (env, "cred", NULL);
    void *payload = NULL;
    int plen = 0;
    gid_t gid;
    munge_err_t e;

    *body = NULL;
    if (!proto_type (env) || strcmp (proto_type (env), "peer")) {
        return errnprintf (err, len, EACCES,
                           "peer messages must be of type \"peer\" and carry a MUNGE "
                           "credential (got type '%.32s')",
                           proto_type (env) ? proto_type (env) : "?");
    }
    if (!cred || !*cred) {
        return errnprintf (err, len, EACCES, "peer message without a MUNGE credential refused");
    }
    /* munge_decode stores the credential's own options (cipher, MAC...)
     * in the context it is given, so a forged credential would poison the
     * context used to encode: decode with a throw-away copy. */
    munge_ctx_t dctx = munge_ctx_copy (pa->ctx);
    if (!dctx) {
        return errnprintf (err, len, ENOMEM, "out of memory");
    }
    e = munge_decode (cred, dctx, &payload, &plen, uid, &gid);
    if (e != EMUNGE_SUCCESS) {
        char why[256]; /* dctx owns its message */
        snprintf (why, sizeof (why), "%s",
                  munge_ctx_strerror (dctx) ? munge_ctx_strerror (dctx) : munge_strerror (e));
        munge_ctx_destroy (dctx);
        free (payload);
        return errnprintf (
            err, len,
            e == EMUNGE_SOCKET || e == EMUNGE_SNAFU || e == EMUNGE_NO_MEMORY ? EIO : EACCES,
            "peer MUNGE credential refused: %s", why);
    }
    munge_ctx_destroy (dctx);
    if (!payload || plen <= 0 || proto_decode (payload, (size_t)plen, body) < 0) {
        free (payload);
        return errnprintf (err, len, EPROTO, "peer message inside a valid credential is malformed");
    }
    free (payload);
    return 0;
}

/* --- sessions ----------------------------------------------------------- */

int peerauth_key_new (unsigned char *key)
{
    size_t got = 0;

    while (got < PEERAUTH_KEY_LEN) {
        ssize_t n = getrandom (key + got, PEERAUTH_KEY_LEN - got, 0);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0)
            got += (size_t)n;
    }
    return 0;
}

void peerauth_key_hex (const unsigned char *key, char *hex)
{
    for (int i = 0; i < PEERAUTH_KEY_LEN; i++)
        snprintf (hex + 2 * i, 3, "%02x", key[i]);
}

int peerauth_key_parse (const char *hex, unsigned char *key)
{
    if (!hex || strlen (hex) != 2 * PEERAUTH_KEY_LEN)
        return -1;
    for (int i = 0; i < PEERAUTH_KEY_LEN; i++) {
        unsigned v;
        if (!isxdigit ((unsigned char)hex[2 * i]) || !isxdigit ((unsigned char)hex[2 * i + 1])
            || sscanf (hex + 2 * i, "%2x", &v) != 1)
            return -1;
        key[i] = (unsigned char)v;
    }
    return 0;
}

void peerauth_session_init (struct peerauth_session *s, const unsigned char *key, int leader)
{
    memcpy (s->key, key, PEERAUTH_KEY_LEN);
    s->sent = s->got = 0;
    s->self = leader ? 'L' : 'M';
    s->peer = leader ? 'M' : 'L';
}

void peerauth_session_wipe (struct peerauth_session *s)
{
    explicit_bzero (s, sizeof (*s));
}

static void session_mac (const struct peerauth_session *s, char dir, uint64_t seq, const char *body,
                         size_t n, unsigned char *mac)
{
    unsigned char head[9];
    unsigned int maclen = 0;
    head[0] = (unsigned char)dir;
    for (int i = 0; i < 8; i++)
        head[1 + i] = (unsigned char)(seq >> (56 - 8 * i));
    /* One buffer, so that the one-shot HMAC() covers head and body. */
    unsigned char *buf = malloc (sizeof (head) + n);
    if (!buf) {
        memset (mac, 0, 32);
        return;
    }
    memcpy (buf, head, sizeof (head));
    memcpy (buf + sizeof (head), body, n);
    HMAC (EVP_sha256 (), s->key, PEERAUTH_KEY_LEN, buf, sizeof (head) + n, mac, &maclen);
    free (buf);
}

json_object *peerauth_seal (struct peerauth_session *s, json_object *body, char *err, size_t len)
{
    unsigned char mac[32];
    char hex[65];
    const char *txt;
    size_t n;
    json_object *env;

    if (!proto_type (body)) {
        errnprintf (err, len, EINVAL, "peer message without a type");
        return NULL;
    }
    txt = json_object_to_json_string_length (body, JSON_C_TO_STRING_PLAIN, &n);
    if (n > PEERAUTH_MAX_BODY) {
        errnprintf (err, len, EMSGSIZE, "peer message of %zu bytes is over the %d-byte limit", n,
                    PEERAUTH_MAX_BODY);
        return NULL;
    }
    session_mac (s, s->self, s->sent + 1, txt, n, mac);
    for (int i = 0; i < 32; i++)
        snprintf (hex + 2 * i, 3, "%02x", mac[i]);
    if (!(env = proto_new ("peer-s")) || proto_set_int (env, "seq", (int64_t)(s->sent + 1)) < 0
        || json_object_object_add (env, "body", json_object_new_string_len (txt, (int)n)) < 0
        || proto_set_str (env, "mac", hex) < 0) {
        json_object_put (env);
        errnprintf (err, len, ENOMEM, "out of memory");
        return NULL;
    }
    s->sent++;
    return env;
}

int peerauth_open (struct peerauth_session *s, json_object *env, json_object **body, char *err,
                   size_t len)
{
    const char *hex = proto_get_str (env, "mac", NULL), *txt;
    json_object *b;
    unsigned char mac[32], want[32];
    int64_t seq = proto_get_int (env, "seq", -1);
    size_t n;

    *body = NULL;
    if (!proto_type (env) || strcmp (proto_type (env), "peer-s")
        || !json_object_object_get_ex (env, "body", &b)
        || !json_object_is_type (b, json_type_string) || !hex || strlen (hex) != 64) {
        return errnprintf (err, len, EACCES, "not a message of this session (type '%.32s')",
                           proto_type (env) ? proto_type (env) : "?");
    }
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf (hex + 2 * i, "%2x", &v) != 1) {
            return errnprintf (err, len, EACCES, "session message with a malformed MAC");
        }
        mac[i] = (unsigned char)v;
    }
    txt = json_object_get_string (b);
    n = (size_t)json_object_get_string_len (b);
    /* The MAC is checked against the sequence number we expect, not the
     * one the message claims: a replayed, dropped or reordered message
     * fails like a forged one. */
    session_mac (s, s->peer, s->got + 1, txt, n, want);
    if (CRYPTO_memcmp (mac, want, sizeof (mac)) != 0 || seq != (int64_t)(s->got + 1)) {
        return errnprintf (err, len, EACCES,
                           "session message %lld refused: its MAC does not match message "
                           "%llu of this session",
                           (long long)seq, (unsigned long long)(s->got + 1));
    }
    if (proto_decode (txt, n, body) < 0) {
        return errnprintf (err, len, EPROTO, "session message %lld is malformed", (long long)seq);
    }
    s->got++;
    return 0;
}
