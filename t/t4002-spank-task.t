#!/bin/sh
test_description='spank: a protected task runs under its own PID-namespace init

srun --checkpoint-ib on a real 2-node Slurm cluster (proctrack/cgroup,
task/cgroup) with a real ibcrd per node, jobs of an ordinary user.  The
application sees itself as PID 102 of its own PID namespace and /proc,
under a setsid ibcr-init (PID 101) under the holder (PID 1), below the
task process Slurm knows; all four stay in the step cgroups;
scancel and its signals reach the application exactly once; exit codes and
deaths by signal are what Slurm reports without ibcr; a job without the
option is not touched at all.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT SLURM OTHERS USERS IBCRD

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
preload=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so

run=$IBCRD_RUN

# The probe is the application: it describes itself, its parent and its
# grandparent with shell builtins (so /proc/self is the shell itself).  A
# protected task sees its own namespace's /proc, so these are the pids
# inside; the tests read the host's side (the task process, cgroups) from
# outside while the probe waits for ./go (when given "wait").
cat >probe.sh <<\EOF
#!/bin/sh
# No command substitution before the facts are read: a subshell would
# be another process.
load() { # FILE VAR: set VAR_ppid, VAR_nspid, VAR_name from a status file
	while read -r k v; do
		case $k in
		PPid:) eval "$2_ppid=\$v" ;;
		NSpid:) eval "$2_nspid=\"\$v\"" ;;
		Name:) eval "$2_name=\$v" ;;
		Uid:) set -- "$1" "$2" $v; eval "$2_uid=\$3" ;;
		esac
	done <"$1"
}
load_sid() { # FILE VAR: set VAR_sid from a stat file
	read -r a b c d e s rest <"$1"
	eval "$2_sid=\$s"
}
load /proc/self/status app
load_sid /proc/self/stat app
load /proc/$app_ppid/status parent
load_sid /proc/$app_ppid/stat parent
load /proc/$parent_ppid/status gp
echo "app_nspid=$app_nspid"
echo "app_sid=$app_sid"
echo "parent=$app_ppid"
echo "parent_name=$parent_name"
echo "parent_nspid=$parent_nspid"
echo "parent_sid=$parent_sid"
echo "grandparent=$parent_ppid"
echo "grandparent_name=$gp_name"
echo "grandparent_ppid=$gp_ppid"
echo "uids=$app_uid $parent_uid $gp_uid"
echo "task_pid=$SLURM_TASK_PID"
echo "pidns=$(readlink /proc/self/ns/pid)"
echo "parent_pidns=$(readlink /proc/$app_ppid/ns/pid)"
echo "preload=${LD_PRELOAD-none} socket=${IBCR_SOCKET-none}"
echo "end=1"
if test "$1" = wait; then
	n=0
	while ! test -e go; do
		n=$((n + 1)); test $n -lt 1200 || { echo "probe: no ./go after 120 s" >&2; exit 3; }
		sleep 0.1
	done
fi
EOF
chmod +x probe.sh

# get KEY FILE: the value of KEY=value in a probe output
get() {
	sed -n "s/^$1=//p" "$2"
}

# host_field PID FIELD: a field of the host's /proc/PID/status
host_field() {
	sed -n "s/^$2:[[:space:]]*//p" /proc/$1/status
}

test_expect_success IBCRD 'start a 2-node cluster and one ibcrd per node' '
	mkdir -p "$run" &&
	ibcr_atexit ibcrd_stop_all &&
	echo "required $plugin socket=$run/ibcrd/%n/ibcrd.sock libibcr=$preload init=$IBCR_BUILDDIR/init/ibcr-init" >plugstack.conf &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 2 &&
	ibcrd_start_node n1 &&
	ibcrd_start_node n2
'

test_expect_success IBCRD 'the application is PID 102 of its own PID namespace, with a /proc of its own' '
	rm -f go &&
	srun -N1 --checkpoint-ib=30m ./probe.sh wait >p.out &
	probe=$! &&
	ibcr_wait_for 30 grep -q "^end=1" p.out &&
	cat p.out &&
	test "$(get app_nspid p.out)" = 102 &&
	test "$(get pidns p.out)" != "$(readlink /proc/self/ns/pid)"
'

test_expect_success IBCRD 'its parent is PID 101 there, a session leader named ibcr-init, under PID 1 ibcr-holder' '
	test "$(get parent_name p.out)" = ibcr-init &&
	test "$(get parent_nspid p.out)" = 101 &&
	test "$(get parent_sid p.out)" = 101 &&
	test "$(get app_sid p.out)" = 101 &&
	test "$(get parent_pidns p.out)" = "$(get pidns p.out)" &&
	test "$(get grandparent p.out)" = 1 &&
	test "$(get grandparent_name p.out)" = ibcr-holder &&
	# Its parent is outside the namespace.
	test "$(get grandparent_ppid p.out)" = 0
'

# task_pid: the pid of the one task n1's ibcrd has registered (its
# status: the daemon's own "pid" comes before the tasks).
task_pid() {
	ibcrd_node_status n1 | sed "s/.*\"tasks\":\[//" | grep -o "\"pid\":[0-9]*" | head -n 1 |
		cut -d: -f2
}

test_expect_success IBCRD 'from the host: init, holder, then the task process Slurm knows, a child of slurmstepd' '
	init=$(task_pid) && test -n "$init" &&
	test "$(host_field $init Name)" = ibcr-init &&
	test "$(host_field $init NSpid | awk "{print \$NF}")" = 101 &&
	holder=$(host_field $init PPid) &&
	test "$(host_field $holder Name)" = ibcr-holder &&
	task=$(host_field $holder PPid) &&
	test "$task" = "$(get task_pid p.out)" &&
	test "$(host_field $task Name)" = ibcr-task &&
	test "$(host_field $(host_field $task PPid) Name)" = slurmstepd
'

test_expect_success IBCRD 'task, holder, init and application stay in the step cgroup, as the job'"'"'s user' '
	app=$(cut -d" " -f1 /proc/$init/task/$init/children) &&
	grep ":freezer:$IBCR_CGROUP_PREFIX/slurm_n1/uid_$IBCR_JOB_UID/job_[0-9]*/step_0" /proc/$app/cgroup &&
	for p in $init $holder $task; do
		test_cmp /proc/$app/cgroup /proc/$p/cgroup || return 1
		test "$(host_field $p Uid)" = "$(host_field $app Uid)" || return 1
	done &&
	test "$(host_field $app Uid | cut -f1)" = $IBCR_JOB_UID
'

test_expect_success IBCRD 'ibcrd registered the init pid of the task, for the job'"'"'s user' '
	ibcrd_node_status n1 >st.json &&
	grep "\"jobs\":\[{\"job\":\"[0-9]*\",\"uid\":$IBCR_JOB_UID," st.json &&
	ibcrd_node_has_rank n1 "" 0 $init
'

test_expect_success IBCRD 'the probe ends when told' '
	touch go &&
	wait $probe
'

test_expect_success IBCRD 'a job without the option is not touched: no namespace, no preload' '
	srun -N1 ./probe.sh >n.out &&
	cat n.out &&
	test $(get app_nspid n.out | wc -w) -eq 1 &&
	test "$(get pidns n.out)" = "$(readlink /proc/self/ns/pid)" &&
	test "$(get app_nspid n.out)" = "$(get task_pid n.out)" &&
	test "$(get parent_name n.out)" = slurmstepd &&
	test "$(get preload n.out)" = "none socket=none" &&
	# (that job has ended: that it never registered is in the log only)
	test $(grep -c "registered rank" "$run/ibcrd/n1/ibcrd.log") -eq 1
'

test_expect_success IBCRD 'exit codes reach srun as without ibcr' '
	for code in 0 1 7 42; do
		srun -N1 sh -c "exit $code"
		plain=$?
		srun -N1 --checkpoint-ib sh -c "exit $code"
		ours=$?
		echo "exit $code: plain $plain, ibcr $ours"
		test $plain = $code && test $ours = $code || return 1
	done
'

test_expect_success IBCRD 'a death by signal reaches srun as without ibcr' '
	for sig in USR1 TERM INT; do
		# one node for both: srun names it in its message
		srun -N1 -w n1 sh -c "kill -$sig \$\$" 2>plain.err
		plain=$?
		srun -N1 -w n1 --checkpoint-ib sh -c "kill -$sig \$\$" 2>ours.err
		ours=$?
		echo "SIG$sig: plain $plain, ibcr $ours"
		# srun adds "Force Terminated StepId=..." for SIGTERM or not,
		# depending on timing alone: compare what it says of the task.
		grep "task 0" plain.err >plain.msg
		grep "task 0" ours.err >ours.msg
		cat plain.err ours.err &&
		test -s ours.msg &&
		test $plain = $ours && test $ours != 0 &&
		test_cmp plain.msg ours.msg || {
			{ echo "SIG$sig: plain $plain, ibcr $ours"
			  echo "--- plain:"; cat plain.err
			  echo "--- ibcr:"; cat ours.err; } | ibcr_diag
			return 1
		}
	done
'

test_expect_success IBCRD 'another ordinary user (nobody): holder, init and application are that user' '
	mkdir -m 0777 u && cp probe.sh u/ &&
	jobid=$(sbatch --parsable --uid=nobody --gid=nogroup -N1 -D "$(pwd)/u" \
		-o "$(pwd)/u/job.out" --wrap "srun -N1 --checkpoint-ib=2h ./probe.sh") &&
	slurm_wait_job "$jobid" COMPLETED 30 &&
	cat u/job.out &&
	test "$(get app_nspid u/job.out)" = 102 &&
	test "$(get parent_name u/job.out)" = ibcr-init &&
	test "$(get grandparent_name u/job.out)" = ibcr-holder &&
	test "$(get uids u/job.out)" = "65534 65534 65534" &&
	grep "job $jobid step 0: registered rank 0 pid [0-9]* uid 65534" \
		"$run/ibcrd/n1/ibcrd.log"
'

test_expect_success IBCRD 'two tasks on one node: one namespace each, both complete' '
	srun -N1 -n2 --checkpoint-ib ./probe.sh >two.out &&
	test $(grep -c "^parent_name=ibcr-init$" two.out) -eq 2 &&
	test $(get pidns two.out | sort -u | wc -l) -eq 2 &&
	for v in $(get app_nspid two.out); do
		test "$v" = 102 || return 1
	done
'

test_expect_success IBCRD 'stdin and stdout pass through the shim intact (4 MiB, checksummed)' '
	head -c 4194304 /dev/urandom >data.in &&
	srun -N1 --checkpoint-ib sha256sum <data.in >sum.remote &&
	sha256sum <data.in >sum.local &&
	test_cmp sum.local sum.remote &&
	srun -N1 --checkpoint-ib cat data.in >data.out &&
	cmp data.in data.out
'

# ms_of CMD...: run CMD 5 times, print the median wall time in ms.
ms_of() {
	for i in 1 2 3 4 5; do
		t0=$(date +%s%N) &&
		"$@" >/dev/null &&
		echo $(( ($(date +%s%N) - t0) / 1000000 )) || return 1
	done | sort -n | sed -n 3p
}

test_expect_success IBCRD 'the shim adds little to a task start (median of 5)' '
	plain=$(ms_of srun -N1 true) &&
	ours=$(ms_of srun -N1 --checkpoint-ib true) &&
	echo "srun -N1 true: $plain ms plain, $ours ms with --checkpoint-ib" | ibcr_diag &&
	test $ours -lt $((plain + 1000))
'

cat >sigapp.sh <<\EOF
#!/bin/sh
# Count the USR1s we get; on TERM say so and exit 3.
n=0
trap 'n=$((n + 1)); echo "usr1 $n" >>"$1.log"' USR1
trap 'echo term >>"$1.log"; exit 3' TERM
touch "$1.ready"
i=0
while ! test -e "$1.stop"; do
	i=$((i + 1)); test $i -lt 1200 || { echo "sigapp: no $1.stop after 120 s" >>"$1.log"; exit 4; }
	sleep 0.1 &
	wait $!
done
echo "done $n" >>"$1.log"
EOF
chmod +x sigapp.sh

# t2_cluster_empty: no process is left in this cluster's cgroups.
t2_cluster_empty() {
	! grep -l -e ":$IBCR_CGROUP_PREFIX/" /proc/[0-9]*/cgroup 2>/dev/null
}

test_expect_success IBCRD 'scancel -s USR1 reaches the application exactly once' '
	jobid=$(sbatch --parsable -N1 -o s1.out --wrap "srun -N1 --checkpoint-ib ./sigapp.sh s1") &&
	ibcr_wait_for 30 test -e s1.ready &&
	scancel -s USR1 "$jobid" &&
	ibcr_wait_for 10 grep -qx "usr1 1" s1.log &&
	scancel -s USR1 "$jobid" &&
	ibcr_wait_for 10 grep -qx "usr1 2" s1.log &&
	touch s1.stop &&
	slurm_wait_job "$jobid" COMPLETED 30 &&
	cat s1.log &&
	printf "usr1 1\nusr1 2\ndone 2\n" >expect &&
	test_cmp expect s1.log
'

test_expect_success IBCRD 'scancel ends the job: the application gets SIGTERM, nothing is left' '
	jobid=$(sbatch --parsable -N1 -w n1 -o s2.out --wrap "srun -N1 --checkpoint-ib ./sigapp.sh s2") &&
	ibcr_wait_for 30 test -e s2.ready &&
	scancel "$jobid" &&
	slurm_wait_job "$jobid" CANCELLED 30 &&
	ibcr_wait_for 5 test -e s2.log &&
	cat s2.log &&
	echo term >expect &&
	test_cmp expect s2.log &&
	# on_cancel = nothing (the default): the SIGTERM was held while
	# ibcrd asked Slurm why, then let through without a checkpoint
	# (held, then let through: a sequence the log alone records)
	log="$run/ibcrd/n1/ibcrd.log" &&
	grep "job $jobid rank 0: SIGTERM held" "$log" &&
	grep "job $jobid rank 0: SIGTERM goes to the task" "$log" &&
	! ls "$run"/ibcrd/n1/storage/local/$jobid/gen-* &&
	# Only processes of this cluster: other tests may run at the same time.
	ibcr_wait_for 10 t2_cluster_empty
'

test_expect_success IBCRD 'slurm_stop' '
	slurm_stop
'

test_done
