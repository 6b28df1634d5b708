# 02-wait.sh - the one polling loop of the tests (each area's waiting
# helpers, ibcrd_wait_for, spank_wait_lines..., are built on it), and the
# processes a test started.
#
#   ibcr_wait_for SECONDS CMD...
#       run CMD every 0.05 s until it succeeds; after SECONDS, false, with
#       one stderr line naming what it waited for.

ibcr_wait_for() {
	ibcr_wf_n=$(($1 * 20))
	shift
	until "$@"; do
		ibcr_wf_n=$((ibcr_wf_n - 1))
		if test $ibcr_wf_n -le 0; then
			echo "timed out waiting for: $*" >&2
			return 1
		fi
		sleep 0.05
	done
}

# The processes a test started (a daemon, a restored tree, the tasks it
# holds) are known by pid, never by name.
#
#   ibcr_alive PID
#       PID runs: the state field of /proc/PID/stat, not kill -0, which a
#       zombie still answers.
#   ibcr_dead PID
#       the contrary.
#   ibcr_track PID...
#       at the end of the test, every one of them still running is sent
#       SIGKILL and waited for (20 s each at most).

ibcr_alive() {
	ibcr_al_st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	test -n "$ibcr_al_st" && test "$ibcr_al_st" != Z && test "$ibcr_al_st" != X
}

ibcr_dead() {
	! ibcr_alive "$1"
}

ibcr_tracked=
ibcr_track() {
	ibcr_tracked="$ibcr_tracked $*"
}

ibcr_kill_tracked() {
	for ibcr_kt_p in $ibcr_tracked; do
		ibcr_alive "$ibcr_kt_p" && kill -9 "$ibcr_kt_p" 2>/dev/null
	done
	for ibcr_kt_p in $ibcr_tracked; do
		ibcr_wait_for 20 ibcr_dead "$ibcr_kt_p"
	done
	ibcr_tracked=
	return 0
}
ibcr_atexit ibcr_kill_tracked
