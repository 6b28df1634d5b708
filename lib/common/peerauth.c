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

#include <munge.h>

#include "peerauth.h"
#include "proto.h"

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
        || munge_ctx_set (pa->ctx, MUNGE_OPT_UID_RESTRICTION, (uid_t)geteuid ()) != EMUNGE_SUCCESS) {
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
        snprintf (err, len, "peer message without a type");
        errno = EINVAL;
        return NULL;
    }
    s = json_object_to_json_string_length (body, JSON_C_TO_STRING_PLAIN, &n);
    if (n > PEERAUTH_MAX_BODY) {
        snprintf (err, len, "peer message of %zu bytes is over the %d-byte limit", n,
                  PEERAUTH_MAX_BODY);
        errno = EMSGSIZE;
        return NULL;
    }
    if ((e = munge_encode (&cred, pa->ctx, s, (int)n)) != EMUNGE_SUCCESS) {
        snprintf (err, len, "cannot get a MUNGE credential: %s (is munged running?)",
                  munge_ctx_strerror (pa->ctx) ? munge_ctx_strerror (pa->ctx) : munge_strerror (e));
        free (cred);
        errno = EIO;
        return NULL;
    }
    if (!(env = proto_new ("peer")) || proto_set_str (env, "cred", cred) < 0) {
        json_object_put (env);
        free (cred);
        snprintf (err, len, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    free (cred);
    return env;
}

int peerauth_unwrap (struct peerauth *pa, json_object *env, json_object **body,
                     uid_t *uid, char *err, size_t len)
{
    const char *cred = proto_get_str (env, "cred", NULL);
    void *payload = NULL;
    int plen = 0;
    gid_t gid;
    munge_err_t e;

    *body = NULL;
    if (!proto_type (env) || strcmp (proto_type (env), "peer")) {
        snprintf (err, len, "peer messages must be of type \"peer\" and carry a MUNGE "
                  "credential (got type '%.32s')", proto_type (env) ? proto_type (env) : "?");
        errno = EACCES;
        return -1;
    }
    if (!cred || !*cred) {
        snprintf (err, len, "peer message without a MUNGE credential refused");
        errno = EACCES;
        return -1;
    }
    /* munge_decode stores the credential's own options (cipher, MAC...)
     * in the context it is given, so a forged credential would poison the
     * context used to encode: decode with a throw-away copy. */
    munge_ctx_t dctx = munge_ctx_copy (pa->ctx);
    if (!dctx) {
        snprintf (err, len, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    e = munge_decode (cred, dctx, &payload, &plen, uid, &gid);
    if (e != EMUNGE_SUCCESS) {
        const char *why = munge_ctx_strerror (dctx);
        snprintf (err, len, "peer MUNGE credential refused: %s", why ? why : munge_strerror (e));
        munge_ctx_destroy (dctx);
        free (payload);
        errno = (e == EMUNGE_SOCKET || e == EMUNGE_SNAFU || e == EMUNGE_NO_MEMORY) ? EIO : EACCES;
        return -1;
    }
    munge_ctx_destroy (dctx);
    if (!payload || plen <= 0 || proto_decode (payload, (size_t)plen, body) < 0) {
        snprintf (err, len, "peer message inside a valid credential is malformed");
        free (payload);
        errno = EPROTO;
        return -1;
    }
    free (payload);
    return 0;
}
