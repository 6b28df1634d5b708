#!/bin/sh
# ucx-clock-bench.sh - what UCX's wall clock costs in a protected process
# (libibcr(7), IBCR_UCX_CLOCK; issue 11).
#
# libibcr makes UCX read gettimeofday instead of the CPU's time-stamp
# counter.  One run measures, side by side:
#   1. one read of each clock (bench/clock_read.c): the most the change
#      can add per clock read of UCX;
#   2. ucx_perftest between two network-namespace hosts on softib, both
#      sides with libibcr preloaded, IBCR_UCX_CLOCK=tsc (UCX's own
#      choice) against the default wall clock: UCT active-message
#      latency over ud_verbs (am_lat 8 B), UCP tag latency over ud_verbs
#      and over rc_verbs (tag_lat 8 B; rc_verbs is what the MPI tests
#      use, with ud_verbs beside it), and the 8-byte message rate over
#      rc_verbs (tag_bw);
#   3. the same UCP tag latency over shared memory between two processes
#      of one host (UCX_TLS=sm): UCX's fastest path here, where a clock
#      read weighs most (protected MPI jobs are steered off it, see
#      spank-ibcr(8)).
# Each mode is checked first (UCX_LOG_LEVEL=debug: "arch clock
# frequency" is 1000000 Hz on the wall clock).  ucx_perftest times with
# UCX's clock too, so on the wall clock its per-iteration ("typical")
# latency has a resolution of 1 us: the tables use the overall figures
# (the run's time over its iterations), exact on both clocks.  tsc and wall alternate,
# ROUNDS times; the tables give the medians, the best runs, and wall / tsc.
#
# Usage (root, from a built tree after `make`):
#   bench/ucx-clock-bench.sh [ROUNDS]        (default 5)
# Prints markdown (doc/mpi-bench.md, "UCX's clock").

ROUNDS=${1:-5}
top=$(cd "$(dirname "$0")/.." && pwd)
IBCR_BUILDDIR=${IBCR_BUILDDIR:-$top}
IBCR_SRCDIR=${IBCR_SRCDIR:-$top}
SHARNESS_TEST_SRCDIR=$top/t
export IBCR_BUILDDIR IBCR_SRCDIR
for f in "$top"/t/sharness.d/*.sh; do
	. "$f" || { echo "ucx-clock-bench: cannot load $f" >&2; exit 2; }
done
. "$top/t/mpi/mpi.sh" || { echo "ucx-clock-bench: cannot load t/mpi/mpi.sh" >&2; exit 2; }
for p in ROOT NETNS UCX SOFTIBDEV LIBIBCR; do
	ibcr_prereq_ok "$p" ||
		{ echo "ucx-clock-bench: $p: $(ibcr_prereq_why "$p")" >&2; exit 2; }
done
mpi_setup

fail() {
	echo "ucx-clock-bench: FAILED: $*" >&2
	exit 1
}
work=$(mktemp -d "${TMPDIR:-/tmp}/ibcr-ucx-clock.XXXXXX") || exit 1
chmod 0755 "$work"
ibcr_atexit rm -rf "$work"
trap 'ibcr_run_atexit' EXIT
trap 'exit 130' INT TERM
cd "$work" || exit 1

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

${CC:-cc} -O2 -o clock_read "$top/bench/clock_read.c" || fail "cannot build clock_read"
netns_create 2 || fail "netns"
echo "load at the start: $(cut -d' ' -f1-3 /proc/loadavg); clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
echo

# ---- 1. one clock read ------------------------------------------------------
echo "## One clock read (bench/clock_read.c, 10^7 reads, best and median of $ROUNDS)"
echo
echo "| clock | best (ns) | median (ns) |"
echo "|---|---:|---:|"
./clock_read 10000000 "$ROUNDS" | awk '{ printf "| %s | %.1f | %.1f |\n", $1, $2, $3 }'
echo

# ---- 2, 3. ucx_perftest -----------------------------------------------------
# env_of MODE: UCX_ENV_EXTRA for libibcr with IBCR_UCX_CLOCK=MODE
env_of() {
	echo "LD_PRELOAD=$LIBIBCR IBCR_UCX_CLOCK=$1"
}
for m in tsc wall; do
	UCX_ENV_EXTRA="$(env_of $m) UCX_LOG_LEVEL=debug" ucx_on 1 ucx_info -d >info.$m 2>&1
	f=$(sed -n "s/.*arch clock frequency: \([0-9.]*\) Hz.*/\1/p" info.$m | head -n 1)
	case "$m:$f" in
	wall:1000000.00) ;;
	tsc:1000000.00 | *:) fail "IBCR_UCX_CLOCK=$m: UCX says its clock runs at '$f' Hz" ;;
	esac
	echo "IBCR_UCX_CLOCK=$m: UCX's clock runs at $f Hz"
done
echo

# perf NAME SRV CLI COLUMN EXTRA-ENV OPTIONS...: one run, the client's
# Final line's COLUMN
perf() {
	perf_n=$1 perf_s=$2 perf_c=$3 perf_col=$4 perf_x=$5
	shift 5
	UCX_ENV_EXTRA="$UCX_ENV_EXTRA $perf_x" ucx_perf "$perf_n" "$perf_s" "$perf_c" "$@" \
		2>>perf.err | awk -v c="$perf_col" '/^Final:/ { print $c }'
}
cases="uct-ud ucp-ud ucp-rc mr-rc ucp-sm"
for c in $cases; do : >$c.tsc; : >$c.wall; done
r=0
while test $r -lt "$ROUNDS"; do
	for m in tsc wall; do
		UCX_ENV_EXTRA=$(env_of $m)
		perf uct-ud 1 2 5 "UCX_TLS=ud_v" -t am_lat -d softib0:1 -x ud_verbs -s 8 -n 20000 >>uct-ud.$m
		perf ucp-ud 1 2 5 "UCX_TLS=ud_v,self" -t tag_lat -s 8 -n 20000 >>ucp-ud.$m
		perf ucp-rc 1 2 5 "" -t tag_lat -s 8 -n 20000 >>ucp-rc.$m
		perf mr-rc 1 2 9 "" -t tag_bw -s 8 -n 200000 >>mr-rc.$m
		perf ucp-sm 1 1 5 "UCX_TLS=sm,self UCX_NET_DEVICES=all" -t tag_lat -s 8 -n 200000 >>ucp-sm.$m
	done
	r=$((r + 1))
done
UCX_ENV_EXTRA=
for c in $cases; do
	test "$(wc -l <$c.tsc)" = "$ROUNDS" && test "$(wc -l <$c.wall)" = "$ROUNDS" ||
		{ tail -n 30 perf.err >&2; fail "ucx_perftest $c: runs failed"; }
done
echo "## ucx_perftest with libibcr preloaded on both sides, UCX's clock tsc against wall ($ROUNDS rounds)"
echo
echo "Medians, and the best run of each (the least disturbed by other load)."
echo
echo "| | tsc, median | wall, median | wall / tsc | tsc, best | wall, best | wall / tsc |"
echo "|---|---:|---:|---:|---:|---:|---:|"
# row NAME CASE FORMAT BEST: BEST is min (a time) or max (a rate)
row() {
	a=$(median <"$2.tsc") b=$(median <"$2.wall")
	if test "$4" = min; then
		c=$(sort -g "$2.tsc" | head -n 1) d=$(sort -g "$2.wall" | head -n 1)
	else
		c=$(sort -g "$2.tsc" | tail -n 1) d=$(sort -g "$2.wall" | tail -n 1)
	fi
	awk -v n="$1" -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v f="$3" 'BEGIN {
		printf "| %s | " f " | " f " | %.3f | " f " | " f " | %.3f |\n", n, a, b, b / a, c, d, d / c }'
}
row "UCT am_lat 8 B, ud_verbs, n1 to n2 (us, overall)" uct-ud %.2f min
row "UCP tag_lat 8 B, ud_verbs, n1 to n2 (us, overall)" ucp-ud %.2f min
row "UCP tag_lat 8 B, rc_verbs, n1 to n2 (us, overall)" ucp-rc %.2f min
row "UCP tag_bw 8 B, rc_verbs, n1 to n2 (msg/s)" mr-rc %.0f max
row "UCP tag_lat 8 B, shared memory, two processes of n1 (us, overall)" ucp-sm %.3f min
echo
for c in $cases; do
	echo "runs $c, tsc / wall: $(tr '\n' ' ' <$c.tsc)/ $(tr '\n' ' ' <$c.wall)"
done
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
