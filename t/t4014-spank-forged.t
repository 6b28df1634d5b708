#!/bin/sh
test_description='spank: a forged image never restores as more than its user

An image is the job user'"'"'s data: CRIU'"'"'s parasite runs inside the user'"'"'s
process while it is dumped, so whatever the image says is what the user
could have made it say.  ibcr restores it with CRIU running as the job'"'"'s
user (CAP_CHECKPOINT_RESTORE only) inside the task'"'"'s namespaces, and
checks the restored tree before it runs.  Each case here commits a real
generation of a job of ibcr-user1, alters it the way a hostile job could
(t/criu/forge.py, checksums recomputed), requeues the job and requires
that nothing of it runs with more than ibcr-user1 has: uid 0 in the
credentials, a capability, an fd on a file only root may read.  Each is
refused with a clear message and the job fails; a clean generation of the
same job restores.  The file rollback before a restore (a file the image
holds open for writing is cut back to its size at the dump, by a child
running as the job'"'"'s user) is pointed at a file of ibcr-user2, directly,
through a symbolic link and through a linked folder: each is refused,
naming the file, and ibcr-user2'"'"'s file keeps every byte.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU USERS PYCRIU

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
preload=$plugin
FORGE=$SHARNESS_TEST_SRCDIR/criu/forge.py

spank_write_counter


# run_job: a counting job of ibcr-user1, checkpointed once; prints its id.
run_job() {
	rm -f app.out app.err &&
	rj=$(sbatch --parsable -N1 -o job.out job.sh) &&
	spank_wait_lines app.out 10 &&
	spank_checkpoint $rj >/dev/null &&
	echo $rj
}


# refused JOB WHAT: the requeued JOB failed, its task saying WHAT, and no
# line was counted after the requeue.
refused() {
	slurm_wait_job "$1" FAILED 60 &&
	cat app.err | ibcr_diag &&
	grep "ibcr: job $1 step 0 task 0 on n1: cannot restore generation 1: .*$2" app.err &&
	! test -s app.out
}

as_user1() {
	setpriv --reuid="$IBCR_USER1" --regid="$IBCR_USER1" --clear-groups "$@"
}

test_expect_success 'start a 1-node cluster and its ibcrd' '
	ibcr_atexit ibcrd_stop_all &&
	ibcrd_start_node n1 &&
	spank_plugstack "$plugin" "$preload" &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 1 &&
	chown "$IBCR_USER1" . &&
	cat >job.sh <<-\EOF &&
	#!/bin/sh
	srun -n 1 --checkpoint-ib -o app.out -e app.err ./fcounter.sh 100
	EOF
	chmod +x job.sh &&
	# A name of its own: other tests may run counter.sh at the same time.
	cp counter.sh fcounter.sh &&
	# A file only root may read, for the forged fd.
	echo "root only" >secret && chmod 0600 secret &&
	# A job that appends to a file it holds open (rolled back at restore).
	cat >flog.sh <<-\EOF &&
	#!/bin/sh
	exec 3>>"$1"
	i=0
	while test $i -lt 100; do
		i=$((i + 1)); echo $i; echo "line $i" >&3; sleep 0.1
	done
	EOF
	chmod +x flog.sh &&
	cat >logjob.sh <<-\EOF &&
	#!/bin/sh
	srun -n 1 --checkpoint-ib -o app.out -e app.err ./flog.sh "$PWD/flog.log"
	EOF
	chmod +x logjob.sh &&
	# ibcr-user2'"'"'s file, readable by all, writable by ibcr-user2 only, in a
	# folder of theirs; a link to it and a link to the folder, ibcr-user1'"'"'s.
	mkdir u2 && seq 1 2000 >u2/victim && cp u2/victim victim.orig &&
	chown -R "$IBCR_USER2" u2 && chmod 0755 u2 && chmod 0644 u2/victim &&
	mkdir u1 && chown "$IBCR_USER1" u1 &&
	as_user1 ln -s "$PWD/u2/victim" u1/victim-link &&
	as_user1 ln -s "$PWD/u2" u1/dir-link
'

gen1() {
	echo "$IBCRD_RUN/ibcrd/n1/storage/local/$1/gen-1"
}

# run_logjob: a job of ibcr-user1 appending to flog.log, checkpointed
# once after 10 lines; prints its id.
run_logjob() {
	rm -f app.out app.err flog.log &&
	rj=$(sbatch --parsable -N1 -o job.out logjob.sh) &&
	spank_wait_lines app.out 10 &&
	spank_checkpoint $rj >/dev/null &&
	echo $rj
}

# rollback_refused PATH WHY: a generation whose appended file is forged to
# PATH, 0 bytes long at the dump, is refused naming PATH (WHY: the
# system'"'"'s reason), and ibcr-user2'"'"'s file (whole again first) is whole.
# (A rollback run as root cuts it through PATH: tried by hand.)
rollback_refused() {
	cat victim.orig >u2/victim &&
	job=$(run_logjob) &&
	grep -q "flog.log" "$(gen1 $job)/task-0/ibcr-files.json" &&
	/usr/bin/python3 "$FORGE" "$(gen1 $job)" task-0 record flog.log "$1" 0 &&
	spank_requeue $job &&
	refused $job "$1, open for writing in the image, is not the task.s user.s to write ($2)" &&
	test_cmp victim.orig u2/victim &&
	! pgrep -f flog.sh
}

test_expect_success 'the job'"'"'s user cannot alter a committed generation' '
	job=$(run_job) &&
	g=$(gen1 $job) &&
	test "$(stat -c %U "$g/task-0")" = root &&
	! setpriv --reuid="$IBCR_USER1" --regid="$IBCR_USER1" --clear-groups \
		sh -c "echo x >>\"$g/manifest.json\"" 2>/dev/null &&
	scancel $job && slurm_wait_job $job CANCELLED 30
'

test_expect_success 'credentials forged to uid 0: CRIU, running as the user, cannot take them' '
	job=$(run_job) &&
	/usr/bin/python3 "$FORGE" "$(gen1 $job)" task-0 creds &&
	spank_requeue $job &&
	refused $job "criu restore of .* failed: Unable to set real, effective and saved user ID" &&
	! pgrep -u 0 -f fcounter.sh
'

test_expect_success 'a forged capability: the restored tree is refused before it runs' '
	job=$(run_job) &&
	/usr/bin/python3 "$FORGE" "$(gen1 $job)" task-0 caps &&
	spank_requeue $job &&
	refused $job "generation refused: restored process [0-9]* (thread [0-9]*) has capabilities" &&
	! pgrep -f fcounter.sh
'

test_expect_success 'an fd forged onto a root-only file: CRIU, as the user, cannot open it' '
	job=$(run_job) &&
	/usr/bin/python3 "$FORGE" "$(gen1 $job)" task-0 file fcounter.sh "$PWD/secret" &&
	spank_requeue $job &&
	refused $job "criu restore of .* failed: Can.t open file .*/secret on restore: Permission denied" &&
	! pgrep -f fcounter.sh
'

test_expect_success 'a rollback forged onto ibcr-user2'"'"'s file: refused, naming it; the file is whole' '
	rollback_refused "$PWD/u2/victim" "Permission denied"
'

test_expect_success 'the same through a symbolic link to the file' '
	rollback_refused "$PWD/u1/victim-link" "Too many levels of symbolic links"
'

test_expect_success 'the same through a link to ibcr-user2'"'"'s folder' '
	rollback_refused "$PWD/u1/dir-link/victim" "Permission denied"
'

test_expect_success 'the appending job, not forged: its file is cut back to the dump and goes on' '
	job=$(run_logjob) &&
	spank_wait_lines flog.log 20 &&
	spank_requeue $job &&
	slurm_wait_job $job COMPLETED 60 &&
	grep "flog.log from [0-9]* to [0-9]* bytes" app.err &&
	seq 1 100 | sed "s/^/line /" >flog.want &&
	test_cmp flog.want flog.log
'

test_expect_success 'the same job, not forged: restored as its user, with no capability' '
	job=$(run_job) &&
	spank_requeue $job &&
	spank_wait_lines app.out 5 &&
	test "$(head -n 1 app.out)" -gt 10 &&
	app=$(pgrep -u "$IBCR_UID1" -f fcounter.sh | head -n 1) &&
	test -n "$app" &&
	grep "^Uid:[[:space:]]*$IBCR_UID1[[:space:]]*$IBCR_UID1[[:space:]]*$IBCR_UID1[[:space:]]*$IBCR_UID1$" /proc/$app/status &&
	grep "^CapEff:[[:space:]]*0000000000000000$" /proc/$app/status &&
	grep "^CapPrm:[[:space:]]*0000000000000000$" /proc/$app/status &&
	slurm_wait_job $job COMPLETED 60
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
