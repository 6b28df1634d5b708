# spank/lib.sh - helpers for the SPANK/Slurm tests (t40NN-spank-*.t), one
# copy of what they all need; sourced after sharness.sh:
#	. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
#
#   spank_verbs_setup           the build tree's plugin, libibcr, softib
#                               and verbs_stream ($plugin $libibcr
#                               $SOFTIB_LIBDIR $VS), one storage ($store);
#                               prerequisite BUILT (00-prereqs.sh) says
#                               they are built
#   spank_plugstack PLUGIN LIBIBCR
#                               write plugstack.conf: PLUGIN required, with
#                               LIBIBCR as the preload and each node's ibcrd
#                               socket and conf under $IBCRD_RUN/ibcrd/%n
#   spank_start_preempt_cluster N
#                               an N-node netns Slurm cluster (plugstack.conf)
#                               whose default partition is preempted by
#                               partition "high"
#   spank_start_ibcrds N        an ibcrd on each of n1..nN ($IBCRD_CONF_EXTRA
#                               and $IBCRD_STORAGE as for ibcrd_start_node)
#   spank_write_counter         write ./counter.sh COUNT [STATUS]: counts
#                               from 1 to COUNT, a line every 0.1 s, then
#                               exits with STATUS (default 0)
#   spank_write_vs TIMEOUT SERVER-OPTS CLIENT-OPTS
#                               write ./vs.sh PORT [MSGS], the two-rank
#                               verbs stream ($VS) as a Slurm task
#   spank_checkpoint JOB        one committed generation of JOB, now, by
#                               n1's ibcrd ("ibcr checkpoint --wait")
#   spank_requeue JOB           scontrol requeue JOB, wait until it is
#                               pending, move app.out and app.err to .1,
#                               and let it start at once (not 120 s later)
#   spank_lines FILE            its number of lines (0 when missing)
#   spank_wait_lines FILE N     until FILE has N lines or more (30 s)
#   spank_gens JOB              JOB's committed generations in $store
#   spank_wait_gens JOB N [SECONDS]
#                               until JOB has N of them (default 30 s)
#   spank_wait_restored PREFIX  until PREFIX.0.err and PREFIX.1.err both
#                               say "restored from generation" (60 s)
#   spank_field JOB NAME        a field of "scontrol show job"
#   spank_restarts_at_least JOB N [SECONDS]
#                               until JOB was requeued N times (default 60 s)
#   spank_hurry_start, spank_hurry_stop
#                               start and stop a loop that makes every
#                               pending job eligible now

# spank_verbs_setup: what a verbs job under the plugin needs from the
# build tree, and one storage shared by every node's ibcrd.
spank_verbs_setup() {
	plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
	libibcr=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
	SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
	VS=$IBCR_BUILDDIR/t/softib/verbs_stream
	IBCRD_STORAGE=$IBCRD_RUN/storage
	store=$IBCRD_STORAGE/local
}

# spank_plugstack PLUGIN LIBIBCR: the plugin's line, %n expanded by the
# plugin per node so that several nodes on one host find their own ibcrd.
spank_plugstack() {
	echo "required $1 socket=$IBCRD_RUN/ibcrd/%n/ibcrd.sock libibcr=$2 init=$IBCR_BUILDDIR/init/ibcr-init conf=$IBCRD_RUN/ibcrd/%n/ibcrd.conf" >plugstack.conf
}

# spank_start_preempt_cluster N: preemption by partition priority
# (PreemptMode=REQUEUE, GraceTime=30) is what the trigger tests preempt
# with; a caller may prefix SLURM_NODE_CORES=... for more cores.
spank_start_preempt_cluster() {
	SLURM_PLUGSTACK=plugstack.conf \
	SLURM_PARTITION_OPTS="PriorityTier=1 PreemptMode=REQUEUE GraceTime=30" \
	SLURM_CONF_EXTRA="PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
PartitionName=high Nodes=ALL PriorityTier=2 PreemptMode=OFF MaxTime=INFINITE State=UP" \
	slurm_start "$1" --netns
}

# spank_start_ibcrds N: apart from the cluster's start, because an ibcrd's
# conf may name what slurm_start has only just set ($IBCR_MUNGE_SOCKET).
spank_start_ibcrds() {
	sp_i=1
	while test $sp_i -le "$1"; do
		ibcrd_start_node n$sp_i || return 1
		sp_i=$((sp_i + 1))
	done
}

# spank_write_counter: a program with no verbs whose output shows where a
# restored run went on from (the next number, not 1).
spank_write_counter() {
	cat >counter.sh <<\EOF
#!/bin/sh
i=0
while test $i -lt "$1"; do
	i=$((i + 1))
	echo $i
	sleep 0.1
done
exit ${2:-0}
EOF
	chmod +x counter.sh
}

# spank_write_vs TIMEOUT SERVER-OPTS CLIENT-OPTS: vs.sh PORT [MSGS] runs
# "$VS -C -T TIMEOUT -p PORT": rank 0 serves on its node's address (with
# SERVER-OPTS) and writes that address to addr.JOB; rank 1 waits for it and
# sends (-o send -q 2 CLIENT-OPTS).  The options go into vs.sh as written,
# so '"$2"' in them is vs.sh's MSGS.  exec: the task is the stream itself.
spank_write_vs() {
	cat >vs.sh <<VSEOF
#!/bin/sh
a=addr.\$SLURM_JOB_ID
if test "\$SLURM_PROCID" = 0; then
	ip -4 -o addr show eth0 | awk '{ split(\$4, a, "/"); print a[1] }' >\$a.tmp && mv \$a.tmp \$a
	exec "$VS" -C -T $1 -p "\$1" $2
fi
t=0
while ! test -s \$a; do
	t=\$((t + 1)); test \$t -lt 300 || exit 3
	sleep 0.1
done
# Rank 0 listens right after it wrote its address, on another node: the
# stream's client retries a refused connect (for half its -T timeout).
exec "$VS" -C -T $1 -p "\$1" -o send -q 2 $3 "\$(cat \$a)"
VSEOF
	chmod +x vs.sh
}

# spank_lines FILE: its number of lines (0 when missing).
spank_lines() {
	if test -f "$1"; then wc -l <"$1"; else echo 0; fi
}

# spank_wait_lines FILE N: until FILE has N lines or more (30 s).
spank_has_lines() {
	test "$(spank_lines "$1")" -ge "$2"
}
spank_wait_lines() {
	ibcr_wait_for 30 spank_has_lines "$1" "$2" ||
		{ echo "$1 has $(spank_lines "$1") lines, not $2" >&2; return 1; }
}

# spank_gens JOB: how many committed generations JOB has in $store (a
# generation counts once its manifest, written last, is there).
spank_gens() {
	ls "$store/$1"/gen-*/manifest.json 2>/dev/null | wc -l
}

# spank_wait_gens JOB N [SECONDS]: until JOB has N committed generations
# (default 30 s).
spank_has_gens() {
	test "$(spank_gens "$1")" -ge "$2"
}
spank_wait_gens() {
	ibcr_wait_for "${3:-30}" spank_has_gens "$1" "$2" ||
		{ echo "job $1 has $(spank_gens "$1") generations, not $2" >&2; return 1; }
}

# spank_wait_restored PREFIX: until both ranks' stderr (PREFIX.0.err,
# PREFIX.1.err) say they were restored (60 s); shows them otherwise.
spank_both_restored() {
	grep -q "restored from generation" "$1.0.err" 2>/dev/null &&
		grep -q "restored from generation" "$1.1.err" 2>/dev/null
}
spank_wait_restored() {
	ibcr_wait_for 60 spank_both_restored "$1" || { cat "$1".*.err; return 1; }
}

# spank_field JOB NAME: a field of scontrol show job.
spank_field() {
	scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# spank_restarts_at_least JOB N [SECONDS]: until the job was requeued N
# times (default 60 s); an empty field counts as 0.
spank_has_restarts() {
	sr_n=$(spank_field "$1" Restarts)
	test "${sr_n:-0}" -ge "$2"
}
spank_restarts_at_least() {
	ibcr_wait_for "${3:-60}" spank_has_restarts "$1" "$2" ||
		{ echo "job $1: Restarts=$(spank_field "$1" Restarts), not $2" >&2; return 1; }
}

# A requeued job waits 120 s (BeginTime); the tests do not.  Only jobs
# pending for that reason are hurried (one pending for nodes is left to
# the scheduler: StartTime=now made Slurm push such a job's eligibility 10
# minutes out once, in t5004's time-limit case).  A job is
# hurried once it was pending at the loop's previous pass, a second or more
# ago: slurmd refuses a credential made in the second its last run ended
# (slurm_start_now).  The loop runs in the background with every descriptor
# of sharness closed, so that it never holds a test's output open;
# spank_hurry_stop is idempotent (register it with ibcr_atexit as well).
# The loop's bound is the test's life: it ends once the test's shell ($$)
# is gone, even when that was killed and ran no teardown.
spank_hurry_pid=
spank_hurry_start() {
	(
		seen=
		while ibcr_alive $$; do
			now=
			for j in $(squeue -h -t pending -o "%A %r" 2>/dev/null |
				sed -n "s/ BeginTime$//p"); do
				case " $seen " in
				*" $j "*) scontrol update jobid=$j StartTime=now 2>/dev/null ;;
				esac
				now="$now $j"
			done
			seen=$now
			sleep 1
		done
	) </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	spank_hurry_pid=$!
	ibcr_record_proc $spank_hurry_pid "spank_hurry_start loop"
}
spank_hurry_stop() {
	test -z "$spank_hurry_pid" || { kill $spank_hurry_pid; wait $spank_hurry_pid; } 2>/dev/null
	spank_hurry_pid=
	return 0
}

spank_checkpoint() {
	"$IBCR_BUILDDIR/cli/ibcr" -c "$IBCRD_RUN/ibcrd/n1/ibcrd.conf" \
		--socket "$IBCRD_RUN/ibcrd/n1/ibcrd.sock" checkpoint "$1" --wait
}

spank_requeue() {
	scontrol requeue "$1" &&
	ibcr_wait_for 30 sh -c "scontrol -o show job $1 | grep -q JobState=PENDING" &&
	# The first run's files, out of the way of the next run's (a process
	# still ending writes on into the renamed file).
	mv app.out app.out.1 && mv app.err app.err.1 &&
	slurm_start_now "$1"
}
