# ibcr.sh - run workloads under libibcr and the test coordinator.
#
# Sourced by t/t20NN-ibcr-*.t after sharness.sh.  Everything a test starts
# writes into its trash directory; the coordinator's socket is a relative
# path ("NAME.sock"), so processes in network namespaces (same filesystem,
# other network) reach it too and no path with the trash directory's space
# goes through a word-split environment list.
#
# API:
#   ibcr_softib_require  skip (or fail with CI=true) unless softib and
#                        libibcr are built; then points SOFTIB_LIBDIR at a
#                        private copy of softib in the trash directory.
#   ibcr_on HOST CMD...  run CMD here (HOST 0 or empty) or in netns host HOST.
#   coord_start NAME NPROCS [COORD-OPTIONS...]
#                        start t/ibcr/coord in the background on NAME.sock,
#                        output NAME.coord.{out,err}; waits for the socket.
#   coord_wait           wait for it; its exit status.
#   coord_cycles NAME    print how many cycles it completed.
#   coord_over NAME      true once it printed its "cycles done" line.
#   coord_cycles_are NAME N   true when it completed N (else says so).
#   ibcr_env RANK        print the environment words that put a process
#                        under libibcr with rank RANK talking to the
#                        coordinator of the current NAME (for VW_*_ENV).
#   ibcr_stream NAME NCYCLES WAIT [CLIENT-OPTIONS...]
#                        a verbs_stream server (rank 0, VW_SERVER_HOST) and
#                        client (rank 1, VW_CLIENT_HOST) both under libibcr,
#                        with a coordinator running NCYCLES cycles spaced
#                        WAIT (MIN_MS:MAX_MS) apart; both sides must verify
#                        the same totals and every cycle must complete.
#   ibcr_pp NAME SRVHOST CLIHOST NCYCLES WAIT TOOL ARGS...
#                        a Debian pingpong under libibcr (NCYCLES 0: no
#                        coordinator); both sides must finish and print
#                        $IBCR_PP_DONE (client) and $IBCR_PP_SRV_DONE
#                        (server; empty: not checked), grep patterns,
#                        "iters in" for the pingpongs.
#   ibcr_ids_changed NAME
#                        from the coordinator's final "stat" lines: every
#                        QP's real QPN and every MR's real rkey differ from
#                        the ones the application holds; prints the pairs.

IBCR_LIB=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
IBCR_COORD=$IBCR_BUILDDIR/t/ibcr/coord
. "$SHARNESS_TEST_SRCDIR"/softib/vw.sh

ibcr_softib_require() {
	ibcr_require LIBIBCR SOFTIB
	# softib may be rebuilt while a test runs (other work in this tree):
	# use a private copy, checked to load, so every rebuild of the run
	# sees the same backend file.
	ibcr_sr_i=0
	mkdir -p softib-copy
	# (with its companions libefa, libmlx5... that perftest loads)
	until for ibcr_sr_f in "$SOFTIB_LIBDIR"/lib*.so.[0-9]; do
			ibcr_sr_b=$(basename "$ibcr_sr_f")
			cp -L "$ibcr_sr_f" "softib-copy/$ibcr_sr_b.tmp" &&
			mv "softib-copy/$ibcr_sr_b.tmp" "softib-copy/$ibcr_sr_b" || break
		done &&
		LD_LIBRARY_PATH="$PWD/softib-copy" ibv_devices >/dev/null 2>&1; do
		ibcr_sr_i=$((ibcr_sr_i + 1))
		if test $ibcr_sr_i -gt 20; then
			echo "cannot make a working copy of $SOFTIB_LIBDIR/libibverbs.so.1" >&2
			break
		fi
		sleep 0.5
	done
	SOFTIB_LIBDIR=$PWD/softib-copy
}

# ibcr_show_ NAME SUFFIX...: NAME.SUFFIX files to stderr and, so that a
# failure under make check is explained in the test's log, to the TAP
# stream as comments (tail of each).
ibcr_show_() {
	ibcr_sh_n=$1
	shift
	for ibcr_sh_f in "$@"; do
		test -s "$ibcr_sh_n.$ibcr_sh_f" || continue
		sed "s|^|$ibcr_sh_n.$ibcr_sh_f: |" "$ibcr_sh_n.$ibcr_sh_f" >&2
		tail -20 "$ibcr_sh_n.$ibcr_sh_f" | sed "s|^|$ibcr_sh_n.$ibcr_sh_f: |" | ibcr_diag
	done
	return 0
}

ibcr_on() {
	ibcr_on_h=$1
	shift
	if test -z "$ibcr_on_h" || test "$ibcr_on_h" = 0; then
		"$@"
	else
		netns_exec "$ibcr_on_h" "$@"
	fi
}

coord_start() {
	coord_name=$1
	shift
	coord_n=$1
	shift
	rm -f "$coord_name".sock "$coord_name".coord.out "$coord_name".coord.err
	timeout 300 "$IBCR_COORD" -s "$coord_name".sock -n "$coord_n" "$@" \
		>"$coord_name".coord.out 2>"$coord_name".coord.err &
	coord_pid=$!
	if ! ibcr_wait_for 10 coord_sock_or_exited || ! test -S "$coord_name".sock; then
		echo "coord_start $coord_name: no socket" >&2
		cat "$coord_name".coord.err >&2
		return 1
	fi
}

# coord_sock_or_exited: the coordinator made its socket, or is gone.
coord_sock_or_exited() {
	test -S "$coord_name".sock || ibcr_dead $coord_pid
}

coord_wait() {
	wait $coord_pid
	coord_rc=$?
	if test $coord_rc -ne 0; then
		echo "coordinator $coord_name exited $coord_rc" >&2
		cat "$coord_name".coord.err "$coord_name".coord.out >&2
	fi
	return $coord_rc
}

coord_cycles() {
	sed -n 's/^cycles done: \([0-9]*\)$/\1/p' "$1".coord.out
}

coord_over() {
	grep -q "^cycles done" "$1".coord.out
}

# coord_cycles_are NAME N: the coordinator of NAME completed N cycles
# (says how many otherwise, in the TAP log too).
coord_cycles_are() {
	ibcr_cc_got=$(coord_cycles "$1")
	test "$ibcr_cc_got" = "$2" && return 0
	echo "$1: $ibcr_cc_got of $2 cycles done before the workload ended" |
		tee /dev/stderr | ibcr_diag
	return 1
}

ibcr_env() {
	echo "IBCR_RANK=$1 IBCR_SOCKET=$coord_name.sock LD_PRELOAD=$IBCR_LIB $IBCR_EXTRA_ENV"
}

ibcr_stream() {
	ibcr_st_name=$1
	ibcr_st_n=$2
	ibcr_st_w=$3
	shift 3
	coord_start "$ibcr_st_name" 2 -c "$ibcr_st_n" -w "$ibcr_st_w" $IBCR_COORD_OPTS || return 1
	VW_SERVER_ENV=$(ibcr_env 0) VW_CLIENT_ENV=$(ibcr_env 1) vw_stream "$ibcr_st_name" "$@"
	ibcr_st_rc=$?
	coord_wait
	ibcr_st_crc=$?
	if test $ibcr_st_rc -ne 0 || test $ibcr_st_crc -ne 0; then
		ibcr_show_ "$ibcr_st_name" server.err client.err coord.err coord.out
		return 1
	fi
	ibcr_st_got=$(coord_cycles "$ibcr_st_name")
	grep "^cycle " "$ibcr_st_name".coord.out | tail -1
	if test "$ibcr_st_got" != "$ibcr_st_n"; then
		echo "ibcr_stream $ibcr_st_name: $ibcr_st_got of $ibcr_st_n cycles done before the stream ended" |
			tee /dev/stderr | ibcr_diag
		ibcr_show_ "$ibcr_st_name" coord.out
		return 1
	fi
}

IBCR_PP_DONE="iters in"
IBCR_PP_SRV_DONE="iters in"
# ibcr_pp_listening_or_exited: ibcr_pp's server listens, or is gone.
ibcr_pp_listening_or_exited() {
	ibcr_on "$ibcr_pp_srv" ss -Hltn "sport = :$ibcr_pp_port" | grep -q LISTEN ||
		ibcr_dead $ibcr_pp_spid
}

ibcr_pp() {
	ibcr_pp_name=$1 ibcr_pp_srv=$2 ibcr_pp_cli=$3 ibcr_pp_n=$4 ibcr_pp_w=$5 ibcr_pp_tool=$6
	shift 6
	coord_name=$ibcr_pp_name
	if test "$ibcr_pp_n" -gt 0; then
		coord_start "$ibcr_pp_name" 2 -c "$ibcr_pp_n" -w "$ibcr_pp_w" \
			$IBCR_COORD_OPTS || return 1
		ibcr_pp_e0=$(ibcr_env 0)
		ibcr_pp_e1=$(ibcr_env 1)
	else
		ibcr_pp_e0="LD_PRELOAD=$IBCR_LIB"
		ibcr_pp_e1=$ibcr_pp_e0
	fi
	# below the ephemeral range and softib's endpoint ports (24576-)
	ibcr_pp_port=$(( 12000 + ($$ * 7 + ${ibcr_pp_k:=0}) % 12000 ))
	ibcr_pp_k=$((ibcr_pp_k + 1))
	while ibcr_on "$ibcr_pp_srv" ss -Htan "( sport = :$ibcr_pp_port )" | grep -q .; do
		ibcr_pp_port=$((ibcr_pp_port + 1))
	done
	if test "$ibcr_pp_srv" = 0; then
		ibcr_pp_addr=127.0.0.1
	else
		ibcr_pp_addr=$(netns_ip "$ibcr_pp_srv")
	fi
	ibcr_on "$ibcr_pp_srv" env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" $ibcr_pp_e0 \
		timeout 240 "$ibcr_pp_tool" -p $ibcr_pp_port "$@" \
		>"$ibcr_pp_name".srv.out 2>"$ibcr_pp_name".srv.err &
	ibcr_pp_spid=$!
	if ! ibcr_wait_for 10 ibcr_pp_listening_or_exited || ibcr_dead $ibcr_pp_spid; then
		kill $ibcr_pp_spid 2>/dev/null
		echo "ibcr_pp $ibcr_pp_name: the server did not listen" >&2
		return 1
	fi
	ibcr_on "$ibcr_pp_cli" env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" $ibcr_pp_e1 \
		timeout 240 "$ibcr_pp_tool" -p $ibcr_pp_port "$@" "$ibcr_pp_addr" \
		>"$ibcr_pp_name".cli.out 2>"$ibcr_pp_name".cli.err
	ibcr_pp_crc=$?
	wait $ibcr_pp_spid
	ibcr_pp_src=$?
	ibcr_pp_ok=0
	if test "$ibcr_pp_n" -gt 0; then
		coord_wait || ibcr_pp_ok=1
	fi
	if test $ibcr_pp_crc -ne 0 || test $ibcr_pp_src -ne 0 ||
	   { test -n "$IBCR_PP_SRV_DONE" &&
	     ! grep -q "$IBCR_PP_SRV_DONE" "$ibcr_pp_name".srv.out; } ||
	   ! grep -q "$IBCR_PP_DONE" "$ibcr_pp_name".cli.out; then
		ibcr_pp_ok=1
	fi
	if test $ibcr_pp_ok -ne 0; then
		echo "ibcr_pp $ibcr_pp_name: client exit $ibcr_pp_crc, server exit $ibcr_pp_src" >&2
		ibcr_show_ "$ibcr_pp_name" srv.out srv.err cli.out cli.err coord.out coord.err
		return 1
	fi
	cat "$ibcr_pp_name".cli.out
}

ibcr_ids_changed() {
	grep "^stat " "$1".coord.out >"$1".stat || {
		echo "no stat lines from the coordinator" >&2
		return 1
	}
	# "vqpn": V, "rqpn": R and "vrkey": V, "rrkey": R pairs, one per line
	sed 's/{ "v/\n&/g' "$1".stat |
		sed -n 's/^{ "v\(qpn\|rkey\)": \([0-9]*\), "r[a-z]*": \([0-9]*\) }.*/\1 \2 \3/p' \
		>"$1".ids
	grep -q "^qpn " "$1".ids && grep -q "^rkey " "$1".ids || {
		echo "no QPs or MRs in the stat lines" >&2
		cat "$1".stat >&2
		return 1
	}
	cat "$1".ids
	awk '$2 == $3' "$1".ids | sed "s/^/$1: real id unchanged: /" | ibcr_diag
	! awk '$2 == $3 { print $1 " " $2 ": the real id is still the first one"; bad = 1 }
		END { exit !bad }' "$1".ids
}
