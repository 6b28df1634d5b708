#!/bin/sh
# demo-mpi.sh - ibcr's second demo on one machine: an MPI job preempted
# and restored on other nodes.
#
# A private 3-node Slurm cluster (one network namespace, own IP, per
# node) whose partition "high" preempts the default one, an ibcrd per
# node, one checkpoint storage, the SPANK plugin, libibcr and softib
# from this build tree, as contrib/demo.sh has them.  The job is a real,
# unmodified program from Debian's archive: hpcc (HPC Challenge, linked
# with Open MPI), 4 ranks on nodes n1 and n2 under srun --mpi=pmix, UCX
# on softib, submitted by the ordinary user ibcr-user1 with a bare
# --checkpoint-ib.  A job of partition "high" then takes n1: Slurm
# preempts hpcc, ibcrd takes one final checkpoint of all 4 ranks and
# requeues the job; with n1 busy, its next run lands on n2 and n3 and
# restores the ranks there, which finish.  hpcc checks its own results
# (HPL's residual, PTRANS, RandomAccess, STREAM, FFT); the demo shows its
# verdicts and compares them with an uninterrupted run made first.
# Each step is printed; it exits 0 only on success and leaves nothing
# running.  About 2 to 4 minutes on 2 cores.
#
# Usage: contrib/demo-mpi.sh     (as root, after make, in the build tree)
#   IBCR_DEMO_KEEP=1   keep the work directory (configs, logs) afterwards

case "${1-}" in
"") ;;
-h|--help)
	echo "usage: $0   (run as root after make; see README.md)"
	exit 0 ;;
*)
	echo "demo-mpi.sh: unknown argument '$1' (it takes none)" >&2
	exit 2 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
IBCR_BUILDDIR=${IBCR_BUILDDIR:-$top}
SHARNESS_TEST_SRCDIR=$top/t
export IBCR_BUILDDIR
for f in "$top"/t/sharness.d/*.sh; do
	. "$f" || { echo "demo-mpi.sh: cannot load $f" >&2; exit 1; }
done
. "$top/t/mpi/mpi.sh" && . "$top/t/mpi/hpcc.sh" ||
	{ echo "demo-mpi.sh: cannot load t/mpi/mpi.sh, t/mpi/hpcc.sh" >&2; exit 1; }

for p in ROOT SLURM NETNS CRIU UCX OPENMPI HPCC SOFTIBDEV USERS MPIBUILT; do
	if ! ibcr_prereq_ok "$p"; then
		echo "demo-mpi.sh: cannot run: $p: $(ibcr_prereq_why "$p") (contrib/deps.sh installs it)" >&2
		exit 1
	fi
done
mpi_setup
plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
for f in "$plugin" "$IBCRD" "$IBCR_BUILDDIR/cli/ibcr"; do
	test -e "$f" || { echo "demo-mpi.sh: $f is missing: build first (make -j2)" >&2; exit 1; }
done

demo_name=demo-mpi.sh
. "$top/contrib/demo-lib.sh"

# sharness's test_cmp, for hpcc_complete
test_cmp() {
	diff -u "$@"
}
# The job's folders are the user's (slurm_start gives them the work
# directory).

# hpcc_env: what t5004's Open MPI jobs run with (t/mpi/ckpt.sh)
hpcc_env="OMPI_MCA_btl=self PMIX_MCA_gds=hash"

t_start=$(date +%s)
say "starting a private Slurm cluster: munged, slurmctld and 3 slurmd, each node in its own network namespace; partition high preempts the default one"
echo "required $plugin socket=$IBCRD_RUN/ibcrd/%n/ibcrd.sock libibcr=$LIBIBCR init=$IBCR_BUILDDIR/init/ibcr-init conf=$IBCRD_RUN/ibcrd/%n/ibcrd.conf" >plugstack.conf
SLURM_PLUGSTACK=plugstack.conf \
SLURM_PARTITION_OPTS="PriorityTier=1 PreemptMode=REQUEUE GraceTime=30" \
SLURM_CONF_EXTRA="PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
PartitionName=high Nodes=ALL PriorityTier=2 PreemptMode=OFF MaxTime=INFINITE State=UP" \
	slurm_start 3 --netns --devns || fail "slurm_start"
sinfo -N -o "%N %P %t %o" | sed 's/^/    /'

say "starting ibcrd on each node, one checkpoint storage for all"
ibcr_atexit ibcrd_stop_all
IBCRD_STORAGE=$IBCRD_RUN/storage
IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET"
mkdir -p "$IBCRD_STORAGE"
for n in n1 n2 n3; do
	ibcrd_start_node $n || fail "ibcrd_start_node $n"
done

say "an uninterrupted run first: hpcc, 4 ranks on 2 nodes, srun --mpi=pmix, UCX on softib, without ibcr"
hpcc_input ref 1000 || fail "hpcc_input"
(cd ref && mpi_with openmpi $hpcc_env srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 -t 10 \
	-o hpcc.out -e hpcc.err hpcc) || fail "the uninterrupted run failed: $(tail -n 5 ref/hpcc.err)"
hpcc_complete ref/hpccoutf.txt >/dev/null 2>&1 || fail "the uninterrupted run did not pass its checks"
hpcc_facts ref/hpccoutf.txt >ref.facts
grep -e "^||Ax-b||" -e "^Success=" ref/hpccoutf.txt | sed 's/^/    /'

say "sbatch --checkpoint-ib as $IBCR_JOB_USER: hpcc on n1, n2 (n3 kept busy, so Slurm picks n1 and n2)"
hpcc_input job 1000 || fail "hpcc_input"
filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") || fail "sbatch filler"
slurm_wait_job "$filler" RUNNING 30 || fail "the filler did not start"
job=$(mpi_with openmpi $hpcc_env sbatch --parsable -N2 --ntasks-per-node=2 --checkpoint-ib \
	-D "$IBCR_WORKDIR/job" -o job.out -e job.err \
	--wrap "srun --mpi=pmix -o hpcc.out -e hpcc.err hpcc") || fail "sbatch"
slurm_wait_job "$job" RUNNING 30 || fail "job $job did not start"
echo "    job $job runs on $(squeue -h -j "$job" -o %N)"
scancel "$filler"

say "waiting until every rank is past MPI_Init (hpcc's first section is over)"
ibcr_wait_for 300 grep -qs "^End of MPIRandomAccess section.$" job/hpccoutf.txt ||
	fail "hpcc did not get through its first section"
grep "^Begin of .* section.$" job/hpccoutf.txt | tail -n 1 | sed 's/^/    now: /'

say "sbatch -p high -w n1: a job of a higher partition takes n1, Slurm preempts hpcc"
high=$(sbatch --parsable -p high -w n1 -c 2 -o /dev/null --wrap "sleep 60") || fail "sbatch -p high"
ibcr_wait_for 60 sh -c "grep -q 'job $job: preempt: final checkpoint, then requeue' $IBCRD_RUN/ibcrd/n1/ibcrd.log" ||
	fail "ibcrd did not take a final checkpoint of job $job"
grep "job $job: preempt: final checkpoint, then requeue" "$IBCRD_RUN/ibcrd/n1/ibcrd.log" |
	sed 's/^ibcrd: /    n1 /'
slurm_wait_job "$job" PENDING 60 || fail "job $job was not requeued"
"$IBCR_BUILDDIR/cli/ibcr" --storage "$IBCRD_STORAGE" list "$job" | sed 's/^/    /'
mv job/hpcc.err job/hpcc.err.1 && mv job/hpcc.out job/hpcc.out.1
echo "    (a requeued job waits 2 minutes before it may start again: the demo starts it now)"
slurm_start_now "$job" || fail "scontrol update StartTime=now"
slurm_wait_job "$job" RUNNING 60 || fail "job $job did not start again"
echo "    job $job runs again, now on $(squeue -h -j "$job" -o %N) (n1 is taken by job $high)"

say "the next run restores the 4 ranks on their new nodes instead of starting hpcc again"
ibcr_wait_for 120 sh -c "test \"\$(grep -cs 'restored from generation' job/hpcc.err)\" = 4" ||
	fail "the ranks were not restored: $(cat job/hpcc.err)"
sed 's/^/    /' job/hpcc.err

say "waiting for the restored hpcc to finish"
slurm_wait_job "$job" COMPLETED 600 || fail "job $job did not complete: $(tail -n 5 job/hpcc.err)"
hpcc_complete job/hpccoutf.txt || fail "hpcc's report is not complete and passed"
hpcc_facts job/hpccoutf.txt >job.facts
diff -u ref.facts job.facts || fail "the restored run's verdicts differ from the uninterrupted run's"
grep -e "^||Ax-b||" -e "^Success=" job/hpccoutf.txt | sed 's/^/    /'
echo "    $(wc -l <ref.facts) verdicts, residuals, norms and sizes identical to the uninterrupted run's"
say "job $job COMPLETED: preempted on n1, n2, restored on n2, n3, hpcc's checks passed with the same results"

say "stopping ibcrd and the cluster"
scancel "$high" 2>/dev/null
ibcrd_stop_all
slurm_stop || fail "slurm_stop"
say "done in $(( $(date +%s) - t_start )) s"
exit 0
