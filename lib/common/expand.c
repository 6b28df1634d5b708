/* expand.c - see expand.h. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expand.h"

int expand_hostname (char *buf, size_t len)
{
    char *dot;

    if (gethostname (buf, len) < 0)
        return -1;
    buf[len - 1] = '\0';
    if ((dot = strchr (buf, '.')))
        *dot = '\0';
    return 0;
}

char *expand_path (const char *in, const char *node, const char *host, char bad[3])
{
    char hostbuf[256];
    size_t cap, len = 0;
    char *out;

    if (!in) {
        errno = EINVAL;
        return NULL;
    }
    if ((!node || !host) && strchr (in, '%')) {
        if (expand_hostname (hostbuf, sizeof (hostbuf)) < 0)
            return NULL;
        if (!node)
            node = hostbuf;
        if (!host)
            host = hostbuf;
    }
    cap = strlen (in) + 1;
    if (node && host)
        cap += strlen (in) / 2 * (strlen (node) + strlen (host));
    if (!(out = malloc (cap)))
        return NULL;
    for (const char *p = in; *p; p++) {
        const char *sub = NULL;
        char one[2] = { 0, 0 };

        if (*p != '%') {
            out[len++] = *p;
            continue;
        }
        switch (p[1]) {
        case 'n':
            sub = node;
            break;
        case 'h':
            sub = host;
            break;
        case '%':
            one[0] = '%';
            sub = one;
            break;
        default:
            if (bad) {
                bad[0] = '%';
                bad[1] = p[1];
                bad[2] = '\0';
            }
            free (out);
            errno = EINVAL;
            return NULL;
        }
        memcpy (out + len, sub, strlen (sub));
        len += strlen (sub);
        p++;
    }
    out[len] = '\0';
    return out;
}
