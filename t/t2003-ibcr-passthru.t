#!/bin/sh
test_description='libibcr: transparent pass-through on softib

With libibcr preloaded on both sides and no checkpoint ever taken, Debian'"'"'s
unmodified pingpongs (RC, UC, UD, SRQ), perftest and verbs_stream (every opcode, UD, SRQ,
completion channels, several threads, the ibv_wr_* and ibv_cq_ex APIs) run
exactly as without it, on one host and
between two network-namespace hosts; the receivers verify every byte.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/ibcr/ibcr.sh
ibcr_require ROOT NETNS IBVUTILS
ibcr_want PERFTEST
ibcr_softib_require

test_expect_success 'two network-namespace hosts' '
	netns_create 2
'

test_expect_success 'libibcr is the one serving the verbs (debug line)' '
	LD_LIBRARY_PATH="$SOFTIB_LIBDIR" IBCR_DEBUG=1 LD_PRELOAD="$IBCR_LIB" \
		ibv_devinfo >devinfo.out 2>devinfo.err &&
	grep "^libibcr.*backend loaded: libibverbs.so.1" devinfo.err &&
	grep "hca_id:.*softib" devinfo.out
'

for where in "0 0" "1 2"; do
	set -- $where
	if test "$1" = 0; then place="one host"; else place="two netns hosts"; fi
	test_expect_success "rc_pingpong -c and -c -e ($place)" "
		ibcr_pp rc$1 $1 $2 0 0 ibv_rc_pingpong -c -n 300 &&
		ibcr_pp rce$1 $1 $2 0 0 ibv_rc_pingpong -c -e -n 300
	"
	test_expect_success "uc_pingpong -c and -c -e ($place)" "
		ibcr_pp uc$1 $1 $2 0 0 ibv_uc_pingpong -c -n 300 &&
		ibcr_pp uce$1 $1 $2 0 0 ibv_uc_pingpong -c -e -n 300
	"
	test_expect_success "ud_pingpong -c and -c -e ($place)" "
		ibcr_pp ud$1 $1 $2 0 0 ibv_ud_pingpong -c -n 300 &&
		ibcr_pp ude$1 $1 $2 0 0 ibv_ud_pingpong -c -e -n 300
	"
	test_expect_success "srq_pingpong -c and -c -e -q 4 ($place)" "
		ibcr_pp srq$1 $1 $2 0 0 ibv_srq_pingpong -c -n 100 &&
		ibcr_pp srqe$1 $1 $2 0 0 ibv_srq_pingpong -c -e -q 4 -n 100
	"
done

VW_SERVER_ENV="LD_PRELOAD=$IBCR_LIB"
VW_CLIENT_ENV="LD_PRELOAD=$IBCR_LIB"
for op in send send_imm write write_imm read fadd cswap; do
	test_expect_success "verbs_stream RC $op under libibcr (one host)" "
		vw_stream pt-$op -o $op -n 400 -W 32
	"
done

for op in send write_imm read fadd; do
	test_expect_success "verbs_stream -X (ibv_wr_*, ibv_cq_ex) RC $op under libibcr" "
		vw_stream ptx-$op -X -o $op -n 400 -W 32
	"
done

test_expect_success 'rc_pingpong -c -N (ibv_wr_* API) under libibcr' '
	ibcr_pp rcn 0 0 0 0 ibv_rc_pingpong -c -N -n 300
'

test_expect_success PERFTEST 'perftest default path (ibv_wr_*): ib_send_bw, ib_write_bw, ib_read_lat, ib_atomic_bw' '
	# perftest servers of latency tests print no result line
	IBCR_PP_DONE="#bytes" && IBCR_PP_SRV_DONE= &&
	ibcr_pp pf-send 0 0 0 0 ib_send_bw -s 64 -n 2000 &&
	ibcr_pp pf-write 0 0 0 0 ib_write_bw -s 4096 -n 2000 &&
	ibcr_pp pf-read 0 0 0 0 ib_read_lat -s 8 -n 500 &&
	ibcr_pp pf-atomic 0 0 0 0 ib_atomic_bw -n 1000 &&
	# every result line carries a rate: nothing ran empty
	for f in pf-send pf-write pf-read pf-atomic; do
		grep -A1 "#bytes" $f.cli.out | tail -1 | awk "{ exit !(\$1 > 0 && \$2 > 0) }" || return 1
	done
	rc=$?
	IBCR_PP_DONE="iters in" IBCR_PP_SRV_DONE="iters in"
	test $rc = 0
'

VW_SERVER_HOST=1
VW_CLIENT_HOST=2
test_expect_success 'verbs_stream UD, SRQ, events, inline, unsignaled, threads (two hosts)' '
	vw_stream pt-ud -U -o send_imm -q 2 -n 400 &&
	vw_stream pt-srq -S -q 4 -n 200 &&
	vw_stream pt-ev -w event -n 400 &&
	vw_stream pt-poll -w poll -o write_imm -n 400 &&
	vw_stream pt-inl -I -s 64 -n 400 &&
	vw_stream pt-sig -u 4 -o write -n 400 &&
	vw_stream pt-thr -t 2 -q 4 -c 2 -n 200 &&
	vw_stream pt-xud -X -U -q 2 -n 300 &&
	vw_stream pt-xsrq -X -S -q 4 -w event -n 200
'

test_done
