/* duration.c - see duration.h. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "duration.h"

static const struct {
    const char *name;
    uint64_t ms;
} units[] = {
    { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "d", 86400000 },
};
#define NUNITS (sizeof (units) / sizeof (units[0]))

int duration_parse (const char *s, uint64_t *ms)
{
    uint64_t total = 0;
    int seen[NUNITS] = { 0 };
    const char *p = s;
    int bare;

    if (!s || !*s)
        goto inval;
    bare = strspn (s, "0123456789") == strlen (s);
    while (*p) {
        uint64_t n = 0;
        size_t u, ulen = 0;

        if (!isdigit ((unsigned char)*p))
            goto inval;
        while (isdigit ((unsigned char)*p)) {
            if (n > (UINT64_MAX - 9) / 10)
                goto range;
            n = n * 10 + (*p++ - '0');
        }
        if (bare) {
            u = 1; /* bare number: seconds */
        } else {
            while (isalpha ((unsigned char)p[ulen]))
                ulen++;
            for (u = 0; u < NUNITS; u++)
                if (strlen (units[u].name) == ulen && !strncmp (p, units[u].name, ulen))
                    break;
            if (u == NUNITS || seen[u])
                goto inval;
            p += ulen;
        }
        seen[u] = 1;
        if (n > UINT64_MAX / units[u].ms || total > UINT64_MAX - n * units[u].ms)
            goto range;
        total += n * units[u].ms;
    }
    *ms = total;
    return 0;
inval:
    errno = EINVAL;
    return -1;
range:
    errno = ERANGE;
    return -1;
}

char *duration_format (uint64_t ms, char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0)
        return buf;
    buf[0] = '\0';
    if (ms == 0) {
        snprintf (buf, len, "0s");
        return buf;
    }
    for (int u = NUNITS - 1; u >= 0; u--) {
        uint64_t n = ms / units[u].ms;
        if (n == 0)
            continue;
        ms -= n * units[u].ms;
        int w = snprintf (buf + off, len - off, "%llu%s", (unsigned long long)n, units[u].name);
        if (w < 0 || (size_t)w >= len - off)
            break;
        off += w;
    }
    return buf;
}
