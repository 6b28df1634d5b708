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
on another thread wrote it.'

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

test_done
