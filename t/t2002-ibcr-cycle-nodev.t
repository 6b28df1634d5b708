#!/bin/sh
test_description='libibcr: checkpoint cycles driven by the coordinator, no device needed

A libibcr process without a device goes through quiesce, drain, release,
rebuild, connect and resume generations: after every release no libibverbs
mapping of the backend is left (only the process own, as before its first
verb), the fd count stays flat, and the backend named at each rebuild is the
one loaded (a copy of libibverbs under another path).'

. $(dirname $0)/sharness.sh

LIBIBCR="$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so"
COORD="$IBCR_BUILDDIR/t/ibcr/coord"
IDLE="$IBCR_BUILDDIR/t/ibcr/idle"
SYSVERBS=$(ldconfig -p | sed -n "s/.*libibverbs.so.1 (libc6,x86-64) => //p" | head -1)

# The coordinator's socket: in the short folder, not the trash directory
# (a unix socket path has at most 107 bytes, the trash directory's grows
# with the clone's location).
SOCK=$(ibcr_shortdir)/coord.sock

# run_cycles N BACKENDS: N cycles on one idle process; output in coord.out
run_cycles() {
	rm -f "$SOCK" coord.out idle.out || return 1
	timeout 300 "$COORD" -s "$SOCK" -n 1 -c "$1" -w 0:2 -b "$2" >coord.out 2>&1 &
	coord_pid=$!
	ibcr_wait_for 5 test -S "$SOCK" || { cat coord.out; kill $coord_pid; return 1; }
	# stdin stays open until the coordinator is done (at most its 300 s)
	{ while kill -0 $coord_pid 2>/dev/null; do sleep 0.1; done; } |
		IBCR_RANK=0 IBCR_SOCKET="$SOCK" LD_PRELOAD="$LIBIBCR" "$IDLE" >idle.out
	wait $coord_pid
}

test_expect_success 'a copy of libibverbs under another path' '
	mkdir alt && cp "$SYSVERBS" alt/libibverbs.so.1
'

test_expect_success '4 cycles alternating the backend complete' '
	run_cycles 4 "libibverbs.so.1,$PWD/alt/libibverbs.so.1" &&
	cat coord.out idle.out &&
	grep -x "cycles done: 4" coord.out &&
	test $(grep -c "^cycle [0-9]*: drain" coord.out) = 4
'

test_expect_success 'no backend mapping is left after release' '
	base=$(sed -n "s/^baseline_maps \([0-9]*\).*/\1/p" idle.out) &&
	test -n "$base" &&
	sed -n "s/^released 0 fds [0-9]* verbs_maps \([0-9]*\) .*/\1/p" coord.out >maps &&
	test $(wc -l <maps) = 4 &&
	! grep -vx "$base" maps
'

test_expect_success 'the backend named at the last rebuild is the one in use' '
	grep "^cycle 3: .* backend $PWD/alt/libibverbs.so.1$" coord.out &&
	grep "^stat " coord.out | sed "s,\\\\/,/,g" >stat &&
	grep -F "\"backend\": \"$PWD/alt/libibverbs.so.1\"" stat
'

test_expect_success '300 cycles leave the fd count flat' '
	run_cycles 300 "libibverbs.so.1" &&
	grep -x "cycles done: 300" coord.out &&
	sed -n "s/^released 0 fds \([0-9]*\) .*/\1/p" coord.out | sort -u >fds &&
	cat fds &&
	test $(wc -l <fds) = 1
'

test_done
