# 30-ibcrd.sh - real ibcrd daemons for a test, one per (Slurm) node.
#
# API:
#   IBCRD                 the build tree's ibcrd (prerequisite IBCRD of
#                         00-prereqs.sh: it is built)
#   IBCRD_RUN             folder of their state, /run/ibcr-d.<PID> (a path
#                         without spaces: Slurm and plugstack.conf split
#                         arguments on them, and the trash folder has one)
#   IBCRD_CONF_EXTRA      lines added to every ibcrd.conf written after it
#                         is set
#   IBCRD_STORAGE         storage folder of every ibcrd started after it is
#                         set (one shared by all nodes, so a job restores
#                         on other nodes); default one per node
#   ibcrd_start_node NODE
#                         writes $IBCRD_RUN/ibcrd/NODE/ibcrd.conf (socket,
#                         storage and staging under that folder, spelled
#                         with %n), starts `ibcrd -F -c FILE -N NODE` and
#                         waits for its socket; on failure prints its log.
#                         When NODE is a node of a running `slurm_start
#                         --netns` cluster, ibcrd runs in that node's
#                         network and UTS namespaces (those of its slurmd),
#                         as on a real node: CRIU dumps and restores its
#                         tasks from inside them, and it reaches the other
#                         nodes' ibcrd at the node's address.  Start it
#                         after slurm_start then, so it also has SLURM_CONF
#                         and watches Slurm (time limits, drains,
#                         preemption).
#   ibcrd_stop_all        SIGTERM and reap every ibcrd started; when the
#                         test failed, print their logs first; removes
#                         $IBCRD_RUN.  Register it with ibcr_atexit.
#
# Only the pids started here are ever signalled.

IBCRD=${IBCR_BUILDDIR:-.}/ibcrd/ibcrd
IBCRD_RUN=/run/ibcr-d.$$
ibcrd_pids=

ibcrd_start_node() {
	isn_dir=$IBCRD_RUN/ibcrd/$1
	mkdir -p "$isn_dir" || return 1
	{
		echo "socket = $IBCRD_RUN/ibcrd/%n/ibcrd.sock"
		echo "storage = ${IBCRD_STORAGE:-$IBCRD_RUN/ibcrd/%n/storage}"
		echo "staging = $IBCRD_RUN/ibcrd/%n/staging"
		test -z "$IBCRD_CONF_EXTRA" || printf '%s\n' "$IBCRD_CONF_EXTRA"
	} >"$isn_dir/ibcrd.conf" || return 1
	isn_enter=
	eval "isn_slurmd=\${ibcr_slurm_pid_slurmd_$1:-}"
	if test "${ibcr_slurm_netns:-0}" = 1 && test -n "$isn_slurmd"; then
		isn_enter="nsenter -t $isn_slurmd -n -u"
	fi
	# Close the descriptors sharness keeps, or the test would wait for
	# the daemon to exit before it reports.  nsenter execs: $! is ibcrd.
	$isn_enter "$IBCRD" -F -c "$isn_dir/ibcrd.conf" -N "$1" \
		</dev/null >"$isn_dir/ibcrd.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	ibcrd_pids="$ibcrd_pids $!"
	ibcr_record_proc $! "ibcrd -N $1"
	ibcr_record_path "$IBCRD_RUN"
	isn_t=50
	while ! test -S "$isn_dir/ibcrd.sock"; do
		isn_t=$((isn_t - 1))
		if test $isn_t -le 0; then
			echo "ibcrd for $1 did not create its socket in 5 s:" >&2
			cat "$isn_dir/ibcrd.log" >&2
			return 1
		fi
		sleep 0.1
	done
}

ibcrd_stop_all() {
	if command -v ibcr_failed >/dev/null 2>&1 && ibcr_failed; then
		for isa_f in "$IBCRD_RUN"/ibcrd/*/ibcrd.log; do
			test -f "$isa_f" && { echo "----- $isa_f"; cat "$isa_f"; }
		done | ibcr_diag
	fi
	for isa_p in $ibcrd_pids; do
		kill -TERM "$isa_p" 2>/dev/null
		wait "$isa_p" 2>/dev/null
	done
	ibcrd_pids=
	rm -rf "$IBCRD_RUN"
	return 0
}
