/* map.c - open-addressing hash map with linear probing (see map.h).
 *
 * Lookups sit on the completion path after a rebuild, so they must stay a
 * hash and a probe or two: the table is kept under 50% full.
 */
#include "config.h"
#include <stdlib.h>
#include <errno.h>
#include "map.h"

static inline size_t hash64 (uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (size_t)k;
}

void map_init (struct ibcr_map *m)
{
    m->slot = NULL;
    m->cap = m->len = m->tomb = 0;
}

void map_fini (struct ibcr_map *m)
{
    free (m->slot);
    map_init (m);
}

void map_clear (struct ibcr_map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        m->slot[i].used = 0;
    m->len = m->tomb = 0;
}

static struct ibcr_map_slot *find (const struct ibcr_map *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = hash64 (key) & mask;; i = (i + 1) & mask) {
        struct ibcr_map_slot *s = &m->slot[i];
        if (s->used == 0)
            return NULL;
        if (s->used == 1 && s->key == key)
            return s;
    }
}

static int grow (struct ibcr_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    if ((m->len + 1) * 2 < m->cap)
        ncap = m->cap; /* only tombstones to sweep */
    struct ibcr_map_slot *ns = calloc (ncap, sizeof (*ns));
    if (!ns) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slot[i].used != 1)
            continue;
        size_t j = hash64 (m->slot[i].key) & (ncap - 1);
        while (ns[j].used)
            j = (j + 1) & (ncap - 1);
        ns[j] = m->slot[i];
    }
    free (m->slot);
    m->slot = ns;
    m->cap = ncap;
    m->tomb = 0;
    return 0;
}

int map_put (struct ibcr_map *m, uint64_t key, void *val)
{
    struct ibcr_map_slot *s = find (m, key);
    if (s) {
        s->val = val;
        return 0;
    }
    if ((m->len + m->tomb + 1) * 2 > m->cap && grow (m) < 0)
        return -1;
    size_t mask = m->cap - 1;
    size_t i = hash64 (key) & mask;
    while (m->slot[i].used == 1)
        i = (i + 1) & mask;
    if (m->slot[i].used == 2)
        m->tomb--;
    m->slot[i].key = key;
    m->slot[i].val = val;
    m->slot[i].used = 1;
    m->len++;
    return 0;
}

void *map_get (const struct ibcr_map *m, uint64_t key)
{
    struct ibcr_map_slot *s = find (m, key);
    return s ? s->val : NULL;
}

void map_del (struct ibcr_map *m, uint64_t key)
{
    struct ibcr_map_slot *s = find (m, key);
    if (s) {
        s->used = 2;
        m->len--;
        m->tomb++;
    }
}

int map_add (struct ibcr_map *m, uint64_t key, uint64_t n)
{
    struct ibcr_map_slot *s = find (m, key);
    if (s) {
        s->val = (void *)((uintptr_t)s->val + n);
        return 0;
    }
    return map_put (m, key, (void *)(uintptr_t)n);
}

uint64_t map_count (const struct ibcr_map *m, uint64_t key)
{
    return (uint64_t)(uintptr_t)map_get (m, key);
}

long map_next (const struct ibcr_map *m, long i)
{
    for (; i >= 0 && (size_t)i < m->cap; i++)
        if (m->slot[i].used == 1)
            return i;
    return -1;
}
