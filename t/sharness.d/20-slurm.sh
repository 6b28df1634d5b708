# 20-slurm.sh - a private, real Slurm cluster for one test.
#
# Starts munged, slurmctld and N slurmd (nodes n1..nN) with every config,
# key, socket, pid, log and state file under the test's trash directory,
# and stops exactly the processes it started.  Two tests can run at the
# same time: ports are picked free, names and cgroups carry the test's PID.
#
# API:
#   slurm_start N [--netns] [--devns]
#       N = 1..6 nodes.  Default: every slurmd on 127.0.0.1 with its own
#       Port (Debian's slurmd is built with multiple-slurmd).  --netns: node
#       I's slurmd runs in network namespace I of 10-netns.sh (made if not
#       yet) with NodeAddr=NodeHostname=netns_ip I, in its own UTS namespace
#       whose hostname is the node name; slurmctld listens on the bridge.
#       --devns: every slurmd (and so its jobs) runs under softib-devns, in
#       a private mount namespace with /dev/infiniband/uverbs0, so UCX
#       lists softib (needs the SOFTIBDEV prerequisite).  Each node has its
#       own TmpFS ($IBCR_SLURM_DIR/tmp/nI): Slurm's PMIx plugin makes
#       per-step folders there whose names would collide in a shared /tmp.
#       Returns when all nodes are idle; on failure prints the logs.
#       Exports SLURM_CONF (so srun/sbatch/squeue/scontrol just work),
#       IBCR_SLURM_DIR (state folder, path without spaces), MUNGE_SOCKET
#       and IBCR_MUNGE_SOCKET (munged's socket; slurm.conf's AuthInfo
#       names it too), IBCR_CGROUP_PREFIX (cgroup path, relative to each
#       v1 controller's root, under which slurm_nX/uid_U/job_J lives).
#     Read before start:
#       SLURM_CONF_EXTRA      lines appended to slurm.conf (e.g. more
#                             partitions, PreemptType=..., JobRequeue=1)
#       SLURM_PARTITION_OPTS  appended to the default partition's line
#                             (PartitionName=debug Nodes=ALL Default=YES)
#       SLURM_PLUGSTACK       a plugstack.conf file to use (else an empty
#                             one, never the system's); linked, not copied,
#                             so edits after start reach the next step
#       SLURM_NODE_CORES      cores per node (default 2)
#       SLURM_DEBUG           SlurmctldDebug/SlurmdDebug level (info)
#   slurm_stop
#       Cancels what still runs, `scontrol shutdown`, then kills (TERM,
#       then KILL) only pids it started and processes left in its own
#       cgroups, munged last; removes its cgroup folders, mounts and
#       links.  Prints the daemons' logs first if the test has failed.
#       Idempotent; registered with ibcr_atexit by slurm_start.
#   slurm_pids            the pids slurm_start started (munged, slurmctld,
#                         slurmd...), for "nothing left behind" checks
#   slurm_cgroup_dirs     the cgroup folders this cluster owns (existing)
#   slurm_logs            print every daemon log, with headers
#   slurm_wait_job JOBID STATE [TIMEOUT]
#                         poll until the job's JobState is STATE (e.g.
#                         RUNNING, COMPLETED); fails at once if the job ends
#                         in another state, or after TIMEOUT s (default 60)
#   slurm_start_now JOBID
#                         let the pending (requeued) job start at once:
#                         scontrol update StartTime=now, once the clock is
#                         in a later second than when this was called.
#                         Call it after the job was seen PENDING (its last
#                         run's end, or the requeue that ended it, is then
#                         done): see below.
#   slurm_node_addr I     the address of node nI
#   srun ...              as the job user (below), and bounded: stopped
#                         after IBCR_SRUN_TIMEOUT s (600), saying so
#
# Jobs run as an ordinary user, as on a real cluster: IBCR_JOB_USER
# (default $IBCR_USER1 of 00-prereqs.sh when it exists; a test about
# root's own jobs sets it empty after sourcing sharness) is given the
# trash directory by slurm_start; the sbatch the test calls itself takes
# --uid/--gid of that user, and its srun runs as that user.  IBCR_JOB_UID
# is its uid (0 when empty), as in Slurm's cgroup folders uid_U.
#
# Why the cgroup detour: Slurm's cgroup/v1 plugin names its folder
# slurm_<node> at each controller's root and job folders uid_U/job_J, and
# `slurmctld -c` restarts job ids at 1, so two concurrent test clusters
# would share /sys/fs/cgroup/freezer/slurm_n1/uid_0/job_1 and kill each
# other's tasks.  Each cluster therefore gets a sub-cgroup ibcr_<PID> of
# every controller, bind-mounted at a private CgroupMountpoint; the kernel
# still shows true paths in /proc/PID/cgroup.
#
# Outside the trash directory it makes only /run/ibcr.<PID>/: a link
# "slurm" to the state folder and the cgroup bind mounts; slurm_stop
# removes them.  With --netns every process of a node (slurmd, slurmstepd,
# tasks) shares that node's network and UTS namespaces, so `hostname`
# prints the node name there; anything that dumps those tasks (CRIU) sees
# namespaces other than its own unless it runs inside them (netns_exec).
#
# Requires ROOT and SLURM (and NETNS for --netns).

ibcr_slurm_tag=
ibcr_slurm_pids=
ibcr_slurm_cgs="freezer cpuset memory devices cpuacct"

slurm_pids() {
	echo $ibcr_slurm_pids
}

slurm_node_addr() {
	if test "$ibcr_slurm_netns" = 1; then
		netns_ip "$1"
	else
		echo 127.0.0.1
	fi
}

# ibcr_slurm_free_ports_ COUNT: print COUNT distinct TCP ports nobody
# uses, from a random start so concurrent tests rarely race, in
# 10000-31999: below the kernel's ephemeral range (32768-60999) so no
# outgoing connection takes one between this check and the daemon's
# bind.  Each port of the range is tried once at most.
ibcr_slurm_free_ports_() {
	ibcr_fp_want=$1
	ibcr_fp_busy=" $(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); printf "%s ", a[n] }')"
	ibcr_fp_p=$(( $(od -An -N2 -tu2 /dev/urandom) % 22000 ))
	ibcr_fp_got=0
	ibcr_fp_tried=0
	while test $ibcr_fp_got -lt "$ibcr_fp_want"; do
		if test $ibcr_fp_tried -ge 22000; then
			echo "slurm_start: fewer than $ibcr_fp_want free TCP ports in 10000-31999" >&2
			return 1
		fi
		case "$ibcr_fp_busy" in
		*" $((10000 + ibcr_fp_p)) "*) ;;
		*)
			echo $((10000 + ibcr_fp_p))
			ibcr_fp_got=$((ibcr_fp_got + 1)) ;;
		esac
		ibcr_fp_p=$(( (ibcr_fp_p + 1) % 22000 ))
		ibcr_fp_tried=$((ibcr_fp_tried + 1))
	done
}

# ibcr_slurm_bg_ NAME CMD...: start a daemon in the background with its
# output in log/NAME.out, no inherited test fds (a daemon holding sharness's
# TAP pipe would make the test driver wait for it), and remember its pid.
ibcr_slurm_bg_() {
	ibcr_bg_name=$1
	shift
	"$@" </dev/null >"$IBCR_SLURM_DIR/log/$ibcr_bg_name.out" 2>&1 \
		3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	ibcr_slurm_pids="$ibcr_slurm_pids $!"
	eval "ibcr_slurm_pid_$ibcr_bg_name=$!"
	ibcr_record_proc $! "$ibcr_bg_name"
}

# ibcr_pid_alive_ PID: true while PID exists and is not a zombie
# (kill -0 succeeds on zombies, which PID 1 here reaps late).
ibcr_pid_alive_() {
	ibcr_st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)
	test -n "$ibcr_st" && test "$ibcr_st" != Z && test "$ibcr_st" != X
}

# slurm_pids_gone PID...: none of them runs any more.
slurm_pids_gone() {
	for ibcr_wg_p in "$@"; do
		ibcr_pid_alive_ "$ibcr_wg_p" && return 1
	done
	return 0
}

# ibcr_wait_gone_ SECONDS PID...: until all have exited; false after
# SECONDS, saying so (ibcr_wait_for).
ibcr_wait_gone_() {
	ibcr_wg_s=$1
	shift
	ibcr_wait_for "$ibcr_wg_s" slurm_pids_gone "$@"
}

ibcr_slurm_cg_setup_() {
	for ibcr_cg in $ibcr_slurm_cgs; do
		ibcr_root=/sys/fs/cgroup/$ibcr_cg
		test -e "$ibcr_root/tasks" || continue
		mkdir -p "$ibcr_root$IBCR_CGROUP_PREFIX" || return 1
		if test "$ibcr_cg" = cpuset; then
			# A new v1 cpuset has no cpus or mems; nothing could join it.
			cat "$ibcr_root/cpuset.cpus" >"$ibcr_root$IBCR_CGROUP_PREFIX/cpuset.cpus" &&
			cat "$ibcr_root/cpuset.mems" >"$ibcr_root$IBCR_CGROUP_PREFIX/cpuset.mems" ||
				return 1
		fi
		mkdir -p "$ibcr_slurm_run/cgroup/$ibcr_cg" &&
		mount --bind "$ibcr_root$IBCR_CGROUP_PREFIX" "$ibcr_slurm_run/cgroup/$ibcr_cg" ||
			return 1
	done
}

slurm_cgroup_dirs() {
	test -n "$IBCR_CGROUP_PREFIX" || return 0
	for ibcr_cg in $ibcr_slurm_cgs; do
		test -d "/sys/fs/cgroup/$ibcr_cg$IBCR_CGROUP_PREFIX" &&
			echo "/sys/fs/cgroup/$ibcr_cg$IBCR_CGROUP_PREFIX"
	done
	return 0
}

# ibcr_slurm_cg_pids_: every process still in this cluster's cgroups.
ibcr_slurm_cg_pids_() {
	for ibcr_d in $(slurm_cgroup_dirs); do
		find "$ibcr_d" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -u
}

ibcr_slurm_write_conf_() {
	ibcr_ports=$(ibcr_slurm_free_ports_ $((ibcr_slurm_n + 1))) || return 1
	ibcr_ctld_port=$(echo "$ibcr_ports" | head -n 1)
	if test "$ibcr_slurm_netns" = 1; then
		ibcr_ctld_addr=$(netns_host_ip)
	else
		ibcr_ctld_addr=127.0.0.1
	fi
	ibcr_d=$IBCR_SLURM_DIR
	ibcr_lvl=${SLURM_DEBUG:-info}
	if test -n "$SLURM_PLUGSTACK"; then
		case "$SLURM_PLUGSTACK" in
		/*) ibcr_ps=$SLURM_PLUGSTACK ;;
		*) ibcr_ps="$(pwd)/$SLURM_PLUGSTACK" ;;
		esac
		if ! test -r "$ibcr_ps"; then
			echo "slurm_start: SLURM_PLUGSTACK=$SLURM_PLUGSTACK is not a readable file" >&2
			return 1
		fi
		ln -sf "$ibcr_ps" "$ibcr_d/etc/plugstack.conf"
	else
		: >"$ibcr_d/etc/plugstack.conf"
	fi
	cat >"$ibcr_d/etc/slurm.conf" <<-EOF
	# Written by t/sharness.d/20-slurm.sh for one test; see there.
	ClusterName=ibcr$ibcr_slurm_tag
	SlurmctldHost=$(hostname -s)($ibcr_ctld_addr)
	SlurmctldPort=$ibcr_ctld_port
	SlurmUser=root
	SlurmdUser=root
	AuthType=auth/munge
	CredType=cred/munge
	AuthInfo=socket=$IBCR_MUNGE_SOCKET
	StateSaveLocation=$ibcr_d/ctld
	SlurmdSpoolDir=$ibcr_d/spool/%n
	TmpFS=$ibcr_d/tmp/%n
	SlurmctldPidFile=$ibcr_d/run/slurmctld.pid
	SlurmdPidFile=$ibcr_d/run/slurmd.%n.pid
	SlurmctldLogFile=$ibcr_d/log/slurmctld.log
	SlurmdLogFile=$ibcr_d/log/slurmd.%n.log
	SlurmctldDebug=$ibcr_lvl
	SlurmdDebug=$ibcr_lvl
	PlugStackConfig=$ibcr_d/etc/plugstack.conf
	ProctrackType=proctrack/cgroup
	TaskPlugin=task/cgroup
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/none
	SchedulerType=sched/backfill
	SchedulerParameters=batch_sched_delay=0
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core
	SlurmdParameters=config_overrides
	MpiDefault=none
	SwitchType=switch/none
	MailProg=/bin/true
	KillWait=5
	InactiveLimit=0
	MinJobAge=300
	ReturnToService=2
	SlurmdTimeout=120
	EOF
	ibcr_i=1
	for ibcr_port in $(echo "$ibcr_ports" | tail -n +2); do
		ibcr_addr=$(slurm_node_addr $ibcr_i)
		if test "$ibcr_slurm_netns" = 1; then
			ibcr_host=$ibcr_addr
		else
			ibcr_host=localhost
		fi
		echo "NodeName=n$ibcr_i NodeAddr=$ibcr_addr NodeHostname=$ibcr_host Port=$ibcr_port Boards=1 SocketsPerBoard=1 CoresPerSocket=${SLURM_NODE_CORES:-2} ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN" >>"$ibcr_d/etc/slurm.conf"
		mkdir -p "$ibcr_d/spool/n$ibcr_i" "$ibcr_d/tmp/n$ibcr_i" &&
		chmod 1777 "$ibcr_d/tmp/n$ibcr_i"
		ibcr_i=$((ibcr_i + 1))
	done
	echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP $SLURM_PARTITION_OPTS" >>"$ibcr_d/etc/slurm.conf"
	if test -n "$SLURM_CONF_EXTRA"; then
		printf '%s\n' "$SLURM_CONF_EXTRA" >>"$ibcr_d/etc/slurm.conf"
	fi
	cat >"$ibcr_d/etc/cgroup.conf" <<-EOF
	CgroupPlugin=cgroup/v1
	CgroupAutomount=no
	CgroupMountpoint=$ibcr_slurm_run/cgroup
	ConstrainCores=no
	ConstrainRAMSpace=no
	ConstrainDevices=no
	EOF
}

# slurm_nodes_idle: every node reports idle; also true (the wait is
# over) once a daemon slurm_start started has exited, named in
# ibcr_slurm_died.  (sinfo -N lists a node once per partition: count
# each node once.)
slurm_nodes_idle() {
	ibcr_idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | grep -c ' idle$')
	test "$ibcr_idle" -eq "$ibcr_slurm_n" && return 0
	for ibcr_p in $ibcr_slurm_pids; do
		if ! ibcr_pid_alive_ "$ibcr_p"; then
			ibcr_slurm_died=$ibcr_p
			return 0
		fi
	done
	return 1
}

# ibcr_slurm_wait_idle_ SECONDS: until every node reports idle.
ibcr_slurm_wait_idle_() {
	ibcr_slurm_died=
	if ! ibcr_wait_for "$1" slurm_nodes_idle; then
		echo "slurm_start: only $ibcr_idle of $ibcr_slurm_n nodes idle after $1 s" >&2
		sinfo -N >&2
		return 1
	fi
	if test -n "$ibcr_slurm_died"; then
		echo "slurm_start: daemon pid $ibcr_slurm_died exited during start-up" >&2
		return 1
	fi
}

sbatch() {
	if test -n "$IBCR_JOB_USER"; then
		command sbatch --uid="$IBCR_JOB_USER" --gid="$IBCR_JOB_USER" "$@"
	else
		command sbatch "$@"
	fi
}

# srun runs as the user from the start: with --uid, root's srun drops to
# the user while it waits for an allocation, and a queued allocation's
# answer (a MUNGE credential for root) then fails to decode.
# A test's srun ends: after IBCR_SRUN_TIMEOUT seconds (600) it is
# stopped, saying so, and fails (a hung step would hold the test, and CI,
# until its own time limit).
srun() {
	ibcr_sr_t=${IBCR_SRUN_TIMEOUT:-600}
	if test -n "$IBCR_JOB_USER"; then
		timeout -k 10 "$ibcr_sr_t" setpriv --reuid="$IBCR_JOB_USER" \
			--regid="$IBCR_JOB_USER" --init-groups -- srun "$@"
	else
		timeout -k 10 "$ibcr_sr_t" srun "$@"
	fi
	ibcr_sr_rc=$?
	if test $ibcr_sr_rc = 124; then
		echo "srun $*: no end after $ibcr_sr_t s (IBCR_SRUN_TIMEOUT); stopped" >&2
	fi
	return $ibcr_sr_rc
}

if test -z "${IBCR_JOB_USER+set}" && ibcr_prereq_ok USERS; then
	IBCR_JOB_USER=$IBCR_USER1
fi

slurm_start() {
	if test -n "$IBCR_JOB_USER"; then
		IBCR_JOB_UID=$(id -u "$IBCR_JOB_USER") || return 1
		chown "$IBCR_JOB_USER" "${SHARNESS_TRASH_DIRECTORY:-$PWD}" || return 1
	else
		IBCR_JOB_UID=0
	fi
	export IBCR_JOB_UID
	ibcr_slurm_start_once_ "$@"
	ibcr_ss_rc=$?
	if test $ibcr_ss_rc -eq 2; then
		# Another program took one of our free ports before the daemon
		# bound it: start again on fresh ports, once.
		echo "slurm_start: a port was taken meanwhile; retrying with new ports" >&2
		slurm_stop
		ibcr_slurm_start_once_ "$@"
		ibcr_ss_rc=$?
	fi
	return $ibcr_ss_rc
}

ibcr_slurm_start_once_() {
	if test -n "$ibcr_slurm_tag"; then
		echo "slurm_start: a cluster is already running; slurm_stop it first" >&2
		return 1
	fi
	ibcr_slurm_n=$1
	case "$ibcr_slurm_n" in
	[1-6]) ;;
	*)
		echo "slurm_start: need a node count 1..6, got '$1'" >&2
		return 1 ;;
	esac
	ibcr_slurm_netns=0
	ibcr_slurm_devns=
	shift
	for ibcr_opt in "$@"; do
		case "$ibcr_opt" in
		--netns) ibcr_slurm_netns=1 ;;
		--devns)
			if ! ibcr_prereq_ok SOFTIBDEV; then
				echo "slurm_start: --devns: $(ibcr_prereq_why SOFTIBDEV)" >&2
				return 1
			fi
			ibcr_slurm_devns=$IBCR_SOFTIB_DEVNS ;;
		*)
			echo "slurm_start: unknown option '$ibcr_opt' (--netns, --devns)" >&2
			return 1 ;;
		esac
	done
	if test "$ibcr_slurm_netns" = 1; then
		netns_create "$ibcr_slurm_n" || return 1
		if test "$(netns_count)" -lt "$ibcr_slurm_n"; then
			echo "slurm_start: $ibcr_slurm_n nodes need $ibcr_slurm_n namespaces, netns_create made $(netns_count)" >&2
			return 1
		fi
	fi

	ibcr_slurm_tag=$$
	ibcr_slurm_pids=
	ibcr_atexit slurm_stop
	ibcr_base=${SHARNESS_TRASH_DIRECTORY:-$IBCR_WORKDIR}
	if test -z "$ibcr_base"; then
		echo "slurm_start: no trash directory (outside sharness, set IBCR_WORKDIR)" >&2
		return 1
	fi
	# Slurm's config parser and plugstack.conf split on spaces and the
	# trash directory's name has one: reach our state by a link instead.
	ibcr_slurm_run=/run/ibcr.$ibcr_slurm_tag
	ibcr_record_path "$ibcr_slurm_run"
	# munged's socket must be reachable by every user a job runs as, and
	# munged checks every folder above it: keep it out of the trash
	# directory, whose parents may be private (a clone under /root).
	chmod go+x "$ibcr_base" &&
	mkdir -p "$ibcr_base/slurm" "$ibcr_slurm_run/munge" &&
	chmod 0755 "$ibcr_slurm_run" "$ibcr_slurm_run/munge" &&
	ln -sfn "$ibcr_base/slurm" "$ibcr_slurm_run/slurm" || return 1
	IBCR_SLURM_DIR=$ibcr_slurm_run/slurm
	IBCR_MUNGE_SOCKET=$ibcr_slurm_run/munge/munge.socket
	MUNGE_SOCKET=$IBCR_MUNGE_SOCKET
	SLURM_CONF=$IBCR_SLURM_DIR/etc/slurm.conf
	IBCR_CGROUP_PREFIX=/ibcr_$ibcr_slurm_tag
	export IBCR_SLURM_DIR IBCR_MUNGE_SOCKET MUNGE_SOCKET SLURM_CONF IBCR_CGROUP_PREFIX
	(
		cd "$IBCR_SLURM_DIR" &&
		mkdir -p etc log run ctld spool
	) || return 1

	ibcr_slurm_cg_setup_ || {
		echo "slurm_start: cannot make cgroups $IBCR_CGROUP_PREFIX under /sys/fs/cgroup/{$ibcr_slurm_cgs}" >&2
		return 1
	}
	ibcr_slurm_write_conf_ || return 1

	# munged checks the owner of every folder above its key, seed, pid
	# and log: keep them out of the trash directory, which jobs of
	# IBCR_JOB_USER own.
	ibcr_munge_dir=$ibcr_slurm_run/munge
	mkdir -p "$ibcr_munge_dir/key" "$ibcr_munge_dir/log" "$ibcr_munge_dir/run" &&
	chmod 0700 "$ibcr_munge_dir/key" &&
	ln -sfn "$ibcr_munge_dir/log/munged.log" "$IBCR_SLURM_DIR/log/munged.log" || return 1
	mungekey --create --force --keyfile="$ibcr_munge_dir/key/munge.key" || {
		echo "slurm_start: mungekey failed" >&2
		return 1
	}
	ibcr_slurm_bg_ munged munged --foreground \
		--key-file="$ibcr_munge_dir/key/munge.key" \
		--socket="$IBCR_MUNGE_SOCKET" \
		--pid-file="$ibcr_munge_dir/run/munged.pid" \
		--log-file="$ibcr_munge_dir/log/munged.log" \
		--seed-file="$ibcr_munge_dir/key/munged.seed"
	if ! ibcr_wait_for 10 slurm_munged_socket_or_exit || ! test -S "$IBCR_MUNGE_SOCKET"; then
		echo "slurm_start: munged did not create $IBCR_MUNGE_SOCKET" >&2
		slurm_logs >&2
		return 1
	fi

	ibcr_slurm_bg_ slurmctld slurmctld -D -c -i -f "$SLURM_CONF"
	# A slurmd or client that finds slurmctld not yet listening retries
	# only a second later: wait (cheaply) for its port first.
	if ! ibcr_wait_for 20 slurm_ctld_listening_or_exit || ! slurm_ctld_listening; then
		if grep -qs "Address already in use" "$IBCR_SLURM_DIR"/log/*; then
			return 2
		fi
		echo "slurm_start: slurmctld is not listening on port $ibcr_ctld_port" >&2
		slurm_logs >&2
		return 1
	fi
	ibcr_i=1
	while test $ibcr_i -le "$ibcr_slurm_n"; do
		if test "$ibcr_slurm_netns" = 1; then
			# nsenter and unshare exec without forking: $! is slurmd.
			ibcr_slurm_bg_ "slurmd_n$ibcr_i" \
				nsenter --net="/run/netns/$(netns_name $ibcr_i)" \
				$ibcr_slurm_devns \
				unshare --uts sh -c 'hostname "$1" && exec slurmd -D -f "$SLURM_CONF" -N "$1"' \
				sh "n$ibcr_i"
		else
			ibcr_slurm_bg_ "slurmd_n$ibcr_i" $ibcr_slurm_devns \
				slurmd -D -f "$SLURM_CONF" -N "n$ibcr_i"
		fi
		ibcr_i=$((ibcr_i + 1))
	done
	ibcr_slurm_wait_idle_ 60 || {
		if grep -qs "Address already in use" "$IBCR_SLURM_DIR"/log/*; then
			return 2
		fi
		slurm_logs >&2
		return 1
	}
}

# slurm_munged_socket_or_exit: munged made its socket, or exited.
slurm_munged_socket_or_exit() {
	test -S "$IBCR_MUNGE_SOCKET" || ! ibcr_pid_alive_ "$ibcr_slurm_pid_munged"
}

# slurm_ctld_listening: slurmctld's port is open; ..._or_exit: or
# slurmctld exited.
slurm_ctld_listening() {
	test -n "$(ss -Hltn "sport = :$ibcr_ctld_port" 2>/dev/null)"
}
slurm_ctld_listening_or_exit() {
	slurm_ctld_listening || ! ibcr_pid_alive_ "$ibcr_slurm_pid_slurmctld"
}

slurm_logs() {
	test -n "$IBCR_SLURM_DIR" && test -d "$IBCR_SLURM_DIR/log" || return 0
	for ibcr_f in "$IBCR_SLURM_DIR/etc/slurm.conf" "$IBCR_SLURM_DIR"/log/*; do
		test -s "$ibcr_f" || continue
		echo "----- ${ibcr_f##*/} (last 150 lines)"
		tail -n 150 "$ibcr_f"
	done
}

# slurm_job_in_state JOBID STATE: the job's JobState is STATE; also true
# (the wait is over) once the job has ended in another state.  The state
# seen is in ibcr_wj_state.
slurm_job_in_state() {
	ibcr_wj_state=$(scontrol -o show job "$1" 2>/dev/null |
		sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	test "$ibcr_wj_state" = "$2" && return 0
	case "$ibcr_wj_state" in
	COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
		return 0 ;;
	esac
	return 1
}

slurm_wait_job() {
	ibcr_wj_id=$1
	ibcr_wj_want=$2
	if test -z "$ibcr_wj_id" || test -z "$ibcr_wj_want"; then
		echo "slurm_wait_job: usage: slurm_wait_job JOBID STATE [TIMEOUT]" >&2
		return 1
	fi
	ibcr_wj_state=
	# Bounded by the clock (ibcr_wait_for): each scontrol may take long (a
	# controller that is gone makes every call wait for its connect
	# timeout).
	if ! ibcr_wait_for "${3:-60}" slurm_job_in_state "$ibcr_wj_id" "$ibcr_wj_want"; then
		echo "slurm_wait_job: job $ibcr_wj_id is ${ibcr_wj_state:-unknown}, not $ibcr_wj_want, after ${3:-60} s" >&2
		scontrol show job "$ibcr_wj_id" >&2
		return 1
	fi
	if test "$ibcr_wj_state" != "$ibcr_wj_want"; then
		echo "slurm_wait_job: job $ibcr_wj_id ended $ibcr_wj_state, expected $ibcr_wj_want" >&2
		scontrol show job "$ibcr_wj_id" >&2
		return 1
	fi
}

# slurmd revokes a job's credential when its run ends (the time of
# slurmctld's terminate request) and refuses to launch the job on a
# credential made in that second or before: slurmctld then kills the
# requeued run before it starts ("Killing non-startable batch JobId=N:
# Job credential revoked", slurmd "Job N already killed, do not launch
# batch job") and the job is FAILED with exit code 1.  Both times are whole
# seconds.  A requeued job would start some 120 s later; a test that lets
# it start at once has slurmctld's next scheduling pass (about once a
# second) make the credential, and that pass may come within the second
# the last run ended: measured, ten requeues out of ten of a job that
# ended just after a second began were refused so.  The job is seen
# pending after that end, so once the clock has left the second it was
# seen pending in, every credential is newer.
slurm_clock_past() {
	test "$(date +%s)" -gt "$1"
}
slurm_start_now() {
	ibcr_sn_t=$(date +%s)
	ibcr_wait_for 5 slurm_clock_past "$ibcr_sn_t" &&
	scontrol update jobid="$1" StartTime=now
}

# slurm_jobs_gone: no job runs, is suspended or completing, and no process
# is left in the cluster's cgroups.
slurm_jobs_gone() {
	test -z "$(ibcr_slurm_cg_pids_)" &&
	test -z "$(squeue -h -t running,suspended,completing -o %A 2>/dev/null)"
}

# slurm_cgroups_killed_empty: SIGKILL to every process left in the
# cluster's cgroups; true once there is none.
slurm_cgroups_killed_empty() {
	ibcr_left=$(ibcr_slurm_cg_pids_)
	test -z "$ibcr_left" && return 0
	kill -KILL $ibcr_left 2>/dev/null
	return 1
}

# slurm_cgroup_removed DIR: remove the cgroup folder DIR, deepest first
# (a cgroup folder can only be removed once empty, and its control files
# go with it); true once it is gone.
slurm_cgroup_removed() {
	find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null
	! test -d "$1"
}

slurm_stop() {
	test -n "$ibcr_slurm_tag" || return 0
	if ibcr_failed; then
		slurm_logs | ibcr_diag
	fi
	ibcr_ss_rc=0
	if ibcr_pid_alive_ "$ibcr_slurm_pid_slurmctld"; then
		# Jobs outlive `scontrol shutdown` (their slurmstepds keep
		# running), so end them first, through Slurm, without waiting
		# out KillWait: teardown need not be gentle with test jobs.
		# A job cancelled just before (still COMPLETING) is waited for
		# too: its slurmstepd would otherwise retry its completion
		# against a gone slurmctld and hold its slurmd past shutdown.
		ibcr_jobs=$(squeue -h -t running,suspended,completing -o %A 2>/dev/null)
		if test -n "$ibcr_jobs"; then
			scancel --full -s KILL $ibcr_jobs 2>/dev/null
			# Also wait out COMPLETING: a slurmd whose epilog-complete
			# message finds no slurmctld retries for 10 s at shutdown.
			# (Teardown goes on either way; what is left is killed
			# below.)
			ibcr_wait_for 15 slurm_jobs_gone 2>&1 | ibcr_diag
		fi
		scontrol shutdown >/dev/null 2>&1
	fi
	if ! ibcr_wait_gone_ 10 $(echo "$ibcr_slurm_pids" | sed "s/\b$ibcr_slurm_pid_munged\b//"); then
		echo "slurm_stop: Slurm daemons ignored 'scontrol shutdown'; sending TERM" | ibcr_diag
		ibcr_ss_rc=1
		for ibcr_p in $ibcr_slurm_pids; do
			test "$ibcr_p" = "$ibcr_slurm_pid_munged" || kill -TERM "$ibcr_p" 2>/dev/null
		done
		ibcr_wait_gone_ 5 $ibcr_slurm_pids 2>&1 | ibcr_diag
	fi
	# Whatever is left in our cgroups (slurmstepd, tasks) is this
	# cluster's by construction.  (If some survive, removing the cgroup
	# folders below fails, naming them.)
	ibcr_wait_for 5 slurm_cgroups_killed_empty 2>&1 | ibcr_diag
	kill -TERM "$ibcr_slurm_pid_munged" 2>/dev/null
	if ! ibcr_wait_gone_ 5 $ibcr_slurm_pids; then
		ibcr_ss_rc=1
		kill -KILL $ibcr_slurm_pids 2>/dev/null
		ibcr_wait_gone_ 2 $ibcr_slurm_pids 2>&1 | ibcr_diag
	fi
	# Reap our children so they do not linger as zombies.
	for ibcr_p in $ibcr_slurm_pids; do
		wait "$ibcr_p" 2>/dev/null
	done
	# Remove our cgroup folders (slurm_cgroup_removed).
	for ibcr_d in $(slurm_cgroup_dirs); do
		ibcr_wait_for 3 slurm_cgroup_removed "$ibcr_d" 2>&1 | ibcr_diag
		if test -d "$ibcr_d"; then
			echo "slurm_stop: cannot remove cgroup $ibcr_d" | ibcr_diag
			ibcr_ss_rc=1
		fi
	done
	for ibcr_cg in $ibcr_slurm_cgs; do
		if mountpoint -q "$ibcr_slurm_run/cgroup/$ibcr_cg" 2>/dev/null; then
			umount "$ibcr_slurm_run/cgroup/$ibcr_cg" || ibcr_ss_rc=1
		fi
		rmdir "$ibcr_slurm_run/cgroup/$ibcr_cg" 2>/dev/null
	done
	rmdir "$ibcr_slurm_run/cgroup" 2>/dev/null
	rm -f "$ibcr_slurm_run/slurm"
	rm -rf "$ibcr_slurm_run/munge"
	rmdir "$ibcr_slurm_run" 2>/dev/null
	ibcr_slurm_tag=
	return $ibcr_ss_rc
}
