# 01-atexit.sh - teardown that runs whether a test passes or fails.
#
# Sharness runs its final `cleanup` commands only when every test passed;
# after a failure it exits and leaves daemons, namespaces and cgroups
# behind.  Helpers that start things register their teardown here instead.
#
# API:
#   ibcr_atexit CMD     run CMD (a function name with arguments) once at the
#                       end: under sharness before the trash directory is
#                       removed on success, and from the EXIT trap on
#                       failure, an unexpected exit, or an interrupt
#                       (SIGINT, SIGTERM, SIGHUP).  The last registered
#                       runs first.  Each CMD must be idempotent.
#   ibcr_failed         true when the test script has a failure so far
#                       (teardown uses it to print daemon logs).
#   ibcr_diag           stdin to the TAP stream as "# " comment lines.
#   ibcr_run_atexit     run the registered commands now (contrib/demo.sh
#                       calls it; sharness tests never need to).
#
# Never kills or removes anything itself: each registered command only
# touches what its own helper made.

ibcr_atexit_cmds=

ibcr_atexit() {
	case "$ibcr_atexit_cmds" in
	*"|$*|"*) return 0 ;;	# registered already
	esac
	ibcr_atexit_cmds="|$*|$ibcr_atexit_cmds"
}

ibcr_failed() {
	test "${test_failure:-0}" -gt 0 2>/dev/null || test -n "$ibcr_force_failed"
}

ibcr_diag() {
	# fd 5 is sharness's TAP stdout; outside sharness use stderr.
	if { true >&5; } 2>/dev/null; then
		sed 's/^/# /' >&5
	else
		sed 's/^/# /' >&2
	fi
}

ibcr_run_atexit() {
	ibcr_ra_rc=0
	# One command at a time off the list, as it starts: when a signal
	# ends the shell during sharness's final cleanup (the success path),
	# the EXIT trap's call goes on with the commands not yet run.
	while test -n "$ibcr_atexit_cmds"; do
		ibcr_atexit_cmds=${ibcr_atexit_cmds#|}
		ibcr_ra_cmd=${ibcr_atexit_cmds%%|*}
		ibcr_atexit_cmds=${ibcr_atexit_cmds#*|}
		test -n "$ibcr_ra_cmd" || continue
		eval "$ibcr_ra_cmd" || ibcr_ra_rc=1
	done
	return $ibcr_ra_rc
}

if command -v test_done >/dev/null 2>&1 && command -v die >/dev/null 2>&1; then
	# Success path: sharness's final cleanup runs before the trash
	# directory (which holds daemon state) is removed.
	cleanup ibcr_run_atexit
	# Failure path: the EXIT trap.  Keep sharness's own `die` last, with
	# the original exit status, so its "unexpected exit" check still works.
	trap 'ibcr_exit_rc=$?; ibcr_run_atexit; (exit $ibcr_exit_rc); die' EXIT
	# Interrupted: ^C (SIGINT to the whole process group), SIGTERM or
	# SIGHUP would end the shell without its EXIT trap and leave clusters,
	# mounts and namespaces up.  Exit instead, so the teardown runs.  The
	# TAP reader may be gone already: SIGPIPE is ignored from then on, so
	# a write to it cannot end the teardown halfway.  A second signal
	# during the teardown ends it.  The shell acts on a signal once the
	# command in the foreground ends: a wait loop's next sleep, but srun
	# (20-slurm.sh: under timeout, in a process group of its own, which
	# ^C does not reach) only at its end or IBCR_SRUN_TIMEOUT.
	for ibcr_sig_ in INT:130 TERM:143 HUP:129; do
		# shellcheck disable=SC2064 # the status is fixed here
		trap "trap '' PIPE; exit ${ibcr_sig_#*:}" "${ibcr_sig_%:*}"
	done
fi
