/* nsmalloc.h - the hand-over between libibcr and libibcr_ns.so (nsmalloc.c):
 * libibcr's nsheap, given to the backend's namespace as its allocator so
 * that the backend's memory is returned at every release instead of leaked
 * with the namespace's own libc heaps.
 */
#ifndef IBCR_NSMALLOC_H
#define IBCR_NSMALLOC_H

#include <stddef.h>

struct ibcr_ns_alloc {
    void *(*malloc) (size_t);
    void (*free) (void *);
    void *(*calloc) (size_t, size_t);
    void *(*realloc) (void *, size_t);
    int (*posix_memalign) (void **, size_t, size_t);
    size_t (*usable) (void *);
};

/* Exported by libibcr_ns.so; libibcr calls it through dlsym. */
void ibcr_ns_set_alloc (const struct ibcr_ns_alloc *fns);

#endif
