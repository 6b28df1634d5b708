#!/bin/sh
# offcpu-summary.sh - where a process spent a run's time off the CPU,
# from a "perf sched record -g" of it (doc/ckpt-stall.md).
#
# Usage: bench/offcpu-summary.sh PERF_DATA COMM [N]
#   e.g. perf sched record -g -o perf.data -- \
#            bench/ckpt-stall-bench.sh --cases 1x16384 --staging /var/tmp
#        bench/offcpu-summary.sh perf.data criu
#        bench/offcpu-summary.sh perf.data dd
#
# Takes the task named COMM that ran longest (the dumping CRIU, not its
# helpers), and prints its time on the CPU, its time waiting to be woken,
# its time runnable but waiting for a CPU, then its waits summed by the
# kernel stack it left the CPU from (the N largest, default 8): a wait
# begins where the task switched out, so each wait is charged to the
# stack of the switch before it.
set -eu

test $# -ge 2 || { echo "usage: $0 PERF_DATA COMM [N]" >&2; exit 2; }
data=$1 comm=$2 top=${3:-8}
test -r "$data" || { echo "$0: cannot read '$data'" >&2; exit 1; }
case $top in '' | *[!0-9]*) echo "$0: N must be a number, not '$top'" >&2; exit 2 ;; esac

# perf sched timehist -s ends with a table of tasks: comm[tid] parent
# sched-in run-time ...; the longest run-time of COMM wins.
pid=$(perf sched timehist -i "$data" -s 2>/dev/null |
	awk -v c="$comm" '$1 ~ "^" c "\\[[0-9]+\\]$" && NF >= 9 {
		if ($4 + 0 > best) { best = $4 + 0; p = $1 } }
		END { if (p != "") { sub(/^.*\[/, "", p); sub(/\]$/, "", p); print p } }')
test -n "$pid" || { echo "$0: no task named '$comm' in $data" >&2; exit 1; }

perf sched timehist -i "$data" -p "$pid" 2>/dev/null | awk -v c="$comm" -v pid="$pid" -v top="$top" '
	# time cpu task wait sch-delay run stack...
	NR > 3 && NF >= 6 {
		if (prev != "") { W[prev] += $4; N[prev]++ }
		wait += $4; delay += $5; run += $6
		k = ""
		for (i = 7; i <= NF && i <= 15; i++) k = k (k == "" ? "" : " ") $i
		prev = (k == "" ? "(no stack)" : k)
	}
	END {
		printf "%s[%s]: on CPU %.0f ms, waiting %.0f ms, runnable %.0f ms\n",
			c, pid, run, wait, delay
		printf "| waited, ms | waits | switched out from |\n|---|---|---|\n"
		n = 0
		for (k in W) order[++n] = k
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (W[order[j]] > W[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
		for (i = 1; i <= n && i <= top; i++)
			printf "| %.0f | %d | %s |\n", W[order[i]], N[order[i]], order[i]
	}'
