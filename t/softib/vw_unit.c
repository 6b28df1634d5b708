/* vw_unit.c - unit tests of the workload tools' own logic, no device.
 *
 * If the pattern, slot layout or option parsing were wrong, every softib
 * test built on them would accuse the device falsely (or miss its bugs):
 * prove them on their own first.  Prints TAP.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vw_opts.h"
#include "vw_pattern.h"

static void pattern_tests (void)
{
    uint8_t a[1000], b[1000], e = 0;
    uint32_t qp;
    uint64_t seq;
    char why[256];

    vw_pattern_fill (a, sizeof (a), 3, 77);
    vw_pattern_fill (b, sizeof (b), 3, 77);
    ok (memcmp (a, b, sizeof (a)) == 0, "a message is a pure function of (qp, seq)");
    ok (vw_pattern_check (a, sizeof (a), 3, 77, NULL) == -1, "an intact message checks");
    vw_pattern_fill (b, sizeof (b), 3, 78);
    ok (memcmp (a, b, sizeof (a)) != 0, "the next seq differs");
    vw_pattern_fill (b, sizeof (b), 4, 77);
    ok (memcmp (a, b, sizeof (a)) != 0, "another qp differs");
    ok (memcmp (a + 8, b + 8, sizeof (a) - 8) != 0, "and differs beyond the tag");
    a[517] ^= 0x10;
    ok (vw_pattern_check (a, sizeof (a), 3, 77, &e) == 517, "a flipped bit is found at its byte");
    ok (e == (uint8_t)(a[517] ^ 0x10), "and the expected byte is reported");
    vw_pattern_fill (a, sizeof (a), 3, 79);
    ok (vw_pattern_tag (a, sizeof (a), &qp, &seq) == 0 && qp == 3 && seq == 79,
        "the tag names the message");
    vw_pattern_explain (a, sizeof (a), 3, 77, why, sizeof (why));
    ok (strstr (why, "got intact message qp 3 seq 79") != NULL,
        "a wrong but intact message is named: %s", why);
    for (size_t len = 1; len <= 17; len++) {
        uint8_t s[17];
        vw_pattern_fill (s, len, 1, 2);
        if (vw_pattern_check (s, len, 1, 2, NULL) != -1)
            break;
        if (len == 17)
            ok (1, "lengths 1..17 (partial words) fill and check");
    }
    vw_pattern_fill (a, 5, 1, 2);
    vw_pattern_fill (b, 5, 1, 3);
    ok (memcmp (a, b, 5) != 0, "even 5-byte messages of different seq differ");
    ok (vw_hash (VW_HASH_INIT, "a", 1) != vw_hash (VW_HASH_INIT, "b", 1), "the hash sees a byte");
}

static void slot_tests (void)
{
    const size_t len = 1001;
    for (int nsge = 1; nsge <= 7; nsge += 3) {
        size_t stride = vw_slot_stride (len, nsge), sum = 0;
        uint8_t *slot = calloc (1, stride), msg[1001], back[1001];
        vw_pattern_fill (msg, len, 9, 9);
        vw_slot_guard_init (slot, len, nsge);
        vw_slot_scatter (slot, msg, len, nsge);
        vw_slot_gather (back, slot, len, nsge);
        for (int k = 0; k < nsge; k++) {
            size_t off, plen;
            vw_slot_piece_at (len, nsge, k, &off, &plen);
            sum += plen;
        }
        ok (sum == len, "nsge %d: pieces add up to the message", nsge);
        ok (stride % 8 == 0, "nsge %d: slots stay 8-byte aligned", nsge);
        ok (memcmp (msg, back, len) == 0, "nsge %d: scatter then gather is identity", nsge);
        ok (vw_slot_guard_check (slot, len, nsge) == -1, "nsge %d: guards intact", nsge);
        {
            size_t off, plen;
            vw_slot_piece_at (len, nsge, 0, &off, &plen);
            slot[off + plen] ^= 1; /* one byte past the first piece */
            ok (vw_slot_guard_check (slot, len, nsge) == (ssize_t)(off + plen),
                "nsge %d: a write one byte past a piece is caught", nsge);
        }
        free (slot);
    }
}

static int parse (struct vw_opts *o, char *err, const char *a0, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    const char *s;

    argv[argc++] = (char *)"verbs_stream";
    va_start (ap, a0);
    for (s = a0; s; s = va_arg (ap, const char *))
        argv[argc++] = (char *)s;
    va_end (ap);
    argv[argc] = NULL;
    return vw_opts_parse (o, argc, argv, err, 256);
}

static void opts_tests (void)
{
    struct vw_opts o, back;
    char err[256] = "", line[512];

    ok (parse (&o, err, "-o", "write", "-n", "10", "-s", "65536", "-q", "4", "-c", "2", "-t", "2",
               "-g", "3", "-u", "4", "-w", "event", "-W", "32", "-I", "-x", "3", "-T", "77", "-X",
               "-C", "host", NULL)
            == 0,
        "a full client line parses (%s)", err);
    ok (o.op == VW_OP_WRITE && o.count == 10 && o.size == 65536 && o.nqp == 4 && o.ncq == 2
            && o.nthread == 2 && o.nsge == 3 && o.sig_every == 4 && o.wait == VW_WAIT_EVENT
            && o.window == 32 && o.inline_data && strcmp (o.host, "host") == 0,
        "every option lands in its field");
    vw_opts_format (&o, line, sizeof (line));
    memset (&back, 0, sizeof (back));
    back.host = "x";
    back.gid_index = -1;
    ok (vw_opts_load (&back, line, err, sizeof (err)) == 0, "the workload line loads back (%s)",
        err);
    ok (back.op == o.op && back.count == o.count && back.size == o.size && back.nqp == o.nqp
            && back.ncq == o.ncq && back.nthread == o.nthread && back.nsge == o.nsge
            && back.sig_every == o.sig_every && back.wait == o.wait && back.window == o.window
            && back.inline_data == o.inline_data && back.gid_index == 3 && back.timeout == 77
            && back.ex == 1 && back.ckpt == 1,
        "and round-trips exactly");
    ok (parse (&o, err, "-o", "fadd", "h", NULL) == 0 && o.size == 8, "atomics default to 8 bytes");
    ok (parse (&o, err, "-o", "fadd", "-s", "16", "h", NULL) < 0 && strstr (err, "-s 8"),
        "atomics of 16 bytes are refused: %s", err);
    ok (parse (&o, err, "-o", "bogus", "h", NULL) < 0 && strstr (err, "send|send_imm"),
        "an unknown opcode lists the valid ones: %s", err);
    ok (parse (&o, err, "-U", "-o", "write", "h", NULL) < 0 && strstr (err, "UD"),
        "UD with RDMA WRITE is refused: %s", err);
    ok (parse (&o, err, "-c", "3", "-t", "2", "-q", "4", "h", NULL) < 0 && strstr (err, "multiple"),
        "CQs not a multiple of threads are refused: %s", err);
    ok (parse (&o, err, "-C", "-o", "cswap", "h", NULL) < 0 && strstr (err, "-C"),
        "checkpointable atomics are refused: %s", err);
    ok (parse (&o, err, "-C", "-o", "write_imm", "h", NULL) == 0 && o.ckpt,
        "checkpointable WRITE_WITH_IMM parses");
    ok (parse (&o, err, "-n", "0", "h", NULL) < 0 && strstr (err, "-n"),
        "a zero count is refused: %s", err);
    ok (parse (&o, err, "-I", "-o", "read", "h", NULL) < 0 && strstr (err, "inline"),
        "inline READ is refused: %s", err);
    ok (parse (&o, err, "-p", "0", NULL) < 0 && strstr (err, "-P"),
        "a server on port 0 without -P is refused: %s", err);
    ok (vw_opts_load (&back, "op=send n=1", err, sizeof (err)) < 0 && strstr (err, "versions"),
        "a short workload line is refused: %s", err);
}

int main (void)
{
    plan (NO_PLAN);
    pattern_tests ();
    slot_tests ();
    opts_tests ();
    done_testing ();
    return exit_status ();
}
