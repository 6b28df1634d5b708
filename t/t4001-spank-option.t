#!/bin/sh
test_description='spank: --checkpoint-ib and the plugstack.conf arguments

The ibcr SPANK plugin from the build tree on a real 2-node Slurm cluster
with a real ibcrd per node: the option in sbatch, salloc and srun, refused
intervals, inheritance from a batch job into its sruns and the override by
srun, strict plugstack.conf arguments and per-node %n expansion.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT SLURM
ibcr_want IBCRD

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
# Any existing library serves as the preloaded one here: these tests look
# at what reaches the task, not at checkpoints.
preload=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so

# Space-free state folder: plugstack.conf splits its arguments on blanks.
run=$IBCRD_RUN

plugstack() {
	echo "required $plugin socket=$run/ibcrd/%n/ibcrd.sock libibcr=$preload init=$IBCR_BUILDDIR/init/ibcr-init $*" >plugstack.conf
}

test_expect_success 'the plugin is built and exports only SPANK entry points' '
	test -f "$plugin" &&
	nm -D --defined-only "$plugin" | awk "{ print \$3 }" | sort >syms &&
	cat syms &&
	! grep -v -e "^slurm_spank_" -e "^plugin_" syms &&
	grep -x slurm_spank_init syms &&
	grep -x slurm_spank_task_init syms
'

test_expect_success IBCRD 'start a 2-node cluster and one ibcrd per node' '
	mkdir -p "$run" && ln -sfn "$(pwd)" "$run/trash" &&
	ibcr_atexit ibcrd_stop_all &&
	plugstack &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 2 &&
	ibcrd_start_node n1 &&
	ibcrd_start_node n2
'

test_expect_success IBCRD 'sbatch, salloc and srun --help list the option' '
	for cmd in sbatch salloc srun; do
		$cmd --help >help.$cmd &&
		grep -- "--checkpoint-ib=\[INTERVAL\]" help.$cmd || return 1
	done
'

test_expect_success IBCRD 'malformed intervals are refused at submission, showing the accepted forms' '
	for bad in 5x 1h30 m30 30m30m -5m 0s 250ms 1.5h; do
		test_must_fail sbatch --checkpoint-ib=$bad --wrap true 2>err.sbatch &&
		test_must_fail srun --checkpoint-ib=$bad true 2>err.srun &&
		test_must_fail salloc --checkpoint-ib=$bad true 2>err.salloc &&
		for c in sbatch srun salloc; do
			grep "^ibcr: --checkpoint-ib=$bad: .*accepted forms: 90s, 30m, 2h, 1h30m" err.$c ||
				{ cat err.$c; return 1; }
		done
	done &&
	squeue -h >queued &&
	test_must_be_empty queued
'

test_expect_success IBCRD 'srun --checkpoint-ib=INTERVAL reaches every task' '
	for good in 90s 30m 2h 1h30m 45; do
		srun -N2 --checkpoint-ib=$good sh -c \
			"echo \$SLURMD_NODENAME \${IBCR_CHECKPOINT_INTERVAL-unset}" 2>err.$good |
			sort >got.$good || return 1
		cat err.$good
	done &&
	printf "n1 1m30s\nn2 1m30s\n" >expect && test_cmp expect got.90s &&
	printf "n1 30m\nn2 30m\n" >expect && test_cmp expect got.30m &&
	printf "n1 2h\nn2 2h\n" >expect && test_cmp expect got.2h &&
	printf "n1 1h30m\nn2 1h30m\n" >expect && test_cmp expect got.1h30m &&
	printf "n1 45s\nn2 45s\n" >expect && test_cmp expect got.45
'

test_expect_success IBCRD 'a bare --checkpoint-ib protects the task without an interval' '
	srun -N1 --checkpoint-ib sh -c \
		"echo \"[\${IBCR_CHECKPOINT_INTERVAL-unset}] \$IBCR_SOCKET\"" >bare &&
	echo "[] $run/ibcrd/n1/ibcrd.sock" >expect &&
	test_cmp expect bare
'

test_expect_success IBCRD 'socket=%n is expanded per node, libibcr is preloaded' '
	srun -N2 --checkpoint-ib=30m sh -c \
		"echo \$SLURMD_NODENAME \$IBCR_SOCKET \$LD_PRELOAD" | sort >env.out &&
	printf "n1 $run/ibcrd/n1/ibcrd.sock $preload\nn2 $run/ibcrd/n2/ibcrd.sock $preload\n" >expect &&
	test_cmp expect env.out
'

test_expect_success IBCRD 'a user LD_PRELOAD is kept after libibcr' '
	LD_PRELOAD=libc.so.6 srun -N1 --checkpoint-ib=30m sh -c "echo \$LD_PRELOAD" >pre.out &&
	echo "$preload:libc.so.6" >expect &&
	test_cmp expect pre.out
'

test_expect_success IBCRD 'sbatch --checkpoint-ib: the batch step is not touched, its sruns inherit, srun overrides' '
	cat >job.sh <<-\EOF &&
	#!/bin/sh
	echo "batch [${IBCR_CHECKPOINT_INTERVAL-unset}] ${LD_PRELOAD-none}"
	srun -N1 sh -c "echo \"inherit [\${IBCR_CHECKPOINT_INTERVAL-unset}]\""
	srun -N1 --checkpoint-ib=90s sh -c "echo \"override [\${IBCR_CHECKPOINT_INTERVAL-unset}]\""
	srun -N1 --checkpoint-ib sh -c "echo \"bare [\${IBCR_CHECKPOINT_INTERVAL-unset}]\""
	EOF
	jobid=$(sbatch --parsable -N1 --checkpoint-ib=30m -o job.out job.sh) &&
	slurm_wait_job "$jobid" COMPLETED 60 &&
	cat job.out &&
	printf "batch [unset] none\ninherit [30m]\noverride [1m30s]\nbare []\n" >expect &&
	test_cmp expect job.out
'

test_expect_success IBCRD 'a bare sbatch --checkpoint-ib is inherited as bare' '
	jobid=$(sbatch --parsable -N1 --checkpoint-ib -o bjob.out --wrap \
		"srun -N1 sh -c \"echo \\\"[\\\${IBCR_CHECKPOINT_INTERVAL-unset}] \\\$IBCR_SOCKET\\\"\"") &&
	slurm_wait_job "$jobid" COMPLETED 60 &&
	echo "[] $run/ibcrd/n1/ibcrd.sock" >expect &&
	test_cmp expect bjob.out
'

test_expect_success IBCRD 'batch_step=yes protects the batch script too' '
	plugstack batch_step=yes &&
	jobid=$(sbatch --parsable -N1 --checkpoint-ib=2h -o b2.out --wrap \
		"echo \"[\${IBCR_CHECKPOINT_INTERVAL-unset}] \$LD_PRELOAD\"") &&
	slurm_wait_job "$jobid" COMPLETED 60 &&
	echo "[2h] $preload" >expect &&
	test_cmp expect b2.out &&
	plugstack
'

test_expect_success IBCRD 'salloc --checkpoint-ib reaches the sruns of the allocation' '
	salloc -N1 --checkpoint-ib=2h srun -N1 sh -c \
		"echo \"[\${IBCR_CHECKPOINT_INTERVAL-unset}]\"" >alloc.out &&
	echo "[2h]" >expect &&
	test_cmp expect alloc.out
'

test_expect_success IBCRD 'plugstack.conf: an unknown key is an error naming it' '
	plugstack colour=blue &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: unknown argument .colour. (known: socket=PATH, libibcr=PATH, init=PATH, batch_step=yes|no, on_daemon_down=warn|fail, timeout=DURATION, conf=PATH, term_wait=DURATION)" err &&
	test_must_fail sbatch --wrap true 2>err &&
	grep "unknown argument .colour." err
'

test_expect_success IBCRD 'plugstack.conf: bad values are named with what to write' '
	plugstack batch_step=maybe &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: batch_step=maybe: use batch_step=yes or batch_step=no" err &&
	plugstack on_daemon_down=ignore &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: on_daemon_down=ignore: use on_daemon_down=warn" err &&
	plugstack timeout=forever &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: timeout=forever: give a duration" err &&
	echo "required $plugin socket=relative/ibcrd.sock" >plugstack.conf &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: socket=relative/ibcrd.sock: give an absolute path" err &&
	echo "required $plugin socket=/run/%j.sock" >plugstack.conf &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: socket=/run/%j.sock: unknown escape .%j." err &&
	plugstack batch_step=no batch_step=yes &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: batch_step= is given twice; keep one" err &&
	echo "required $plugin socket" >plugstack.conf &&
	test_must_fail srun -N1 true 2>err &&
	grep "^ibcr: plugstack.conf: argument .socket. needs a value" err &&
	plugstack &&
	srun -N1 --checkpoint-ib true
'

# The tasks have ended (and left ibcrd's state with their connection):
# their registration is recorded in the log only.
test_expect_success IBCRD 'each protected task registered with its node ibcrd' '
	grep "registered rank" "$run"/ibcrd/n1/ibcrd.log | head -n 3 &&
	grep -q "step 0: registered rank 0 .* node n1" "$run/ibcrd/n1/ibcrd.log" &&
	grep -q "registered rank 1 .* node n2" "$run/ibcrd/n2/ibcrd.log"
'

test_expect_success IBCRD 'slurm_stop' '
	slurm_stop
'

test_done
