# ibcrd/lib.sh - helpers for the ibcrd and ibcr tests (t30NN-ibcrd-*.t).
#
#   ibcrd_setup NAME [LINE...]  make folder NAME/ with NAME/ibcrd.conf:
#                               the socket (and pid file) in folder run/,
#                               storage in storage/ and staging in
#                               staging/ of NAME/ in the short private
#                               folder (ibcr_shortdir), each reached from
#                               the trash directory's NAME/ by a link of
#                               the same name; plus each extra
#                               "key = value" LINE, which replaces the
#                               default socket, storage or staging line
#                               when it gives that key (a storage or
#                               staging of its own then has no link in
#                               NAME/).  No line depends on where
#                               the clone is: a path in the trash
#                               directory grows with it, and a socket
#                               path may have 107 bytes, an ibcrd.conf
#                               line 198 characters.  ibcrd is given the
#                               real folders, never the links (root
#                               follows no link a user could have made).
#   ibcrd_storage NAME, ibcrd_staging NAME
#                               the real path of NAME's default storage
#                               and staging (ibcrd names it in messages
#                               and status; NAME/storage is a link to it)
#   ibcrd_start NAME [ARG...]   run "ibcrd -F -c NAME/ibcrd.conf ARG..." in
#                               the background (log NAME/ibcrd.log), wait
#                               for its socket; teardown is registered
#   ibcrd_stop NAME             SIGTERM it and wait; prints its log if the
#                               test has failed; idempotent
#   ibcrd_pid NAME              pid of the running daemon
#   ibcrd_sock NAME             its socket path
#   ibcrd_rundir NAME           the folder of its socket and pid file
#   ibcrd_state PID             the state letter of PID (R, S, T, Z...),
#                               empty once it is gone
#   ibcrd_wait_gone PID [SECONDS]
#                               until PID no longer runs (default 10 s)
#
# For the tests that run programs under "ibcr run" / "ibcr restart":
#
#   ibcrd_use_build             export IBCR_INIT and IBCR_LIBIBCR so that
#                               ibcr and ibcrd use the build tree's
#   (ibcr_track PID..., ibcr_alive PID: t/sharness.d/02-wait.sh)
#   ibcrd_wait_for CMD...       ibcr_wait_for $ibcrd_wait_secs CMD...
#                               (default 20 s)
#   ibcrd_field JOB KEY         KEY of JOB's (last) task, "ibcr status --json"
#   ibcrd_job_field JOB KEY     KEY of JOB itself (last_gen, last_error,
#                               phase), "ibcr status --json"; empty if none
#   ibcrd_json_job KEY          the same from a status reply on stdin
#   ibcrd_manifest_gen FILE     the generation a manifest names
#   ibcrd_joined NAME JOB NODE RANK
#                               leader NAME lists NODE, with RANK, among
#                               JOB's members
#   ibcrd_task_fields JOB KEY   KEY of every task of JOB, one per line
#   ibcrd_gens JOB              JOB's committed generations, as "1 2 "
#   ibcrd_report FILE APP       SIGUSR1 to the pattern program APP (whose
#                               output is FILE); waits for its next
#                               "report" line and prints it
#   ibcrd_free_port N           a TCP port for a test program's own
#                               exchange, from the test's pid and N,
#                               checked free here
#
# For several hosts (network namespaces of sharness.d/10-netns.sh):
#
#   ibcrd_host_start I MSOCK [LINE...]
#                               host I's ibcrd (node nI, peer port 7195,
#                               MUNGE socket MSOCK, the hosts' shared
#                               storage, plus each extra "key = value"
#                               LINE), inside host I, state in folder hI/
#   ibcrd_shared_storage        the shared storage's real path, in the
#                               short folder; ibcrd_host_start makes it
#                               and links shared/ in the trash directory
#                               to it
#   ibcrd_on I                  prints the command prefix that runs a
#                               command inside host I (see ibcrd_bg)
#
# For verbs jobs on softib:
#
#   ibcrd_bg NAME RANK SUBCOMMAND [ARG...]
#                               "ibcr SUBCOMMAND ARG..." in the background
#                               with softib ($SOFTIB_LIBDIR) as the device,
#                               prefixed by $IBCRD_ON (e.g. ibcrd_on I);
#                               output NAME.RANK.out/.err, exit status
#                               NAME.RANK.rc; tracked
#   ibcrd_ctl N JOB NAME        N ranks of JOB have their libibcr control
#                               connection, says the status of daemon NAME
#   ibcrd_pingpong NAME JOB PORT ITERS
#                               "ibv_rc_pingpong -c -n ITERS -p PORT" as
#                               ranks 0 (server) and 1 of JOB on this host
#                               (ibcrd_bg NAME), against ibcrd d; returns
#                               once both hold their control connection
#   ibcrd_listening PORT [I]    something listens on TCP PORT here (or
#                               inside host I): a server rank is ready for
#                               its client
#
# Everything lives in the test's trash directory, but for what ibcrd.conf
# names (in the short folder, linked from the trash directory); only the
# pids started here are ever signalled.

IBCRD=$IBCR_BUILDDIR/ibcrd/ibcrd
IBCR=$IBCR_BUILDDIR/cli/ibcr
RAWMSG=$IBCR_BUILDDIR/t/ibcrd/rawmsg
MKGEN=$IBCR_BUILDDIR/t/ibcrd/mkgen
PEERMSG=$IBCR_BUILDDIR/t/ibcrd/peermsg
PATTERN=$IBCR_BUILDDIR/t/criu/pattern
export IBCRD IBCR RAWMSG MKGEN PEERMSG

ibcrd_setup() {
	ibcrd_s_name=$1
	shift
	ibcrd_s_given=" "
	for ibcrd_s_line in "$@"; do
		case "$ibcrd_s_line" in
		socket\ =*|storage\ =*|staging\ =*)
			ibcrd_s_given="$ibcrd_s_given${ibcrd_s_line%% =*} " ;;
		esac
	done
	mkdir -p "$PWD/$ibcrd_s_name" || return 1
	chmod 0755 "$PWD/$ibcrd_s_name"
	# ibcrd makes run/, storage/ and staging/ itself (and checks them):
	# only their parent here.  The links may dangle until it has.
	mkdir -p "$(ibcr_shortdir)/$ibcrd_s_name" &&
	chmod 0755 "$(ibcr_shortdir)/$ibcrd_s_name" &&
	ln -sfT "$(ibcrd_rundir "$ibcrd_s_name")" "$PWD/$ibcrd_s_name/run" || return 1
	for ibcrd_s_key in storage staging; do
		case "$ibcrd_s_given" in
		*" $ibcrd_s_key "*) continue ;;
		esac
		ln -sfT "$(ibcrd_$ibcrd_s_key "$ibcrd_s_name")" \
			"$PWD/$ibcrd_s_name/$ibcrd_s_key" || return 1
	done
	{
		case "$ibcrd_s_given" in
		*" socket "*) ;;
		*) echo "socket = $(ibcrd_sock "$ibcrd_s_name")" ;;
		esac
		for ibcrd_s_key in storage staging; do
			case "$ibcrd_s_given" in
			*" $ibcrd_s_key "*) ;;
			*) echo "$ibcrd_s_key = $(ibcrd_$ibcrd_s_key "$ibcrd_s_name")" ;;
			esac
		done
		for ibcrd_s_line in "$@"; do
			echo "$ibcrd_s_line"
		done
	} >"$PWD/$ibcrd_s_name/ibcrd.conf"
}

ibcrd_rundir() {
	echo "$(ibcr_shortdir)/$1/run"
}

ibcrd_storage() {
	echo "$(ibcr_shortdir)/$1/storage"
}

ibcrd_staging() {
	echo "$(ibcr_shortdir)/$1/staging"
}

ibcrd_sock() {
	echo "$(ibcrd_rundir "$1")/ibcrd.sock"
}

# The state field of /proc/PID/stat, not kill -0: a zombie still
# answers kill -0, and PID 1 here reaps late.
ibcrd_state() {
	test -r "/proc/$1/stat" || return 0
	sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null
}

# ibcrd_wait_gone PID [SECONDS]: until PID no longer runs (default 10 s).
ibcrd_wait_gone() {
	ibcr_wait_for "${2:-10}" ibcr_dead "$1"
}

ibcrd_pid() {
	cat "$PWD/$1/launch.pid"
}

ibcrd_start() {
	ibcrd_st_name=$1
	shift
	ibcrd_st_dir=$PWD/$ibcrd_st_name
	"$IBCRD" -F -c "$ibcrd_st_dir/ibcrd.conf" -v "$@" 2>>"$ibcrd_st_dir/ibcrd.log" &
	echo $! >"$ibcrd_st_dir/launch.pid"
	ibcr_record_proc $! "ibcrd $ibcrd_st_name"
	ibcr_atexit ibcrd_stop "$ibcrd_st_name"
	if ! ibcr_wait_for 10 ibcrd_up_or_exited "$ibcrd_st_dir" || ! ibcrd_up "$ibcrd_st_dir"; then
		echo "ibcrd_start: ibcrd $ibcrd_st_name did not come up:" >&2
		cat "$ibcrd_st_dir/ibcrd.log" >&2
		return 1
	fi
}

# ibcrd_up DIR: the daemon DIR/launch.pid names wrote its pid file, which
# is written last and names this daemon (stale files left by a killed one
# do not count); ibcrd_up_or_exited DIR: or it is gone.
ibcrd_up() {
	test "$(cat "$1/run/ibcrd.pid" 2>/dev/null)" = "$(cat "$1/launch.pid")"
}
ibcrd_up_or_exited() {
	ibcrd_up "$1" || ! ibcr_alive "$(cat "$1/launch.pid")"
}

# ibcrd_end_launched DIR: SIGTERM the daemon DIR/launch.pid names (SIGKILL
# when it is still there 5 s later), reap it, forget its pid.
ibcrd_end_launched() {
	test -f "$1/launch.pid" || return 0
	ibcrd_el_pid=$(cat "$1/launch.pid")
	if ibcr_alive "$ibcrd_el_pid"; then
		kill -TERM "$ibcrd_el_pid" 2>/dev/null
		ibcrd_wait_gone "$ibcrd_el_pid" 5 || kill -KILL "$ibcrd_el_pid" 2>/dev/null
	fi
	wait "$ibcrd_el_pid" 2>/dev/null
	rm -f "$1/launch.pid"
	return 0
}

ibcrd_stop() {
	ibcrd_sp_dir=$PWD/$1
	test -f "$ibcrd_sp_dir/launch.pid" || return 0
	if ibcr_failed 2>/dev/null && test -f "$ibcrd_sp_dir/ibcrd.log"; then
		{ echo "--- ibcrd $1 log:"; cat "$ibcrd_sp_dir/ibcrd.log"; } | ibcr_diag
	fi
	ibcrd_end_launched "$ibcrd_sp_dir"
}

# ibcrd_stop_service NAME: stop a service-mode ibcrd by its pid file.
ibcrd_stop_service() {
	ibcrd_ss_pid=$(cat "$PWD/$1/run/ibcrd.pid" 2>/dev/null) || return 0
	ibcr_alive "$ibcrd_ss_pid" || return 0
	case "$(tr '\0' ' ' <"/proc/$ibcrd_ss_pid/cmdline")" in
	*"$PWD/$1/"*|*" $1/ibcrd.conf"*) kill -TERM "$ibcrd_ss_pid"; ibcrd_wait_gone "$ibcrd_ss_pid" 5 ;;
	esac
	return 0
}

# ibcrd_munged_start NAME: a private munged (own key) in folder NAME/;
# its socket is "$(ibcrd_munge_sock NAME)", in the test's short folder.
# Teardown is registered.
ibcrd_munge_sock() {
	echo "$(ibcr_shortdir)/$1.munge/munge.socket"
}

ibcrd_munged_start() {
	ibcrd_m_dir=$PWD/$1
	ibcrd_m_sock=$(ibcrd_munge_sock "$1")
	mkdir -p "$ibcrd_m_dir/key" "${ibcrd_m_sock%/*}" "$ibcrd_m_dir/log" || return 1
	chmod 0755 "$ibcrd_m_dir" "${ibcrd_m_sock%/*}" && chmod 0700 "$ibcrd_m_dir/key" &&
	mungekey --create --keyfile="$ibcrd_m_dir/key/munge.key" || return 1
	# --force: a checkout made with umask 002 has group-writable folders
	# above the trash directory, which munged would refuse for its files.
	munged --foreground --force --key-file="$ibcrd_m_dir/key/munge.key" \
		--socket="$ibcrd_m_sock" \
		--pid-file="$ibcrd_m_dir/munged.pid" \
		--log-file="$ibcrd_m_dir/log/munged.log" \
		--seed-file="$ibcrd_m_dir/key/munged.seed" 2>>"$ibcrd_m_dir/log/stderr" &
	echo $! >"$ibcrd_m_dir/launch.pid"
	ibcr_record_proc $! "munged $1"
	ibcr_atexit ibcrd_munged_stop "$1"
	if ! ibcr_wait_for 10 ibcrd_munged_sock_or_exited "$1" || ! test -S "$ibcrd_m_sock"; then
		echo "munged $1 did not start:" >&2
		cat "$ibcrd_m_dir/log/"* >&2
		return 1
	fi
}

# ibcrd_munged_sock_or_exited NAME: munged NAME made its socket, or is gone.
ibcrd_munged_sock_or_exited() {
	test -S "$(ibcrd_munge_sock "$1")" || ! ibcr_alive "$(cat "$PWD/$1/launch.pid")"
}

ibcrd_munged_stop() {
	ibcrd_end_launched "$PWD/$1"
}

# ibcrd_peer_port NAME: the peer port a running ibcrd reports.
ibcrd_peer_port() {
	"$RAWMSG" "$(ibcrd_sock "$1")" '{"version":1,"type":"status"}' |
		sed -n 's/.*"peer_port":\([0-9]*\).*/\1/p'
}

# --- programs under "ibcr run" / "ibcr restart" ---------------------------

# Programs run as an ordinary user, as on a real cluster: with
# IBCR_JOB_USER set (20-slurm.sh; a test about root or about several
# users sets it empty before calling this), "$IBCR" becomes a wrapper
# that runs the command as that user (its run, restart, checkpoint,
# status, ...), and IBCR_ROOT is the command itself, for root's view.
ibcrd_use_build() {
	IBCR_INIT=$IBCR_BUILDDIR/init/ibcr-init
	IBCR_LIBIBCR=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
	export IBCR_INIT IBCR_LIBIBCR
	IBCR_ROOT=$IBCR_BUILDDIR/cli/ibcr
	if test -n "$IBCR_JOB_USER" && test "$(id -u)" = 0; then
		mkdir -p "$SHARNESS_TRASH_DIRECTORY/.bin" || return 1
		IBCR=$SHARNESS_TRASH_DIRECTORY/.bin/ibcr
		printf '#!/bin/sh\nexec setpriv --reuid=%s --regid=%s --init-groups -- "%s" "$@"\n' \
			"$IBCR_JOB_USER" "$IBCR_JOB_USER" "$IBCR_ROOT" >"$IBCR" &&
		chmod 0755 "$IBCR" || return 1
		export IBCR
	fi
}

ibcrd_wait_secs=20
ibcrd_wait_for() {
	ibcr_wait_for "$ibcrd_wait_secs" "$@"
}

# ibcrd_field JOB KEY [RANK]: KEY of the newest registered task of JOB
# (of rank RANK), from "ibcr status --json".  Newest, not any: a task
# whose process just ended stays listed until its connection closes, and
# a restore of the same job may already have registered beside it.
ibcrd_field() {
	"$IBCR" status "$1" --json 2>/dev/null | ibcrd_json_task "$2" "${3:-}"
}

# ibcrd_json_task KEY [RANK]: the same, from a status reply on stdin
# (ibcrd lists the newest registration first).
ibcrd_json_task() {
	/usr/bin/python3 -c '
import json, sys
key, rank = sys.argv[1], sys.argv[2]
try:
    o = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
jobs = [o["job"]] if isinstance(o.get("job"), dict) else o.get("jobs", [o])
for j in jobs:
    for t in j.get("tasks", []):
        if key in t and (rank == "" or t.get("rank") == int(rank)):
            print(t[key])
            sys.exit(0)
sys.exit(1)
' "$1" "$2"
}

# ibcrd_job_field JOB KEY: KEY of JOB itself (last_gen, last_error,
# phase...), from "ibcr status JOB --json"; empty when JOB has no KEY.
ibcrd_job_field() {
	"$IBCR" status "$1" --json 2>/dev/null | ibcrd_json_job "$2"
}

# ibcrd_json_job KEY: the same, from a status reply on stdin; fails when
# the reply names no job.
ibcrd_json_job() {
	/usr/bin/python3 -c '
import json, sys
try:
    o = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
j = o.get("job")
if not isinstance(j, dict):
    sys.exit(1)
v = j.get(sys.argv[1])
print("" if v is None else v)
' "$1"
}

# ibcrd_joined NAME JOB NODE RANK: ibcrd NAME (the job's leader) lists
# NODE among JOB's members, holding RANK ("members" of status --json).
ibcrd_joined() {
	IBCR_SOCKET=$(ibcrd_sock "$1") "$IBCR" status "$2" --json 2>/dev/null |
		/usr/bin/python3 -c '
import json, sys
try:
    j = json.load(sys.stdin)["job"]
except (ValueError, KeyError):
    sys.exit(1)
ok = any(m["node"] == sys.argv[1] and int(sys.argv[2]) in m["ranks"]
         for m in j.get("members", []))
sys.exit(0 if ok else 1)
' "$3" "$4"
}

# ibcrd_manifest_gen FILE: the "generation" a committed manifest names.
ibcrd_manifest_gen() {
	/usr/bin/python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["generation"])
' "$1"
}

ibcrd_task_fields() {
	"$IBCR" status "$1" --json | sed "s/.*\"tasks\"://" | grep -o "\"$2\":[0-9]*" |
		sed "s/.*://"
}

ibcrd_gens() {
	"$IBCR" list "$1" --json | grep -o "\"generation\":[0-9]*" | sed "s/.*://" | tr "\n" " "
}

# ibcrd_reports_more FILE N: FILE has more than N "report" lines.
ibcrd_reports_more() {
	test "$(grep -c "^report " "$1")" -gt "$2"
}

ibcrd_report() {
	ibcrd_rp_n=$(grep -c "^report " "$1")
	kill -USR1 "$2" || return 1
	ibcr_wait_for 20 ibcrd_reports_more "$1" "$ibcrd_rp_n" || return 1
	tail -n 1 "$1"
}

ibcrd_free_port() {
	# Below the ephemeral range (32768-) and softib's endpoints (24576-):
	# the port is checked free here, but may be used inside a namespace
	# host.  Skips ports something (another test) listens on or holds.
	# Each port of 12000-23999 is tried once at most.
	ibcrd_fp_o=$(( ($$ * 13 + ${1:-0} * 101) % 12000 ))
	ibcrd_fp_n=0
	while ss -Htan "( sport = :$((12000 + ibcrd_fp_o)) )" | grep -q .; do
		ibcrd_fp_o=$(( (ibcrd_fp_o + 1) % 12000 ))
		ibcrd_fp_n=$((ibcrd_fp_n + 1))
		if test $ibcrd_fp_n -ge 12000; then
			echo "ibcrd_free_port: no free TCP port in 12000-23999" >&2
			return 1
		fi
	done
	echo $((12000 + ibcrd_fp_o))
}

# --- several hosts ---------------------------------------------------------

# The admin lists the cluster's hosts as peers: ordinary users' jobs
# outside Slurm may then name any of them as their leader.
ibcrd_host_peers() {
	ibcrd_hp_i=1
	while test $ibcrd_hp_i -le "$(netns_count)"; do
		printf "%s " "$(netns_ip $ibcrd_hp_i)"
		ibcrd_hp_i=$((ibcrd_hp_i + 1))
	done
}

ibcrd_shared_storage() {
	echo "$(ibcr_shortdir)/shared"
}

ibcrd_host_start() {
	ibcrd_hs_i=$1 ibcrd_hs_m=$2
	shift 2
	# The hosts' shared storage, in the short folder; shared/ in the
	# trash directory is a link to it.
	mkdir -p -m 0755 "$(ibcrd_shared_storage)" &&
	ln -sfT "$(ibcrd_shared_storage)" "$PWD/shared" &&
	ibcrd_setup h$ibcrd_hs_i "node = n$ibcrd_hs_i" "peer_port = 7195" "munge_socket = $ibcrd_hs_m" \
		"criu = $IBCR_CRIU" "storage = $(ibcrd_shared_storage)" "peers = $(ibcrd_host_peers)" "$@" &&
	set -- $ibcrd_hs_i &&
	{ netns_exec $1 "$IBCRD" -F -c "$PWD/h$1/ibcrd.conf" -v 2>>h$1/ibcrd.log & } &&
	echo $! >h$1/launch.pid &&
	ibcr_record_proc $! "ibcrd h$1" &&
	ibcr_atexit ibcrd_stop h$1 &&
	ibcrd_wait_for test -S h$1/run/ibcrd.sock
}

ibcrd_on() {
	echo "nsenter --net=/run/netns/$(netns_name $1)"
}

# --- verbs jobs on softib --------------------------------------------------

# The whole task then lives in $IBCRD_ON's namespace, as CRIU and that
# host's ibcrd do.
IBCRD_ON=
ibcrd_bg() {
	ibcrd_bg_n=$1 ibcrd_bg_r=$2
	shift 2
	{ ( $IBCRD_ON env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" "$IBCR" "$@" \
		>$ibcrd_bg_n.$ibcrd_bg_r.out 2>$ibcrd_bg_n.$ibcrd_bg_r.err
	    echo $? >$ibcrd_bg_n.$ibcrd_bg_r.rc ) & } &&
	ibcr_track $!
}

ibcrd_ctl() {
	test "$(IBCR_SOCKET=$(ibcrd_sock $3) "$IBCR" status $2 --json 2>/dev/null |
		grep -o "\"control\":true" | wc -l)" -ge "$1"
}

ibcrd_listening() {
	if test -n "$2"; then
		netns_exec "$2" ss -Hltn "sport = :$1" | grep -q LISTEN
	else
		ss -Hltn "sport = :$1" | grep -q LISTEN
	fi
}

ibcrd_pingpong() {
	ibcrd_bg $1 0 run --job $2 --rank 0 --size 2 -- ibv_rc_pingpong -c -n $4 -p $3 &&
	ibcrd_wait_for ibcrd_listening $3 &&
	ibcrd_bg $1 1 run --job $2 --rank 1 --size 2 -- ibv_rc_pingpong -c -n $4 -p $3 127.0.0.1 &&
	ibcrd_wait_for ibcrd_ctl 2 $2 d
}
