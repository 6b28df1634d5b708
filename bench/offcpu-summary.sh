#!/bin/sh
# offcpu-summary.sh - where a task spent a run's time off the CPU, from a
# "perf sched record -g" of it (doc/ckpt-stall.md).
#
# Usage: bench/offcpu-summary.sh PERF_DATA COMM [N]
#   e.g. perf sched record -g -o perf.data -- \
#            bench/ckpt-stall-bench.sh --cases 1x16384 --staging /var/tmp
#        bench/offcpu-summary.sh perf.data criu
#        bench/offcpu-summary.sh perf.data dd
#
# Takes the thread named COMM (the kernel keeps 15 characters of a name)
# that ran longest, e.g. the dumping CRIU rather than its helpers, and
# prints its time on and off the CPU, then its time off the CPU summed by
# the kernel stack it left the CPU from (the N largest, default 8; about
# 5 frames each).  A time off the CPU begins where the thread switched out,
# so each is charged to the stack of the switch before it.  It includes
# time the thread was runnable but had no CPU: preempted threads show up
# under the stacks of preemption points (__cond_resched,
# exit_to_user_mode_loop, irqentry_exit_to_user_mode).
set -eu

usage() {
	echo "usage: $0 PERF_DATA COMM [N]" >&2
	exit 2
}
if test $# -lt 2 || test $# -gt 3; then usage; fi
data=$1 comm=$2 top=${3:-8}
case $top in '' | *[!0-9]* | 0) echo "$0: N must be a number above 0, not '$top'" >&2; exit 2 ;; esac
test -r "$data" || { echo "$0: cannot read '$data'" >&2; exit 1; }
command -v perf >/dev/null || { echo "$0: perf is not installed (Debian: linux-perf)" >&2; exit 1; }
comm=$(printf '%.15s' "$comm")

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# perf sched timehist -s ends with a table of threads: comm[tid] or
# comm[tid/pid], parent, sched-in count, run time, ...
if ! perf sched timehist -i "$data" -s >"$tmp"; then
	echo "$0: perf sched timehist failed on '$data' (was it made by 'perf sched record'?)" >&2
	exit 1
fi
tid=$(awk -v c="$comm" '
	index($1, c "[") == 1 && $NF ~ /^[0-9]+$/ && NF >= 9 {
		t = substr($1, length(c) + 2); sub(/[]\/].*/, "", t)
		if (t ~ /^[0-9]+$/ && $4 + 0 > best) { best = $4 + 0; tid = t } }
	END { if (tid != "") print tid }' "$tmp")
test -n "$tid" || { echo "$0: no thread named '$comm' in '$data'" >&2; exit 1; }

if ! perf sched timehist -i "$data" -t "$tid" --max-stack 5 >"$tmp"; then
	echo "$0: perf sched timehist -t $tid failed on '$data'" >&2
	exit 1
fi
awk -v c="$comm" -v tid="$tid" -v top="$top" '
	# time cpu thread wait sch-delay run stack...
	$4 ~ /^[0-9.]+$/ && $6 ~ /^[0-9.]+$/ {
		if (prev != "") { W[prev] += $4; N[prev]++ }
		off += $4; run += $6
		k = ""
		for (i = 7; i <= NF; i++) k = k (k == "" ? "" : " ") $i
		prev = (k == "" ? "(no stack)" : k)
	}
	END {
		printf "%s[%s]: on CPU %.0f ms, off CPU %.0f ms\n", c, tid, run, off
		printf "| off CPU, ms | times | switched out from |\n|---|---|---|\n"
		n = 0
		for (k in W) order[++n] = k
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (W[order[j]] > W[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
		for (i = 1; i <= n && i <= top; i++)
			printf "| %.0f | %d | %s |\n", W[order[i]], N[order[i]], order[i]
	}' "$tmp"
