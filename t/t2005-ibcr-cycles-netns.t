#!/bin/sh
test_description='libibcr: 50 checkpoint cycles at random moments, two netns hosts

For every workload issue 4 names, a verbs_stream server (host 1) and client
(host 2) run under libibcr while the test coordinator drives 50 quiesce,
drain, release, rebuild, connect, resume cycles at random moments 2-20 ms
apart.  The receiver verifies every message exactly once and in order
(sequence numbers, checksums, same totals on both sides); atomics end at
their exact expected values; every completion carries the QPN the
application holds while the real QPNs changed.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/ibcr/ibcr.sh
ibcr_require ROOT NETNS
ibcr_softib_require

test_expect_success 'two network-namespace hosts' '
	netns_create 2
'
VW_SERVER_HOST=1
VW_CLIENT_HOST=2

# About 3 s of traffic per stream: it outlasts the 50 cycles (~1.5 s, more
# on a loaded machine).
PACE="-s 1024 -n 24000 -r 8000 -W 32"

for op in send send_imm write write_imm read; do
	test_expect_success "RC $op: 50 cycles" "
		ibcr_stream c-$op 50 2:20 -o $op $PACE &&
		ibcr_ids_changed c-$op
	"
done

for op in fadd cswap; do
	test_expect_success "RC $op: 50 cycles, exact final values" "
		ibcr_stream c-$op 50 2:20 -o $op -n 12000 -r 4000 &&
		ibcr_ids_changed c-$op
	"
done

test_expect_success 'UD SEND with address handles, 2 QPs: 50 cycles' '
	ibcr_stream c-ud 50 2:20 -U -q 2 -s 1024 -n 12000 -r 4000 &&
	ibcr_ids_changed c-ud
'

test_expect_success 'UD SEND addressed by GID (GRH): 50 cycles' '
	ibcr_stream c-udg 50 2:20 -U -x 0 -q 2 -s 1024 -n 12000 -r 4000 &&
	ibcr_ids_changed c-udg
'

test_expect_success 'SRQ receives, 4 QPs on one SRQ: 50 cycles' '
	ibcr_stream c-srq 50 2:20 -S -q 4 -s 1024 -n 6000 -r 2000 &&
	ibcr_ids_changed c-srq
'

test_expect_success 'receiver blocked on a completion channel: 50 cycles' '
	ibcr_stream c-ev 50 2:20 -w event -o send_imm $PACE &&
	ibcr_ids_changed c-ev
'

test_expect_success 'two threads, 4 QPs, 2 CQs, unsignaled sends, poll(): 50 cycles' '
	ibcr_stream c-mt 50 2:20 -t 2 -q 4 -c 2 -u 4 -w poll -s 1024 -n 6000 -r 2000 &&
	ibcr_ids_changed c-mt
'

test_expect_success 'ibv_wr_* and ibv_cq_ex (-X): RC write_imm and fetch-add, 50 cycles each' '
	ibcr_stream c-xw 50 2:20 -X -o write_imm $PACE &&
	ibcr_ids_changed c-xw &&
	ibcr_stream c-xa 50 2:20 -X -o fadd -n 12000 -r 4000 &&
	ibcr_ids_changed c-xa
'

test_expect_success 'ibv_wr_* and ibv_cq_ex (-X): UD SEND on a completion channel, 50 cycles' '
	ibcr_stream c-xud 50 2:20 -X -U -q 2 -w event -s 1024 -n 12000 -r 4000 &&
	ibcr_ids_changed c-xud
'

test_done
