/* nsmalloc.c - libibcr_ns.so: the malloc of the backend's link-map namespace.
 *
 * libibcr loads its verbs backend with dlmopen(LM_ID_NEWLM), which gives
 * the backend a libc of its own.  That libc's heaps (one arena per thread
 * the backend starts) are never unmapped when the namespace is closed at
 * release: every checkpoint cycle would leak them (about 150 KiB of RSS and
 * two mappings per cycle with softib).  This small library is loaded first
 * into the namespace, so its malloc family precedes the namespace's libc
 * for every object there (libc's own internal calls included), and forwards
 * to libibcr's nsheap (nsheap.c), handed over right after loading, whose
 * memory is all unmapped when the backend is unloaded.
 *
 * Before the hand-over (the namespace's libc initializing) requests are
 * served from a small static area; such blocks are never freed.
 * Must never call anything of the namespace's libc that may allocate.
 */
#include "config.h"
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nsmalloc.h"

#define NS_EXPORT __attribute__ ((visibility ("default")))

static struct ibcr_ns_alloc a;
static _Alignas(64) unsigned char early[64 * 1024];
static size_t early_used;

NS_EXPORT void ibcr_ns_set_alloc (const struct ibcr_ns_alloc *fns);
void ibcr_ns_set_alloc (const struct ibcr_ns_alloc *fns)
{
    a = *fns;
}

static int is_early (const void *p)
{
    return (const unsigned char *)p >= early && (const unsigned char *)p < early + sizeof (early);
}

/* Bump allocation with a size header, 16-byte aligned (or 'align'). */
static void *early_alloc (size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    size_t start = (early_used + sizeof (size_t) + align - 1) & ~(align - 1);
    if (start + n > sizeof (early) || n > sizeof (early)) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy (early + start - sizeof (size_t), &n, sizeof (size_t));
    early_used = start + n;
    return early + start;
}

static size_t early_size (const void *p)
{
    size_t n;
    memcpy (&n, (const unsigned char *)p - sizeof (size_t), sizeof (size_t));
    return n;
}

NS_EXPORT void *malloc (size_t n);
void *malloc (size_t n)
{
    return a.malloc ? a.malloc (n) : early_alloc (n, 16);
}

NS_EXPORT void free (void *p);
void free (void *p)
{
    if (p && !is_early (p) && a.free)
        a.free (p);
}

NS_EXPORT void *calloc (size_t k, size_t n);
void *calloc (size_t k, size_t n)
{
    if (a.calloc)
        return a.calloc (k, n);
    if (n && k > SIZE_MAX / n) {
        errno = ENOMEM;
        return NULL;
    }
    return early_alloc (k * n, 16); /* static memory is zeroed */
}

NS_EXPORT void *realloc (void *p, size_t n);
void *realloc (void *p, size_t n)
{
    if (p && is_early (p)) {
        void *q = malloc (n);
        size_t old = early_size (p);
        if (q)
            memcpy (q, p, old < n ? old : n);
        return q;
    }
    return a.realloc ? a.realloc (p, n) : (p ? NULL : early_alloc (n, 16));
}

NS_EXPORT void *reallocarray (void *p, size_t k, size_t n);
void *reallocarray (void *p, size_t k, size_t n)
{
    if (n && k > SIZE_MAX / n) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc (p, k * n);
}

NS_EXPORT int posix_memalign (void **out, size_t align, size_t n);
int posix_memalign (void **out, size_t align, size_t n)
{
    if (a.posix_memalign)
        return a.posix_memalign (out, align, n);
    *out = early_alloc (n, align);
    return *out ? 0 : ENOMEM;
}

NS_EXPORT void *aligned_alloc (size_t align, size_t n);
void *aligned_alloc (size_t align, size_t n)
{
    void *p;
    int rc = posix_memalign (&p, align < sizeof (void *) ? sizeof (void *) : align, n);
    if (rc) {
        errno = rc;
        return NULL;
    }
    return p;
}

NS_EXPORT void *memalign (size_t align, size_t n);
void *memalign (size_t align, size_t n)
{
    return aligned_alloc (align, n);
}

NS_EXPORT void *valloc (size_t n);
void *valloc (size_t n)
{
    return aligned_alloc (4096, n);
}

NS_EXPORT void *pvalloc (size_t n);
void *pvalloc (size_t n)
{
    return aligned_alloc (4096, (n + 4095) & ~(size_t)4095);
}

NS_EXPORT size_t malloc_usable_size (void *p);
size_t malloc_usable_size (void *p)
{
    if (!p)
        return 0;
    if (is_early (p))
        return early_size (p);
    return a.usable ? a.usable (p) : 0;
}
