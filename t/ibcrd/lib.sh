# ibcrd/lib.sh - helpers for the ibcrd and ibcr tests (t30NN-ibcrd-*.t).
#
#   ibcrd_setup NAME [LINE...]  make folder NAME/ with NAME/ibcrd.conf:
#                               socket, storage and staging inside NAME/,
#                               plus each extra "key = value" LINE
#   ibcrd_start NAME [ARG...]   run "ibcrd -F -c NAME/ibcrd.conf ARG..." in
#                               the background (log NAME/ibcrd.log), wait
#                               for its socket; teardown is registered
#   ibcrd_stop NAME             SIGTERM it and wait; prints its log if the
#                               test has failed; idempotent
#   ibcrd_pid NAME              pid of the running daemon
#   ibcrd_sock NAME             its socket path
#   ibcrd_alive PID             true while PID runs (not a zombie)
#   ibcrd_wait_gone PID [TENTHS]
#
# Everything lives in the test's trash directory; only the pids started
# here are ever signalled.

IBCRD=$IBCR_BUILDDIR/ibcrd/ibcrd
IBCR=$IBCR_BUILDDIR/ibcrd/ibcr
RAWMSG=$IBCR_BUILDDIR/t/ibcrd/rawmsg
MKGEN=$IBCR_BUILDDIR/t/ibcrd/mkgen
PEERMSG=$IBCR_BUILDDIR/t/ibcrd/peermsg
export IBCRD IBCR RAWMSG MKGEN PEERMSG

ibcrd_setup() {
	ibcrd_s_name=$1
	shift
	mkdir -p "$PWD/$ibcrd_s_name" || return 1
	chmod 0755 "$PWD/$ibcrd_s_name"
	{
		echo "socket = $PWD/$ibcrd_s_name/run/ibcrd.sock"
		echo "storage = $PWD/$ibcrd_s_name/storage"
		echo "staging = $PWD/$ibcrd_s_name/staging"
		for ibcrd_s_line in "$@"; do
			echo "$ibcrd_s_line"
		done
	} >"$PWD/$ibcrd_s_name/ibcrd.conf"
}

ibcrd_sock() {
	echo "$PWD/$1/run/ibcrd.sock"
}

ibcrd_alive() {
	test -r "/proc/$1/stat" || return 1
	ibcrd_a_state=$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)
	test -n "$ibcrd_a_state" && test "$ibcrd_a_state" != Z && test "$ibcrd_a_state" != X
}

ibcrd_wait_gone() {
	ibcrd_w_t=${2:-100}
	while ibcrd_alive "$1"; do
		ibcrd_w_t=$((ibcrd_w_t - 1))
		test $ibcrd_w_t -gt 0 || return 1
		sleep 0.1
	done
	return 0
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
	ibcr_atexit ibcrd_stop "$ibcrd_st_name"
	ibcrd_st_t=100
	# The pid file is written last and names this daemon: stale files left
	# by a killed one do not count.
	while test "$(cat "$ibcrd_st_dir/run/ibcrd.pid" 2>/dev/null)" != "$(cat "$ibcrd_st_dir/launch.pid")"; do
		ibcrd_st_t=$((ibcrd_st_t - 1))
		if test $ibcrd_st_t -le 0 || ! ibcrd_alive "$(cat "$ibcrd_st_dir/launch.pid")"; then
			echo "ibcrd_start: ibcrd $ibcrd_st_name did not come up:" >&2
			cat "$ibcrd_st_dir/ibcrd.log" >&2
			return 1
		fi
		sleep 0.05
	done
}

ibcrd_stop() {
	ibcrd_sp_dir=$PWD/$1
	test -f "$ibcrd_sp_dir/launch.pid" || return 0
	ibcrd_sp_pid=$(cat "$ibcrd_sp_dir/launch.pid")
	if ibcr_failed 2>/dev/null && test -f "$ibcrd_sp_dir/ibcrd.log"; then
		{ echo "--- ibcrd $1 log:"; cat "$ibcrd_sp_dir/ibcrd.log"; } | ibcr_diag
	fi
	if ibcrd_alive "$ibcrd_sp_pid"; then
		kill -TERM "$ibcrd_sp_pid" 2>/dev/null
		ibcrd_wait_gone "$ibcrd_sp_pid" 50 || kill -KILL "$ibcrd_sp_pid" 2>/dev/null
	fi
	wait "$ibcrd_sp_pid" 2>/dev/null
	rm -f "$ibcrd_sp_dir/launch.pid"
	return 0
}

# ibcrd_stop_service NAME: stop a service-mode ibcrd by its pid file.
ibcrd_stop_service() {
	ibcrd_ss_pid=$(cat "$PWD/$1/run/ibcrd.pid" 2>/dev/null) || return 0
	ibcrd_alive "$ibcrd_ss_pid" || return 0
	case "$(tr '\0' ' ' <"/proc/$ibcrd_ss_pid/cmdline")" in
	*"$PWD/$1/"*|*" $1/ibcrd.conf"*) kill -TERM "$ibcrd_ss_pid"; ibcrd_wait_gone "$ibcrd_ss_pid" 50 ;;
	esac
	return 0
}

# ibcrd_munged_start NAME: a private munged (own key) in folder NAME/;
# its socket is NAME/sock/munge.socket.  Teardown is registered.
ibcrd_munged_start() {
	ibcrd_m_dir=$PWD/$1
	mkdir -p "$ibcrd_m_dir/key" "$ibcrd_m_dir/sock" "$ibcrd_m_dir/log" || return 1
	chmod 0755 "$ibcrd_m_dir" "$ibcrd_m_dir/sock" && chmod 0700 "$ibcrd_m_dir/key" &&
	mungekey --create --keyfile="$ibcrd_m_dir/key/munge.key" || return 1
	# --force: a checkout made with umask 002 has group-writable folders
	# above the trash directory, which munged would refuse for its files.
	munged --foreground --force --key-file="$ibcrd_m_dir/key/munge.key" \
		--socket="$ibcrd_m_dir/sock/munge.socket" \
		--pid-file="$ibcrd_m_dir/munged.pid" \
		--log-file="$ibcrd_m_dir/log/munged.log" \
		--seed-file="$ibcrd_m_dir/key/munged.seed" 2>>"$ibcrd_m_dir/log/stderr" &
	echo $! >"$ibcrd_m_dir/launch.pid"
	ibcr_atexit ibcrd_munged_stop "$1"
	ibcrd_m_t=100
	while ! test -S "$ibcrd_m_dir/sock/munge.socket"; do
		ibcrd_m_t=$((ibcrd_m_t - 1))
		if test $ibcrd_m_t -le 0 || ! ibcrd_alive "$(cat "$ibcrd_m_dir/launch.pid")"; then
			echo "munged $1 did not start:" >&2
			cat "$ibcrd_m_dir/log/"* >&2
			return 1
		fi
		sleep 0.05
	done
}

ibcrd_munged_stop() {
	ibcrd_mp_dir=$PWD/$1
	test -f "$ibcrd_mp_dir/launch.pid" || return 0
	ibcrd_mp_pid=$(cat "$ibcrd_mp_dir/launch.pid")
	if ibcrd_alive "$ibcrd_mp_pid"; then
		kill -TERM "$ibcrd_mp_pid" 2>/dev/null
		ibcrd_wait_gone "$ibcrd_mp_pid" 50 || kill -KILL "$ibcrd_mp_pid" 2>/dev/null
	fi
	wait "$ibcrd_mp_pid" 2>/dev/null
	rm -f "$ibcrd_mp_dir/launch.pid"
	return 0
}

# ibcrd_peer_port NAME: the peer port a running ibcrd reports.
ibcrd_peer_port() {
	"$RAWMSG" "$(ibcrd_sock "$1")" '{"version":1,"type":"status"}' |
		sed -n 's/.*"peer_port":\([0-9]*\).*/\1/p'
}
