#!/bin/sh
# demo.sh - the README's first command: ibcr's demo on one machine.
#
# A private 2-node Slurm cluster, one network namespace (own IP) per node,
# started with the test suite's helpers (t/sharness.d), one ibcrd per node
# inside the node's namespaces, one checkpoint storage for both, and the
# SPANK plugin, libibcr and softib from this build tree.  A two-rank verbs
# job (Debian's ibv_rc_pingpong with buffer validation, one rank per node)
# is submitted by an ordinary user (ibcr-user1, made by contrib/deps.sh)
# with --checkpoint-ib=5s; it is checkpointed while it runs,
# requeued with `scontrol requeue`, restored on its next run (both ranks,
# verbs objects rebuilt with new ids) and completes with every buffer
# validated.  Each step is printed; it exits 0 only on success, leaves
# nothing running or mounted, and touches no system-wide Slurm, munge or
# ibcr configuration.  About a minute.
#
# Usage: contrib/demo.sh     (as root, after make, in the build tree)
#   IBCR_DEMO_KEEP=1   keep the work directory (configs, logs) afterwards

case "${1-}" in
"") ;;
-h|--help)
	echo "usage: $0   (run as root after make; see README.md)"
	exit 0 ;;
*)
	echo "demo.sh: unknown argument '$1' (it takes none)" >&2
	exit 2 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
IBCR_BUILDDIR=${IBCR_BUILDDIR:-$top}
export IBCR_BUILDDIR
for f in "$top"/t/sharness.d/*.sh; do
	. "$f" || { echo "demo.sh: cannot load $f" >&2; exit 1; }
done

for p in ROOT SLURM NETNS CRIU IBVUTILS USERS; do
	if ! ibcr_prereq_ok "$p"; then
		echo "demo.sh: cannot run: $p: $(ibcr_prereq_why "$p") (contrib/deps.sh installs it)" >&2
		exit 1
	fi
done
plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
libibcr=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
softib=$IBCR_BUILDDIR/lib/softib/.libs
for f in "$plugin" "$libibcr" "$softib/libibverbs.so.1" "$IBCRD" "$IBCR_BUILDDIR/cli/ibcr"; do
	test -e "$f" || { echo "demo.sh: $f is missing: build first (make -j2)" >&2; exit 1; }
done

demo_name=demo.sh
. "$top/contrib/demo-lib.sh"

# gens JOB: committed generations of JOB.
gens() {
	ls "$IBCRD_STORAGE/local/$1"/gen-*/manifest.json 2>/dev/null | wc -l
}

# have_gens JOB N: JOB has N committed generations or more.
have_gens() {
	test "$(gens "$1")" -ge "$2"
}

# until_true TENTHS CMD...: until CMD succeeds, or fail after TENTHS/10 s.
until_true() {
	ut_t=$1
	shift
	while ! "$@"; do
		ut_t=$((ut_t - 1))
		test $ut_t -gt 0 || return 1
		sleep 0.1
	done
}

t_start=$(date +%s)
say "starting a private Slurm cluster: munged, slurmctld and 2 slurmd, each node in its own network namespace"
echo "required $plugin socket=$IBCRD_RUN/ibcrd/%n/ibcrd.sock libibcr=$libibcr init=$IBCR_BUILDDIR/init/ibcr-init conf=$IBCRD_RUN/ibcrd/%n/ibcrd.conf" >plugstack.conf
SLURM_PLUGSTACK=plugstack.conf slurm_start 2 --netns || fail "slurm_start"
sinfo -N -o "%N %t %o" | sed 's/^/    /'

say "starting ibcrd on each node (inside its namespaces), one checkpoint storage for both"
ibcr_atexit ibcrd_stop_all
IBCRD_STORAGE=$IBCRD_RUN/storage
IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET"
mkdir -p "$IBCRD_STORAGE"
ibcrd_start_node n1 && ibcrd_start_node n2 || fail "ibcrd_start_node"

# Rank 0 serves on its node's address, rank 1 connects to it.
cat >pp.sh <<\EOF
#!/bin/sh
a=addr.$SLURM_JOB_ID
if test "$SLURM_PROCID" = 0; then
	ip -4 -o addr show eth0 | awk '{ split($4, a, "/"); print a[1] }' >$a.tmp && mv $a.tmp $a
	exec ibv_rc_pingpong -c -n "$1" -p "$2"
fi
t=0
while ! test -s $a; do
	t=$((t + 1)); test $t -lt 300 || exit 3
	sleep 0.1
done
sleep 0.5
exec ibv_rc_pingpong -c -n "$1" -p "$2" "$(cat $a)"
EOF
chmod +x pp.sh
iters=400000
port=$(( 30000 + $$ % 20000 ))

say "sbatch --checkpoint-ib=5s as the ordinary user $IBCR_JOB_USER: ibv_rc_pingpong -c ($iters validated round trips), one rank per node, libibcr on softib"
job=$(sbatch --parsable -N2 --checkpoint-ib=5s -o job.out \
	--export=ALL,LD_LIBRARY_PATH=$softib \
	--wrap "srun -N2 -n2 -o pp.%t.out -e pp.%t.err ./pp.sh $iters $port") || fail "sbatch"
slurm_wait_job "$job" RUNNING 30 || fail "job $job did not start"
echo "    job $job runs on $(squeue -h -j "$job" -o %N)"

say "waiting for two checkpoints (each: quiesce, drain, release the verbs objects, CRIU dump on both nodes, rebuild, commit)"
until_true 600 have_gens "$job" 2 || fail "job $job has $(gens "$job") checkpoints after 60 s"
"$IBCR_BUILDDIR/cli/ibcr" --storage "$IBCRD_STORAGE" list "$job" | sed 's/^/    /'
grep "job $job gen [0-9]*: dumped and resumed" "$IBCRD_RUN/ibcrd/n1/ibcrd.log" | sed 's/^ibcrd: /    n1 /'

say "scontrol requeue $job: Slurm ends both ranks and queues the job again"
scontrol requeue "$job" || fail "scontrol requeue"
until_true 300 sh -c "scontrol -o show job $job | grep -q JobState=PENDING" ||
	fail "job $job is not pending after the requeue"
newest=$(ls -d "$IBCRD_STORAGE/local/$job"/gen-* | sed 's/.*gen-//' | sort -n | tail -n 1)
for r in 0 1; do
	mv pp.$r.out run1.$r.out && mv pp.$r.err run1.$r.err
done
echo "    first run stopped; newest checkpoint: generation $newest"
echo "    (a requeued job waits 2 minutes before it may start again: the demo starts it now)"
scontrol update jobid="$job" StartTime=now || fail "scontrol update StartTime=now"
slurm_wait_job "$job" RUNNING 60 || fail "job $job did not start again"

say "the next run restores both ranks instead of starting the program"
until_true 300 sh -c 'grep -q "restored from generation" pp.0.err 2>/dev/null &&
	grep -q "restored from generation" pp.1.err 2>/dev/null' || fail "the ranks were not restored"
cat pp.0.err pp.1.err | sed 's/^/    /'
grep "job $job: restored tasks rebuilt and resumed" "$IBCRD_RUN/ibcrd/n1/ibcrd.log" |
	sed 's/^ibcrd: /    n1 /'

say "waiting for the restored pingpong to finish"
slurm_wait_job "$job" COMPLETED 120 || fail "job $job did not complete"
for r in 0 1; do
	grep -q "^$iters iters in" pp.$r.out || fail "rank $r did not finish its $iters iterations"
	grep -q "^Failed\|Couldn't\|mismatch" pp.$r.err pp.$r.out && fail "rank $r reported an error"
	echo "    rank $r: $(grep "^$iters iters in" pp.$r.out)"
done
"$IBCR_BUILDDIR/cli/ibcr" --storage "$IBCRD_STORAGE" verify "$job" >verify.out 2>&1 ||
	fail "ibcr verify $job: $(cat verify.out)"
say "job $job COMPLETED: checkpointed, requeued, restored, every buffer validated; images verified"

say "stopping ibcrd and the cluster"
ibcrd_stop_all
slurm_stop || fail "slurm_stop"
for p in $(slurm_pids); do
	test -e "/proc/$p" && fail "pid $p is still there after slurm_stop"
done
say "done in $(( $(date +%s) - t_start )) s"
exit 0
