#!/bin/sh
test_description='harness: a SPANK plugin from the build tree, via plugstack.conf

t/spank/harness_spank.so registers --harness-test=VALUE; the harness points
its private cluster at a plugstack.conf naming the built plugin, and the
option shows in sbatch --help and reaches the job tasks environment.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT SLURM

plugin=$IBCR_BUILDDIR/t/spank/.libs/harness_spank.so

test_expect_success 'the test plugin is built' '
	test -f "$plugin" || {
		echo "missing $plugin: run make -C t spank/harness_spank.la" >&2
		false
	}
'

test_expect_success 'slurm_start with SLURM_PLUGSTACK loads it' '
	echo "required $plugin tag=h$$" >plugstack.conf &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 2 &&
	test "$(readlink "$IBCR_SLURM_DIR/etc/plugstack.conf")" = "$(pwd)/plugstack.conf"
'

test_expect_success 'sbatch --help lists the plugin option' '
	sbatch --help >help &&
	grep -- "--harness-test=VALUE" help &&
	grep "pass VALUE to the job" help
'

test_expect_success 'srun --harness-test value and the plugstack argument reach every task' '
	srun -N2 --harness-test=v$$ sh -c \
		"echo \$SLURMD_NODENAME \$IBCR_HARNESS_TEST \$IBCR_HARNESS_TAG" |
		sort >env.out &&
	printf "n1 v$$ h$$\nn2 v$$ h$$\n" >expect &&
	test_cmp expect env.out
'

test_expect_success 'an sbatch --harness-test value reaches the batch step and its sruns' '
	jobid=$(sbatch --parsable -N2 --harness-test=b$$ -o job.out --wrap \
		"echo batch \$IBCR_HARNESS_TEST; srun -N2 sh -c \"echo step \\\$IBCR_HARNESS_TEST\"") &&
	slurm_wait_job "$jobid" COMPLETED 30 &&
	printf "batch b$$\nstep b$$\nstep b$$\n" >expect &&
	test_cmp expect job.out
'

test_expect_success 'without the option the tasks get no value' '
	srun -N1 sh -c "echo \${IBCR_HARNESS_TEST-unset}" >none.out &&
	echo unset >expect &&
	test_cmp expect none.out
'

test_expect_success 'a plugstack.conf edit reaches the next step; a bad argument is named' '
	echo "required $plugin tag=h$$ bogus=1" >plugstack.conf &&
	test_must_fail srun -N1 true 2>err &&
	cat err &&
	grep "unknown or too long plugstack.conf argument .bogus=1." err &&
	echo "required $plugin tag=h$$" >plugstack.conf &&
	srun -N1 true
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
