/* vw_pattern.h - message contents the verbs workload tools can verify.
 *
 * Every message of a stream is a pure function of (qp index, sequence
 * number, length): the sender generates it, the receiver regenerates it and
 * compares byte for byte, so a lost, duplicated, reordered or corrupted
 * message is always detected and named.  The first 8 bytes carry the
 * (qp, seq) tag so that a mismatch says which message arrived instead.
 *
 * A "slot" is where one message lives in local memory when it is split into
 * several scatter/gather pieces: each piece is followed by a guard area of
 * known bytes, so a device that writes past a piece is caught too.
 *
 * Pure C, no verbs calls: this file must stay usable by any test.
 */
#ifndef VW_PATTERN_H
#define VW_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define VW_HASH_INIT 0xcbf29ce484222325ULL
#define VW_GUARD_LEN 64
#define VW_GUARD_BYTE 0xa5

/* Fill buf with message (qp, seq) of length len. */
void vw_pattern_fill (void *buf, size_t len, uint32_t qp, uint64_t seq);

/* Compare buf with message (qp, seq).  Returns -1 when equal, else the
 * offset of the first differing byte; *exp_byte gets the expected byte
 * there.  Callers use vw_pattern_tag() to say what arrived instead. */
ssize_t vw_pattern_check (const void *buf, size_t len, uint32_t qp, uint64_t seq,
                          uint8_t *exp_byte);

/* Decode the tag at the start of a message (needs len >= 8).  Returns 0
 * and sets *qp and *seq, or -1 when len is too short. */
int vw_pattern_tag (const void *buf, size_t len, uint32_t *qp, uint64_t *seq);

/* Describe why buf is not message (qp, seq) into msg (for error output). */
void vw_pattern_explain (const void *buf, size_t len, uint32_t qp, uint64_t seq, char *msg,
                         size_t msglen);

/* FNV-1a 64 over len bytes, continuing from h. */
uint64_t vw_hash (uint64_t h, const void *buf, size_t len);

/* A 64-bit mix (splitmix64's finaliser): deterministic values for atomics. */
uint64_t vw_mix64 (uint64_t x);

/* Slot layout: len bytes split in nsge pieces, each followed by a guard. */
size_t vw_slot_piece (size_t len, int nsge);  /* bytes per piece (last may be shorter) */
size_t vw_slot_stride (size_t len, int nsge); /* bytes a slot takes in memory */
/* Offset and length of piece k inside a slot; length 0 when k is unused. */
void vw_slot_piece_at (size_t len, int nsge, int k, size_t *off, size_t *plen);
void vw_slot_scatter (void *slot, const void *msg, size_t len, int nsge);
void vw_slot_gather (void *msg, const void *slot, size_t len, int nsge);
void vw_slot_guard_init (void *slot, size_t len, int nsge);
/* Returns -1 when every guard byte is intact, else the offset of the first
 * damaged one inside the slot. */
ssize_t vw_slot_guard_check (const void *slot, size_t len, int nsge);

#endif
