#!/bin/sh
# ckpt-stall-bench.sh - where a checkpoint's stall goes, against dd of the
# same bytes to the same staging folder (issue 12, part 3).
#
# For each case TxM (T tasks of M MiB on this node, one job) a probe per
# task holds M MiB (every page written) and wakes every 0.5 ms, keeping
# the longest gap it saw: the stall as the program feels it.  The job runs
# under "ibcr run" against an ibcrd of its own; one "ibcr checkpoint
# --wait" is taken, then dd writes as many bytes as the checkpoint's
# images hold to the same staging folder (same run, right after).  From
# the committed manifest and CRIU's own statistics (stats-dump in each
# task's image folder) it reports where the time went:
#
#   stall      the longest gap any probe saw (ms)
#   ibcr       the generation's phases outside the dump that the job
#              waits for: quiesce + drain + release before, rebuild +
#              connect + resume after (from the manifest's timeline)
#   dump       the node's dump phase (all tasks' CRIUs, wall time)
#   tasks      each task's dump interval in the dump phase (start-end ms)
#   freeze     CRIU freezing the task (slowest task)
#   page copy  CRIU moving the pages into its pipes (memdump - memwrite)
#   img write  CRIU writing pipes to the image files (memwrite)
#   other      the rest of CRIU's frozen time (threads, files, fds, ...)
#   dd         dd of the images' bytes from /dev/zero to the staging
#              folder (no fsync: CRIU does not sync staging either)
#   memcpy     the same bytes at this machine's memcpy bandwidth into
#              fresh memory (measured once; the first line also gives
#              it into memory written before): not a floor, CRIU can
#              beat it (doc/ckpt-stall.md, last section)
#   stall/dd   the issue's goal is 1.5x
#   CRIU CPU   CPU time (user + system) the node's CRIUs used, summed over
#              tasks (the manifest's dump cpu_ms; the pages the parasite
#              moves are charged to the task, not to CRIU)
#   dd CPU     dd's CPU time for the same bytes
#   CPU/dd     their ratio: on a machine other work keeps busy, the stall
#              also counts time CRIU waited for a CPU; this does not
#
# Usage (root, from a built tree):
#   bench/ckpt-stall-bench.sh [--cases "1x1024 1x4096 1x16384 8x512"]
#       [--staging DIR] [--dir DIR] [--variants "base pipe64m ..."]
#       [--rounds N] [--big-rounds N] [--keep]
# --staging (default /dev/shm) is where CRIU dumps, --dir (default
# /var/tmp) holds the storage the images are committed to.  A case runs
# only if this machine has the memory: the probes plus, with staging on
# tmpfs, their images plus 2 GiB (else a "skipped" row says why).
# --variants runs every case once per variant, the variants one after the
# other for each case (interleaved), so their rows compare side by side:
#   base         as configured (contrib/sysctl.d/60-ibcr.conf, which
#                contrib/deps.sh applies, sets fs.pipe-max-size to 8 MiB)
#   pipeNm       fs.pipe-max-size = N MiB for the run (CRIU's page pipes
#                grow up to it; restored afterwards); pipe1m is the
#                kernel's default
#   criu:FILE    CRIU reads FILE as its configuration (CRIU_CONFIG_FILE
#                in ibcrd's environment, which CRIU inherits): extra
#                CRIU options without changing ibcrd
#   staging:DIR  another staging folder for this variant
#   dirtyN       vm.dirty_ratio = N (and vm.dirty_background_ratio =
#                N / 2) for the run, restored afterwards (the _bytes
#                forms too, if the node sets those): how much of the
#                memory an image may dirty before the kernel makes CRIU
#                wait for writeback (staging on a disk)
#   noreport     on a virtual machine whose balloon device takes back
#                free memory (free page reporting), stop that for the
#                round (/sys/module/page_reporting/parameters/
#                page_reporting_order above the largest order, where
#                the kernel allows it; restored afterwards, then the
#                kernel is made to report its free memory again before
#                the next round) and touch all but 1 GiB of the node's
#                free memory once before the round, so that the host
#                backs it
#   ddfirst      dd also runs before the checkpoint, and the row's dd
#                is that one (scaled to the image's bytes; the one
#                after goes to stderr): before each of the two the
#                kernel's reports of free memory to the host settle
#                (as after noreport), so that both start from the same
#                state (with noreport: no wait).  The dd after a
#                checkpoint finds the page cache holding what it kept
#                of the image, written back, and can take its pages
#                from there rather than from free memory the host took
#                back
# Where the kernel counts what it reported to the host (reported_kib in
# that folder), each round also prints, to stderr, how much it reported
# during the dump and during dd.
# and A+B: both (e.g. pipe16m+staging:/var/tmp).
# --rounds N repeats every case N times (variants interleaved in each
# round; cases of 8 GiB and more run --big-rounds times, default once);
# with more than one round of either, a table of medians follows.
# Prints one markdown table; the manifests and CRIU logs of the last run
# stay in DIR/ckpt-stall.*/ with --keep.
set -eu

CASES="1x1024 1x4096 1x16384 8x512"
BASE=${TMPDIR:-/var/tmp}
SBASE=/dev/shm
VARIANTS=base
ROUNDS=1
BIG_ROUNDS=1
KEEP=0
while test $# -gt 0; do
	case $1 in
	--cases) CASES=$2; shift 2 ;;
	--dir) BASE=$2; shift 2 ;;
	--staging) SBASE=$2; shift 2 ;;
	--variants) VARIANTS=$2; shift 2 ;;
	--rounds|--big-rounds)
		case $2 in
		[1-9]|[1-9][0-9]) ;;
		*) echo "ckpt-stall-bench: $1 $2: want a number of rounds (1-99)" >&2; exit 2 ;;
		esac
		if test "$1" = --rounds; then ROUNDS=$2; else BIG_ROUNDS=$2; fi
		shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) echo "usage: $0 [--cases \"1x1024 8x512\"] [--staging DIR] [--dir DIR] [--variants \"base pipe8m dirty40 noreport ddfirst criu:FILE staging:DIR pipe8m+staging:DIR\"] [--rounds N] [--big-rounds N] [--keep]" >&2
	   exit 2 ;;
	esac
done
test "$(id -u)" = 0 || { echo "ckpt-stall-bench: needs root (CRIU)" >&2; exit 2; }
TOP=$(cd "$(dirname "$0")/.." && pwd)
IBCRD=$TOP/ibcrd/ibcrd
IBCR=$TOP/cli/ibcr
IBCR_INIT=$TOP/init/ibcr-init
IBCR_LIBIBCR=$TOP/lib/ibcr/.libs/libibcr.so
CRIU=${IBCR_CRIU:-/usr/local/sbin/criu}
export IBCR_INIT IBCR_LIBIBCR
for f in "$IBCRD" "$IBCR" "$IBCR_INIT" "$IBCR_LIBIBCR" "$CRIU"; do
	test -x "$f" || test -r "$f" || { echo "ckpt-stall-bench: $f missing: build first" >&2; exit 2; }
done
# CRIU's statistics are decoded with its own python module.
PYCRIU=/usr/bin/python3
$PYCRIU -c 'import pycriu.images' 2>/dev/null || PYCRIU=

W=$(mktemp -d "$BASE/ckpt-stall.XXXXXX")
chmod 755 "$W"
SDIRS=
PIDS=
DPID=
PIPE_MAX0=$(cat /proc/sys/fs/pipe-max-size)
DIRTY0=$(cat /proc/sys/vm/dirty_ratio)
DIRTYBG0=$(cat /proc/sys/vm/dirty_background_ratio)
DIRTYB0=$(cat /proc/sys/vm/dirty_bytes)
DIRTYBGB0=$(cat /proc/sys/vm/dirty_background_bytes)
DIRTY_SET=0
PRDIR=/sys/module/page_reporting/parameters
PR0=$(cat "$PRDIR/page_reporting_order" 2>/dev/null || true)
# One above the largest order of the buddy allocator: no block is that
# large, so none is reported.
PR_OFF=$(awk 'NR == 1 { print NF - 4 }' /proc/buddyinfo)
PR_SET=0
# The free memory the kernel has reported to the host, in KiB, if this
# kernel counts it (not every kernel does: then empty).
reported_kib() {
	cat "$PRDIR/reported_kib" 2>/dev/null || true
}
# touch_free MIB: write MIB MiB of anonymous memory once, then free it.
touch_free() {
	test "$1" -gt 0 || return 0
	python3 -c 'import sys; b = bytearray(b"\1") * (int(sys.argv[1]) << 20)' "$1"
}
# After free page reporting is back on: make the kernel report what is
# free, so the next round starts as a round of a node with reporting
# does.  Reporting starts when a large block is freed, so 1 GiB is
# touched and freed; then wait until the kernel has reported half of
# the free memory (at most 120 s), or 30 s where it keeps no count.
# (The variables are this function's own: run_case's counters are
# global too.)
reporting_settle() {
	prs_r0=$(reported_kib)
	prs_goal=$(awk '/^MemFree:/ { print int($2 / 2) }' /proc/meminfo)
	touch_free 1024
	if test -z "$prs_r0"; then
		sleep 30
		return 0
	fi
	prs_n=0
	while test $(($(reported_kib) - prs_r0)) -lt "$prs_goal" && test $prs_n -lt 120; do
		sleep 1
		prs_n=$((prs_n + 1))
	done
	echo "ckpt-stall-bench: reporting back on: $((($(reported_kib) - prs_r0) / 1024)) MiB reported in ${prs_n} s" \
		"(waiting for $((prs_goal / 1024)))" >&2
}
# noreport_check: can this node's free page reporting be turned off?
noreport_check() {
	if test -z "$PR0"; then
		echo "ckpt-stall-bench: noreport: this kernel has no free page reporting ($PRDIR)" >&2
		exit 2
	fi
	case $PR0 in
	[0-9] | [0-9][0-9]) ;;
	*) echo "ckpt-stall-bench: noreport: page_reporting_order is '$PR0': no balloon reports free pages here" >&2; exit 2 ;;
	esac
	if test "$PR0" -ge "$PR_OFF"; then
		echo "ckpt-stall-bench: noreport: page_reporting_order is $PR0, reporting is off already" \
			"(a run stopped by SIGKILL leaves it so; the kernel's default is the huge page order, 9 on x86-64)" >&2
		exit 2
	fi
}
# sysctls back to what they were before this run.  Writing a dirty ratio
# clears its _bytes form (and the other way round), so the writeback
# limits are written only if a dirtyN variant changed them, each in the
# form the node had.
sysctls_restore() {
	echo "$PIPE_MAX0" >/proc/sys/fs/pipe-max-size
	if test "$PR_SET" = 1; then
		PR_SET=0
		if ! { echo "$PR0" >"$PRDIR/page_reporting_order"; } 2>/dev/null; then
			echo "ckpt-stall-bench: could not set page_reporting_order back: echo $PR0 >$PRDIR/page_reporting_order" >&2
		elif test "${1:-}" != quick; then
			reporting_settle
		fi
	fi
	test "$DIRTY_SET" = 1 || return 0
	if test "$DIRTYB0" != 0; then
		echo "$DIRTYB0" >/proc/sys/vm/dirty_bytes
	else
		echo "$DIRTY0" >/proc/sys/vm/dirty_ratio
	fi
	if test "$DIRTYBGB0" != 0; then
		echo "$DIRTYBGB0" >/proc/sys/vm/dirty_background_bytes
	else
		echo "$DIRTYBG0" >/proc/sys/vm/dirty_background_ratio
	fi
	DIRTY_SET=0
}
cleanup() {
	set +e
	# A second signal must not cut the restore short.
	trap '' HUP INT TERM
	sysctls_restore quick
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	pkill -KILL -f "$W/probe.py" 2>/dev/null
	sleep 0.3
	for d in $SDIRS; do rm -rf "$d"; done
	test "$KEEP" = 1 || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
# Before any work: a round of minutes should not end on this.
case " $(echo "$VARIANTS" | tr + ' ') " in *" noreport "*) noreport_check ;; esac

cat >"$W/probe.py" <<'PY'
import os, signal, sys, time
mib, out = int(sys.argv[1]), sys.argv[2]
buf = bytearray(b"\x5a") * (mib << 20)
for i in range(0, len(buf), 4096):
    buf[i] = (i >> 12) & 0xff
worst = 0.0
def report(sig, frame):
    global worst
    with open(out + ".tmp", "w") as f:
        f.write("%.1f\n" % (worst * 1000))
    os.rename(out + ".tmp", out)
    worst = 0.0
signal.signal(signal.SIGUSR1, report)
with open(out + ".pid", "w") as f:
    f.write("ready\n")
last = time.monotonic()
while True:
    time.sleep(0.0005)
    now = time.monotonic()
    if now - last > worst:
        worst = now - last
    last = now
PY

# The manifest's and CRIU's figures of one generation, as one table row's
# middle part (see the header below).
cat >"$W/row.py" <<'PY'
import json, sys
man, gen_dir, pycriu = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
m = json.load(open(man))
node = m["timeline"]["nodes"][0]["phases"]
def dur(p):
    return node[p]["end_ms"] - node[p]["start_ms"] if p in node else 0.0
before = dur("quiesce") + dur("drain") + dur("release")
after = dur("rebuild") + dur("connect") + dur("resume")
tasks = sorted(m["tasks"], key=lambda t: t["rank"])
iv = " ".join("%d-%d" % (t["dump"]["start_ms"], t["dump"]["end_ms"]) for t in tasks if "dump" in t)
cpu = sum(t["dump"].get("cpu_ms", 0) for t in tasks if "dump" in t)
cr = dict(freeze=0.0, copy=0.0, write=0.0, other=0.0)
if pycriu:
    import pycriu.images as im
    for t in tasks:
        s = im.load(open("%s/task-%d/stats-dump" % (gen_dir, t["rank"]), "rb"))["entries"][0]["dump"]
        ms = lambda k: s.get(k, 0) / 1000.0
        v = dict(freeze=ms("freezing_time"), copy=ms("memdump_time") - ms("memwrite_time"),
                 write=ms("memwrite_time"),
                 other=ms("frozen_time") - ms("memdump_time"))
        for k in cr:
            cr[k] = max(cr[k], v[k])
    crs = "%.0f | %.0f | %.0f | %.0f" % (cr["freeze"], cr["copy"], cr["write"], cr["other"])
else:
    crs = "- | - | - | -"
print("%d %d | %.1f | %.0f | %.1f | %s | %s" % (m["bytes"], cpu, before, dur("dump"), after, iv or "-", crs))
PY

now_ms() { echo $(($(date +%s%N) / 1000000)); }
wait_file() {
	wf_i=0
	while ! test -e "$1"; do
		wf_i=$((wf_i + 1))
		test $wf_i -lt 15000 || { echo "ckpt-stall-bench: $1 never came" >&2; exit 1; }
		sleep 0.02
	done
}

# memcpy bandwidth (MB/s), once, best of 5 copies of 256 MiB: into fresh
# memory (guest page faults and zeroing included, as for the page cache
# an image goes into; each copy reuses memory the last one freed), and
# into memory written before (the copy alone).
read -r MEMCPY MEMCPY_RES <<EOF
$(python3 -c '
import time
a = bytearray(256 << 20)
for i in range(0, len(a), 4096): a[i] = 1
def best(copy):
    t0 = 1e9
    for _ in range(5):
        t = time.perf_counter(); copy(); t0 = min(t0, time.perf_counter() - t)
    return "%.0f" % (len(a) / t0 / 1e6)
b = bytearray(a)
print(best(lambda: bytes(a)), best(lambda: b.__setitem__(slice(None), a)))')
EOF

# ibcrd_start STAGING: a daemon of our own with that staging folder.
ibcrd_start() {
	mkdir -p "$1"
	chmod 755 "$1"
	cat >"$W/ibcrd.conf" <<-EOC
	node = n1
	socket = $W/run/ibcrd.sock
	storage = $W/storage
	staging = $1
	criu = $CRIU
	peer_port = 0
	retention = 1
	timeout_dump = 30m
	EOC
	rm -f "$W/run/ibcrd.sock"
	if test -n "$CRIU_CONF"; then
		CRIU_CONFIG_FILE=$CRIU_CONF "$IBCRD" -F -c "$W/ibcrd.conf" 2>>"$W/ibcrd.log" &
	else
		"$IBCRD" -F -c "$W/ibcrd.conf" 2>>"$W/ibcrd.log" &
	fi
	DPID=$!
	PIDS="$PIDS $DPID"
	IBCR_SOCKET=$W/run/ibcrd.sock
	export IBCR_SOCKET
	wait_file "$IBCR_SOCKET"
}

ibcrd_stop() {
	kill -TERM "$DPID" 2>/dev/null || true
	wait "$DPID" 2>/dev/null || true
}

# dd_measure FILE BYTES: time dd writing BYTES from /dev/zero to FILE
# (after a sync), then remove FILE; sets dd_ms and dd_cpu.
dd_measure() {
	sync
	dd_t0=$(now_ms)
	/usr/bin/time -f "%U %S" -o "$W/dd.time" \
		dd if=/dev/zero of="$1" bs=4M count="$2" iflag=count_bytes 2>/dev/null
	dd_ms=$(($(now_ms) - dd_t0))
	dd_cpu=$(awk '{ print ($1 + $2) * 1000 }' "$W/dd.time")
	rm -f "$1"
}

# run_case LABEL T M STAGING: one job of T tasks of M MiB; one row.
n=0
run_case() {
	label=$1 t=$2 mib=$3 st=$4
	n=$((n + 1))
	job=c$n
	avail=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
	need=$((t * mib + 2048))
	case $(stat -f -c %T "$st") in tmpfs) need=$((need + t * mib)) ;; esac
	if test "$avail" -lt "$need"; then
		echo "| $label | ${t}x$mib MiB | skipped: needs $need MiB free, $avail MiB available |||||||||||||"
		return 0
	fi
	r=0
	while test $r -lt "$t"; do
		mkdir -p "$W/$job.w$r"
		if test "$t" = 1; then
			set -- run --name $job
		else
			set -- run --job $job --rank $r --size $t --leader n1@127.0.0.1
		fi
		( cd "$W/$job.w$r" && exec "$IBCR" "$@" -- python3 "$W/probe.py" $mib "$W/$job.gap$r" \
			>"$W/$job.$r.out" 2>&1 ) &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	# The probes run in PID namespaces of their own: find their pids here.
	r=0
	while test $r -lt "$t"; do
		wait_file "$W/$job.gap$r.pid"
		for p in $(pgrep -f -- "$W/probe.py $mib $W/$job.gap$r\$"); do
			case $(cat /proc/$p/comm 2>/dev/null) in python*) echo $p ;; esac
		done >"$W/$job.gap$r.hpid"
		test "$(wc -l <"$W/$job.gap$r.hpid")" = 1 ||
			{ echo "ckpt-stall-bench: no single probe $job/$r: found" \
				"'$(pgrep -a -f -- "$W/probe.py $mib $W/$job.gap$r\$" | tr '\n' ';')';" \
				"its output: '$(tr '\n' ' ' <"$W/$job.$r.out")'" >&2; exit 1; }
		r=$((r + 1))
	done
	sleep 1
	if test "$DDFIRST" = 1; then
		# dd first, from the state the checkpoint will start from:
		# the kernel's reports to the host settled before each
		# (with noreport nothing is reported: no wait).
		test "$PR_SET" = 1 || reporting_settle
		ddb=$((t * mib * 1048576))
		dd_measure "$st/ddb.$job" "$ddb"
		ddb_ms=$dd_ms ddb_cpu=$dd_cpu
		test "$PR_SET" = 1 || reporting_settle
	fi
	# Reset every probe's worst gap, checkpoint, read them.
	r=0
	while test $r -lt "$t"; do
		kill -USR1 "$(cat "$W/$job.gap$r.hpid")"
		wait_file "$W/$job.gap$r"
		rm -f "$W/$job.gap$r"
		r=$((r + 1))
	done
	rep0=$(reported_kib)
	"$IBCR" checkpoint $job --wait >"$W/$job.ckpt" 2>&1 ||
		{ echo "ckpt-stall-bench: checkpoint of $job failed:" >&2; cat "$W/$job.ckpt" "$W/ibcrd.log" >&2; exit 1; }
	stall=0
	r=0
	while test $r -lt "$t"; do
		kill -USR1 "$(cat "$W/$job.gap$r.hpid")"
		wait_file "$W/$job.gap$r"
		stall=$(awk -v a=$stall -v b="$(cat "$W/$job.gap$r")" 'BEGIN { print (b > a) ? b : a }')
		r=$((r + 1))
	done
	gen=$W/storage/local/$job/gen-1
	mid=$(${PYCRIU:-python3} "$W/row.py" "$gen/manifest.json" "$gen" "${PYCRIU:+1}")
	bytes=${mid%% *}
	cpu_ms=${mid#* }
	cpu_ms=${cpu_ms%% *}
	mid="$bytes ${mid#* * }"
	# dd of as many bytes to the same staging folder, right after.
	rep1=$(reported_kib)
	dd_measure "$st/dd.$job" "$bytes"
	if test -n "$rep0"; then
		echo "ckpt-stall-bench: $label ${t}x$mib: reported to the host: $(((rep1 - rep0) / 1024)) MiB during the checkpoint," \
			"$((($(reported_kib) - rep1) / 1024)) MiB during sync and dd" >&2
	fi
	if test "$DDFIRST" = 1; then
		# The row's dd is the one before, scaled to the image's bytes.
		echo "ckpt-stall-bench: $label ${t}x$mib: dd before the checkpoint $ddb_ms ms ($ddb_cpu ms CPU) for $ddb bytes," \
			"after it $dd_ms ms ($dd_cpu ms CPU) for $bytes bytes" >&2
		dd_ms=$(awk -v m="$ddb_ms" -v b="$bytes" -v d="$ddb" 'BEGIN { printf "%.0f", m * b / d }')
		dd_cpu=$(awk -v m="$ddb_cpu" -v b="$bytes" -v d="$ddb" 'BEGIN { printf "%.0f", m * b / d }')
	fi
	# The job ends: its ibcr run's end their tasks.
	for p in $(pgrep -f -- "$IBCR run --(name|job) $job "); do kill -TERM "$p" 2>/dev/null || true; done
	r=0
	while test $r -lt "$t"; do
		p=$(cat "$W/$job.gap$r.hpid")
		kill -KILL "$p" 2>/dev/null || true
		while test -e /proc/$p; do sleep 0.05; done
		r=$((r + 1))
	done
	cp "$gen/manifest.json" "$W/$job.manifest.json"
	rm -rf "$W/storage/local/$job"
	awk -v l="$label" -v c="${t}x$mib MiB" -v s="$stall" -v mid="$mid" -v dd="$dd_ms" \
		-v mc="$MEMCPY" -v cc="$cpu_ms" -v dc="$dd_cpu" 'BEGIN {
		split(mid, f, " ")
		printf "| %s | %s | %.2f | %.0f | %s | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx |\n", l, c,
			f[1] / 1073741824, s, substr(mid, index(mid, "|") + 2), dd, f[1] / mc / 1000,
			s / (dd > 0 ? dd : 1), cc, dc, cc / (dc > 0 ? dc : 1) }'
}

echo "ckpt-stall-bench: $(nproc) cores, load $(cut -d" " -f1-3 /proc/loadavg)," \
	"$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo) GiB available," \
	"memcpy $MEMCPY MB/s (into memory written before: $MEMCPY_RES), staging $SBASE, storage $W," \
	"fs.pipe-max-size $(cat /proc/sys/fs/pipe-max-size), vm.dirty_ratio $DIRTY0, vm.dirty_background_ratio $DIRTYBG0," \
	"free page reporting ${PR0:+from order }${PR0:-none}" >&2
echo "| variant | case | GiB | stall | ibcr before dump | dump | ibcr after dump | task dumps | CRIU freeze | CRIU page copy | CRIU image write | CRIU other | dd same bytes | memcpy | stall/dd | CRIU CPU | dd CPU | CPU/dd |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
# Variants interleaved case by case and round by round, so that the
# machine's state (other load, memory, page cache) hits them alike.
for c in $CASES; do
	rr=$ROUNDS
	test $((${c%%x*} * ${c#*x})) -lt 8192 || rr=$BIG_ROUNDS
	i=0
	while test $i -lt $rr; do
		i=$((i + 1))
		for v in $VARIANTS; do
			CRIU_CONF=
			DDFIRST=0
			st=$SBASE
			sysctls_restore
			for o in $(echo "$v" | tr + ' '); do
				case $o in
				base) ;;
				pipe*m)
					mb=${o#pipe}
					echo $((${mb%m} * 1048576)) >/proc/sys/fs/pipe-max-size ;;
				dirty*)
					pct=${o#dirty}
					case $pct in
					[1-9]|[1-9][0-9]|100) ;;
					*) echo "ckpt-stall-bench: $o: want dirtyN, N a percentage (1-100)" >&2; exit 2 ;;
					esac
					DIRTY_SET=1
					echo $((pct / 2)) >/proc/sys/vm/dirty_background_ratio
					echo "$pct" >/proc/sys/vm/dirty_ratio ;;
				noreport)
					# Kernels that keep the order at or under
					# the largest cannot turn reporting off.
					PR_SET=1
					if ! { echo "$PR_OFF" >"$PRDIR/page_reporting_order"; } 2>/dev/null; then
						PR_SET=0
						echo "ckpt-stall-bench: noreport: this kernel does not let page_reporting_order go above the largest order ($((PR_OFF - 1)))" >&2
						exit 2
					fi
					# All but 1 GiB of the free memory, written once
					# so that the host backs it, then freed.
					touch_free "$(awk '/^MemFree:/ { print int($2 / 1024) - 1024 }' /proc/meminfo)" ;;
				ddfirst) DDFIRST=1 ;;
				criu:*) CRIU_CONF=${o#criu:} ;;
				staging:*) st=${o#staging:} ;;
				*) echo "ckpt-stall-bench: unknown variant $o" >&2; exit 2 ;;
				esac
			done
			sdir=$(mktemp -d "$st/ckpt-stall.XXXXXX")
			SDIRS="$SDIRS $sdir"
			ibcrd_start "$sdir"
			run_case "$v" "${c%%x*}" "${c#*x}" "$sdir" >"$W/row"
			cat "$W/row"
			cat "$W/row" >>"$W/rows"
			ibcrd_stop
			rm -rf "$sdir"
		done
	done
done
sysctls_restore quick
test "$ROUNDS" -gt 1 || test "$BIG_ROUNDS" -gt 1 || exit 0
echo
echo "Medians over each case's n rounds (range), ms:"
echo
python3 - "$W/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(f) < 18 or f[3] == "":
        continue
    rows.setdefault((f[1], f[0]), []).append(f)
print("| case | variant | n | stall | dump | CRIU page copy | CRIU image write | dd same bytes | stall/dd | CRIU CPU | dd CPU | CPU/dd |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
def m(v, i, fmt="%.0f"):
    x = sorted(float(r[i].rstrip("x")) for r in v)
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(x), x[0], x[-1])
for (case, var), v in rows.items():
    print("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (case, var, len(v), m(v, 3),
          m(v, 5), m(v, 9), m(v, 10), m(v, 12), m(v, 14, "%.2f"), m(v, 15), m(v, 16),
          m(v, 17, "%.2f")))
PY
