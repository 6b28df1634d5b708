#!/bin/sh
# softib-shm-bench.sh - softib between two processes on one host: its
# shared-memory path against a raw shared-memory ring, and its TCP path.
#
# Run from the build tree after `make` (no root needed):
#   sh bench/softib-shm-bench.sh [ROUNDS]
#   SOFTIB_LIB_BASE=DIR sh bench/softib-shm-bench.sh [ROUNDS]
#        also runs the shared-memory rows against another softib build
#        (DIR holds its libibverbs.so.1, e.g. OTHER-TREE/lib/softib/.libs),
#        interleaved round by round, in columns of its own
# It builds bench/shm_ring.c and bench/shm_verbs.c, then runs ROUNDS
# rounds (default 3); each round measures, one after another:
#   raw ring:    shm_ring at 8 bytes (message rate) and 64 KiB (bandwidth),
#                and at 64 KiB through as many send and receive buffers
#                as the verbs loop cycles through (its own row)
#   softib shm:  ib_send_bw and ib_write_bw at 8 bytes and 64 KiB, and
#                shm_verbs (a verbs SEND loop without per-message clock
#                reads) at 8 bytes and 64 KiB
#   softib TCP:  the same with SOFTIB_SHM=0 (loopback TCP)
# and prints a markdown table (with a row of CPU time per 8-byte message
# of the raw ring and the verbs loop, which the machine's load changes
# less than the rates) of the medians over the rounds with the
# ratios softib shm / raw ring (the one in doc/softib-shm.md).
set -e
here=$(cd "$(dirname "$0")" && pwd)
top=${IBCR_BUILDDIR:-$(cd "$here/.." && pwd)}
src=$(cd "$here/.." && pwd)
rounds=${1:-3}
for t in ib_send_bw ib_write_bw ss; do
	command -v $t >/dev/null || { echo "softib-shm-bench: $t not found (run contrib/deps.sh)" >&2; exit 1; }
done
lib=$top/lib/softib/.libs
test -f "$lib/libibverbs.so.1" || { echo "softib-shm-bench: build softib first (make)" >&2; exit 1; }
base=${SOFTIB_LIB_BASE:-}
test -z "$base" || test -f "$base/libibverbs.so.1" ||
	{ echo "softib-shm-bench: $base/libibverbs.so.1 is missing" >&2; exit 1; }

work=$(mktemp -d)
spid=
trap 'test -z "$spid" || kill $spid 2>/dev/null; rm -rf "$work"' EXIT INT TERM
${CC:-cc} -O2 -o "$work/shm_ring" "$src/bench/shm_ring.c"
${CC:-cc} -O2 -o "$work/shm_verbs" "$src/bench/shm_verbs.c" -libverbs

# iterations: enough for a few tenths of a second each on the shared-memory
# paths (SHM_BENCH_N8, _N64, _RAW8, _RAW64, _V8 override them; the verbs
# loop runs V8 messages through shared memory, N8 through TCP)
n8=${SHM_BENCH_N8:-500000}
n64=${SHM_BENCH_N64:-50000}
raw8=${SHM_BENCH_RAW8:-10000000}
raw64=${SHM_BENCH_RAW64:-200000}
v8=${SHM_BENCH_V8:-2000000}

port=$((42000 + $$ % 1000))
# pf SHM TOOL SIZE ITERS [LIBDIR] -> "MB/s Mpps" of the client (perftest's average)
pf() {
	shm=$1 tool=$2 size=$3 n=$4 l=${5:-$lib}
	port=$((port + 1))
	SOFTIB_SHM=$shm LD_LIBRARY_PATH="$l" $tool -s "$size" -n "$n" -p $port >"$work/srv" 2>&1 &
	spid=$!
	i=0
	until ss -Hltn "sport = :$port" | grep -q LISTEN; do
		i=$((i + 1)); test $i -lt 400 || { kill $spid; cat "$work/srv" >&2; return 1; }
		sleep 0.05
	done
	SOFTIB_SHM=$shm LD_LIBRARY_PATH="$l" $tool -s "$size" -n "$n" -p $port 127.0.0.1 >"$work/cli" 2>&1 ||
		{ cat "$work/cli" >&2; kill $spid 2>/dev/null; spid=; return 1; }
	wait $spid
	spid=
	awk -v s="$size" '$1 == s { print $4, $5 }' "$work/cli"
}
# vdepth SIZE -> "TX:RX", the send and receive buffers shm_verbs cycles
# through at SIZE (its rule: 512 receives, halved while they pass 8 MiB;
# at most 128 sends, and at most half the receives)
vdepth() {
	awk -v s="$1" 'BEGIN { rx = 512; while (rx > 16 && rx * s > 8388608) rx /= 2
		tx = 128; if (tx > rx / 2) tx = rx / 2; print tx ":" rx }'
}
# raw SIZE ITERS [TX:RX] -> "MB/s Mmsg/s CPU-ns-per-message" of shm_ring
raw() {
	"$work/shm_ring" -s "$1" -n "$2" -b "${3:-1:1}" |
		awk '$1 == "cpu" { c = $2; next } { r = $3 " " $4 } END { print r, c }'
}
# vl SHM SIZE ITERS [LIBDIR] -> the same of shm_verbs
vl() {
	SOFTIB_SHM=$1 LD_LIBRARY_PATH="${4:-$lib}" "$work/shm_verbs" -s "$2" -n "$3" |
		awk '$1 == "cpu" { c = $2; next } { r = $3 " " $4 } END { print r, c }'
}

# collect NAME VALUE: appends VALUE to the file of NAME
collect() { echo "$2" >>"$work/v.$1"; }
median() { sort -g "$work/v.$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

r=0
while test $r -lt "$rounds"; do
	r=$((r + 1))
	set -- $(raw 8 "$raw8"); collect raw_mr "$2"; collect raw_cpu "$3"
	set -- $(raw 65536 "$raw64"); collect raw_bw "$1"
	set -- $(raw 65536 "$raw64" "$(vdepth 65536)"); collect raw_bwv "$1"
	for shm in 1 0; do
		set -- $(pf $shm ib_send_bw 8 "$n8"); collect s${shm}_smr "$2"
		set -- $(pf $shm ib_write_bw 8 "$n8"); collect s${shm}_wmr "$2"
		set -- $(pf $shm ib_send_bw 65536 "$n64"); collect s${shm}_sbw "$1"
		set -- $(pf $shm ib_write_bw 65536 "$n64"); collect s${shm}_wbw "$1"
		n=$v8; test $shm = 1 || n=$n8
		set -- $(vl $shm 8 "$n"); collect s${shm}_vmr "$2"; collect s${shm}_vcpu "$3"
		set -- $(vl $shm 65536 "$n64"); collect s${shm}_vbw "$1"
	done
	if test -n "$base"; then
		set -- $(pf 1 ib_send_bw 8 "$n8" "$base"); collect b_smr "$2"
		set -- $(pf 1 ib_write_bw 8 "$n8" "$base"); collect b_wmr "$2"
		set -- $(pf 1 ib_send_bw 65536 "$n64" "$base"); collect b_sbw "$1"
		set -- $(pf 1 ib_write_bw 65536 "$n64" "$base"); collect b_wbw "$1"
		set -- $(vl 1 8 "$v8" "$base"); collect b_vmr "$2"; collect b_vcpu "$3"
		set -- $(vl 1 65536 "$n64" "$base"); collect b_vbw "$1"
	fi
	echo "round $r of $rounds done" >&2
done

raw_mr=$(median raw_mr) raw_bw=$(median raw_bw)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
row() { # LABEL RAW SHM TCP [BASE]
	if test -n "$base"; then
		echo "| $1 | $2 | $5 | $(ratio "$5" "$2") | $3 | $4 | $(ratio "$3" "$2") | $(ratio "$3" "$4") |"
	else
		echo "| $1 | $2 | $3 | $4 | $(ratio "$3" "$2") | $(ratio "$3" "$4") |"
	fi
}
if test -n "$base"; then
	echo "| one host, median of $rounds rounds | raw shm ring | base softib shm | base shm / raw | softib shm | softib TCP | shm / raw | shm / TCP |"
	echo "|---|---|---|---|---|---|---|---|"
else
	echo "| one host, median of $rounds rounds | raw shm ring | softib shm | softib TCP | shm / raw | shm / TCP |"
	echo "|---|---|---|---|---|---|"
fi
bm() { test -z "$base" || median "$1"; }
row "send 8 B, Mmsg/s" "$raw_mr" "$(median s1_smr)" "$(median s0_smr)" "$(bm b_smr)"
row "RDMA write 8 B, Mmsg/s" "$raw_mr" "$(median s1_wmr)" "$(median s0_wmr)" "$(bm b_wmr)"
row "send 8 B, verbs loop, Mmsg/s" "$raw_mr" "$(median s1_vmr)" "$(median s0_vmr)" "$(bm b_vmr)"
row "send 64 KiB, MB/s" "$raw_bw" "$(median s1_sbw)" "$(median s0_sbw)" "$(bm b_sbw)"
row "RDMA write 64 KiB, MB/s" "$raw_bw" "$(median s1_wbw)" "$(median s0_wbw)" "$(bm b_wbw)"
row "send 64 KiB, verbs loop, MB/s" "$raw_bw" "$(median s1_vbw)" "$(median s0_vbw)" "$(bm b_vbw)"
row "send 64 KiB, verbs loop, MB/s (raw ring through its $(vdepth 65536 | sed 's/:/ send and /') receive buffers)" \
	"$(median raw_bwv)" "$(median s1_vbw)" "$(median s0_vbw)" "$(bm b_vbw)"
# CPU time per message (both processes, all threads): the ratios are
# raw / softib, so that they read as the rates' (higher is better)
rawc=$(median raw_cpu)
if test -n "$base"; then
	echo "| send 8 B, verbs loop: CPU ns per message (ratios: raw / softib) | $rawc | $(median b_vcpu) | $(ratio "$rawc" "$(median b_vcpu)") | $(median s1_vcpu) | $(median s0_vcpu) | $(ratio "$rawc" "$(median s1_vcpu)") | $(ratio "$(median s0_vcpu)" "$(median s1_vcpu)") |"
else
	echo "| send 8 B, verbs loop: CPU ns per message (ratios: raw / softib) | $rawc | $(median s1_vcpu) | $(median s0_vcpu) | $(ratio "$rawc" "$(median s1_vcpu)") | $(ratio "$(median s0_vcpu)" "$(median s1_vcpu)") |"
fi
