#!/bin/sh
test_description='softib as a UCX device: Debian'"'"'s UCX 1.13 lists it and runs on it

softib'"'"'s stand-in libmlx5, librdmacm and libefa export every symbol
version that Debian'"'"'s UCX (libuct_ib, libuct_rdmacm), Open MPI and
libfabric import, so UCX'"'"'s verbs module loads; mlx5dv_is_supported()
says no, so UCX takes its plain verbs path.  UCX lists a device only when
/dev/infiniband/uverbs0 is a character device: softib-devns provides one
in a private mount namespace.  Then ucx_info shows softib0 with rc_verbs
and ud_verbs, and ucx_perftest runs between two network-namespace hosts
restricted to those transports (no TCP or shared-memory fallback), as an
ordinary user, with and without libibcr preloaded.  With libibcr, UCX
reads the wall clock instead of the time-stamp counter (libibcr(7),
IBCR_UCX_CLOCK), ucx_info included, which holds its own copy of UCX'"'"'s
choice.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
ibcr_require ROOT NETNS UCX SOFTIBDEV USERS MPIBUILT
mpi_setup
IBCR_JOB_USER=$IBCR_USER1

# ldd_clean LIB: LIB loads with softib selected, every library, version
# and verbs symbol resolved, and its verbs companions are softib's.  (Open
# MPI's plugins take opal_* from the program that loads them: not ours.)
ldd_clean() {
	LD_LIBRARY_PATH=$SOFTIB_LIBDIR ldd -r "$1" >ldd.out 2>&1
	if grep -E "not found|undefined symbol: (ibv|mlx5dv|rdma|efadv|verbs)_" ldd.out; then
		echo "$1 does not load on softib:" >&2
		cat ldd.out >&2
		return 1
	fi
	for l in $(sed -n "s/^[[:space:]]*\(lib\(ibverbs\|mlx5\|rdmacm\|efa\)\.so\.1\) => .*/\1/p" ldd.out); do
		grep -q "$l => $SOFTIB_LIBDIR/" ldd.out || {
			echo "$1: $l is not softib's" >&2
			cat ldd.out >&2
			return 1
		}
	done
}

test_expect_success 'UCX, Open MPI and libfabric load on softib, every symbol version resolved' '
	n=0 &&
	for f in /usr/lib/*/ucx/libuct_ib.so.0 /usr/lib/*/ucx/libuct_rdmacm.so.0 \
		/usr/lib/*/libfabric.so.1 /usr/lib/*/libmca_common_verbs.so.40 \
		/usr/lib/*/openmpi/lib/openmpi3/mca_btl_openib.so; do
		test -e "$f" || continue
		ldd_clean "$f" || return 1
		n=$((n + 1))
	done &&
	test $n -ge 2
'

test_expect_success 'without a device node, UCX lists no softib' '
	env LD_LIBRARY_PATH=$SOFTIB_LIBDIR ucx_info -d >nodev.out 2>&1 &&
	! grep softib0 nodev.out
'

test_expect_success 'under softib-devns, ucx_info -d shows softib0 with rc_verbs and ud_verbs' '
	ucx_on 0 ucx_info -d >info.out 2>info.err &&
	ucx_tl_devs <info.out | tee tl.out &&
	grep -x "rc_verbs softib0:1" tl.out &&
	grep -x "ud_verbs softib0:1" tl.out &&
	! grep -E "^(rc_mlx5|ud_mlx5|dc_mlx5) " tl.out
'

test_expect_success 'the device node is private to the namespace: the host has none' '
	test ! -e /dev/infiniband
'

# ucx_clock_hz FILE: the rate of UCX's clock, as its debug log in FILE
# says (UCX_LOG_LEVEL=debug): 1000000.00 on the wall clock, the CPU's
# on its time-stamp counter.
ucx_clock_hz() {
	sed -n "s/.*arch clock frequency: \([0-9.]*\) Hz.*/\1/p" "$1" | head -n 1
}

test_expect_success 'UCX reads the time-stamp counter, but the wall clock with libibcr preloaded (unless IBCR_UCX_CLOCK=tsc)' '
	ucx_on 0 env UCX_LOG_LEVEL=debug ucx_info -d >clk-plain.out 2>&1 &&
	grep softib0 clk-plain.out >/dev/null &&
	hz=$(ucx_clock_hz clk-plain.out) &&
	test -n "$hz" && test "$hz" != 1000000.00 &&
	# ucx_info holds its own copy of UCX'"'"'s choice (a copy relocation)
	UCX_ENV_EXTRA="LD_PRELOAD=$LIBIBCR" ucx_on 0 env UCX_LOG_LEVEL=debug \
		ucx_info -d >clk-wall.out 2>&1 &&
	grep softib0 clk-wall.out >/dev/null &&
	test "$(ucx_clock_hz clk-wall.out)" = 1000000.00 &&
	UCX_ENV_EXTRA="LD_PRELOAD=$LIBIBCR IBCR_UCX_CLOCK=tsc" ucx_on 0 env UCX_LOG_LEVEL=debug \
		ucx_info -d >clk-tsc.out 2>&1 &&
	grep softib0 clk-tsc.out >/dev/null &&
	hz=$(ucx_clock_hz clk-tsc.out) &&
	test -n "$hz" && test "$hz" != 1000000.00 &&
	! grep "libibcr.*warning" clk-plain.out clk-wall.out clk-tsc.out
'

# A UCX that chose its clock without calling libibcr's function (here a
# module preloaded ahead of libibcr runs libucs's own): the counter, and
# libibcr says so once, at the first device opened; IBCR_UCX_CLOCK=tsc
# says that is wanted.
test_expect_success 'UCX choosing the time-stamp counter without libibcr is warned about, once, unless IBCR_UCX_CLOCK=tsc' '
	tsc="$IBCR_BUILDDIR/t/ibcr/.libs/ucxtsc.so" &&
	test -f "$tsc" &&
	UCX_ENV_EXTRA="LD_PRELOAD=$tsc:$LIBIBCR" ucx_on 0 env UCX_LOG_LEVEL=debug \
		ucx_info -d >clk-own.out 2>&1 &&
	grep softib0 clk-own.out >/dev/null &&
	hz=$(ucx_clock_hz clk-own.out) &&
	test -n "$hz" && test "$hz" != 1000000.00 &&
	test "$(grep -c "libibcr.*warning: UCX chose the CPU.s time-stamp counter" clk-own.out)" = 1 &&
	UCX_ENV_EXTRA="LD_PRELOAD=$tsc:$LIBIBCR IBCR_UCX_CLOCK=tsc" ucx_on 0 ucx_info -d >clk-own-tsc.out 2>&1 &&
	grep softib0 clk-own-tsc.out >/dev/null &&
	! grep "libibcr.*warning" clk-own-tsc.out
'

# UCX's ids: on the wall clock, ids made in one microsecond by threads
# of one id (every protected rank is PID 102 of its namespace) are equal
# (libucs's own), unless libibcr adds random bits (the ones UCX calls).
test_expect_success 'UCX'"'"'s unique ids stay unique on the wall clock with libibcr preloaded' '
	"$IBCR_BUILDDIR"/t/ibcr/ucxuuid 100000 >uuid-plain.out &&
	grep -x "global: 100000 ids, 0 repeated" uuid-plain.out &&
	grep -x "libucs: 100000 ids, 0 repeated" uuid-plain.out &&
	env LD_PRELOAD="$LIBIBCR" "$IBCR_BUILDDIR"/t/ibcr/ucxuuid 100000 >uuid-ibcr.out &&
	cat uuid-ibcr.out &&
	grep -x "global: 100000 ids, 0 repeated" uuid-ibcr.out &&
	grep -x "libucs: 100000 ids, [1-9][0-9]* repeated" uuid-ibcr.out
'

test_expect_success 'two network-namespace hosts' '
	netns_create 2 &&
	chown "$IBCR_JOB_USER" .
'

test_expect_success 'ucx_perftest tag latency over ud_verbs between the hosts' '
	UCX_ENV_EXTRA="UCX_TLS=ud_v,self" ucx_perf ud-lat 1 2 -t tag_lat -n 2000
'

test_expect_success 'ucx_perftest tag bandwidth, eager and rendezvous, over rc_verbs' '
	ucx_perf rc-eager 1 2 -t tag_bw -s 4096 -n 2000 &&
	ucx_perf rc-rndv 1 2 -t tag_bw -s 4194304 -n 50
'

test_expect_success 'ucx_perftest RDMA put and get over rc_verbs' '
	ucx_perf rc-put 1 2 -t ucp_put_bw -s 1048576 -n 100 &&
	ucx_perf rc-get 1 2 -t ucp_get -s 1048576 -n 100
'

test_expect_success 'the same with libibcr preloaded on both hosts' '
	UCX_ENV_EXTRA="LD_PRELOAD=$LIBIBCR" ucx_perf ibcr-lat 1 2 -t tag_lat -n 2000 &&
	UCX_ENV_EXTRA="LD_PRELOAD=$LIBIBCR" ucx_perf ibcr-rndv 1 2 -t tag_bw -s 4194304 -n 50 &&
	UCX_ENV_EXTRA="LD_PRELOAD=$LIBIBCR" ucx_perf ibcr-get 1 2 -t ucp_get -s 1048576 -n 100
'

test_done
