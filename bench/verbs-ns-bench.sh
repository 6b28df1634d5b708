#!/bin/sh
# verbs-ns-bench.sh - what libibcr adds to each verbs data-path call, in ns.
#
# Run from the build tree after `make` and `make -C t check TESTS=` (which
# builds t/ibcr/coord):
#   sh bench/verbs-ns-bench.sh [ROUNDS]       # default 7
#   IBCR_LIB=.../libibcr.so sh bench/verbs-ns-bench.sh   # another libibcr
#   IBCR_LIB_BASE=.../libibcr.so sh bench/verbs-ns-bench.sh   # and a second
#        libibcr (e.g. a build of the base of a change) in the same run:
#        its setups ibcr/rebuilt are interleaved with the others and get
#        columns of their own, so before and after share one plain column
#   (libibcr_ns.so must sit next to each)
# Compiles bench/verbs_ns.c and runs it against softib (a private copy),
# ROUNDS times in each of three setups, interleaved round by round:
#   plain    without libibcr
#   ibcr     LD_PRELOAD=libibcr.so, before any checkpoint
#   rebuilt  LD_PRELOAD=libibcr.so after one checkpoint cycle (quiesce,
#            drain, release, rebuild, connect, resume, driven by
#            t/ibcr/coord), so libibcr translates ids on every call
# with 1 thread and with 4 threads (own QP and CQ each).  Prints the
# medians over rounds (ns per call) and the differences to plain as a
# markdown table (the one in doc/libibcr-ns.md).
set -e
here=$(cd "$(dirname "$0")" && pwd)
top=${IBCR_BUILDDIR:-$(cd "$here/.." && pwd)}
rounds=${1:-7}
softib=${SOFTIB_LIBDIR:-$top/lib/softib/.libs}
ibcr=${IBCR_LIB:-$top/lib/ibcr/.libs/libibcr.so}
coord=$top/t/ibcr/coord
for f in "$softib/libibverbs.so.1" "$ibcr" "$coord"; do
	test -e "$f" || { echo "verbs-ns-bench: $f is missing: build it first (make; make -C t check TESTS=)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/softib"
for f in "$softib"/lib*.so.[0-9]; do
	cp -L "$f" "$work/softib/"
done
cp -L "$ibcr" "$work/libibcr.so"
# libibcr loads its heap library from next to itself.
cp -L "$(dirname "$ibcr")/libibcr_ns.so" "$work/"
setups="plain ibcr rebuilt"
if test -n "$IBCR_LIB_BASE"; then
	mkdir "$work/base"
	cp -L "$IBCR_LIB_BASE" "$work/base/libibcr.so"
	cp -L "$(dirname "$IBCR_LIB_BASE")/libibcr_ns.so" "$work/base/"
	setups="plain base rebase ibcr rebuilt"
fi
${CC:-cc} -O2 -o "$work/verbs_ns" "$here/verbs_ns.c" -libverbs -lpthread
lib=$work/softib

# one SETUP THREADS: one run; appends "measure ns" lines to $work/SETUP.THREADS
one() {
	case $1 in
	plain) env LD_LIBRARY_PATH="$lib" "$work/verbs_ns" -t "$2" ;;
	ibcr) env LD_LIBRARY_PATH="$lib" LD_PRELOAD="$work/libibcr.so" "$work/verbs_ns" -t "$2" ;;
	base) env LD_LIBRARY_PATH="$lib" LD_PRELOAD="$work/base/libibcr.so" "$work/verbs_ns" -t "$2" ;;
	rebuilt|rebase)
		lso=$work/libibcr.so
		test "$1" = rebase && lso=$work/base/libibcr.so
		rm -f "$work/sock" "$work/ready" "$work/go" "$work/goon"
		"$coord" -s "$work/sock" -n 1 -c 1 -w 0:0 -g "$work/go" >"$work/coord.out" 2>"$work/coord.err" &
		cpid=$!
		i=0
		until test -S "$work/sock"; do
			i=$((i + 1)); test $i -lt 500 || { kill $cpid; return 1; }
			sleep 0.02
		done
		{
			until test -e "$work/ready"; do sleep 0.02; done
			touch "$work/go"
			until grep -q "^cycles done" "$work/coord.out"; do sleep 0.02; done
			touch "$work/goon"
		} &
		hpid=$!
		env LD_LIBRARY_PATH="$lib" LD_PRELOAD="$lso" IBCR_RANK=0 \
			IBCR_SOCKET="$work/sock" "$work/verbs_ns" -t "$2" -w "$work/ready" -g "$work/goon"
		wait $hpid
		wait $cpid || { cat "$work/coord.err" >&2; return 1; }
		grep -qx "cycles done: 1" "$work/coord.out" ||
			{ echo "verbs-ns-bench: no checkpoint cycle" >&2; return 1; }
		;;
	esac >>"$work/$1.$2"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# med SETUP THREADS MEASURE: the median over rounds; a measure a run
# could not make ("psend none": every repetition left out) stops the
# bench, naming it.
med() {
	if grep -q "^$3 none\$" "$work/$1.$2"; then
		echo "verbs-ns-bench: $1, $2 thread(s): no repetition of $3 measured (its CQ was found empty every time)" >&2
		exit 1
	fi
	awk -v m="$3" '$1 == m { print $2 }' "$work/$1.$2" | median
}

r=0
while test $r -lt "$rounds"; do
	for t in 1 4; do
		for s in $setups; do
			one "$s" "$t"
		done
	done
	r=$((r + 1))
done

if test -n "$IBCR_LIB_BASE"; then
	echo "| threads | call | without libibcr | base libibcr | added | base, after a rebuild | added | libibcr | added | after a rebuild | added |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
else
	echo "| threads | call | without libibcr | libibcr | added | after a rebuild | added |"
	echo "|---|---|---|---|---|---|---|"
fi
for t in 1 4; do
	for m in send recv wr wrb ud poll psend precv; do
		p=$(med plain $t $m); i=$(med ibcr $t $m); b=$(med rebuilt $t $m)
		base=
		if test -n "$IBCR_LIB_BASE"; then
			base=$(awk -v i="$(med base "$t" "$m")" -v b="$(med rebase "$t" "$m")" -v p="$p" 'BEGIN {
				printf " %.1f | %+.1f | %.1f | %+.1f |", i, i - p, b, b - p }')
		fi
		case $m in
		send) c="ibv_post_send (1 WR)" ;;
		recv) c="ibv_post_recv (1 WR)" ;;
		wr) c="ibv_wr_start/send/set_sge/complete" ;;
		wrb) c="ibv_wr_start/send/set_sge/abort (builder only)" ;;
		ud) c="ibv_post_send UD (1 WR)" ;;
		poll) c="ibv_poll_cq (1 completion)" ;;
		psend) c="ibv_poll_cq (1 successful send completion)" ;;
		precv) c="ibv_poll_cq (1 successful receive completion)" ;;
		esac
		awk -v t="$t" -v c="$c" -v p="$p" -v i="$i" -v b="$b" -v base="$base" 'BEGIN {
			printf "| %s | %s | %.1f |%s %.1f | %+.1f | %.1f | %+.1f |\n", t, c, p, base, i, i - p, b, b - p }'
	done
done
echo "($rounds rounds; ns per call, median over rounds of each run's median)"
# Repetitions of psend/precv left out because a CQ was found empty.
for s in $setups; do
	for t in 1 4; do
		awk -v s="$s" -v t="$t" '$1 ~ /_skipped$/ { n[$1] += $2 } END {
			printf "%s, %s thread(s): repetitions left out: psend %d, precv %d\n", s, t, n["psend_skipped"], n["precv_skipped"] }' "$work/$s.$t"
	done
done
