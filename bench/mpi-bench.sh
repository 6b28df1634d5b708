#!/bin/sh
# mpi-bench.sh - MPI on softib with and without ibcr, and the time from a
# trigger to resume for a 4-rank MPI job (issue 11, item 5).
#
# One run, on a private 3-node netns Slurm cluster with an ibcrd per node,
# as t5004 has it (t/mpi/ckpt.sh's mpi_ckpt_cluster; UCX restricted to
# softib's rc_verbs, jobs as the ordinary user ibcr-user1):
#
#   1. ucx_perftest between two nodes: tag_lat 8 B (latency, typical us),
#      tag_bw 1 MiB (bandwidth, MB/s), tag_bw 8 B (message rate, msg/s);
#      without and with LD_PRELOAD=libibcr.so on both sides.
#   2. bench/mpi_pingpong.c (every message checked), one rank on each of
#      two nodes under srun, Open MPI (pml ucx, --mpi=pmix) and MPICH
#      (ch4:ucx, --mpi=pmi2): latency (8 B, half round trip), bandwidth
#      (windows of 64 x 1 MiB), 8-byte message rate (windows of 64);
#      plain srun, and srun --checkpoint-ib (libibcr preloaded, the task
#      registered with ibcrd and set up as a checkpointed job is; no
#      checkpoint taken while it runs).
#   Each pair alternates without/with, ROUNDS times; the tables give the
#   medians and with/without.
#   3. A 4-rank mpi_verify job (2 nodes x 2 ranks) of each MPI under
#      sbatch --checkpoint-ib: CKPTS times "ibcr checkpoint --wait" (wall
#      time of the command, and the generation's phases from its manifest
#      timeline: the job is stopped from quiesce to resume), then
#      "scontrol requeue" with one of its nodes taken: the time until the
#      4 ranks are restored on the other nodes and resumed.
#
# Usage (root, from a built tree after `make` and `make -C t check
# TESTS=`, which builds t/mpi/mpi_verify.*):
#   bench/mpi-bench.sh [ROUNDS [CKPTS]]       (default 5 and 3)
# Prints markdown tables (doc/mpi-bench.md).

ROUNDS=${1:-5}
CKPTS=${2:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
IBCR_BUILDDIR=${IBCR_BUILDDIR:-$top}
SHARNESS_TEST_SRCDIR=$top/t
export IBCR_BUILDDIR
for f in "$top"/t/sharness.d/*.sh; do
	. "$f" || { echo "mpi-bench: cannot load $f" >&2; exit 2; }
done
. "$top/t/mpi/mpi.sh" && . "$top/t/spank/lib.sh" && . "$top/t/mpi/ckpt.sh" ||
	{ echo "mpi-bench: cannot load t/mpi/*.sh" >&2; exit 2; }
for p in ROOT SLURM NETNS CRIU UCX OPENMPI MPICH SOFTIBDEV USERS PYTHON3 MPIBUILT \
	VERIFY_OPENMPI VERIFY_MPICH; do
	ibcr_prereq_ok "$p" ||
		{ echo "mpi-bench: $p: $(ibcr_prereq_why "$p")" >&2; exit 2; }
done
mpi_setup
spank_verbs_setup

fail() {
	echo "mpi-bench: FAILED: $*" >&2
	ibcr_force_failed=1
	exit 1
}
IBCR_WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/ibcr-mpi-bench.XXXXXX") || exit 1
chmod 0755 "$IBCR_WORKDIR"
export IBCR_WORKDIR
finish() {
	rc=$?
	ibcr_run_atexit || rc=1
	if test $rc -eq 0; then rm -rf "$IBCR_WORKDIR"; else echo "mpi-bench: kept $IBCR_WORKDIR" >&2; fi
	exit $rc
}
trap finish EXIT
trap 'exit 130' INT TERM
cd "$IBCR_WORKDIR" || exit 1

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now() { date +%s.%N; }

# The ping-pong, built with each MPI's wrapper, readable by the job user.
mpicc.openmpi -O2 -o pp.openmpi "$top/bench/mpi_pingpong.c" &&
mpicc.mpich -O2 -o pp.mpich "$top/bench/mpi_pingpong.c" || fail "cannot build mpi_pingpong"

mpi_ckpt_cluster >cluster.log 2>&1 || { cat cluster.log >&2; fail "cluster"; }
echo "cluster: 3 netns nodes, an ibcrd on each; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# ---- 1. ucx_perftest --------------------------------------------------------
# perf NAME OPTIONS...: the client's Final line, fields: iterations,
# latency typical avg overall (us), bandwidth avg overall (MB/s), rate avg
# overall (msg/s)
perf() {
	perf_n=$1
	shift
	ucx_perf "$perf_n" 1 2 "$@" 2>>perf.err | awk '/^Final:/ { print }'
}
for w in 0 1; do : >ucx.lat.$w; : >ucx.bw.$w; : >ucx.mr.$w; done
r=0
while test $r -lt "$ROUNDS"; do
	for w in 0 1; do
		if test $w = 1; then UCX_ENV_EXTRA="LD_PRELOAD=$LIBIBCR"; else UCX_ENV_EXTRA=; fi
		export UCX_ENV_EXTRA
		perf lat -t tag_lat -s 8 -n 20000 | awk '{ print $3 }' >>ucx.lat.$w
		perf bw -t tag_bw -s 1048576 -n 1000 | awk '{ print $6 }' >>ucx.bw.$w
		perf mr -t tag_bw -s 8 -n 200000 | awk '{ print $8 }' >>ucx.mr.$w
	done
	r=$((r + 1))
done
UCX_ENV_EXTRA=
for f in lat bw mr; do
	test "$(wc -l <ucx.$f.0)" = "$ROUNDS" && test "$(wc -l <ucx.$f.1)" = "$ROUNDS" ||
		{ cat perf.err >&2; fail "ucx_perftest $f runs failed"; }
done
echo "## ucx_perftest, softib rc_verbs, node 1 to node 2 (medians of $ROUNDS)"
echo
echo "| | without libibcr | with libibcr | with / without |"
echo "|---|---:|---:|---:|"
row() {
	a=$(median <"$2.0") b=$(median <"$2.1")
	awk -v n="$1" -v a="$a" -v b="$b" -v f="$3" 'BEGIN { printf "| %s | " f " | " f " | %.3f |\n", n, a, b, b / a }'
}
row "latency, tag_lat 8 B (us, typical)" ucx.lat %.2f
row "bandwidth, tag_bw 1 MiB (MB/s)" ucx.bw %.1f
row "message rate, tag_bw 8 B (msg/s)" ucx.mr %.0f
echo
echo "runs without / with: latency $(tr '\n' ' ' <ucx.lat.0)/ $(tr '\n' ' ' <ucx.lat.1)"
echo "bandwidth $(tr '\n' ' ' <ucx.bw.0)/ $(tr '\n' ' ' <ucx.bw.1); rate $(tr '\n' ' ' <ucx.mr.0)/ $(tr '\n' ' ' <ucx.mr.1)"
echo

# ---- 2. MPI ping-pong -------------------------------------------------------
# pp MPI CKPT: one run, 2 ranks on n1 and n2; its result line
pp() {
	case $1 in
	openmpi) pp_plug=pmix ;;
	mpich) pp_plug=pmi2 ;;
	esac
	mpi_with "$1" $(mpi_ckpt_env_ "$1") srun --mpi=$pp_plug -N2 -n2 -w n1,n2 -t 5 $2 \
		-o pp.out -e pp.err ./pp."$1" -l 20000 -b 20 -r 2000 ||
		{ cat pp.out pp.err >&2; fail "mpi_pingpong $1 ${2:-plain}"; }
	grep "^lat_us " pp.out
}
for m in openmpi mpich; do
	for w in 0 1; do : >$m.lat.$w; : >$m.bw.$w; : >$m.mr.$w; done
done
r=0
while test $r -lt "$ROUNDS"; do
	for m in openmpi mpich; do
		for w in 0 1; do
			if test $w = 1; then o=--checkpoint-ib; else o=; fi
			l=$(pp $m "$o") || exit 1
			echo "$l" | awk '{ print $2 }' >>$m.lat.$w
			echo "$l" | awk '{ print $4 }' >>$m.bw.$w
			echo "$l" | awk '{ print $6 * 1e6 }' >>$m.mr.$w
		done
	done
	r=$((r + 1))
done
for m in openmpi mpich; do
	echo "## MPI ping-pong ($m over UCX), one rank on each of n1, n2 (medians of $ROUNDS)"
	echo
	echo "| | srun | srun --checkpoint-ib | with / without |"
	echo "|---|---:|---:|---:|"
	row "latency, 8 B (us, half round trip)" $m.lat %.2f
	row "bandwidth, 64 x 1 MiB windows (MB/s)" $m.bw %.1f
	row "message rate, 64 x 8 B windows (msg/s)" $m.mr %.0f
	echo
	echo "runs without / with: latency $(tr '\n' ' ' <$m.lat.0)/ $(tr '\n' ' ' <$m.lat.1)"
	echo
done

# ---- 3. trigger to resume ---------------------------------------------------
# phases MANIFEST: the leader's phases (ms) from the generation's timeline
phases() {
	python3 - "$1" <<-\EOF
	import json, sys
	m = json.load(open(sys.argv[1]))
	t = m["timeline"]
	lead = [n for n in t["nodes"] if n.get("leader")] or t["nodes"]
	ph = lead[0]["phases"]
	out = []
	for p in ("begin", "quiesce", "drain", "release", "dump", "rebuild", "connect", "resume", "copy", "commit"):
	    if p in ph:
	        out.append("%s %.0f" % (p, ph[p]["end_ms"] - ph[p]["start_ms"]))
	stall = ph["resume"]["end_ms"] - ph["quiesce"]["start_ms"]
	size = sum(f.get("size", 0) for f in m.get("files", []))
	print("%.0f|%s; images %.0f MiB" % (stall, ", ".join(out), size / 1048576.0))
	EOF
}

echo "## From trigger to resume, 4 ranks of mpi_verify on 2 nodes (sbatch --checkpoint-ib)"
echo
echo "| MPI | trigger | to resumed (ms) | the job stopped (quiesce to resume, ms) | phases of the leader (ms) |"
echo "|---|---|---:|---:|---|"
ITERS=100000
for m in openmpi mpich; do
	filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 || fail "filler"
	J=$(MPI_CKPT_VERIFY_OPTS=-S mpi_ckpt_sbatch_ $m b$m -N2 --ntasks-per-node=2 --checkpoint-ib) &&
	slurm_wait_job $J RUNNING 30 || fail "job of $m"
	scancel $filler
	ibcr_wait_for 120 sh -c "test \$(cat b$m.err 2>/dev/null | grep -c \"past MPI_Init\$\") = 4" ||
		fail "$m: MPI_Init"
	k=0
	while test $k -lt "$CKPTS"; do
		t0=$(now)
		spank_checkpoint $J >/dev/null || fail "ibcr checkpoint $J"
		t1=$(now)
		g=$(mpi_ckpt_newest_gen $J)
		p=$(phases "$store/$J/gen-$g/manifest.json") || fail "manifest of $J gen $g"
		awk -v m=$m -v a="$t0" -v b="$t1" -v p="$p" 'BEGIN { split(p, q, "|");
			printf "| %s | ibcr checkpoint --wait | %.0f (command) | %s | %s |\n", m, (b - a) * 1000, q[1], q[2] }'
		k=$((k + 1))
	done
	# requeue with n1 taken: restored on n2 and n3
	filler=$(sbatch --parsable -w n1 -c 2 -o /dev/null --wrap "sleep 600")
	g=$(mpi_ckpt_newest_gen $J)
	n=$(grep -c "job $J: restored tasks rebuilt and resumed" $IBCRD_RUN/ibcrd/n*/ibcrd.log | awk -F: '{ s += $2 } END { print s }')
	t0=$(now)
	scontrol requeue $J && slurm_wait_job $J PENDING 30 || fail "requeue $J"
	t1=$(now)
	slurm_start_now $J && slurm_wait_job $J RUNNING 60 || fail "restart $J"
	t2=$(now)
	ibcr_wait_for 120 sh -c "test \$(cat b$m.err 2>/dev/null | grep -c \"restored from generation $g \") = 4" ||
		fail "$m: not restored: $(tail -n 5 b$m.err)"
	t3=$(now)
	ibcr_wait_for 120 sh -c "test \$(cat $IBCRD_RUN/ibcrd/n*/ibcrd.log | grep -c \"job $J: restored tasks rebuilt and resumed\") -gt $n" ||
		fail "$m: not resumed"
	t4=$(now)
	awk -v m=$m -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$t4" 'BEGIN {
		printf "| %s | scontrol requeue, restored on n2, n3 | %.0f | - | to pending %.0f, then (StartTime=now, next second) to running %.0f, to 4 ranks restored %.0f, to rebuilt and resumed %.0f |\n",
			m, (e - a) * 1000, (b - a) * 1000, (c - b) * 1000, (d - c) * 1000, (e - d) * 1000 }'
	scancel $J $filler
	slurm_wait_job $J CANCELLED 60 >/dev/null 2>&1
done
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
