#!/bin/sh
# softib-bench.sh - softib against raw TCP between two network namespaces.
#
# Run as root from the build tree after `make`:
#   sh bench/softib-bench.sh [-b BEFORE_LIBDIR] [ITERS]
# -b adds a column for another softib build (a folder holding its
# libibverbs.so.1 and companions, e.g. a copy of lib/softib/.libs taken
# before a change), measured in the same run, for before/after tables.
# It makes two namespace hosts (t/sharness.d/10-netns.sh), builds
# bench/tcp_bw.c, then runs, server on host 1 and client on host 2:
#   softib: ib_write_bw and ib_send_bw at 64 KiB (bandwidth) and 8 bytes
#           (message rate), ib_send_lat and ib_write_lat at 8 bytes;
#   TCP:    tcp_bw at 64 KiB and 8 bytes, and its 8-byte ping-pong;
# and prints a markdown table (the one in doc/softib-bench.md).
set -e
here=$(cd "$(dirname "$0")" && pwd)
top=${IBCR_BUILDDIR:-$(cd "$here/.." && pwd)}
src=$(cd "$here/.." && pwd)
before= bh= bs= b1= b2= b3= b4= b5= b6=
if test "$1" = -b; then
	before=$2
	shift 2
	test -f "$before/libibverbs.so.1" || { echo "softib-bench: -b $before: no libibverbs.so.1 there" >&2; exit 1; }
fi
iters=${1:-5000}
test "$(id -u)" = 0 || { echo "softib-bench: needs root (network namespaces)" >&2; exit 1; }
for t in ib_write_bw ib_send_bw ib_send_lat ib_write_lat ip nsenter ss; do
	command -v $t >/dev/null || { echo "softib-bench: $t not found (run contrib/deps.sh)" >&2; exit 1; }
done
lib=$top/lib/softib/.libs
test -f "$lib/libibverbs.so.1" || { echo "softib-bench: build softib first (make)" >&2; exit 1; }

. "$src/t/sharness.d/01-atexit.sh"
. "$src/t/sharness.d/10-netns.sh"
trap 'ibcr_run_atexit' EXIT INT TERM
netns_create 2

work=$(mktemp -d)
ibcr_atexit rm -rf "$work"
${CC:-cc} -O2 -o "$work/tcp_bw" "$src/bench/tcp_bw.c"

port=$((40000 + $$ % 1000))
# run_pair CMD...: server on host 1, client on host 2 -> client's stdout
run_pair() {
	port=$((port + 1))
	netns_exec 1 env LD_LIBRARY_PATH="$lib" "$@" -p $port >"$work/srv" 2>&1 &
	spid=$!
	i=0
	until netns_exec 1 ss -Hltn "sport = :$port" | grep -q LISTEN; do
		i=$((i + 1)); test $i -lt 200 || { kill $spid; return 1; }
		sleep 0.05
	done
	netns_exec 2 env LD_LIBRARY_PATH="$lib" "$@" -p $port "$(netns_ip 1)" >"$work/cli" 2>&1 ||
		{ cat "$work/cli" >&2; kill $spid 2>/dev/null; return 1; }
	wait $spid
	cat "$work/cli"
}

# perftest result line: "#bytes #iters peak avg Mpps" or latency columns
pf_bw() { run_pair "$1" -s "$2" -n "$3" | awk -v s="$2" '$1 == s { print $4, $5 }'; }
pf_lat() { run_pair "$1" -s 8 -n "$2" | awk '$1 == 8 { print $5 }'; }
tcp() { run_pair "$work/tcp_bw" -m "$1" -s "$2" -n "$3" | awk '{ print $3, $5 }'; }

# measure LIB: the softib rows with the library in folder LIB
measure() {
	lib=$1
	wb=$(pf_bw ib_write_bw 65536 "$iters")
	sb=$(pf_bw ib_send_bw 65536 "$iters")
	wr=$(pf_bw ib_write_bw 8 $((iters * 20)))
	sr=$(pf_bw ib_send_bw 8 $((iters * 20)))
	sl=$(pf_lat ib_send_lat "$iters")
	wl=$(pf_lat ib_write_lat "$iters")
	set -- $wb; wbw=$1; set -- $sb; sbw=$1
	set -- $wr; wmr=$2; set -- $sr; smr=$2
}
if test -n "$before"; then
	measure "$before"
	b_wbw=$wbw b_sbw=$sbw b_wmr=$wmr b_smr=$smr b_sl=$sl b_wl=$wl
fi
measure "$top/lib/softib/.libs"
tb=$(tcp bw 65536 "$iters")
tr=$(tcp bw 8 $((iters * 20)))
tl=$(tcp lat 8 "$iters" | awk '{ print $1 }')

pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "-" }'; }
set -- $tb; tbw=$1
set -- $tr; tmr=$2
if test -n "$before"; then
	bh=" softib before |"; bs="---|"
	b1=" $b_wbw |" b2=" $b_sbw |" b3=" $b_wmr |" b4=" $b_smr |" b5=" $b_sl |" b6=" $b_wl |"
fi
cat <<EOT
| test (host 2 -> host 1, $iters iterations) |$bh softib | raw TCP | softib / TCP |
|---|$bs---|---|---|
| ib_write_bw 64 KiB, MB/s |$b1 $wbw | $tbw | $(pct "$wbw" "$tbw") |
| ib_send_bw 64 KiB, MB/s |$b2 $sbw | $tbw | $(pct "$sbw" "$tbw") |
| ib_write_bw 8 B, Mmsg/s |$b3 $wmr | $tmr | $(pct "$wmr" "$tmr") |
| ib_send_bw 8 B, Mmsg/s |$b4 $smr | $tmr | $(pct "$smr" "$tmr") |
| ib_send_lat 8 B, usec (typical) |$b5 $sl | $tl | |
| ib_write_lat 8 B, usec (typical) |$b6 $wl | $tl | |
EOT
