/* vw_pattern.c - verifiable message contents and slot layout (vw_pattern.h).
 *
 * Word w of message (qp, seq) is a pure function of (qp, seq, w), so any
 * byte can be regenerated without state: word 0 is the tag, the others are
 * mixed from it.  Words are stored little-endian so that two hosts of any
 * byte order agree on the bytes.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "vw_pattern.h"

#define VW_SEQ_MASK ((1ULL << 48) - 1)

uint64_t vw_mix64 (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t pattern_tag (uint32_t qp, uint64_t seq)
{
    return ((uint64_t)(qp & 0xffff) << 48) | (seq & VW_SEQ_MASK);
}

static uint64_t pattern_word (uint64_t tag, size_t w)
{
    if (w == 0)
        return tag;
    return vw_mix64 (tag * 0x100000001b3ULL + w);
}

static void store_le64 (uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void vw_pattern_fill (void *buf, size_t len, uint32_t qp, uint64_t seq)
{
    uint8_t *p = buf;
    uint64_t tag = pattern_tag (qp, seq);

    for (size_t w = 0; w * 8 < len; w++) {
        size_t n = len - w * 8 < 8 ? len - w * 8 : 8;
        store_le64 (p + w * 8, pattern_word (tag, w), n);
    }
}

ssize_t vw_pattern_check (const void *buf, size_t len, uint32_t qp, uint64_t seq, uint8_t *exp_byte)
{
    const uint8_t *p = buf;
    uint64_t tag = pattern_tag (qp, seq);
    uint8_t word[8];

    for (size_t w = 0; w * 8 < len; w++) {
        size_t n = len - w * 8 < 8 ? len - w * 8 : 8;
        store_le64 (word, pattern_word (tag, w), n);
        if (memcmp (word, p + w * 8, n) != 0) {
            for (size_t i = 0; i < n; i++) {
                if (word[i] != p[w * 8 + i]) {
                    if (exp_byte)
                        *exp_byte = word[i];
                    return (ssize_t)(w * 8 + i);
                }
            }
        }
    }
    return -1;
}

int vw_pattern_tag (const void *buf, size_t len, uint32_t *qp, uint64_t *seq)
{
    const uint8_t *p = buf;
    uint64_t tag = 0;

    if (len < 8)
        return -1;
    for (int i = 7; i >= 0; i--)
        tag = (tag << 8) | p[i];
    *qp = (uint32_t)(tag >> 48);
    *seq = tag & VW_SEQ_MASK;
    return 0;
}

void vw_pattern_explain (const void *buf, size_t len, uint32_t qp, uint64_t seq, char *msg,
                         size_t msglen)
{
    const uint8_t *p = buf;
    uint8_t exp = 0;
    ssize_t off = vw_pattern_check (buf, len, qp, seq, &exp);
    uint32_t got_qp;
    uint64_t got_seq;

    if (off < 0) {
        snprintf (msg, msglen, "message is intact");
        return;
    }
    if (vw_pattern_tag (buf, len, &got_qp, &got_seq) == 0
        && (got_qp != (qp & 0xffff) || got_seq != (seq & VW_SEQ_MASK))) {
        /* The whole message is another one: name it, that is the bug. */
        if (vw_pattern_check (buf, len, got_qp, got_seq, NULL) < 0) {
            snprintf (msg, msglen,
                      "expected message qp %u seq %llu, got intact message "
                      "qp %u seq %llu (lost, duplicated or reordered)",
                      qp, (unsigned long long)seq, got_qp, (unsigned long long)got_seq);
            return;
        }
    }
    snprintf (msg, msglen,
              "message qp %u seq %llu (len %zu) differs at byte %zd: "
              "got 0x%02x, expected 0x%02x",
              qp, (unsigned long long)seq, len, off, p[off], exp);
}

uint64_t vw_hash (uint64_t h, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

size_t vw_slot_piece (size_t len, int nsge)
{
    if (nsge < 1)
        nsge = 1;
    return (len + (size_t)nsge - 1) / (size_t)nsge;
}

size_t vw_slot_stride (size_t len, int nsge)
{
    size_t piece = vw_slot_piece (len, nsge);
    size_t stride = (size_t)(nsge < 1 ? 1 : nsge) * (piece + VW_GUARD_LEN);

    /* Keep every slot 8-byte aligned: atomics and word copies want it. */
    return (stride + 7) & ~(size_t)7;
}

void vw_slot_piece_at (size_t len, int nsge, int k, size_t *off, size_t *plen)
{
    size_t piece = vw_slot_piece (len, nsge);
    size_t start = (size_t)k * piece;

    *off = (size_t)k * (piece + VW_GUARD_LEN);
    if (start >= len)
        *plen = 0;
    else
        *plen = len - start < piece ? len - start : piece;
}

void vw_slot_scatter (void *slot, const void *msg, size_t len, int nsge)
{
    size_t piece = vw_slot_piece (len, nsge);

    for (int k = 0; k < (nsge < 1 ? 1 : nsge); k++) {
        size_t off, plen;
        vw_slot_piece_at (len, nsge, k, &off, &plen);
        memcpy ((uint8_t *)slot + off, (const uint8_t *)msg + k * piece, plen);
    }
}

void vw_slot_gather (void *msg, const void *slot, size_t len, int nsge)
{
    size_t piece = vw_slot_piece (len, nsge);

    for (int k = 0; k < (nsge < 1 ? 1 : nsge); k++) {
        size_t off, plen;
        vw_slot_piece_at (len, nsge, k, &off, &plen);
        memcpy ((uint8_t *)msg + k * piece, (const uint8_t *)slot + off, plen);
    }
}

/* The guard of piece k is everything between its data and the next piece
 * (a short last piece leaves more guard than VW_GUARD_LEN). */
static void guard_span (size_t len, int nsge, int k, size_t *start, size_t *end)
{
    size_t piece = vw_slot_piece (len, nsge);
    size_t off, plen;

    vw_slot_piece_at (len, nsge, k, &off, &plen);
    *start = off + plen;
    *end = off + piece + VW_GUARD_LEN;
}

void vw_slot_guard_init (void *slot, size_t len, int nsge)
{
    for (int k = 0; k < (nsge < 1 ? 1 : nsge); k++) {
        size_t s, e;
        guard_span (len, nsge, k, &s, &e);
        memset ((uint8_t *)slot + s, VW_GUARD_BYTE, e - s);
    }
}

ssize_t vw_slot_guard_check (const void *slot, size_t len, int nsge)
{
    const uint8_t *p = slot;

    for (int k = 0; k < (nsge < 1 ? 1 : nsge); k++) {
        size_t s, e;
        guard_span (len, nsge, k, &s, &e);
        for (size_t i = s; i < e; i++)
            if (p[i] != VW_GUARD_BYTE)
                return (ssize_t)i;
    }
    return -1;
}
