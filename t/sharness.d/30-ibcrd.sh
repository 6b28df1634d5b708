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
#                         test failed, print their logs first and copy
#                         CRIU's logs to ibcrd-logs/ in the trash
#                         directory; removes $IBCRD_RUN.  Register it
#                         with ibcr_atexit.
#
# What a node's ibcrd knows, from its status (root's view), not its log:
#   ibcrd_node_status NODE [JOB]
#                         "ibcr status [JOB] --json" of NODE's ibcrd
#   ibcrd_node_ctl N NODE JOB
#                         N tasks of JOB on NODE have their libibcr control
#                         connection
#   ibcrd_node_has_rank NODE JOB RANK [PID]
#                         NODE's ibcrd has JOB's RANK registered (by the
#                         process PID, when given)
#   ibcrd_node_joined NODE JOB MEMBER
#                         NODE, JOB's leader, lists node MEMBER as joined
#   ibcrd_gen_trigger JOB GEN
#                         what started generation GEN of JOB (preempt,
#                         drain, timelimit, cancel, manual, periodic), as
#                         its manifest in $IBCRD_STORAGE says
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
	if ! ibcr_wait_for 5 test -S "$isn_dir/ibcrd.sock"; then
		echo "ibcrd for $1 did not create its socket in 5 s:" >&2
		cat "$isn_dir/ibcrd.log" >&2
		return 1
	fi
}

ibcrd_node_status() {
	"${IBCR_BUILDDIR:-.}/cli/ibcr" --socket "$IBCRD_RUN/ibcrd/$1/ibcrd.sock" \
		status ${2:+"$2"} --json 2>/dev/null
}

ibcrd_node_ctl() {
	test "$(ibcrd_node_status $2 $3 | grep -o "\"control\":true" | wc -l)" -ge "$1"
}

ibcrd_node_has_rank() {
	ibcrd_node_status $1 $2 | grep -q "{\"rank\":$3,[^}]*\"pid\":${4:-[0-9]*}[,}]"
}

ibcrd_node_joined() {
	ibcrd_node_status $1 $2 | grep -q "\"members\":\[[^]]*\"node\":\"$3\""
}

ibcrd_gen_trigger() {
	sed -n "s/.*\"trigger\": *\"\([a-z]*\)\".*/\1/p" \
		"${IBCRD_STORAGE:-$IBCRD_RUN/ibcrd/n1/storage}/local/$1/gen-$2/manifest.json"
}

ibcrd_stop_all() {
	if command -v ibcr_failed >/dev/null 2>&1 && ibcr_failed; then
		for isa_f in "$IBCRD_RUN"/ibcrd/*/ibcrd.log; do
			test -f "$isa_f" && { echo "----- $isa_f"; cat "$isa_f"; }
		done | ibcr_diag
		# CRIU's dump and restore logs (in staging) for a post-mortem
		if test -d "${SHARNESS_TRASH_DIRECTORY:-}" && test -d "$IBCRD_RUN"; then
			mkdir -p "$SHARNESS_TRASH_DIRECTORY/ibcrd-logs" &&
			(cd "$IBCRD_RUN" &&
			 find . -name '*.log' -type f -exec cp --parents {} \
				"$SHARNESS_TRASH_DIRECTORY/ibcrd-logs/" \;) 2>/dev/null
		fi
	fi
	for isa_p in $ibcrd_pids; do
		kill -TERM "$isa_p" 2>/dev/null
		wait "$isa_p" 2>/dev/null
	done
	ibcrd_pids=
	rm -rf "$IBCRD_RUN"
	return 0
}
