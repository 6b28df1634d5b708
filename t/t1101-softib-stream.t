#!/bin/sh
test_description='softib: verbs_stream between two processes on one host

Every opcode, with scatter/gather lists, inline data, unsignaled work
requests, several QPs, CQs and threads, UD with address handles, shared
receive queues, and receivers blocked on a completion channel.  Each run
verifies every message exactly once, in order, byte for byte, and both
sides must agree on the totals.  Injected corruption must be caught.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/softib/vw.sh
softib_require

for op in send send_imm write write_imm read; do
	test_expect_success "RC $op, 1000 x 4 KiB" "
		vw_stream $op -o $op -n 1000 -s 4096
	"
done

test_expect_success 'RC fetch-and-add, 2000 operations, exact returns and final value' '
	vw_stream fadd -o fadd -n 2000
'

test_expect_success 'RC compare-and-swap, 2000 operations (one in five misses)' '
	vw_stream cswap -o cswap -n 2000
'

test_expect_success 'RC write 64 KiB and 1 MiB messages' '
	vw_stream write64k -o write -n 300 -s 65536 &&
	vw_stream write1m -o write -n 20 -s 1048576 -W 4
'

test_expect_success 'RC read 1 MiB messages' '
	vw_stream read1m -o read -n 20 -s 1048576 -W 4
'

test_expect_success 'RC send of 1-byte and odd-sized messages' '
	vw_stream tiny -o send -n 2000 -s 1 &&
	vw_stream odd -o send_imm -n 500 -s 4097
'

# On one host the stream goes through a 1 MiB ring (shm.c) and a reader
# sees at most the bytes up to its end, so a header that crosses the end
# arrives in two pieces.  On the rings a SEND has a tiny 8-byte header, a
# SEND with immediate data a short 16-byte one (wire.h).  While every
# message takes them, 1-byte sends (9 bytes a message) are cut 4 and 3
# bytes into a header at their first and third wraps (2^20 = 4 mod 9),
# 5-byte sends (13) 5 and 1 bytes in (2^20 = 9 mod 13), and 3-byte sends
# with immediate data (19) cut short headers 4, 8, 12, 1, 5 and 9 bytes in
# (2^20 = 4 mod 19).
test_expect_success 'RC send of tiny messages, headers cut at the ring end' '
	vw_stream cut1 -o send -n 400000 -s 1 -u 64 &&
	vw_stream cut3 -o send_imm -n 400000 -s 3 -u 64 &&
	vw_stream cut5 -o send -n 300000 -s 5 -u 64
'

test_expect_success 'scatter/gather lists: send, write, read, write_imm' '
	vw_stream sge-send -o send -g 4 -s 1000 &&
	vw_stream sge-write -o write -g 3 -s 5000 &&
	vw_stream sge-read -o read -g 4 -s 4097 &&
	vw_stream sge-wimm -o write_imm -g 2 -s 64 &&
	vw_stream sge-max -o send -g 16 -s 4096 -n 300
'

test_expect_success 'inline data (the source is scribbled over right after posting)' '
	vw_stream inl-send -o send -I -s 64 &&
	vw_stream inl-simm -o send_imm -I -s 8 &&
	vw_stream inl-write -o write -I -s 100 &&
	vw_stream inl-wimm -o write_imm -I -s 200
'

test_expect_success 'unsignaled work requests (signal every 8th)' '
	for op in send write write_imm read fadd cswap; do
		vw_stream unsig-$op -o $op -u 8 -n 400 || return 1
	done
'

test_expect_success 'several QPs and CQs, two threads posting at once' '
	vw_stream mq-send -o send -q 8 -c 4 -t 2 -n 500 &&
	vw_stream mq-write -o write -q 4 -c 2 -t 2 -s 65536 -n 100 &&
	vw_stream mq-fadd -o fadd -q 4 -c 2 -t 2 -n 500
'

test_expect_success 'four threads, four CQs: read and write_imm' '
	vw_stream mt-read -o read -q 4 -c 4 -t 4 -n 300 &&
	vw_stream mt-wimm -o write_imm -q 6 -c 6 -t 3 -n 300
'

test_expect_success 'one CQ shared by several QPs' '
	vw_stream shcq -o send_imm -q 5 -c 1 -n 400
'

test_expect_success 'UD with address handles (AH from the completion on the way back)' '
	vw_stream ud-send -U -o send -s 1024 &&
	vw_stream ud-simm -U -o send_imm -q 4 -c 2 -s 2048 -n 500 &&
	vw_stream ud-sge -U -o send -g 3 -s 999 -u 4
'

test_expect_success 'shared receive queues' '
	vw_stream srq-send -S -o send -q 4 -n 500 &&
	vw_stream srq-wimm -S -o write_imm -q 3 -n 500 &&
	vw_stream srq-write -S -o write -q 2 -n 500 &&
	vw_stream srq-ud -S -U -o send -q 3 -s 512 -n 500 &&
	vw_stream srq-mt -S -o send -q 4 -t 2 -c 2 -g 2 -n 500
'

test_expect_success 'receiver blocked in ibv_get_cq_event' '
	vw_stream ev-send -w event -o send &&
	vw_stream ev-wimm -w event -o write_imm -q 2 &&
	vw_stream ev-read -w event -o read -q 2 -t 2 -c 2 &&
	vw_stream ev-srq -w event -S -o send -q 3 -n 300
'

test_expect_success 'receiver in poll() on the completion channel fd' '
	vw_stream po-send -w poll -o send &&
	vw_stream po-ud -w poll -U -o send_imm -s 256 &&
	vw_stream po-fadd -w poll -o fadd -n 500
'

test_expect_success 'extended verbs (ibv_wr_*, ibv_start_poll): every opcode' '
	for op in send send_imm write write_imm read fadd cswap; do
		vw_stream x-$op -X -o $op -n 300 || return 1
	done
'

test_expect_success 'extended verbs with inline, sg lists, UD, SRQ, threads, events' '
	vw_stream x-inl -X -o send -I -s 100 -g 2 &&
	vw_stream x-ud -X -U -o send_imm -q 2 -n 300 &&
	vw_stream x-srq -X -S -w event -o send -q 3 -t 3 -c 3 -u 4 -n 300 &&
	vw_stream x-read -X -o read -g 3 -w poll -n 300
'

# libibcr's checkpoint tests pace a long stream so that it outlasts a
# checkpoint: 100 messages at 200/s take half a second.
test_expect_success 'a paced stream (-r) takes the time it should' '
	vw_stream paced -o write -r 200 -n 100 -q 2 >out &&
	secs=$(sed -n "s/.* secs=\([0-9.]*\) .*/\1/p" out) &&
	echo "took $secs s" &&
	awk "BEGIN { exit !($secs >= 0.45 && $secs < 5) }"
'

# The checks themselves must be able to fail: a flipped byte in one
# message is named, and the run fails on both sides.
for op in send write write_imm; do
	test_expect_success "a corrupted $op message is caught" "
		VW_CLIENT_ENV=VW_CORRUPT_SEQ=37 vw_stream_fails bad-$op \
			'seq 37 .*differs at byte 2048' -o $op -n 100 -g 2
	"
done

test_expect_success 'bad options are refused with a clear message' '
	test_expect_code 2 "$VW_BIN"/verbs_stream -o bogus host 2>err &&
	grep "unknown .bogus. (use send|send_imm|write|write_imm|read|fadd|cswap)" err &&
	test_expect_code 2 "$VW_BIN"/verbs_stream -U -o read host 2>err &&
	grep "UD" err &&
	test_expect_code 2 "$VW_BIN"/verbs_stream -o fadd -s 4 host 2>err &&
	grep "use -s 8" err
'

test_expect_success 'a client with no server fails with a clear message' '
	test_expect_code 1 vw_env "$VW_BIN"/verbs_stream -T 2 -p 1 127.0.0.1 2>err &&
	grep "connect to 127.0.0.1 port 1" err
'

test_done
