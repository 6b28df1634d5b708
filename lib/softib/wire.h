/*
 * wire.h - softib's TCP wire format.
 *
 * Every message is a 48-byte header (little-endian; on the same-host
 * rings a short one of 16 bytes for SENDs, and a tiny one of 8 for SENDs
 * without immediate data, below) followed by `len` payload bytes.  A connection starts with a HELLO from the side that
 * connected.  RC uses one connection per direction of a QP pair: the
 * requester connects to the responder's endpoint, sends requests, and reads
 * the responses (ACK, NAK, READ/ATOMIC results) on the same stream.  UD
 * uses one connection per pair of endpoints and direction, shared by all
 * UD QPs.  Anything else on the wire is garbage: the receiving QP goes to
 * ERROR with a logged reason, never the process.
 */
#ifndef SOFTIB_WIRE_H
#define SOFTIB_WIRE_H

#include <stdint.h>

#define SIB_MAGIC 0x53494231u /* "SIB1" */
#define SIB_VERSION 1
#define SIB_MAX_MSG (1u << 31) /* IB's 2 GiB message limit */

enum sib_op {
    SIB_OP_HELLO = 1, /* payload: struct sib_hello */
    SIB_OP_HELLO_NAK, /* imm: reason code */
    /* requests (requester -> responder) */
    SIB_OP_SEND,
    SIB_OP_SEND_IMM,
    SIB_OP_WRITE,
    SIB_OP_WRITE_IMM,
    SIB_OP_READ, /* rlen = bytes wanted */
    SIB_OP_CMP_SWP,
    SIB_OP_FETCH_ADD,
    /* responses (responder -> requester) */
    SIB_OP_ACK,         /* every seq <= hdr.seq accepted */
    SIB_OP_NAK_RNR,     /* seq not accepted: no receive; imm = timer */
    SIB_OP_NAK_ACCESS,  /* seq: bad rkey/bounds/rights */
    SIB_OP_NAK_INV,     /* seq: invalid request (length, opcode) */
    SIB_OP_READ_RESP,   /* payload: data for READ seq */
    SIB_OP_ATOMIC_RESP, /* payload: 8-byte original value */
    /* UD */
    SIB_OP_UD_SEND, /* rkey = dst QPN, rlen = src QPN, cmp = qkey */
    SIB_OP_NAK_OP,  /* seq: responder's local error (e.g. its
				 * receive buffer's lkey): remote op error */
    SIB_OP_MAX
};

enum sib_hdr_flags {
    SIB_F_IMM = 1 << 0,
    SIB_F_SOLICITED = 1 << 1,
    SIB_F_GRH = 1 << 2,
};

struct sib_hdr {
    uint8_t op;
    uint8_t flags;
    uint16_t lid; /* sender's LID (UD: becomes wc.slid) */
    uint32_t len; /* payload bytes after the header */
    uint32_t seq;
    uint32_t imm;  /* immediate data as given (__be32) */
    uint64_t addr; /* remote virtual address */
    uint32_t rkey;
    uint32_t rlen; /* READ: length wanted */
    uint64_t cmp;  /* atomics: compare / add */
    uint64_t swp;  /* atomics: swap */
};

_Static_assert(sizeof (struct sib_hdr) == 48, "wire header is 48 bytes");

/* A short header: the first SIB_HDR_SHORT bytes of one, its op or'ed with
 * SIB_OP_SHORT, every later field 0.  The same-host rings (shm.c) carry
 * SENDs with it: a third of the bytes, and of the cache lines moving
 * between the cores, of an 8-byte message.  Any receiver takes it. */
#define SIB_OP_SHORT 0x80
#define SIB_HDR_SHORT 16
_Static_assert(__builtin_offsetof(struct sib_hdr, addr) == SIB_HDR_SHORT,
               "a short header ends before addr");
_Static_assert(SIB_OP_MAX < SIB_OP_SHORT, "opcodes leave SIB_OP_SHORT free");

/* A tiny header: 8 bytes, for a SEND without immediate data on the
 * same-host rings between QPs of one LID (the sender's destination LID is
 * its own): its op or'ed with SIB_OP_TINY, flags, a 16-bit length and the
 * sequence number; the LID is the receiver's own, every other field 0.
 * An 8-byte SEND is then 16 bytes in the ring, as the raw ring's message
 * of bench/shm_ring.c.  Any receiver takes it. */
#define SIB_OP_TINY 0x40
#define SIB_HDR_TINY 8
struct sib_hdr_tiny {
    uint8_t op;
    uint8_t flags;
    uint16_t len;
    uint32_t seq;
};
_Static_assert(sizeof (struct sib_hdr_tiny) == SIB_HDR_TINY, "a tiny header is 8 bytes");
_Static_assert(SIB_OP_MAX < SIB_OP_TINY, "opcodes leave SIB_OP_TINY free");

enum sib_hello_kind { SIB_HELLO_RC = 1, SIB_HELLO_UD = 2 };

struct sib_hello {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    uint32_t src_ip; /* network order */
    uint32_t src_qpn;
    uint32_t dst_qpn;
    uint32_t psn; /* requester's starting sq_psn */
};

enum sib_nak_reason {
    SIB_NAK_NO_QP = 1, /* no such QP at that endpoint */
    SIB_NAK_NOT_PEER,  /* QP exists but is connected elsewhere */
    SIB_NAK_BAD_HELLO,
    SIB_NAK_PSN, /* requester's sq_psn != responder's rq_psn */
};

/* x86-64 and arm64 are little-endian; the wire is defined as such, and
 * these helpers keep it so on any host. */
#include <endian.h>
static inline void sib_hdr_to_wire (struct sib_hdr *h)
{
    h->lid = htole16 (h->lid);
    h->len = htole32 (h->len);
    h->seq = htole32 (h->seq);
    h->addr = htole64 (h->addr);
    h->rkey = htole32 (h->rkey);
    h->rlen = htole32 (h->rlen);
    h->cmp = htole64 (h->cmp);
    h->swp = htole64 (h->swp);
}

static inline void sib_hdr_from_wire (struct sib_hdr *h)
{
    h->lid = le16toh (h->lid);
    h->len = le32toh (h->len);
    h->seq = le32toh (h->seq);
    h->addr = le64toh (h->addr);
    h->rkey = le32toh (h->rkey);
    h->rlen = le32toh (h->rlen);
    h->cmp = le64toh (h->cmp);
    h->swp = le64toh (h->swp);
}

#endif
