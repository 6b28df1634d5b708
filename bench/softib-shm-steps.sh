#!/bin/sh
# softib-shm-steps.sh - what each change of softib's same-host data path
# gains, measured side by side in one run (doc/softib-shm.md).
#
# Run from the build tree after `make` (no root needed):
#   SOFTIB_LIB_BASE=DIR sh bench/softib-shm-steps.sh [ROUNDS]
# DIR holds the libibverbs.so.1 of the softib before the changes (e.g.
# OTHER-TREE/lib/softib/.libs).  Each of ROUNDS rounds (default 5) runs
# bench/shm_verbs.c (a verbs SEND loop between two processes, no clock
# read per message) at 8 bytes and 64 KiB, one variant after another:
#   base      DIR's softib
#   fences    this softib with SOFTIB_SHM_MEMBARRIER=0 SOFTIB_LOCK_BIAS=0
#             (a fence per message in the rings, an exchange per lock)
#   membarrier  SOFTIB_LOCK_BIAS=0 (the rings' wake-ups without a fence
#             on the data side; locks still exchanges)
#   biased    this softib as built (biased locks too)
# and the raw ring (bench/shm_ring.c), then prints the medians over the
# rounds: 8-byte Mmsg/s, CPU ns per 8-byte message (both processes, all
# threads) and 64 KiB MB/s, with each variant's ratio to the raw ring.
set -e
here=$(cd "$(dirname "$0")" && pwd)
top=${IBCR_BUILDDIR:-$(cd "$here/.." && pwd)}
src=$(cd "$here/.." && pwd)
rounds=${1:-5}
lib=$top/lib/softib/.libs
base=${SOFTIB_LIB_BASE:?set SOFTIB_LIB_BASE to the lib/softib/.libs of the base build}
for l in "$lib" "$base"; do
	test -f "$l/libibverbs.so.1" || { echo "softib-shm-steps: $l/libibverbs.so.1 is missing" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
${CC:-cc} -O2 -o "$work/shm_ring" "$src/bench/shm_ring.c"
${CC:-cc} -O2 -o "$work/shm_verbs" "$src/bench/shm_verbs.c" -libverbs
v8=${SHM_BENCH_V8:-2000000}
n64=${SHM_BENCH_N64:-50000}

# run NAME LIBDIR [VAR=VALUE...]: one 8-byte and one 64 KiB verbs loop
run() {
	name=$1 l=$2
	shift 2
	env "$@" LD_LIBRARY_PATH="$l" "$work/shm_verbs" -s 8 -n "$v8" >"$work/o"
	awk '$1 == "cpu" { print $2 > "/dev/stderr"; next } { print $4 }' "$work/o" \
		>>"$work/$name.mr" 2>>"$work/$name.cpu"
	env "$@" LD_LIBRARY_PATH="$l" "$work/shm_verbs" -s 65536 -n "$n64" |
		awk '$1 != "cpu" { print $3 }' >>"$work/$name.bw"
}
median() { sort -g "$work/$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

r=0
while test $r -lt "$rounds"; do
	r=$((r + 1))
	"$work/shm_ring" -s 8 -n 10000000 |
		awk '$1 == "cpu" { print $2 > "/dev/stderr"; next } { print $4 }' \
		>>"$work/raw.mr" 2>>"$work/raw.cpu"
	"$work/shm_ring" -s 65536 -n 200000 | awk '$1 != "cpu" { print $3 }' >>"$work/raw.bw"
	run base "$base"
	run fences "$lib" SOFTIB_SHM_MEMBARRIER=0 SOFTIB_LOCK_BIAS=0
	run membarrier "$lib" SOFTIB_LOCK_BIAS=0
	run biased "$lib"
	echo "round $r of $rounds done" >&2
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
rmr=$(median raw.mr) rcpu=$(median raw.cpu) rbw=$(median raw.bw)
echo "| median of $rounds rounds | 8 B Mmsg/s | / raw | CPU ns per 8 B message | raw / it | 64 KiB MB/s | / raw |"
echo "|---|---|---|---|---|---|---|"
echo "| raw shm ring | $rmr | 1.00 | $rcpu | 1.00 | $rbw | 1.00 |"
for v in base fences membarrier biased; do
	mr=$(median $v.mr) cpu=$(median $v.cpu) bw=$(median $v.bw)
	echo "| $v | $mr | $(ratio "$mr" "$rmr") | $cpu | $(ratio "$rcpu" "$cpu") | $bw | $(ratio "$bw" "$rbw") |"
done
