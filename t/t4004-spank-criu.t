#!/bin/sh
test_description='spank: CRIU can checkpoint a task tree the plugin made

A step of an ordinary user started with srun --checkpoint-ib on a real
Slurm cluster with a real ibcrd: the init that ibcrd registered is dumped
by CRIU, run inside the task'"'"'s namespaces as that user with only
CAP_CHECKPOINT_RESTORE, with --leave-running while the application
counts, as a periodic checkpoint does; the image holds the init and the
application, and the application goes on without a gap or a repeat.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU USERS IBCRD

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
IBCRD=$IBCR_BUILDDIR/ibcrd/ibcrd
preload=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so

run=/run/ibcr-sp.$$
ibcrd_pid=

cleanup_all() {
	if ibcr_failed && test -f "$run/ibcrd.log"; then
		cat "$run/ibcrd.log" | ibcr_diag
		test -f img/dump.log && tail -n 40 img/dump.log | ibcr_diag
	fi
	if test -n "$ibcrd_pid"; then
		kill -TERM "$ibcrd_pid" 2>/dev/null
		wait "$ibcrd_pid" 2>/dev/null
	fi
	ibcrd_pid=
	rm -rf "$run"
	return 0
}

# counter.sh counts to $1, one line every 0.1 s: the output proves by
# itself that nothing was lost or replayed.
spank_write_counter

test_expect_success IBCRD 'start a 1-node cluster and its ibcrd' '
	mkdir -p "$run" &&
	ibcr_atexit cleanup_all &&
	cat >"$run/ibcrd.conf" <<-EOF &&
	socket = $run/%n/ibcrd.sock
	storage = $run/%n/storage
	staging = $run/%n/staging
	EOF
	# Braces: only the daemon goes to the background, not the whole
	# &&-list (whose ibcr_atexit would then be lost with its subshell).
	{ "$IBCRD" -F -c "$run/ibcrd.conf" -N n1 \
		</dev/null >"$run/ibcrd.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- & } &&
	ibcrd_pid=$! && ibcr_record_proc $ibcrd_pid "ibcrd n1" &&
	ibcr_wait_for 5 test -S "$run/n1/ibcrd.sock" &&
	echo "required $plugin socket=$run/%n/ibcrd.sock libibcr=$preload init=$IBCR_BUILDDIR/init/ibcr-init" >plugstack.conf &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 1
'

# stdio_externals PID: CRIU's --external for the task's stdio files,
# opened by slurmstepd outside the task's mount namespace.
stdio_externals() {
	for fd in 0 1 2; do
		case "$(stat -L -c %F /proc/$1/fd/$fd)" in
		*"regular"*|"character special file")
			mnt=$(sed -n "s/^mnt_id:[[:space:]]*//p" /proc/$1/fdinfo/$fd)
			ino=$(stat -L -c %i /proc/$1/fd/$fd)
			printf -- "--external file[%x:%x] " "$mnt" "$ino" ;;
		esac
	done
}

test_expect_success IBCRD,USERS 'an ordinary user'"'"'s task is dumped from inside its namespaces, as that user, and runs on' '
	chown "$IBCR_USER1" . &&
	jobid=$(sbatch --parsable --uid="$IBCR_USER1" --gid="$IBCR_USER1" -N1 -o job.out \
		--wrap "srun --checkpoint-ib=30m -o app.out ./counter.sh 60") &&
	spank_wait_lines app.out 5 &&
	init=$(sed -n "s/.*job $jobid step 0: registered rank 0 pid \([0-9]*\) .*/\1/p" "$run/ibcrd.log") &&
	test -n "$init" &&
	test "$(cat /proc/$init/comm)" = ibcr-init &&
	test "$(stat -c %u /proc/$init)" = "$IBCR_UID1" &&
	# Its own PID namespace, pids kept clear of a restore'"'"'s CRIU, and a
	# /proc of its own (what the parasite of an unprivileged dump needs).
	nspid=$(sed -n "s/^NSpid:.*[[:space:]]//p" /proc/$init/status) &&
	test "$nspid" = 101 &&
	nsenter -t "$init" -m -p -- sh -c "readlink /proc/self" >self &&
	test "$(cat self)" -gt 101 &&
	mkdir img && chown "$IBCR_USER1" img &&
	t0=$(date +%s%N) &&
	nsenter -t "$init" -m -p -- setpriv --reuid="$IBCR_USER1" --regid="$IBCR_USER1" \
		--init-groups --inh-caps=+checkpoint_restore,+setpcap \
		--ambient-caps=+checkpoint_restore,+setpcap \
		"$IBCR_CRIU" dump --unprivileged -t "$nspid" -D "$PWD/img" -o dump.log \
		--leave-running $(stdio_externals "$init") &&
	echo "criu dump of the task tree as $IBCR_USER1: $(( ($(date +%s%N) - t0) / 1000000 )) ms, $(du -sk img | cut -f1) KiB" | ibcr_diag &&
	test $(ls img/core-*.img | wc -l) -ge 2 &&
	slurm_wait_job "$jobid" COMPLETED 60 &&
	seq 1 60 >expect &&
	test_cmp expect app.out
'

test_expect_success IBCRD 'slurm_stop' '
	slurm_stop
'

test_done
