#!/bin/sh
test_description='libibcr: threads on separate and shared QPs and CQs

t/ibcr/race runs four threads that post and poll (two on a QP and CQ of
their own, two on one shared QP whose send and receive CQs differ) while
a fifth creates and destroys QPs; every completion is checked (status,
QP, order), first under libibcr, then under a ThreadSanitizer build of
libibcr, which must report no data race.  Before they were fixed it
reported two: pollers read the real-QPN table (qp_by_rqpn) while a QP
creation rehashed and freed it, and an error completion made a poller
read the send log'"'"'s head without the QP'"'"'s send lock while a poster
on another thread wrote it (now only the send CQ'"'"'s pollers read that
log, its one consumer).  Two of its threads also pass one CQ'"'"'s lock
back and forth while one of them polls that CQ in a loop, and another
has its receive posts refused while a third polls their empty CQ: with
a lock that served its takers in no order, both cases waited for good.
Two more poll one extended CQ, each from ibv_start_poll to ibv_end_poll,
and check that each completion'"'"'s QP is the one its wr_id names: such
polls on two threads shared the completion being read until libibcr
held a lock from start to end, as a provider holds its CQ'"'"'s.

t/ibcr/udrace then runs four UD senders, each on a QP of its own, after
one coordinator cycle (release and rebuild), when every UD send looks up
a real address handle in its QP'"'"'s cache (lib/ibcr/ah.c): under
libibcr every datagram must arrive once and intact, and under the
ThreadSanitizer build (QPs in error, so sends are translated and then
flushed, no datagram travels) no data race may be reported.  One cache
shared by the QPs without a lock makes that run fail, as did, before
they were fixed, the gate'"'"'s acquire fence that TSan does not model (every
verb after a rebuild looked racy) and the control thread closing its
socket while an exiting thread read its number.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/ibcr/ibcr.sh
ibcr_softib_require
ibcr_want TSAN

# race_ok OUT: the workload passed both its checks.
race_ok() {
	sed "s/^/race: /" "$1" &&
	! grep "^not ok" "$1" &&
	test $(grep -c "^ok " "$1") = 2
}

test_expect_success 'under libibcr: every completion right' '
	env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" LD_PRELOAD="$IBCR_LIB" \
		"$IBCR_BUILDDIR"/t/ibcr/race -n 20000 >race.out 2>race.err
	rc=$?
	cat race.err &&
	test $rc = 0 &&
	grep "^# libibcr: $IBCR_LIB\$" race.out &&
	race_ok race.out
'

test_expect_success TSAN 'under a ThreadSanitizer build of libibcr: no data race' '
	mkdir -p tsan &&
	cp -L "$IBCR_BUILDDIR"/t/ibcr/.libs/libibcr_tsan.so tsan/libibcr.so &&
	cp -L "$IBCR_BUILDDIR"/lib/ibcr/.libs/libibcr_ns.so tsan/ &&
	rt=$(ldd tsan/libibcr.so | awk "/libtsan/ { print \$3 }") &&
	test -n "$rt" &&
	# The runtime must come first; the trash folder'"'"'s name has a space,
	# which LD_PRELOAD would split on: name the library relatively.
	env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" LD_PRELOAD="$rt ./tsan/libibcr.so" \
		TSAN_OPTIONS="exitcode=66" \
		"$IBCR_BUILDDIR"/t/ibcr/race -n 2000 >tsan.out 2>tsan.err
	rc=$?
	grep -A 14 "WARNING: ThreadSanitizer" tsan.err | head -n 80
	test $rc = 0 &&
	! grep -q "ThreadSanitizer" tsan.err &&
	grep "^# libibcr: .*/tsan/libibcr.so\$" tsan.out &&
	race_ok tsan.out
'

# ud_cycle NAME FLAGS ENV...: t/ibcr/udrace under libibcr (ENV says which
# build) with a coordinator that runs one cycle once the program is
# ready; true when the cycle completed and the program passed.
ud_cycle() {
	ud_n=$1 ud_f=$2
	shift 2
	coord_start $ud_n 1 -c 1 -w 0:0 -g $ud_n.go-cycle || return 1
	{ ibcr_wait_for 30 test -e $ud_n.ready && touch $ud_n.go-cycle &&
	  ibcr_wait_for 30 coord_over $ud_n && touch $ud_n.go & }
	ud_helper=$!
	env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" IBCR_RANK=0 IBCR_SOCKET=$ud_n.sock "$@" \
		timeout 120 "$IBCR_BUILDDIR"/t/ibcr/udrace $ud_n.ready $ud_n.go $ud_f \
		>$ud_n.out 2>$ud_n.err
	ud_rc=$?
	touch $ud_n.ready $ud_n.go
	wait $ud_helper
	coord_wait &&
	sed "s/^/$ud_n: /" $ud_n.out &&
	grep -A 14 "WARNING: ThreadSanitizer" $ud_n.err | head -n 80 &&
	test $ud_rc = 0 &&
	grep -x "cycles done: 1" $ud_n.coord.out &&
	! grep "^not ok" $ud_n.out
}

test_expect_success 'UD senders on four QPs after a rebuild: every datagram once and intact' '
	ud_cycle ud "-n 200" LD_PRELOAD="$IBCR_LIB" &&
	test $(grep -c "^ok " ud.out) = 3
'

test_expect_success TSAN 'UD senders on four QPs after a rebuild, under TSan: no data race' '
	mkdir -p tsan &&
	cp -L "$IBCR_BUILDDIR"/t/ibcr/.libs/libibcr_tsan.so tsan/libibcr.so &&
	cp -L "$IBCR_BUILDDIR"/lib/ibcr/.libs/libibcr_ns.so tsan/ &&
	rt=$(ldd tsan/libibcr.so | awk "/libtsan/ { print \$3 }") &&
	test -n "$rt" &&
	ud_cycle udt "-f -n 40" LD_PRELOAD="$rt ./tsan/libibcr.so" TSAN_OPTIONS="exitcode=66" &&
	! grep -q "ThreadSanitizer" udt.err &&
	test $(grep -c "^ok " udt.out) = 1
'

test_done
