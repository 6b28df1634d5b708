/* idtab.h - 32-bit ids to pointers, read with no lock.
 *
 * For the tables the data path reads while another thread may change
 * them: real QPN -> QP on every polled completion, virtual lkey -> MR on
 * every translated post.  Writers are serialized by the caller (ibcr_lock,
 * or the checkpoint thread with the gate closed); readers take no lock and
 * write nothing shared.
 *
 * A three-level radix tree over the id (12, 10 and 10 bits).  A node, once
 * published, is never moved or freed while readers may run: only
 * idtab_clear (gate closed: no application thread is inside a verb) and
 * idtab_fini free them.  An entry is published with a release store and
 * read with an acquire load, so a reader sees either NULL or a fully
 * built object.  What a reader got may still be removed after it looked:
 * the caller keeps the object alive until such readers are done (see
 * ibcr_destroy_qp).  Never do a hash map's rehash here: a reader could be
 * inside the array that a rehash frees.
 */
#ifndef IBCR_IDTAB_H
#define IBCR_IDTAB_H

#include <stdint.h>

#define IDTAB_B1 12
#define IDTAB_B2 10
#define IDTAB_B3 10

struct idtab_leaf {
    void *val[1 << IDTAB_B3];
};

struct idtab_mid {
    struct idtab_leaf *leaf[1 << IDTAB_B2];
};

struct idtab {
    struct idtab_mid **top; /* 1 << IDTAB_B1 entries, made at the first put */
};

void idtab_init (struct idtab *t);
void idtab_fini (struct idtab *t);
/* Remove every entry and free the nodes: only while no reader can run. */
void idtab_clear (struct idtab *t);
/* 0, or -1 errno ENOMEM.  Replaces an existing value; val not NULL. */
int idtab_put (struct idtab *t, uint32_t id, void *val);
void idtab_del (struct idtab *t, uint32_t id);

/* The value, or NULL.  Safe against one concurrent writer. */
static inline void *idtab_get (const struct idtab *t, uint32_t id)
{
    struct idtab_mid **top = __atomic_load_n (&t->top, __ATOMIC_ACQUIRE);
    if (__builtin_expect (!top, 0))
        return NULL;
    struct idtab_mid *m = __atomic_load_n (&top[id >> (IDTAB_B2 + IDTAB_B3)], __ATOMIC_ACQUIRE);
    if (__builtin_expect (!m, 0))
        return NULL;
    struct idtab_leaf *l =
        __atomic_load_n (&m->leaf[(id >> IDTAB_B3) & ((1u << IDTAB_B2) - 1)], __ATOMIC_ACQUIRE);
    if (__builtin_expect (!l, 0))
        return NULL;
    return __atomic_load_n (&l->val[id & ((1u << IDTAB_B3) - 1)], __ATOMIC_ACQUIRE);
}

#endif
