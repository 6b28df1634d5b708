/* ident.c - see ident.h. */
#include "config.h"

#include <string.h>

#include "ident.h"

int ident_ok (const char *s)
{
    size_t n;

    if (!s || !*s || *s == '.' || *s == '-')
        return 0;
    n = strspn (s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
    return n == strlen (s) && n <= IDENT_MAX;
}

int ident_is_slurm_id (const char *id)
{
    if (!*id)
        return 0;
    for (const char *p = id; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}
