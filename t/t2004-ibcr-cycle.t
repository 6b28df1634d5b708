#!/bin/sh
test_description='libibcr: one checkpoint cycle in the middle of an RC SEND stream

Two verbs_stream processes under libibcr exchange sequence-numbered,
checksummed messages; the test coordinator runs one quiesce, drain,
release, rebuild, connect, resume cycle while the stream flows.  Every
message arrives exactly once and in order (the receiver checks sequence
numbers and checksums, both sides report the same totals), the real QPNs
and rkeys changed while the application kept its own (it checks the QPN of every
completion against the one it holds), and after release no fd or mapping of
the backend was left.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/ibcr/ibcr.sh
ibcr_softib_require

# A cycle 300-500 ms into a stream of about 1.5 s.
test_expect_success 'one cycle in the middle of an RC SEND stream' '
	ibcr_stream one 1 300:500 -o send -n 3000 -r 2000 &&
	grep -x "OK msgs=3000 .*" one.server.out | grep "role=server"
'

test_expect_success 'the cycle happened while messages flowed' '
	cat one.coord.out &&
	grep "^cycle 0: drain" one.coord.out &&
	grep "^stat .*\"cycles\": 1" one.coord.out >cyc &&
	test $(wc -l <cyc) = 2
'

test_expect_success 'real QPNs and rkeys changed, the application kept its own' '
	ibcr_ids_changed one
'

test_expect_success 'release left no fd and no backend mapping behind' '
	sed -n "s/^released [01] fds [0-9]* verbs_maps [0-9]* backend_maps \([0-9]*\) .*/\1/p" \
		one.coord.out >rel &&
	test $(wc -l <rel) = 2 &&
	cat rel &&
	# verbs_stream links a libibverbs of its own (never called): only the
	# backend copy libibcr loaded must be gone.
	! grep -vx 0 rel
'

test_done
