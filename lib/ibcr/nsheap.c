/* nsheap.c - the heap of the backend's link-map namespace (nsheap.h).
 *
 * Everything the backend (and its namespace's libc) allocates comes from
 * here, through libibcr_ns.so (nsmalloc.c).  All of it is given back to
 * the kernel at once when the backend is unloaded at release: nothing the
 * backend allocated survives into the checkpoint image, and nothing grows
 * from one cycle to the next (the application's allocator would keep
 * per-thread caches for every backend thread that exits).
 *
 * Small blocks: power-of-two classes from 32 bytes to 64 KiB, carved from
 * 1 MiB regions, recycled through free lists.  Larger ones: a mapping
 * each.  One mutex: the backend allocates on its slow paths only.
 * Must never call malloc (it is the malloc of another namespace).
 */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include "nsheap.h"

#define REGION (1u << 20)
#define MINSHIFT 5 /* 32 bytes */
#define NCLASS 12  /* 32 B .. 64 KiB */
#define HDR 16     /* keeps 16-byte alignment */
#define TAG_SMALL 0u
#define TAG_LARGE 1u
#define TAG_ALIGNED 2u

/* A mapping of ours: regions and large blocks, all on one list. */
struct map_hdr {
    struct map_hdr *next, *prev;
    size_t len;
    size_t pad;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct map_hdr maps = { &maps, &maps, 0, 0 };
static void *freel[NCLASS];
static unsigned char *bump;
static size_t bump_left;

/* The word before a block: tag in the low 2 bits, class, size or offset
 * above them. */
static size_t *word_of (void *p)
{
    return (size_t *)p - 1;
}

static struct map_hdr *map_new (size_t len)
{
    void *m = mmap (NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    struct map_hdr *h = m;
    h->len = len;
    h->next = maps.next;
    h->prev = &maps;
    maps.next->prev = h;
    maps.next = h;
    return h;
}

static void map_free (struct map_hdr *h)
{
    h->prev->next = h->next;
    h->next->prev = h->prev;
    munmap (h, h->len);
}

static int class_of (size_t n)
{
    size_t need = n + HDR;
    int c = 0;
    while (((size_t)1 << (c + MINSHIFT)) < need)
        c++;
    return c;
}

void *nsheap_malloc (size_t n)
{
    void *p = NULL;
    if (n > ((size_t)1 << (MINSHIFT + NCLASS - 1)) - HDR) {
        size_t len = (sizeof (struct map_hdr) + HDR + n + 4095) & ~(size_t)4095;
        if (len < n) {
            errno = ENOMEM;
            return NULL;
        }
        pthread_mutex_lock (&lock);
        struct map_hdr *h = map_new (len);
        pthread_mutex_unlock (&lock);
        if (!h) {
            errno = ENOMEM;
            return NULL;
        }
        p = (unsigned char *)(h + 1) + HDR;
        *word_of (p) = TAG_LARGE;
        return p;
    }
    int c = class_of (n);
    size_t sz = (size_t)1 << (c + MINSHIFT);
    pthread_mutex_lock (&lock);
    if (freel[c]) {
        p = freel[c];
        freel[c] = *(void **)p;
    } else {
        if (bump_left < sz) {
            struct map_hdr *h = map_new (REGION);
            if (!h) {
                pthread_mutex_unlock (&lock);
                errno = ENOMEM;
                return NULL;
            }
            bump = (unsigned char *)(h + 1);
            bump_left = REGION - sizeof (*h);
        }
        p = bump + HDR;
        bump += sz;
        bump_left -= sz;
    }
    pthread_mutex_unlock (&lock);
    *word_of (p) = TAG_SMALL | ((size_t)c << 2);
    return p;
}

void nsheap_free (void *p)
{
    if (!p)
        return;
    size_t w = *word_of (p);
    switch (w & 3) {
    case TAG_ALIGNED:
        nsheap_free ((unsigned char *)p - (w >> 2));
        return;
    case TAG_LARGE:
        pthread_mutex_lock (&lock);
        map_free ((struct map_hdr *)((unsigned char *)p - HDR) - 1);
        pthread_mutex_unlock (&lock);
        return;
    default: {
        int c = (int)(w >> 2);
        pthread_mutex_lock (&lock);
        *(void **)p = freel[c];
        freel[c] = p;
        pthread_mutex_unlock (&lock);
    }
    }
}

size_t nsheap_usable (void *p)
{
    if (!p)
        return 0;
    size_t w = *word_of (p);
    switch (w & 3) {
    case TAG_ALIGNED: {
        unsigned char *raw = (unsigned char *)p - (w >> 2);
        return nsheap_usable (raw) - (w >> 2);
    }
    case TAG_LARGE: {
        struct map_hdr *h = (struct map_hdr *)((unsigned char *)p - HDR) - 1;
        return h->len - sizeof (*h) - HDR;
    }
    default:
        return ((size_t)1 << ((w >> 2) + MINSHIFT)) - HDR;
    }
}

void *nsheap_calloc (size_t k, size_t n)
{
    if (n && k > SIZE_MAX / n) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = nsheap_malloc (k * n);
    if (p)
        memset (p, 0, k * n);
    return p;
}

void *nsheap_realloc (void *p, size_t n)
{
    if (!p)
        return nsheap_malloc (n);
    if (n == 0) {
        nsheap_free (p);
        return NULL;
    }
    size_t have = nsheap_usable (p);
    if (n <= have)
        return p;
    void *q = nsheap_malloc (n);
    if (q) {
        memcpy (q, p, have);
        nsheap_free (p);
    }
    return q;
}

int nsheap_memalign (void **out, size_t align, size_t n)
{
    if (align < sizeof (void *) || (align & (align - 1)))
        return EINVAL;
    if (align <= HDR) {
        *out = nsheap_malloc (n);
        return *out ? 0 : ENOMEM;
    }
    unsigned char *raw = nsheap_malloc (n + align + HDR);
    if (!raw)
        return ENOMEM;
    uintptr_t a = ((uintptr_t)raw + HDR + align - 1) & ~(uintptr_t)(align - 1);
    *word_of ((void *)a) = TAG_ALIGNED | ((a - (uintptr_t)raw) << 2);
    *out = (void *)a;
    return 0;
}

void nsheap_release (void)
{
    pthread_mutex_lock (&lock);
    while (maps.next != &maps)
        map_free (maps.next);
    memset (freel, 0, sizeof (freel));
    bump = NULL;
    bump_left = 0;
    pthread_mutex_unlock (&lock);
}
