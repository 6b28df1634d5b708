# ckpt.sh - one MPI job's checkpoint scenarios under the SPANK plugin,
# shared by t5003 (MPICH, srun --mpi=pmi2) and t5004 (Open MPI, srun
# --mpi=pmix): each function is the body of one test, run with the MPI's
# name; sourced after mpi.sh and spank/lib.sh (spank_verbs_setup,
# mpi_setup done).
#
# A job is 4 ranks of mpi_verify (-n $ITERS $MPI_CKPT_WORK) on 2 of 3
# network-namespace nodes, as $IBCR_JOB_USER, in a batch job with
# --checkpoint-ib; every one must end with every message verified and
# the same OK line as the uninterrupted run (ref.ok).  State kept
# between tests: $J (the job of the periodic, requeue, again and finish
# tests), $filler, $newest.
#
#   mpi_ckpt_cluster            3 netns nodes, partition "high" preempts
#                               the default one (GraceTime 30), an ibcrd
#                               per node (time-limit margin 30 s), one
#                               storage
#   mpi_ckpt_ref MPI            the same job without --checkpoint-ib,
#                               through srun: ref.ok; UCX reads rdtsc
#   mpi_ckpt_periodic MPI       --checkpoint-ib=5s on n1, n2 (n3 taken):
#                               2 generations, whose newest names 4 launcher
#                               connections; the plugin's steering variable
#                               is in every rank, and UCX reads the wall
#                               clock in every rank; no rank's image holds
#                               a listening socket
#   mpi_ckpt_requeue MPI        scontrol requeue with n1 taken: the ranks
#                               come back on n2 and n3 from the newest
#                               generation, 40 s or more after its dump
#   mpi_ckpt_again MPI          the restored ranks are checkpointed again,
#                               launcher connections and all
#   mpi_ckpt_finish MPI         that job completes as the reference did,
#                               UCX still on the wall clock in every
#                               restored rank (so in the drained,
#                               preempted, time-limited and MPI_Init jobs)
#   mpi_ckpt_drain MPI          a drain of n3 under a job on n2, n3:
#                               checkpointed, requeued, restored on n1, n2
#   mpi_ckpt_preempt MPI        bare --checkpoint-ib on n1, n2 preempted by
#                               a job of partition high: one final
#                               generation, requeued, restored
#   mpi_ckpt_timelimit MPI      -t 1: checkpointed and requeued before each
#                               limit, never TIMEOUT
#   mpi_ckpt_in_init MPI        three ranks wait inside MPI_Init for a
#                               fourth held back: a checkpoint then is
#                               refused, naming MPI_Init, nothing is
#                               committed, and the job ends as the
#                               reference did
#   mpi_ckpt_newest_gen JOB     the highest committed generation (0: none)
#   mpi_ckpt_gen_after JOB N    JOB has committed a generation after N

# What each MPI needs under Slurm and ibcr: its Slurm plugin, the
# environment of a checkpointable job, the manifest key of its launcher
# connection, and the variable the plugin sets in protected ranks.
mpi_ckpt_plugin_() {
	case "$1" in openmpi) echo pmix ;; mpich) echo pmi2 ;; esac
}
mpi_ckpt_env_() {
	# Open MPI: no vader nor btl tcp, PMIx's data store in its own memory
	case "$1" in openmpi) echo "OMPI_MCA_btl=self PMIX_MCA_gds=hash" ;; esac
}
mpi_ckpt_key_() {
	case "$1" in openmpi) echo pmix_ino ;; mpich) echo pmi_ino ;; esac
}
mpi_ckpt_steer_() {
	case "$1" in
	openmpi) echo OMPI_MCA_shmem=mmap OMPI_MCA_mpi_add_procs_cutoff=4294967295 ;;
	mpich) echo MPIR_CVAR_NOLOCAL=1 ;;
	esac
	# UCX's clock-based peer timeout (30 days) and keepalive (off), and
	# no shared-memory or TCP transport, in both
	echo UCX_UD_TIMEOUT=2592000s UCX_KEEPALIVE_INTERVAL=inf UCX_TLS=^shm,tcp
}

# mpi_ckpt_clock_ FILE WHEN CLOCK: in FILE (mpi_verify -c's stderr),
# each of the 4 ranks said that UCX read CLOCK (gettimeofday: the wall
# clock libibcr makes it read, in microseconds; rdtsc: the CPU's
# time-stamp counter, its own choice) at WHEN (after MPI_Init, before
# MPI_Finalize), and no rank said any other clock at any time.
mpi_ckpt_clock_() {
	case "$3" in
	gettimeofday) mpi_cc_re="gettimeofday, 1000000 ticks/s" ;;
	*) mpi_cc_re="$3, [0-9]* ticks/s" ;;
	esac
	for mpi_cc_r in 0 1 2 3; do
		grep -q "^mpi_verify: rank $mpi_cc_r on [^:]*: UCX clock $2: $mpi_cc_re\$" "$1" || {
			echo "$1: rank $mpi_cc_r did not say that UCX read $3 $2" | ibcr_diag
			grep "UCX clock" "$1" | ibcr_diag
			return 1
		}
	done
	if grep "UCX clock" "$1" | grep -v ": UCX clock [^:]*: $mpi_cc_re\$"; then
		echo "$1: UCX read another clock than $3" | ibcr_diag
		return 1
	fi
}

# mpi_ckpt_sbatch_ MPI NAME [SBATCH-OPTIONS...]: submit the job, output
# in NAME.out and NAME.err (the batch script's in jobNAME.*); prints its
# id.  $MPI_CKPT_SRUN_OPTS go to srun, $MPI_CKPT_LAUNCH before the
# program (a wrapper that execs it; a path without spaces, relative to the
# trash directory); with $MPI_CKPT_MARK set, the batch
# script first appends "run $SLURM_RESTART_COUNT" to NAME.out.
# UCX's transports are the plugin's choice in protected ranks (the
# uninterrupted reference keeps the suite's UCX_TLS); sbatch is the
# harness's function, which submits as the job's user.
mpi_ckpt_sbatch_tls_() {
	unset UCX_TLS
	sbatch "$@"
}
mpi_ckpt_sbatch_() {
	mpi_cs_m=$1 mpi_cs_n=$2 mpi_cs_mark=
	shift 2
	if test -n "$MPI_CKPT_MARK"; then
		mpi_cs_mark="echo run \${SLURM_RESTART_COUNT:-0} >>$mpi_cs_n.out; "
	fi
	mpi_with "$mpi_cs_m" $(mpi_ckpt_env_ "$mpi_cs_m") mpi_ckpt_sbatch_tls_ --parsable "$@" \
		-o job"$mpi_cs_n".out -e job"$mpi_cs_n".err \
		--wrap "${mpi_cs_mark}srun --mpi=$(mpi_ckpt_plugin_ "$mpi_cs_m") $MPI_CKPT_SRUN_OPTS -o $mpi_cs_n.out -e $mpi_cs_n.err $MPI_CKPT_LAUNCH $(mpi_verify_of_ "$mpi_cs_m") -n $ITERS -c $MPI_CKPT_WORK $MPI_CKPT_VERIFY_OPTS"
}

# mpi_ckpt_runs_same_ MPI NAME: NAME.out, appended to by every run of
# the job (MPI_CKPT_MARK), ends with a complete, verified run with the
# reference's result.  An earlier run may have printed results too: a
# final checkpoint leaves the job running until it is requeued, and what
# it wrote after the dump is written again by the restored run.  Those
# lines must be the reference's as well (hosts aside), and nothing else
# is in the file.  The last run that printed anything is the one checked
# whole: a final checkpoint taken after the ranks printed (inside
# MPI_Finalize) restores ranks that have nothing left to print, and such
# a job still has to end COMPLETED (its callers wait for that).
mpi_ckpt_runs_same_() {
	cat "$2".out "$2".err | ibcr_diag &&
	sed -n "/^rank /s/ on [^:]*:/:/p" ref.out | sort -u >"$2".want &&
	sed -n "/^rank /s/ on [^:]*:/:/p" "$2".out | sort -u >"$2".ranks &&
	test -z "$(comm -13 "$2".want "$2".ranks)" &&
	test -z "$(grep -v -e "^run [0-9]*$" -e "^rank " -e "^mpi_verify: OK " "$2".out)" &&
	test -z "$(grep "^mpi_verify: OK " "$2".out | grep -v -x -F -f ref.ok)" &&
	mpi_crs_runs=$(awk '/^run [0-9]*$/ { n++; next } { p = n } END { print p + 0 }' "$2".out) &&
	awk -v last="$mpi_crs_runs" '/^run [0-9]*$/ { n++; next } n == last' "$2".out >"$2".last &&
	mpi_check_out "$2".last 4 $ITERS 2 &&
	mpi_ckpt_clock_ "$2".err "before MPI_Finalize" gettimeofday &&
	grep "^mpi_verify: OK " "$2".last >"$2".ok &&
	test_cmp ref.ok "$2".ok
}

# mpi_ckpt_connections_ MPI JOB GEN: the generation's launcher connections
mpi_ckpt_connections_() {
	grep -c "\"$(mpi_ckpt_key_ "$1")\": [1-9]" "$store/$2/gen-$3/manifest.json"
}

# mpi_ckpt_same_ MPI NAME: NAME.out is a complete, verified run with the
# reference's result
mpi_ckpt_same_() {
	cat "$2".out "$2".err | ibcr_diag &&
	mpi_check_out "$2".out 4 $ITERS 2 &&
	mpi_ckpt_clock_ "$2".err "before MPI_Finalize" gettimeofday &&
	grep "^mpi_verify: OK " "$2".out >"$2".ok &&
	test_cmp ref.ok "$2".ok
}

# mpi_ckpt_restored_on_ FILE GEN NODE RANK...: FILE says each RANK was
# restored on NODE from GEN
mpi_ckpt_restored_on_() {
	mpi_cr_f=$1 mpi_cr_g=$2 mpi_cr_n=$3
	shift 3
	for mpi_cr_r in "$@"; do
		grep "task $mpi_cr_r on $mpi_cr_n: restored from generation $mpi_cr_g " "$mpi_cr_f" ||
			return 1
	done
}

# mpi_ckpt_since_ T S: S seconds or more have passed since T (epoch)
mpi_ckpt_since_() {
	test $(($(date +%s) - $1)) -ge "$2"
}

mpi_ckpt_newest_gen() {
	ls -d "$store/$1"/gen-*/manifest.json 2>/dev/null |
		sed "s|.*/gen-\([0-9]*\)/manifest.json|\1|" | sort -n | tail -n 1 | grep . || echo 0
}

mpi_ckpt_gen_after() {
	test "$(mpi_ckpt_newest_gen "$1")" -gt "$2"
}

mpi_ckpt_cluster() {
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	SLURM_PLUGSTACK=plugstack.conf \
	SLURM_PARTITION_OPTS="PriorityTier=1 PreemptMode=REQUEUE GraceTime=30" \
	SLURM_CONF_EXTRA="PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
PartitionName=high Nodes=ALL PriorityTier=2 PreemptMode=OFF MaxTime=INFINITE State=UP" \
		slurm_start 3 --netns --devns &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET
timelimit_margin = 30s" &&
	spank_start_ibcrds 3
}

# What every job of these tests runs, the reference too: six sizes up to
# 1 MiB (the largest go by UCX's rendezvous, RDMA reads of the sender's
# buffer), one-sided slots of 256 KiB, and a pause of 150 ms in each
# iteration, its point-to-point messages posted and not yet waited for
# (a checkpoint then finds them in flight).  With the default sizes (up
# to 4 MiB, slots of 1 MiB) and no pause, a job of 250 iterations kept
# both cores busy for 2.6 minutes on an idle machine, and for up to 7
# under CI, where t5003 and t5004 run side by side (a CI run took an
# hour).  A quarter of the
# bytes and the pauses (37 s in all) keep a job running long enough for
# every scenario (two periodic generations, then a requeue; a time limit
# of one minute) without holding the CPUs.
: "${MPI_CKPT_WORK=-s 48,1000,8000,65536,262144,1048576 -w 262144 -p 150}"

# How long a (restored) job may take to complete: a restored job redoes
# nearly all of its work (its image is from its first seconds), and under
# CI, with t5003 and t5004 running side by side on two cores, the
# uninterrupted job alone took 5.8 minutes (2026-11-28); the time-limit
# case waits as long.
MPI_CKPT_RUN_MAX=600
# How long the 4 ranks may take to be restored once Slurm runs the job
# again, and to be checkpointed again: under the same load, the ranks of
# a requeued job said they were restored 1 min 44 s after it went RUNNING
# (2026-11-28; a wait of 60 s failed there).
MPI_CKPT_RESTORE_MAX=300

mpi_ckpt_ref() {
	MPI_VERIFY_ARGS="-n $ITERS -c $MPI_CKPT_WORK" MPI_ITERS=$ITERS mpi_srun "$1" ref $(mpi_ckpt_env_ "$1") &&
	grep "^mpi_verify: OK " ref.out >ref.ok &&
	# Without libibcr, UCX keeps its own clock (what libibcr changes).
	mpi_ckpt_clock_ ref.err "after MPI_Init" rdtsc &&
	mpi_ckpt_clock_ ref.err "before MPI_Finalize" rdtsc
}

mpi_ckpt_periodic() {
	filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	J=$(mpi_ckpt_sbatch_ "$1" mv -N2 --ntasks-per-node=2 --checkpoint-ib=5s) &&
	slurm_wait_job $J RUNNING 30 &&
	test "$(spank_field $J NodeList)" = "n[1-2]" &&
	scancel $filler &&
	spank_wait_gens $J 2 90 &&
	pgrep -u "$IBCR_JOB_USER" -f "^$(mpi_verify_of_ "$1")" >ranks &&
	for p in $(cat ranks); do
		for v in $(mpi_ckpt_steer_ "$1"); do
			tr "\0" "\n" </proc/$p/environ | grep -x -F "$v"
		done
	done >steered &&
	test "$(wc -l <steered)" = $((4 * $(mpi_ckpt_steer_ "$1" | wc -w))) || {
		echo "want $(mpi_ckpt_steer_ "$1" | wc -w) variables in each of 4 ranks ($(cat ranks | tr "\n" " ")), found:" | ibcr_diag
		ibcr_diag <steered
		ps -u "$IBCR_JOB_USER" -o pid,stat,args | ibcr_diag
		return 1
	} &&
	# Before any restore: UCX chose the wall clock, as libibcr told it.
	mpi_ckpt_clock_ mv.err "after MPI_Init" gettimeofday &&
	newest=$(mpi_ckpt_newest_gen $J) &&
	test "$(mpi_ckpt_connections_ "$1" $J $newest)" = 4 &&
	mpi_ckpt_no_listener_ $J $newest
}

# mpi_ckpt_no_listener_ JOB GEN: the 4 ranks' images of GEN hold their
# sockets (libibcr's control connection at least) but no listening one:
# a listener a rank inherited from slurmstepd (Open MPI's: the PMIx
# server's, 0.0.0.0 and a port of the step) stays out, since CRIU would
# bind its port again at each restore, and fail where it is taken.
mpi_ckpt_no_listener_() {
	"$SHARNESS_TEST_SRCDIR"/criu/sockets.py "$store/$1/gen-$2"/task-* >sockets &&
	test "$(grep -c " unix stream connected" sockets)" -ge 4 &&
	if grep " listen" sockets; then
		ibcr_diag <sockets
		return 1
	fi
}

mpi_ckpt_requeue() {
	filler=$(sbatch --parsable -w n1 -c 2 -o /dev/null --wrap "sleep 600") &&
	scontrol requeue $J &&
	slurm_wait_job $J PENDING 30 &&
	slurm_wait_job $filler RUNNING 30 &&
	newest=$(mpi_ckpt_newest_gen $J) &&
	# The ranks come back 40 s or more after their dump: past UCX's UD
	# peer timeout (30 s) and keepalive (20 s), which its clock would
	# count from before the dump (the plugin turns both off).
	mpi_ckpt_dumped=$(stat -c %Y "$store/$J/gen-$newest/manifest.json") &&
	ibcr_wait_for 60 mpi_ckpt_since_ $mpi_ckpt_dumped 40 &&
	mv mv.out mv.out.1 && mv mv.err mv.err.1 &&
	slurm_start_now $J &&
	slurm_wait_job $J RUNNING 60 &&
	test "$(spank_field $J NodeList)" = "n[2-3]" &&
	ibcr_wait_for $MPI_CKPT_RESTORE_MAX sh -c \
		"test \"\$(grep -c \"restored from generation\" mv.err 2>/dev/null)\" = 4" &&
	cat mv.err | ibcr_diag &&
	mpi_ckpt_restored_on_ mv.err $newest n2 0 1 &&
	mpi_ckpt_restored_on_ mv.err $newest n3 2 3
}

mpi_ckpt_again() {
	ibcr_wait_for $MPI_CKPT_RESTORE_MAX mpi_ckpt_gen_after $J $newest &&
	again=$(mpi_ckpt_newest_gen $J) &&
	test "$(mpi_ckpt_connections_ "$1" $J $again)" = 4 &&
	grep "\"node\": \"n3\"" "$store/$J/gen-$again/manifest.json"
}

mpi_ckpt_finish() {
	slurm_wait_job $J COMPLETED $MPI_CKPT_RUN_MAX &&
	mpi_ckpt_same_ "$1" mv
}

mpi_ckpt_drain() {
	D=$(mpi_ckpt_sbatch_ "$1" md -N2 --ntasks-per-node=2 --checkpoint-ib=5s) &&
	slurm_wait_job $D RUNNING 30 &&
	test "$(spank_field $D NodeList)" = "n[2-3]" &&
	scancel $filler &&
	spank_wait_gens $D 2 90 &&
	scontrol update nodename=n3 state=drain reason=ibcr-mpi-ckpt &&
	slurm_wait_job $D PENDING 60 &&
	newest=$(mpi_ckpt_newest_gen $D) &&
	# The drain's final checkpoint is the newest: no periodic one may
	# follow it while Slurm requeues the job (one did, under load, before
	# ibcrd held them back: t4008 shows it with a task slow to end).
	{ test "$(ibcrd_gen_trigger $D $newest)" = drain ||
		{ echo "generation $newest of $D: trigger $(ibcrd_gen_trigger $D $newest), not drain"; false; }; } &&
	mv md.out md.out.1 && mv md.err md.err.1 &&
	slurm_start_now $D &&
	slurm_wait_job $D RUNNING 60 &&
	test "$(spank_field $D NodeList)" = "n[1-2]" &&
	slurm_wait_job $D COMPLETED $MPI_CKPT_RUN_MAX &&
	mpi_ckpt_restored_on_ md.err $newest n1 0 1 &&
	mpi_ckpt_restored_on_ md.err $newest n2 2 3 &&
	mpi_ckpt_same_ "$1" md &&
	scontrol update nodename=n3 state=resume
}

mpi_ckpt_preempt() {
	rm -f mp.out mp.err &&
	P=$(MPI_CKPT_VERIFY_OPTS=-S mpi_ckpt_sbatch_ "$1" mp -N2 -w n1,n2 --ntasks-per-node=2 \
		--checkpoint-ib) &&
	slurm_wait_job $P RUNNING 30 &&
	for n in n1 n2; do
		ibcr_wait_for 60 ibcrd_node_ctl 2 $n $P ||
			return 1
	done &&
	# No generation is taken while a rank is inside MPI_Init (the
	# in_init case): preempt once all are past it, to get the final one.
	ibcr_wait_for 120 sh -c "test \$(grep -c \"past MPI_Init\$\" mp.err) = 4" &&
	H=$(sbatch --parsable -p high -w n1 -c 2 -o /dev/null --wrap "sleep 3") &&
	spank_restarts_at_least $P 1 60 &&
	test "$(spank_gens $P)" = 1 &&
	test "$(ibcrd_gen_trigger $P 1)" = preempt &&
	slurm_wait_job $P PENDING 30 &&
	mv mp.out mp.out.1 && mv mp.err mp.err.1 &&
	slurm_start_now $P &&
	slurm_wait_job $P COMPLETED $MPI_CKPT_RUN_MAX &&
	test "$(grep -c "restored from generation 1 " mp.err)" = 4 &&
	mpi_ckpt_same_ "$1" mp
}

# mpi_ckpt_idle_: no job left in the cluster (the previous case's)
mpi_ckpt_idle_() {
	test -z "$(squeue -h 2>/dev/null)"
}

mpi_ckpt_timelimit() {
	rm -f mt.out mt.err &&
	ibcr_wait_for 120 mpi_ckpt_idle_ &&
	ibcr_atexit spank_hurry_stop &&
	spank_hurry_start &&
	T=$(MPI_CKPT_MARK=1 MPI_CKPT_SRUN_OPTS=--open-mode=append mpi_ckpt_sbatch_ "$1" mt -N2 \
		--ntasks-per-node=2 -t 1 --checkpoint-ib --open-mode=append) &&
	slurm_wait_job $T COMPLETED 600 &&
	spank_hurry_stop &&
	spank_restarts_at_least $T 1 1 &&
	grep -l "\"trigger\": *\"timelimit\"" "$store/$T"/gen-*/manifest.json &&
	test "$(grep -c "restored from generation" mt.err)" -ge 4 &&
	mpi_ckpt_runs_same_ "$1" mt
}

# mpi_ckpt_leader_knows_ JOB N: n1'"'"'s ibcrd, the leader, has N ranks of JOB
# registered (its own tasks and its members'"'"').
mpi_ckpt_leader_knows_() {
	ibcrd_node_status n1 "$1" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)["job"]
n = j["ntasks"] + sum(len(m.get("ranks", [])) for m in j.get("members", []))
sys.exit(0 if n >= int(sys.argv[1]) else 1)' "$2"
}

mpi_ckpt_in_init() {
	rm -f mi.out mi.err go-mi &&
	ibcr_wait_for 120 mpi_ckpt_idle_ &&
	# Rank 3 starts once go-mi exists (at most 120 s): ranks 0-2 wait for
	# it in MPI_Init's PMI exchange, their libibcr connected already.
	cat >hold3.sh <<-\EOF &&
	#!/bin/sh
	n=0
	while test "$SLURM_PROCID" = 3 && ! test -e go-mi; do
		n=$((n + 1)); test $n -le 1200 || exit 1; sleep 0.1
	done
	exec "$@"
	EOF
	chmod 755 hold3.sh &&
	I=$(MPI_CKPT_LAUNCH=./hold3.sh mpi_ckpt_sbatch_ "$1" mi -N2 -w n1,n2 \
		--ntasks-per-node=2 --checkpoint-ib) &&
	slurm_wait_job $I RUNNING 30 &&
	ibcr_wait_for 60 ibcrd_node_ctl 2 n1 $I &&
	ibcr_wait_for 60 ibcrd_node_ctl 1 n2 $I &&
	# Rank 3'"'"'s task registers before hold3.sh holds it, but under load
	# after the others have connected: the refusal to check is MPI_Init'"'"'s,
	# not "3 of its 4 ranks registered".
	{ ibcr_wait_for 60 mpi_ckpt_leader_knows_ $I 4 ||
		{ echo "job $I: the leader n1 does not know all 4 ranks after 60 s"; false; }; } &&
	test_must_fail spank_checkpoint $I >mi.ckpt 2>&1 &&
	cat mi.ckpt &&
	grep "inside P*MPI_Init.*could not be restored" mi.ckpt &&
	test "$(mpi_ckpt_newest_gen $I)" = 0 &&
	touch go-mi &&
	slurm_wait_job $I COMPLETED $MPI_CKPT_RUN_MAX &&
	mpi_ckpt_same_ "$1" mi
}
