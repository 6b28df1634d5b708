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
