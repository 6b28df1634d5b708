#!/bin/sh
# ibcr-bench.sh - what libibcr costs on softib between two network namespaces.
#
# Run as root from the build tree after `make` and `make -C t check
# TESTS=` (which builds t/ibcr/coord and t/softib/verbs_stream):
#   sh bench/ibcr-bench.sh [ROUNDS]
# (SOFTIB_LIBDIR=DIR measures another softib build than lib/softib/.libs.)
# It makes two namespace hosts (t/sharness.d/10-netns.sh), server on host 1,
# client on host 2, and measures in one run:
#   - 8-byte message rate (ib_send_bw, with ibv_post_send and with perftest's
#     default ibv_wr_* path) and latency (ib_send_lat, ibv_post_send),
#     without and with libibcr
#     preloaded on both sides, alternating, ROUNDS times each (default 5);
#     the medians and the ratio with/without;
#   - the time of one checkpoint cycle (quiesce, drain, release, rebuild,
#     connect, resume, as the test coordinator t/ibcr/coord drives it) with
#     1, 16 and 256 QPs per process under a running verbs_stream, 10 cycles
#     each: median and worst, with the phases of the median cycle.
# Prints markdown tables (the ones in doc/libibcr-bench.md).
set -e
here=$(cd "$(dirname "$0")" && pwd)
top=${IBCR_BUILDDIR:-$(cd "$here/.." && pwd)}
src=$(cd "$here/.." && pwd)
rounds=${1:-5}
test "$(id -u)" = 0 || { echo "ibcr-bench: needs root (network namespaces)" >&2; exit 1; }
for t in ib_send_bw ib_send_lat ip nsenter ss; do
	command -v $t >/dev/null || { echo "ibcr-bench: $t not found (run contrib/deps.sh)" >&2; exit 1; }
done
softib=${SOFTIB_LIBDIR:-$top/lib/softib/.libs}
ibcr=$top/lib/ibcr/.libs/libibcr.so
coord=$top/t/ibcr/coord
vs=$top/t/softib/verbs_stream
for f in "$softib/libibverbs.so.1" "$ibcr" "$coord" "$vs"; do
	test -e "$f" || { echo "ibcr-bench: $f is missing: build it first (make; make -C t check TESTS=)" >&2; exit 1; }
done

. "$src/t/sharness.d/01-atexit.sh"
. "$src/t/sharness.d/10-netns.sh"
trap 'ibcr_run_atexit' EXIT INT TERM
netns_create 2

work=$(mktemp -d)
ibcr_atexit rm -rf "$work"
# A private copy of softib: a rebuild of the tree during the run must not
# change the device under the measurement.
# perftest also loads softib's companions (libefa, libmlx5, librdmacm...).
mkdir "$work/softib"
for f in "$softib"/lib*.so.[0-9]; do
	cp -L "$f" "$work/softib/"
done
lib=$work/softib

port=$((41000 + $$ % 1000))
# run_pair ENV CMD...: server on host 1, client on host 2 -> client's stdout
run_pair() {
	envs=$1
	shift
	port=$((port + 1))
	netns_exec 1 env LD_LIBRARY_PATH="$lib" $envs "$@" -p $port >"$work/srv" 2>&1 &
	spid=$!
	i=0
	until netns_exec 1 ss -Hltn "sport = :$port" | grep -q LISTEN; do
		i=$((i + 1)); test $i -lt 200 || { kill $spid; return 1; }
		sleep 0.05
	done
	netns_exec 2 env LD_LIBRARY_PATH="$lib" $envs "$@" -p $port "$(netns_ip 1)" >"$work/cli" 2>&1 ||
		{ echo "ibcr-bench: $* failed:" >&2; cat "$work/cli" "$work/srv" >&2; kill $spid 2>/dev/null; return 1; }
	wait $spid
	cat "$work/cli"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >"$work/rate.0"; : >"$work/rate.1"; : >"$work/lat.0"; : >"$work/lat.1"
: >"$work/wr.0"; : >"$work/wr.1"
r=0
while test $r -lt "$rounds"; do
	for w in 0 1; do
		if test $w = 1; then e="LD_PRELOAD=$ibcr"; else e=; fi
		run_pair "$e" ib_send_bw -s 8 -n 100000 --use_old_post_send |
			awk '$1 == 8 { print $5 }' >>"$work/rate.$w"
		run_pair "$e" ib_send_lat -s 8 -n 20000 --use_old_post_send |
			awk '$1 == 8 { print $5 }' >>"$work/lat.$w"
		run_pair "$e" ib_send_bw -s 8 -n 100000 |
			awk '$1 == 8 { print $5 }' >>"$work/wr.$w"
	done
	r=$((r + 1))
done
r0=$(median <"$work/rate.0"); r1=$(median <"$work/rate.1")
l0=$(median <"$work/lat.0"); l1=$(median <"$work/lat.1")
w0=$(median <"$work/wr.0"); w1=$(median <"$work/wr.1")

echo "## 8-byte messages, softib, two namespace hosts (medians of $rounds runs)"
echo
echo "| | without libibcr | with libibcr | with / without |"
echo "|---|---|---|---|"
awk -v a="$r0" -v b="$r1" 'BEGIN { printf "| message rate (Mpps, ib_send_bw) | %.4f | %.4f | %.3f |\n", a, b, b / a }'
awk -v a="$w0" -v b="$w1" 'BEGIN { printf "| message rate (Mpps, ib_send_bw, ibv_wr_* path) | %.4f | %.4f | %.3f |\n", a, b, b / a }'
awk -v a="$l0" -v b="$l1" 'BEGIN { printf "| latency (us, ib_send_lat typical) | %.2f | %.2f | %.3f |\n", a, b, b / a }'
echo
echo "runs (Mpps without / with): $(tr '\n' ' ' <"$work/rate.0")/ $(tr '\n' ' ' <"$work/rate.1")"
echo "runs (us without / with): $(tr '\n' ' ' <"$work/lat.0")/ $(tr '\n' ' ' <"$work/lat.1")"
echo

# cycle_time NQP: 10 cycles while an 8-byte SEND stream runs on NQP QPs.
cycle_time() {
	nqp=$1
	sock=$work/c$nqp.sock
	rm -f "$sock" "$work/port"
	"$coord" -s "$sock" -n 2 -c 10 -w 50:100 >"$work/c$nqp.out" 2>&1 &
	cpid=$!
	while ! test -S "$sock"; do sleep 0.02; done
	netns_exec 1 env LD_LIBRARY_PATH="$lib" IBCR_RANK=0 IBCR_SOCKET="$sock" LD_PRELOAD="$ibcr" \
		"$vs" -p 0 -P "$work/port" -T 120 >"$work/vs.srv" 2>&1 &
	spid=$!
	while ! test -s "$work/port"; do sleep 0.02; done
	# about 3 s of traffic whatever NQP is
	n=$((3000 / nqp + 20))
	netns_exec 2 env LD_LIBRARY_PATH="$lib" IBCR_RANK=1 IBCR_SOCKET="$sock" LD_PRELOAD="$ibcr" \
		"$vs" -p "$(cat "$work/port")" -T 120 -q "$nqp" -s 8 -W 4 -n $n -r $((n / 3 + 1)) \
		"$(netns_ip 1)" >"$work/vs.cli" 2>&1 || { cat "$work/vs.cli" "$work/vs.srv" >&2; return 1; }
	wait $spid || { cat "$work/vs.srv" >&2; return 1; }
	wait $cpid || { cat "$work/c$nqp.out" >&2; return 1; }
	grep -q "^cycles done: 10$" "$work/c$nqp.out" ||
		{ echo "ibcr-bench: not all cycles ran with $nqp QPs" >&2; cat "$work/c$nqp.out" >&2; return 1; }
	# cycle K: drain D ms (R extra rounds) release L ms rebuild+resume B ms total T ms
	grep "^cycle " "$work/c$nqp.out" | awk '{ print $NF == "ms" ? $(NF-1) : $(NF-3), $4, $10, $13 }' |
		sort -n >"$work/c$nqp.sorted"
	awk -v q="$nqp" '{ t[NR] = $0 } END { split(t[int((NR + 1) / 2)], m, " "); split(t[NR], w, " ");
		printf "| %d | %.1f | %.1f | %.1f | %.1f | %.1f |\n", q, m[1], w[1], m[2], m[3], m[4] }' \
		"$work/c$nqp.sorted"
}

echo "## One checkpoint cycle (quiesce+drain+release+rebuild+connect+resume), ms, 10 cycles"
echo
echo "| QPs per process | median total | worst total | drain (median cycle) | release | rebuild+connect+resume |"
echo "|---|---|---|---|---|---|"
for q in 1 16 256; do
	cycle_time $q
done
