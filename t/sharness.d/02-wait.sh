# 02-wait.sh - the one polling loop of the tests (each area's waiting
# helpers, ibcrd_wait_for, spank_wait_lines..., are built on it), and the
# processes a test started.
#
#   ibcr_wait_for SECONDS CMD...
#       run CMD every 0.05 s until it succeeds; after SECONDS of wall-clock
#       time (however long CMD itself takes), false, with one stderr line
#       naming what it waited for: CMD, so make CMD say it (a function
#       named after the condition, e.g. "t7_gens_at_least per 4").  A
#       wait that must end is written with it, never as a loop of its own:
#       a bound kept by hand is easily lost (a "{ ...; false; }" in an
#       until body does not leave the loop).
#   ibcr_now_cs
#       prints the time since boot in hundredths of a second (no fork).

ibcr_now_cs() {
	read -r ibcr_nc_up ibcr_nc_idle </proc/uptime
	ibcr_nc_s=${ibcr_nc_up%.*}
	ibcr_nc_f=${ibcr_nc_up#*.}
	echo $((ibcr_nc_s * 100 + ${ibcr_nc_f#0}))
}

ibcr_wait_for() {
	ibcr_wf_secs=$1
	shift
	ibcr_wf_end=$(( $(ibcr_now_cs) + ibcr_wf_secs * 100 ))
	until "$@"; do
		if test "$(ibcr_now_cs)" -ge $ibcr_wf_end; then
			echo "timed out after $ibcr_wf_secs s waiting for: $*" >&2
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
#   ibcr_kill SIG PID...
#       SIG to each PID, those already gone being no error.
#   ibcr_track PID...
#       at the end of the test, every one of them still running is sent
#       SIGKILL and waited for (20 s each at most).  Each is also written
#       down for the suite's leftovers check (03-leftovers.sh).  A PID is
#       known with its start time: once it ended, the kernel may give the
#       number to another process (pid_max is often 32768, and a suite
#       makes many), which must not be killed for it.

ibcr_alive() {
	ibcr_al_st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	test -n "$ibcr_al_st" && test "$ibcr_al_st" != Z && test "$ibcr_al_st" != X
}

ibcr_dead() {
	! ibcr_alive "$1"
}

# ibcr_kill SIG PID...: SIG to each PID; one that has ended already (the
# death of another one of them may end it: a task's init when its client
# goes) is no error, one that cannot be signalled is.
ibcr_kill() {
	ibcr_ki_s=$1
	shift
	for ibcr_ki_p in "$@"; do
		kill -"$ibcr_ki_s" "$ibcr_ki_p" 2>/dev/null || ibcr_dead "$ibcr_ki_p" || return 1
	done
}

ibcr_tracked=
ibcr_track() {
	for ibcr_tr_p in "$@"; do
		ibcr_tr_st=$(ibcr_starttime_ "$ibcr_tr_p")
		test -n "$ibcr_tr_st" || continue    # gone already
		ibcr_tracked="$ibcr_tracked $ibcr_tr_p:$ibcr_tr_st"
		ibcr_record_proc "$ibcr_tr_p" tracked
	done
}

# ibcr_same_proc_ PID START: PID still runs and is the process that
# started at START.
ibcr_same_proc_() {
	ibcr_alive "$1" && test "$(ibcr_starttime_ "$1")" = "$2"
}

ibcr_kill_tracked() {
	for ibcr_kt_e in $ibcr_tracked; do
		ibcr_same_proc_ "${ibcr_kt_e%%:*}" "${ibcr_kt_e#*:}" &&
			kill -9 "${ibcr_kt_e%%:*}" 2>/dev/null
	done
	for ibcr_kt_e in $ibcr_tracked; do
		ibcr_wait_for 20 eval '! ibcr_same_proc_ "${ibcr_kt_e%%:*}" "${ibcr_kt_e#*:}"'
	done
	ibcr_tracked=
	return 0
}
ibcr_atexit ibcr_kill_tracked
