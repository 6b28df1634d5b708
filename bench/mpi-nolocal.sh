#!/bin/sh
# mpi-nolocal.sh - what talking through verbs costs two MPICH ranks on one
# node.  The SPANK plugin sets MPIR_CVAR_NOLOCAL=1 and UCX_TLS=^shm,tcp in
# protected tasks (spank-ibcr(8)): neither MPICH's shared-memory segment
# nor UCX's shared-memory transports can be restored, so ranks on one node
# talk through UCX on the verbs device instead (here softib, whose
# same-host path is a shared-memory ring; on InfiniBand the HCA's
# loopback).
#
# Runs t/mpi/mpi_verify.mpich (every message checked) with 2 ranks under
# mpiexec.mpich on this host, in softib-devns, at one message size per
# row, in three setups, in turn, REPS times each:
#   mpich-shm  MPIR_CVAR_NOLOCAL=0, UCX_TLS=rc_v,self: MPICH's own segment
#   ucx-shm    MPIR_CVAR_NOLOCAL=1, UCX_TLS=sm,self: UCX's shared memory
#   verbs      MPIR_CVAR_NOLOCAL=1, UCX_TLS=rc_v,self: what protected
#              ranks use
# The time of an iteration (all pairs at that size, a ring, Bcast,
# Allreduce, Alltoall) is (t(N2) - t(N1)) / (N2 - N1), which takes
# start-up out.  Prints a markdown table: the median per-iteration time of
# each and the verbs setup's ratio to each shared-memory one.
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

# run SETUP SIZE ITERS: wall seconds of one job
run() {
	case $1 in
	mpich-shm) nl=0 tls=rc_v,self ;;
	ucx-shm) nl=1 tls=sm,self ;;
	verbs) nl=1 tls=rc_v,self ;;
	esac
	t0=$(date +%s.%N)
	"$DEVNS" env LD_LIBRARY_PATH="$LIBS" UCX_TLS=$tls UCX_NET_DEVICES=softib0:1 \
		UCX_WARN_UNUSED_ENV_VARS=n MPIR_CVAR_NOLOCAL=$nl \
		timeout 600 mpiexec.mpich -n 2 "$MV" -q -s "$2" -n "$3" >/dev/null ||
		{ echo "mpi-nolocal: the job failed ($1, size $2)" >&2; exit 1; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "| size (B) | MPICH shared memory (ms/iter) | UCX shared memory (ms/iter) | verbs (ms/iter) | verbs / MPICH shm | verbs / UCX shm |"
echo "|---:|---:|---:|---:|---:|---:|"
tmp=${TMPDIR:-/tmp}/mpi-nolocal.$$
for s in $SIZES; do
	# enough iterations that the difference is seconds, not noise
	if test "$s" -ge 1048576; then n1=10 n2=60; else n1=200 n2=2200; fi
	for v in mpich-shm ucx-shm verbs; do : >"$tmp.$v"; done
	r=0
	while test $r -lt "$REPS"; do
		for v in mpich-shm ucx-shm verbs; do
			a=$(run $v "$s" $n1)
			b=$(run $v "$s" $n2)
			echo "($b - $a) * 1000 / ($n2 - $n1)" | bc -l >>"$tmp.$v"
		done
		r=$((r + 1))
	done
	m0=$(median <"$tmp.mpich-shm")
	mu=$(median <"$tmp.ucx-shm")
	m1=$(median <"$tmp.verbs")
	rm -f "$tmp.mpich-shm" "$tmp.ucx-shm" "$tmp.verbs"
	printf '| %s | %.3f | %.3f | %.3f | %.2f | %.2f |\n' "$s" "$m0" "$mu" "$m1" \
		"$(echo "$m1 / $m0" | bc -l)" "$(echo "$m1 / $mu" | bc -l)"
done
