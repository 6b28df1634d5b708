/* ucxuuid.c - are UCX's unique ids unique?  (t1104)
 *
 *   ucxuuid N
 *
 * Loads libucs.so.0 into the global scope and calls ucs_generate_uuid(0)
 * N times in a row, twice: once as UCX's libraries call it (the global
 * scope, where a preloaded libibcr's definition comes first), once
 * straight into libucs's own.  Prints for each how many of the N ids were
 * already given:
 *
 *   global: N ids, D repeated
 *   libucs: N ids, D repeated
 *
 * A UCP worker's first message id is ucs_generate_uuid(0): two ranks of
 * a node that get the same one mix their large messages' fragments.  Ids
 * made in one microsecond by one thread stand for ids made then by two
 * ranks whose thread ids are equal (PID namespaces).
 */
#include "config.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef uint64_t (*uuid_f) (uint64_t);

static int cmp (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static long repeated (uuid_f f, uint64_t *ids, long n)
{
    long d = 0;

    for (long i = 0; i < n; i++)
        ids[i] = f (0);
    qsort (ids, (size_t)n, sizeof (ids[0]), cmp);
    for (long i = 1; i < n; i++)
        d += ids[i] == ids[i - 1];
    return d;
}

int main (int argc, char **argv)
{
    long n = argc > 1 ? atol (argv[1]) : 0;
    void *ucs = dlopen ("libucs.so.0", RTLD_NOW | RTLD_GLOBAL);
    uuid_f global, own;
    uint64_t *ids;

    if (n < 2) {
        fprintf (stderr, "usage: ucxuuid N (N >= 2)\n");
        return 2;
    }
    if (!ucs) {
        fprintf (stderr, "ucxuuid: %s\n", dlerror ());
        return 1;
    }
    global = (uuid_f)dlsym (RTLD_DEFAULT, "ucs_generate_uuid");
    own = (uuid_f)dlsym (ucs, "ucs_generate_uuid");
    if (!global || !own || !(ids = malloc ((size_t)n * sizeof (*ids)))) {
        fprintf (stderr, "ucxuuid: no ucs_generate_uuid in libucs.so.0, or no memory\n");
        return 1;
    }
    printf ("global: %ld ids, %ld repeated\n", n, repeated (global, ids, n));
    printf ("libucs: %ld ids, %ld repeated\n", n, repeated (own, ids, n));
    free (ids);
    return 0;
}
