/* map.h - a small open-addressing hash map from 64-bit keys to pointers.
 *
 * Used for id translation (real QPN -> QP, virtual lkey -> MR, virtual
 * (LID,QPN) -> real ids) and per-peer counters.  Not thread-safe: callers
 * hold the lock that guards the table's owner.  Key 0 is allowed.
 */
#ifndef IBCR_MAP_H
#define IBCR_MAP_H

#include <stddef.h>
#include <stdint.h>

struct ibcr_map_slot {
    uint64_t key;
    void *val;
    int used; /* 0 empty, 1 used, 2 deleted */
};

struct ibcr_map {
    struct ibcr_map_slot *slot;
    size_t cap, len, tomb;
};

void map_init (struct ibcr_map *m);
void map_fini (struct ibcr_map *m);
void map_clear (struct ibcr_map *m);
/* 0, or -1 errno ENOMEM.  Replaces an existing value. */
int map_put (struct ibcr_map *m, uint64_t key, void *val);
/* The value, or NULL when absent (store no NULL values). */
void *map_get (const struct ibcr_map *m, uint64_t key);
void map_del (struct ibcr_map *m, uint64_t key);
/* Counter helpers: values stored as integers. */
int map_add (struct ibcr_map *m, uint64_t key, uint64_t n);
uint64_t map_count (const struct ibcr_map *m, uint64_t key);
/* Iterate: i from 0; returns the next used slot index >= i, or -1. */
long map_next (const struct ibcr_map *m, long i);

#endif
