# demo-lib.sh - what contrib/demo.sh and contrib/demo-mpi.sh share, sourced
# by both after the test suite's helpers (t/sharness.d): their messages,
# and a private work folder that is removed when the demo succeeds (kept,
# with its configs and logs, when it fails or IBCR_DEMO_KEEP is set).
#
#   demo_name   set before sourcing: the script's name, for messages
#   say MSG...  one step of the demo
#   fail MSG... the demo failed: say why, have the daemons' logs printed

say() {
	printf '==> %s\n' "$*"
}

fail() {
	echo "$demo_name: FAILED: $*" >&2
	# Makes slurm_stop and ibcrd_stop_all print the daemons' logs.
	ibcr_force_failed=1
	exit 1
}

IBCR_WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/ibcr-${demo_name%.sh}.XXXXXX") || exit 1
chmod 0755 "$IBCR_WORKDIR"
export IBCR_WORKDIR
finish() {
	rc=$?
	ibcr_run_atexit || rc=1
	if test $rc -eq 0 && test -z "${IBCR_DEMO_KEEP-}"; then
		rm -rf "$IBCR_WORKDIR"
	else
		echo "$demo_name: configs and logs kept in $IBCR_WORKDIR" >&2
	fi
	exit $rc
}
trap finish EXIT
trap 'exit 130' INT TERM
cd "$IBCR_WORKDIR" || exit 1
