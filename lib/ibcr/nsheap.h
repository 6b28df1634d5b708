/* nsheap.h - the backend namespace's heap (nsheap.c): a small allocator of
 * libibcr's own whose memory is all returned to the kernel when the
 * backend is unloaded, so nothing of the backend's grows across cycles.
 * Handed to libibcr_ns.so (nsmalloc.h) as the namespace's malloc.
 */
#ifndef IBCR_NSHEAP_H
#define IBCR_NSHEAP_H

#include <stddef.h>

void *nsheap_malloc (size_t n);
void nsheap_free (void *p);
void *nsheap_calloc (size_t k, size_t n);
void *nsheap_realloc (void *p, size_t n);
int nsheap_memalign (void **out, size_t align, size_t n);
size_t nsheap_usable (void *p);
/* Unmap everything (the backend and its namespace are gone). */
void nsheap_release (void);

#endif
