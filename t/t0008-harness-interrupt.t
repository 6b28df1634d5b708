#!/bin/sh
test_description='harness: a test stopped by SIGTERM or ^C still tears down what it started

A test script of this suite, written here, starts a one-node Slurm
cluster (munged, slurmctld, slurmd, cgroup mounts, a /run folder, a
short folder in /tmp) and waits.  Stopped by SIGTERM, or by SIGINT to
its whole process group (^C in a terminal), it must end within a bound,
saying so, with its teardown run: the leftovers check (t/sharness.d/
03-leftovers.sh, over its own records and tag) finds nothing.  Stopped
in the first step of its teardown after it passed, the other steps
still run.  Before
01-atexit.sh trapped these signals the shell died on them without its
EXIT trap, and the cluster stayed up.'

. "$(dirname "$0")"/sharness.sh
ibcr_require ROOT SLURM

# The inner test: a cluster, its pid and "up" in $IT_MARK, then a wait
# the signal cuts short.  With IT_HOLD set it passes instead, and the
# first step of its teardown (it_hold, registered after slurm_start's
# slurm_stop) says "held" and waits there.
cat >t0000-inner.t <<\EOF
#!/bin/sh
test_description='inner: a cluster, then a wait'
. "$SHARNESS_TEST_SRCDIR"/sharness.sh
it_hold() {
	echo held >>"$IT_MARK"
	ibcr_wait_for 600 false
}
test_expect_success 'a cluster, then a wait for a signal' '
	slurm_start 1 &&
	echo "up $$" >"$IT_MARK" &&
	if test -n "$IT_HOLD"; then ibcr_atexit it_hold; else ibcr_wait_for 600 false; fi
'
test_done
EOF

# it_stop NAME: should a case fail before its inner test ended, SIGTERM
# it (what the first case shows to work), then the leftovers check over
# its records and tag names and ends whatever is left.  By $IT_DIR, the
# trash folder: teardown may run from another.
IT_DIR=$PWD
it_stop() {
	if test -s "$IT_DIR/$1.pid" && ibcr_alive "$(cat "$IT_DIR/$1.pid")"; then
		it_sp=$(cat "$IT_DIR/$1.pid")
		kill -TERM $it_sp
		# Still there: its whole session (it leads it), so that the
		# check below does not take it for a test still running.
		if ! ibcr_wait_for 120 ibcr_dead $it_sp; then
			kill -KILL -- -$it_sp
			ibcr_wait_for 30 ibcr_dead $it_sp
		fi
	fi
	( IBCR_SUITE_TAG=$IT_DIR/$1/tag; ibcr_leftovers "$IT_DIR/$1/suite" ) | ibcr_diag
}

# it_run NAME: start the inner test in a session of its own (SIGINT at
# its default, as in a terminal: this shell may have it ignored), with
# its own trash folder, records and tag; wait until its cluster is up.
it_run() {
	ibcr_atexit it_stop "$1" &&
	rm -f "$1.mark" &&
	mkdir -p "$1" || return 1
	# Alone, not at the end of an && list (which would all go to the
	# background, in a subshell).
	env --default-signal=INT,TERM,HUP \
		SHARNESS_TEST_DIRECTORY="$PWD/$1" IBCR_SUITE_DIR="$PWD/$1/suite" \
		IBCR_SUITE_TAG="$PWD/$1/tag" IT_MARK="$PWD/$1.mark" IT_HOLD="${IT_HOLD-}" \
		setsid sh ./t0000-inner.t >"$1.out" 2>&1 </dev/null &
	it_shell=$! &&
	echo $it_shell >"$1.pid" &&
	{ ibcr_wait_for 120 grep -qs "^up " "$1.mark" ||
		{ cat "$1.out" | ibcr_diag; false; }; } &&
	test "$(head -n 1 "$1.mark")" = "up $it_shell"
}

# it_gone NAME [CODE]: the inner test ended within 120 s, said it exited
# with CODE (a failure, not a passed test stopped in its teardown), and
# left nothing: no /run folder or cgroup mount of its pid, and nothing
# for the leftovers check over its records and tag.
it_gone() {
	{ ibcr_wait_for 120 ibcr_dead $it_shell ||
		{ echo "the inner test (pid $it_shell) still runs after 120 s"; false; }; } &&
	cat "$1.out" | ibcr_diag &&
	{ test -z "$2" || grep "FATAL: Unexpected exit with code $2" "$1.out" ||
		{ echo "the inner test ended without saying it exited with $2: no teardown ran"; false; }; } &&
	! test -e /run/ibcr.$it_shell &&
	! grep " /run/ibcr\.$it_shell/" /proc/mounts &&
	( IBCR_SUITE_TAG=$PWD/$1/tag; ibcr_leftovers "$PWD/$1/suite" ) >"$1.left" &&
	test_must_be_empty "$1.left"
}

test_expect_success 'SIGTERM to the test shell: its cluster is torn down' '
	it_run term &&
	kill -TERM $it_shell &&
	it_gone term 143
'

test_expect_success 'SIGINT to its whole process group (^C): the same' '
	it_run int &&
	kill -s INT -- -$it_shell &&
	it_gone int 130
'

test_expect_success 'SIGTERM in the first step of a passed test'"'"'s teardown: the other steps still run' '
	IT_HOLD=1 it_run hold &&
	{ ibcr_wait_for 120 grep -qx held hold.mark ||
		{ cat hold.out | ibcr_diag; false; }; } &&
	kill -TERM $it_shell &&
	it_gone hold
'

test_done
