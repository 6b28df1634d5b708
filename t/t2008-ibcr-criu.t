#!/bin/sh
test_description='libibcr: CRIU dumps a process between release and rebuild

A process under libibcr holds QPs, CQs, MRs and a SEND stuck in RNR.  The
coordinator runs quiesce, drain and release, then waits: CRIU dumps the
process (leaving it running) while its verbs resources are released, which
CRIU cannot do while a device is open.  Then the rebuild goes on and the
stuck SEND is delivered exactly once.  The control socket to the
coordinator is declared external, as ibcrd does.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/ibcr/ibcr.sh
ibcr_require ROOT CRIU
ibcr_softib_require

released() {
	grep -q "^released 0 " dump.coord.out
}

# ctl_inode PID: the inode of the process's unix socket to the coordinator.
# softib holds no socket after release; take the one whose peer the
# coordinator holds all the same, in case the process holds others.
ctl_inode() {
	for ci_ino in $(ls -l /proc/$1/fd |
			sed -n "s/.*socket:\[\([0-9]*\)\]$/\1/p"); do
		ci_peer=$(ss -Hxn | awk -v i="$ci_ino" '$5 == "*" && $6 == i { print $8 }')
		test -n "$ci_peer" || continue
		if ss -Hxnp | grep " $ci_peer \* $ci_ino " | grep -q '"coord"'; then
			echo "$ci_ino"
			return 0
		fi
	done
	echo "no socket of pid $1 leads to the coordinator" >&2
	ls -l /proc/$1/fd >&2
	return 1
}

dump_drive() {
	ibcr_wait_for 30 test -e stuck && touch go-cycle &&
	ibcr_wait_for 30 released &&
	pid=$(sed -n "s/^hello rank 0 pid //p" dump.coord.out) &&
	ino=$(ctl_inode $pid) &&
	ls -l /proc/$pid/fd >fds.at-dump &&
	mkdir -p img &&
	"$IBCR_CRIU" dump -t $pid -D img -o dump.log --leave-running --shell-job \
		--external "unix[$ino]" && echo dumped >dump.ok
	touch go-rebuild &&
	ibcr_wait_for 30 coord_over dump && touch go-recv
}

test_expect_success 'dump between release and rebuild, then the stuck SEND arrives once' '
	coord_start dump 1 -c 1 -w 0:0 -g go-cycle -p go-rebuild || return 1
	{ dump_drive & }
	helper=$!
	# detach: its own session, and no inherited descriptor leading out of
	# the dumped process, as ibcr run starts a task (see t/criu/detach.c);
	# a CI runner may start the tests in a session led from outside the
	# PID namespace.
	env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" $(ibcr_env 0) \
		timeout 60 "$IBCR_BUILDDIR"/t/criu/detach \
		"$IBCR_BUILDDIR"/t/ibcr/rnr stuck go-recv </dev/null >rnr.out 2>rnr.err
	rc=$?
	touch stuck go-rebuild go-recv
	wait $helper
	coord_wait &&
	sed "s/^/rnr: /" rnr.out rnr.err dump.coord.out fds.at-dump &&
	test $rc = 0 &&
	! grep "^not ok" rnr.out &&
	grep -x "cycles done: 1" dump.coord.out
'

test_expect_success 'CRIU wrote an image of the released process' '
	# criu dump exited 0 (dump.ok), with the memory and every thread
	# (the application, libibcr control and event threads)
	test -s dump.ok || { tail -30 img/dump.log | ibcr_diag; false; } &&
	ls img | grep -q "^pages-.*\.img$" &&
	test $(ls img | grep -c "^core-.*\.img$") -ge 2
'

test_expect_success 'at dump time the process held no device fd' '
	cat fds.at-dump &&
	! grep -E "infiniband|uverbs|softib" fds.at-dump
'

test_done
