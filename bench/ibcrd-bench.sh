#!/bin/sh
# ibcrd-bench.sh - what a checkpoint and a restart cost, against the raw
# operations underneath (issue 5, "Performance"):
#
#   stall    the longest pause a running program sees during
#            "ibcr checkpoint --wait", against a bare "criu dump
#            --leave-running" of the same kind of process (goal <= 1.2x);
#   commit   the durable copy to storage (copy, fsync, checksums, manifest)
#            against "dd conv=fsync" of the same bytes to the same storage
#            (goal: bandwidth >= 0.9x dd's);
#   restart  "ibcr restart" until the program runs again, against reading
#            the same image files (goal <= 1.2x + 100 ms).
#
# Usage (root, from a built tree):
#   bench/ibcrd-bench.sh [--sizes "256 1024 4096"] [--dir DIR] [--staging DIR2]
# DIR (default /var/tmp) holds the storage: put it on the disk you want
# measured.  DIR2 (default /dev/shm) is the node-local staging CRIU dumps
# to, as on a compute node (tmpfs or a local SSD): on the storage's own
# disk the copy would compete with the staging's writeback.  Caches are
# dropped before each restart and raw read.  Prints a markdown table;
# every number is one run.
set -eu

SIZES="256 1024"
BASE=${TMPDIR:-/var/tmp}
SBASE=/dev/shm
while test $# -gt 0; do
	case $1 in
	--sizes) SIZES=$2; shift 2 ;;
	--dir) BASE=$2; shift 2 ;;
	--staging) SBASE=$2; shift 2 ;;
	*) echo "usage: $0 [--sizes \"256 1024 4096\"] [--dir DIR] [--staging DIR2]" >&2; exit 2 ;;
	esac
done
test "$(id -u)" = 0 || { echo "ibcrd-bench: needs root (CRIU)" >&2; exit 2; }
TOP=$(cd "$(dirname "$0")/.." && pwd)
IBCRD=$TOP/ibcrd/ibcrd
IBCR=$TOP/cli/ibcr
IBCR_INIT=$TOP/init/ibcr-init
IBCR_LIBIBCR=$TOP/lib/ibcr/.libs/libibcr.so
CRIU=${IBCR_CRIU:-/usr/local/sbin/criu}
export IBCR_INIT IBCR_LIBIBCR
for f in "$IBCRD" "$IBCR" "$IBCR_INIT" "$IBCR_LIBIBCR" "$CRIU"; do
	test -x "$f" || test -r "$f" || { echo "ibcrd-bench: $f missing: build first" >&2; exit 2; }
done

W=$(mktemp -d "$BASE/ibcrd-bench.XXXXXX")
S=$(mktemp -d "$SBASE/ibcrd-bench.XXXXXX")
chmod 755 "$W" "$S"
PIDS=
cleanup() {
	for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
	sleep 0.3
	rm -rf "$W" "$S"
}
trap cleanup EXIT

# The probe holds SIZE MiB (every page written); its loop wakes every
# 0.5 ms and keeps the longest gap between two wake-ups, which is what a
# freeze looks like from inside.  SIGUSR1 writes that gap (ms) to the
# file named by $PROBE_OUT and starts a new measurement.
cat >"$W/probe.py" <<'PY'
import os, signal, sys, time
mib = int(sys.argv[1])
buf = bytearray(b"\x5a") * (mib << 20)
for i in range(0, len(buf), 4096):
    buf[i] = i & 0xff
out = os.environ["PROBE_OUT"]
worst = 0.0
def report(sig, frame):
    global worst
    with open(out + ".tmp", "w") as f:
        f.write("%.1f\n" % (worst * 1000))
    os.rename(out + ".tmp", out)
    worst = 0.0
signal.signal(signal.SIGUSR1, report)
with open(out + ".ready", "w") as f:
    f.write("ready\n")
last = time.monotonic()
while True:
    time.sleep(0.0005)
    now = time.monotonic()
    if now - last > worst:
        worst = now - last
    last = now
PY

cat >"$W/ibcrd.conf" <<EOC
socket = $W/run/ibcrd.sock
storage = $W/storage
staging = $S
criu = $CRIU
peer_port = 0
retention = 1
EOC
"$IBCRD" -F -c "$W/ibcrd.conf" 2>"$W/ibcrd.log" &
PIDS="$PIDS $!"
IBCR_SOCKET=$W/run/ibcrd.sock
export IBCR_SOCKET
while ! test -S "$IBCR_SOCKET"; do sleep 0.05; done

now_ms() { echo $(($(date +%s%N) / 1000000)); }
wait_file() { while ! test -e "$1"; do sleep 0.02; done; }

# gap FILE PID: the probe's longest pause since the last call, in ms.
gap() {
	rm -f "$1"
	kill -USR1 "$2"
	wait_file "$1"
	cat "$1"
}

app_of() {
	"$IBCR" status "$1" --json | sed -n 's/.*"app_pid":\([0-9]*\).*/\1/p'
}

echo "| size | stall: ibcr checkpoint | stall: bare criu dump | ratio | commit (copy+fsync+manifest) | dd conv=fsync | bandwidth ratio | restart | raw read | goal (1.2x read + 100 ms) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
n=0
for mib in $SIZES; do
	n=$((n + 1))
	job=b$mib-$n
	# --- ibcr checkpoint of a running probe
	PROBE_OUT=$W/$job.gap "$IBCR" run --name $job -- python3 "$W/probe.py" $mib \
		>"$W/$job.out" 2>&1 &
	run=$!
	PIDS="$PIDS $run"
	wait_file "$W/$job.gap.ready"
	while test -z "$(app_of $job)"; do sleep 0.05; done
	app=$(app_of $job)
	sleep 0.5
	gap "$W/$job.gap" $app >/dev/null
	out=$("$IBCR" checkpoint $job --wait)
	stall=$(gap "$W/$job.gap" $app)
	# copy, fsync, checksums and the manifest's rename: the durable commit
	copy=$(echo "$out" | sed -n 's/.*copy \([0-9]*\) ms.*/\1/p')
	bytes=$(sed -n 's/^  "bytes": *\([0-9]*\).*/\1/p' "$W/storage/local/$job/gen-1/manifest.json")

	# --- bare criu dump of the same kind of process under ibcr-init
	PROBE_OUT=$W/bare$n.gap "$IBCR_INIT" --pidfile "$W/bare$n.pid" -- \
		python3 "$W/probe.py" $mib >/dev/null 2>&1 </dev/null &
	PIDS="$PIDS $!"
	wait_file "$W/bare$n.gap.ready"
	wait_file "$W/bare$n.pid"
	init=$(cat "$W/bare$n.pid")
	bapp=$(cat /proc/$init/task/$init/children | tr -d ' ')
	sleep 0.5
	gap "$W/bare$n.gap" $bapp >/dev/null
	mkdir -p "$S/bare$n"
	"$CRIU" dump -t $init -D "$S/bare$n" -o dump.log --leave-running
	bare=$(gap "$W/bare$n.gap" $bapp)
	kill -9 $init
	rm -rf "$S/bare$n"

	# --- dd of as many bytes, from the same staging to the same storage,
	# durably.  Random bytes: a virtual disk may write zeros for free.
	head -c "$bytes" /dev/urandom >"$S/ddsrc"
	t0=$(now_ms)
	dd if="$S/ddsrc" of="$W/storage/dd.$mib" bs=4M conv=fsync 2>/dev/null
	dd_ms=$(($(now_ms) - t0))
	rm -f "$W/storage/dd.$mib" "$S/ddsrc"

	# --- restart, against reading the image files
	kill -9 $run $(cat /proc/$app/status | sed -n 's/^PPid:\t//p') $app 2>/dev/null || true
	while test -e /proc/$app; do sleep 0.02; done
	# Both read the images from the storage, not from the page cache.
	sync; echo 3 >/proc/sys/vm/drop_caches
	t0=$(now_ms)
	PROBE_OUT=$W/$job.gap2 "$IBCR" restart $job >"$W/$job.rs.out" 2>"$W/$job.rs.err" &
	rs=$!
	PIDS="$PIDS $rs"
	while ! grep -q "restored from" "$W/$job.rs.err" 2>/dev/null; do sleep 0.005; done
	restart_ms=$(($(now_ms) - t0))
	kill -TERM $rs; wait $rs 2>/dev/null || true
	sync; echo 3 >/proc/sys/vm/drop_caches
	t0=$(now_ms)
	cat "$W/storage/local/$job/gen-1/task-0/"* >/dev/null
	read_ms=$(($(now_ms) - t0))

	ratio=$(awk "BEGIN { printf \"%.2f\", $stall / ($bare > 0 ? $bare : 1) }")
	bw=$(awk "BEGIN { printf \"%.2f\", ($dd_ms > 0 ? $dd_ms : 1) / ($copy > 0 ? $copy : 1) }")
	goal=$(awk "BEGIN { printf \"%.0f\", 1.2 * $read_ms + 100 }")
	echo "| $mib MiB | $stall ms | $bare ms | ${ratio}x | ${copy%.*} ms | $dd_ms ms | ${bw}x | $restart_ms ms | $read_ms ms | $goal ms |"
	rm -rf "$W/storage/local/$job" "$S/$job"
done
