#!/bin/sh
test_description='spank: when ibcrd cannot be reached, per on_daemon_down

A job with --checkpoint-ib on a real 2-node Slurm cluster where ibcrd is
missing, its socket is stale, it accepts but never answers, or it runs on
one node only.  With on_daemon_down=warn the task runs untouched and the
job stderr says it is UNPROTECTED and why; with on_daemon_down=fail the
task fails before any user code runs, saying why; nothing hangs beyond the
plugstack timeout.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT SLURM
ibcr_want IBCRD

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
preload=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so

run=$IBCRD_RUN
hung_pid=

cleanup_all() {
	if test -n "$hung_pid"; then
		kill -TERM "$hung_pid" 2>/dev/null
		wait "$hung_pid" 2>/dev/null
	fi
	hung_pid=
	ibcrd_stop_all
}

plugstack() {
	echo "required $plugin socket=$run/ibcrd/%n/ibcrd.sock libibcr=$preload init=$IBCR_BUILDDIR/init/ibcr-init $*" >plugstack.conf
}

# The application leaves a mark, so a test can tell whether it ran, and
# says whether it is in a PID namespace of its own (NSpid has 2 levels).
cat >app.sh <<\EOF
#!/bin/sh
while read -r k v; do
	test "$k" = NSpid: && set -- "$@" $v
done </proc/self/status
# A protected task sees its own namespace's /proc, whose PID 1 is
# ibcr's holder, and its NSpid from there only: count the host level.
test "$(cat /proc/1/comm 2>/dev/null)" = ibcr-holder && set -- host "$@"
echo "$SLURMD_NODENAME levels=$# preload=${LD_PRELOAD-none}"
EOF
chmod +x app.sh

# elapsed CMD...: run CMD, print its wall time in whole seconds on fd 3.
elapsed() {
	el_t0=$(date +%s)
	"$@"
	el_rc=$?
	echo $(( $(date +%s) - el_t0 )) >&3
	return $el_rc
}

test_expect_success 'start a 2-node cluster without ibcrd' '
	mkdir -p "$run/ibcrd/n1" "$run/ibcrd/n2" &&
	ibcr_atexit cleanup_all &&
	plugstack &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 2
'

test_expect_success 'warn (default): the tasks run untouched and say they are UNPROTECTED' '
	srun -N2 --checkpoint-ib=30m ./app.sh >out 2>err &&
	cat err &&
	sort out >out.sorted &&
	printf "n1 levels=1 preload=none\nn2 levels=1 preload=none\n" >expect &&
	test_cmp expect out.sorted &&
	for n in 1 2; do
		grep "^ibcr: job [0-9]* step 0 task [01] on n$n: cannot reach ibcrd at $run/ibcrd/n$n/ibcrd.sock: No such file or directory (is ibcrd running on this node?); running UNPROTECTED: this task will not be checkpointed (on_daemon_down=warn)$" err ||
			return 1
	done
'

test_expect_success 'warn: a batch job completes and its stderr file has the warning' '
	jobid=$(sbatch --parsable -N1 -o b.out -e b.err --checkpoint-ib --wrap "srun ./app.sh") &&
	slurm_wait_job "$jobid" COMPLETED 30 &&
	cat b.err &&
	echo "n1 levels=1 preload=none" >expect &&
	test_cmp expect b.out &&
	grep "^ibcr: job $jobid step 0 task 0 on n1: cannot reach ibcrd .*running UNPROTECTED" b.err
'

test_expect_success 'fail: the task fails before the application runs, saying why' '
	plugstack on_daemon_down=fail &&
	test_must_fail srun -N2 --checkpoint-ib=30m sh -c "touch ran.\$SLURMD_NODENAME" 2>err &&
	cat err &&
	! test -e ran.n1 && ! test -e ran.n2 &&
	grep "^ibcr: job [0-9]* step 0 task 0 on n1: cannot reach ibcrd at $run/ibcrd/n1/ibcrd.sock: No such file or directory (is ibcrd running on this node?); the task is not started (on_daemon_down=fail)$" err &&
	grep "^ibcr: job [0-9]* step 0 task 1 on n2: cannot reach ibcrd" err
'

test_expect_success 'fail: a job without the option is not concerned' '
	srun -N2 ./app.sh | sort >out &&
	printf "n1 levels=1 preload=none\nn2 levels=1 preload=none\n" >expect &&
	test_cmp expect out
'

test_expect_success 'a stale socket (nobody listening) is refused at once' '
	perl -MSocket -e "socket(S, PF_UNIX, SOCK_STREAM, 0) or die; bind(S, pack_sockaddr_un(\$ARGV[0])) or die \"bind: \$!\"" \
		"$run/ibcrd/n1/ibcrd.sock" &&
	test -S "$run/ibcrd/n1/ibcrd.sock" &&
	plugstack &&
	srun -N1 --checkpoint-ib ./app.sh >out 2>err &&
	cat err &&
	echo "n1 levels=1 preload=none" >expect &&
	test_cmp expect out &&
	grep "^ibcr: job [0-9]* step 0 task 0 on n1: cannot reach ibcrd at $run/ibcrd/n1/ibcrd.sock: Connection refused (is ibcrd running on this node?); running UNPROTECTED" err &&
	rm -f "$run/ibcrd/n1/ibcrd.sock"
'

test_expect_success 'a daemon that accepts but never answers costs the timeout, no more' '
	perl -MSocket -e "socket(S, PF_UNIX, SOCK_STREAM, 0) or die; bind(S, pack_sockaddr_un(\$ARGV[0])) or die; listen(S, 16) or die; open(F, \">\", \$ARGV[1]); close(F); sleep 120" \
		"$run/ibcrd/n1/ibcrd.sock" hung.ready </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	hung_pid=$! &&
	ibcr_track $hung_pid &&
	ibcr_wait_for 10 test -e hung.ready &&
	plugstack timeout=1s &&
	elapsed srun -N1 --checkpoint-ib ./app.sh >out 2>err 3>secs &&
	cat err &&
	echo "srun took $(cat secs) s" &&
	test $(cat secs) -lt 8 &&
	echo "n1 levels=1 preload=none" >expect &&
	test_cmp expect out &&
	grep "^ibcr: job [0-9]* step 0 task 0 on n1: ibcrd at $run/ibcrd/n1/ibcrd.sock: no answer to the ping request: timed out; running UNPROTECTED" err &&
	plugstack timeout=1s on_daemon_down=fail &&
	test_must_fail elapsed srun -N1 --checkpoint-ib ./app.sh >out 2>err 3>secs &&
	cat err &&
	echo "srun took $(cat secs) s" &&
	test $(cat secs) -lt 8 &&
	test_must_be_empty out &&
	grep "no answer to the ping request: timed out; the task is not started (on_daemon_down=fail)" err &&
	kill $hung_pid && wait $hung_pid; hung_pid= &&
	rm -f "$run/ibcrd/n1/ibcrd.sock"
'

test_expect_success 'a daemon that hangs up without answering is named as such' '
	perl -MSocket -e "socket(S, PF_UNIX, SOCK_STREAM, 0) or die; bind(S, pack_sockaddr_un(\$ARGV[0])) or die; listen(S, 16) or die; open(F, \">\", \$ARGV[1]); close(F); alarm 120; while (accept(C, S)) { close(C) }" \
		"$run/ibcrd/n1/ibcrd.sock" hup.ready </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	hung_pid=$! &&
	ibcr_track $hung_pid &&
	ibcr_wait_for 10 test -e hup.ready &&
	plugstack &&
	srun -N1 --checkpoint-ib ./app.sh >out 2>err &&
	cat err &&
	echo "n1 levels=1 preload=none" >expect &&
	test_cmp expect out &&
	grep "^ibcr: job [0-9]* step 0 task 0 on n1: ibcrd at $run/ibcrd/n1/ibcrd.sock: no answer to the ping request: ibcrd closed the connection (see its log); running UNPROTECTED" err &&
	kill $hung_pid && wait $hung_pid; hung_pid= &&
	rm -f "$run/ibcrd/n1/ibcrd.sock"
'

test_expect_success IBCRD 'ibcrd on n1 only: n1 is protected, n2 warns' '
	ibcrd_start_node n1 &&
	plugstack &&
	srun -N2 --checkpoint-ib=30m ./app.sh >out 2>err &&
	cat err &&
	sort out >out.sorted &&
	printf "n1 levels=2 preload=$preload\nn2 levels=1 preload=none\n" >expect &&
	test_cmp expect out.sorted &&
	grep "^ibcr: job [0-9]* step 0 task 1 on n2: cannot reach ibcrd at $run/ibcrd/n2/ibcrd.sock" err &&
	! grep "on n1" err &&
	# (the task has ended: its registration is recorded in the log only)
	grep "registered rank 0 .* node n1" "$run/ibcrd/n1/ibcrd.log"
'

test_expect_success IBCRD 'a missing libibcr is reported like a missing daemon' '
	echo "required $plugin socket=$run/ibcrd/%n/ibcrd.sock libibcr=/nonexistent/libibcr.so init=$IBCR_BUILDDIR/init/ibcr-init" >plugstack.conf &&
	srun -N1 --checkpoint-ib ./app.sh >out 2>err &&
	cat err &&
	echo "n1 levels=1 preload=none" >expect &&
	test_cmp expect out &&
	grep "^ibcr: job [0-9]* step 0 task 0 on n1: the checkpoint library /nonexistent/libibcr.so does not exist (plugstack.conf libibcr=); running UNPROTECTED" err
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
