/* idtab.c - radix tree of 32-bit ids, lock-free reads (see idtab.h).
 *
 * Invariant: a node reachable from t->top stays allocated until
 * idtab_clear or idtab_fini; those run only when no reader can.
 */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include "idtab.h"

#define N1 (1u << IDTAB_B1)
#define N2 (1u << IDTAB_B2)
#define N3 (1u << IDTAB_B3)

void idtab_init (struct idtab *t)
{
    t->top = NULL;
}

static void free_nodes (struct idtab_mid **top)
{
    if (!top)
        return;
    for (unsigned i = 0; i < N1; i++) {
        if (!top[i])
            continue;
        for (unsigned j = 0; j < N2; j++)
            free (top[i]->leaf[j]);
        free (top[i]);
    }
    free (top);
}

void idtab_fini (struct idtab *t)
{
    free_nodes (t->top);
    t->top = NULL;
}

void idtab_clear (struct idtab *t)
{
    struct idtab_mid **top = t->top;
    __atomic_store_n (&t->top, NULL, __ATOMIC_RELEASE);
    free_nodes (top);
}

/* The slot of id, making the nodes on its way if make; NULL if absent
 * (or, with make, out of memory). */
static void **slot (struct idtab *t, uint32_t id, int make)
{
    struct idtab_mid **top = t->top;
    if (!top) {
        if (!make || !(top = calloc (N1, sizeof (*top))))
            return NULL;
        __atomic_store_n (&t->top, top, __ATOMIC_RELEASE);
    }
    struct idtab_mid **mp = &top[id >> (IDTAB_B2 + IDTAB_B3)];
    if (!*mp) {
        struct idtab_mid *m;
        if (!make || !(m = calloc (1, sizeof (*m))))
            return NULL;
        __atomic_store_n (mp, m, __ATOMIC_RELEASE);
    }
    struct idtab_leaf **lp = &(*mp)->leaf[(id >> IDTAB_B3) & (N2 - 1)];
    if (!*lp) {
        struct idtab_leaf *l;
        if (!make || !(l = calloc (1, sizeof (*l))))
            return NULL;
        __atomic_store_n (lp, l, __ATOMIC_RELEASE);
    }
    return &(*lp)->val[id & (N3 - 1)];
}

int idtab_put (struct idtab *t, uint32_t id, void *val)
{
    void **s = slot (t, id, 1);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    __atomic_store_n (s, val, __ATOMIC_RELEASE);
    return 0;
}

void idtab_del (struct idtab *t, uint32_t id)
{
    void **s = slot (t, id, 0);
    if (s)
        __atomic_store_n (s, NULL, __ATOMIC_RELEASE);
}
