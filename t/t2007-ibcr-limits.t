#!/bin/sh
test_description='libibcr: refused features, and 1000 cycles without growth

What libibcr cannot checkpoint (XRC, memory windows, ODP, device memory,
flow steering, WQs, thread/parent domains, raw and driver QPs, tag-matching
SRQs, multicast, re-registration, dma-buf, imports) fails at creation with
EOPNOTSUPP and one log line naming it.  Cycles that rebuild and connect
twice (as an aborted generation'"'"'s undo does) keep a stream exact and the
fd count flat.  Then 1000 checkpoint cycles under a running verified
stream leave the fd count flat, no backend mapping behind, and resident
memory flat.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/ibcr/ibcr.sh
ibcr_softib_require

test_expect_success 'unsupported features are refused with EOPNOTSUPP and a log line each' '
	env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" LD_PRELOAD="$IBCR_LIB" \
		"$IBCR_BUILDDIR"/t/ibcr/refuse >refuse.out 2>refuse.err
	rc=$?
	sed "s/^/refuse: /" refuse.out refuse.err &&
	test $rc = 0 &&
	! grep "^not ok" refuse.out &&
	n=$(sed -n "s/^# refusals \([0-9]*\)$/\1/p" refuse.out) &&
	test "$n" -ge 16 &&
	test $(grep -c "^libibcr\[[0-9]*\]: .* refused (EOPNOTSUPP): " refuse.err) = "$n"
'

test_expect_success '1000 cycles under a running stream' '
	ibcr_stream long 1000 0:0 -o send -q 2 -w event -n 5000 -r 400
'

# fds_flat NAME FROM: from cycle FROM on (the first ones may come before
# the application opened all of its own fds), both ranks of coordinator
# NAME released with one fd count and no backend mapping left.
fds_flat() {
	for r in 0 1; do
		sed -n "s/^released $r fds \([0-9]*\) verbs_maps [0-9]* backend_maps \([0-9]*\) .*/\1 \2/p" \
			$1.coord.out | sed -n "$2,\$p" | sort | uniq -c >$1.fds.$r &&
		sed "s/^/rank $r: cycles, fds, backend mappings: /" $1.fds.$r | tee /dev/stderr | ibcr_diag &&
		test $(wc -l <$1.fds.$r) = 1 &&
		grep -q " 0$" $1.fds.$r || return 1
	done
}

test_expect_success 'the fd count stayed flat and no backend mapping was left' '
	fds_flat long 20
'

# An aborted generation's undo (ibcrd) rebuilds and connects processes
# that had connected already.  Coordinator -r does so in every cycle: the
# stream must stay exact, and the real objects of the first rebuild must
# not stay behind (fd count flat), connected, with receives on them.
test_expect_success '30 cycles that rebuild and connect twice, under a running stream' '
	IBCR_COORD_OPTS=-r
	ibcr_stream twice 30 0:0 -o send -q 2 -w event -n 2000 -r 400
	tw_rc=$?
	IBCR_COORD_OPTS=
	test $tw_rc = 0 &&
	fds_flat twice 5
'

# Without libibcr_ns.so the backend namespace leaked ~150 KiB per cycle;
# with it feeding the application's malloc, ~4 KiB (per-thread caches of
# the backend's exited threads).  Now the namespace's heap is libibcr's
# nsheap, unmapped at every release: resident memory must stay flat (within
# 256 KiB of page-level noise over 800 cycles).
test_expect_success 'resident memory stays flat (cycles 200..1000)' '
	for r in 0 1; do
		sed -n "s/^released $r .* rss_kb \([0-9]*\)$/\1/p" long.coord.out >rss.$r &&
		test $(wc -l <rss.$r) = 1000 &&
		a=$(sed -n 200p rss.$r) && b=$(sed -n 1000p rss.$r) &&
		echo "rank $r: rss $a KiB at cycle 200, $b KiB at cycle 1000" | tee /dev/stderr | ibcr_diag &&
		test $((b - a)) -lt 256 || return 1
	done
'

test_done
