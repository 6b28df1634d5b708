#!/bin/sh
# mpi-nolocal.sh - what MPIR_CVAR_NOLOCAL=1 costs two MPICH ranks on one
# node.  The SPANK plugin sets it in protected tasks (spank-ibcr(8)):
# MPICH's shared-memory segment cannot be restored, so ranks on one node
# talk through UCX on the verbs device instead (here softib, whose
# loopback is TCP; on InfiniBand the HCA's loopback).
#
# Runs t/mpi/mpi_verify.mpich (every message checked) with 2 ranks under
# mpiexec.mpich on this host, in softib-devns, over UCX rc_verbs, at one
# message size per row, with MPIR_CVAR_NOLOCAL=0 (MPICH's shared memory)
# and =1, alternating, REPS times each.  The time of an iteration (all
# pairs at that size, a ring, Bcast, Allreduce, Alltoall) is
# (t(N2) - t(N1)) / (N2 - N1), which takes start-up out.  Prints a
# markdown table: the median per-iteration time of each and their ratio.
#
# Usage (from a built tree, as any user who may run MPI):
#   bench/mpi-nolocal.sh [--reps N] [--sizes "48 65536 4194304"]
set -eu

REPS=3
SIZES="48 65536 4194304"
while test $# -gt 0; do
	case $1 in
	--reps) REPS=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	*) echo "usage: $0 [--reps N] [--sizes \"48 65536 4194304\"]" >&2; exit 2 ;;
	esac
done
TOP=$(cd "$(dirname "$0")/.." && pwd)
MV=$TOP/t/mpi/mpi_verify.mpich
DEVNS=$TOP/lib/softib/softib-devns
LIBS=$TOP/lib/softib/.libs
for f in "$MV" "$DEVNS" "$LIBS/libibverbs.so.1"; do
	test -e "$f" || { echo "mpi-nolocal: $f missing: build first (make -C t check TESTS=)" >&2; exit 2; }
done
command -v mpiexec.mpich >/dev/null || { echo "mpi-nolocal: mpiexec.mpich missing" >&2; exit 2; }

# run NOLOCAL SIZE ITERS: wall seconds of one job
run() {
	t0=$(date +%s.%N)
	"$DEVNS" env LD_LIBRARY_PATH="$LIBS" UCX_TLS=rc_v,self UCX_NET_DEVICES=softib0:1 \
		UCX_WARN_UNUSED_ENV_VARS=n MPIR_CVAR_NOLOCAL=$1 \
		timeout 600 mpiexec.mpich -n 2 "$MV" -q -s "$2" -n "$3" >/dev/null ||
		{ echo "mpi-nolocal: the job failed (NOLOCAL=$1, size $2)" >&2; exit 1; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "| size (B) | shared memory (ms/iter) | NOLOCAL=1 (ms/iter) | ratio |"
echo "|---:|---:|---:|---:|"
for s in $SIZES; do
	# enough iterations that the difference is seconds, not noise
	if test "$s" -ge 1048576; then n1=10 n2=60; else n1=200 n2=2200; fi
	: >"${TMPDIR:-/tmp}/mpi-nolocal.$$.0"
	: >"${TMPDIR:-/tmp}/mpi-nolocal.$$.1"
	r=0
	while test $r -lt "$REPS"; do
		for v in 0 1; do
			a=$(run $v "$s" $n1)
			b=$(run $v "$s" $n2)
			echo "($b - $a) * 1000 / ($n2 - $n1)" | bc -l >>"${TMPDIR:-/tmp}/mpi-nolocal.$$.$v"
		done
		r=$((r + 1))
	done
	m0=$(median <"${TMPDIR:-/tmp}/mpi-nolocal.$$.0")
	m1=$(median <"${TMPDIR:-/tmp}/mpi-nolocal.$$.1")
	rm -f "${TMPDIR:-/tmp}/mpi-nolocal.$$.0" "${TMPDIR:-/tmp}/mpi-nolocal.$$.1"
	printf '| %s | %.3f | %.3f | %.2f |\n' "$s" "$m0" "$m1" "$(echo "$m1 / $m0" | bc -l)"
done
