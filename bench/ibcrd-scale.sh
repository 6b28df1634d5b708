#!/bin/sh
# ibcrd-scale.sh - what a checkpoint costs against the number of nodes
# (issue 13): N network-namespace hosts on this machine, an ibcrd on each
# (one munged, MUNGE between them), one job with one small task per host
#
#   ibcr run --job J --rank R --size N --leader n1@ADDR -- \
#       sh -c 'while :; do sleep 0.2; done'
#
# and C checkpoints of it from the leader ("ibcr checkpoint J --wait").
# From each committed manifest's timeline (the leader's record of every
# node and phase, see ibcrd(8) TIMELINE) it reports against N:
#
#   total   generation start to the manifest's rename (commit);
#   stall   generation start to the last node's resume: what the job
#           feels;
#   coord   total minus the dump phase's and the copy phase's wall time:
#           the coordination (begin, quiesce, drain, release, rebuild,
#           connect, resume, and the commit's own work);
#   dump    the dump phase's wall time, against the sum of the nodes'
#           own dump times (what a node-after-node dump would cost) and
#           their ratio (the parallelism obtained);
#   begin   the begin phase (one MUNGE credential per member and its
#           worker's fork), and one round trip to every node (the
#           quiesce phase, which costs nothing on the nodes);
#   leader CPU per request
#           what sending one session request and reading its reply costs
#           the leader's CPU (the serial part of a flat fan-out), and per
#           member for gen-begin (MUNGE's client side, the connect): the
#           per-message costs doc/scale.md's model starts from.
#
# Median and range over the C checkpoints, in ms.  Every task runs in a
# working folder of its own, as on separate machines.
#
# Each N runs once per fan-out of --fanout (default "flat 4"): "flat" sets
# fanout = 64 in ibcrd.conf (at least N: the leader asks every member),
# a number K makes the members a tree of K children per node (ibcrd(8)),
# side by side on the same hosts.
#
# Then, for each N and fan-out, the restore side (off with --no-restore):
# a job of N ranks that use verbs (bench/verbs_ns.c in its waiting mode:
# its QPs made, it sleeps; softib as the device, libibcr preloaded) is
# checkpointed once, killed, and restarted on all N hosts at once
# ("ibcr restart J --rank R --leader ..." on each).  From the leader's
# record of the restart ("last_restore" in ibcr status --json):
#   restore wall   first node's restore start to the last one's end;
#   sum            the nodes' own restore times added up, and sum/wall;
#   barrier        the last restore's end to the last node's resume: the
#                  leader's wait for every rank (gen-begin down its tree),
#                  then rebuild, connect, resume on every node;
#   rebuild..resume  that barrier from the rebuild's start.
#
# Usage (root, from a built tree):
#   bench/ibcrd-scale.sh [--nodes "2 4 8 16 32"] [--fanout "flat 4"]
#                        [--checkpoints 5] [--no-restore] [--dir DIR]
#                        [--base BUILDDIR] [--keep]
# DIR (default /var/tmp) holds the shared storage; staging is in /dev/shm.
# --base names the build tree of another ibcr (e.g. a worktree of an
# older commit, built): for each N its ibcrd's run first, on the same
# hosts, then this tree's, and a second table compares the two (from the
# manifests' "times", which both have, and the wall time of
# "ibcr checkpoint --wait").
# Prints markdown tables, and the raw numbers per checkpoint to
# DIR/ibcrd-scale.*/raw.txt (kept when --keep is given).
set -eu

NODES="2 4 8 16 32"
FANOUTS="flat 4"
RESTORE=1
CKPTS=5
BASE=${TMPDIR:-/var/tmp}
KEEP=0
BASEDIR=
while test $# -gt 0; do
	case $1 in
	--base) BASEDIR=$(cd "$2" && pwd); shift 2 ;;
	--nodes) NODES=$2; shift 2 ;;
	--fanout) FANOUTS=$2; shift 2 ;;
	--no-restore) RESTORE=0; shift ;;
	--checkpoints) CKPTS=$2; shift 2 ;;
	--dir) BASE=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) echo "usage: $0 [--nodes \"2 4 8 16 32\"] [--fanout \"flat 4\"] [--checkpoints 5] [--no-restore] [--dir DIR] [--base BUILDDIR] [--keep]" >&2
	   exit 2 ;;
	esac
done
test "$(id -u)" = 0 || { echo "ibcrd-scale: needs root (CRIU, namespaces)" >&2; exit 2; }
TOP=$(cd "$(dirname "$0")/.." && pwd)
IBCRD=$TOP/ibcrd/ibcrd
IBCR=$TOP/cli/ibcr
IBCR_INIT=$TOP/init/ibcr-init
IBCR_LIBIBCR=$TOP/lib/ibcr/.libs/libibcr.so
CRIU=${IBCR_CRIU:-/usr/local/sbin/criu}
export IBCR_INIT IBCR_LIBIBCR
for f in "$IBCRD" "$IBCR" "$IBCR_INIT" "$IBCR_LIBIBCR" "$CRIU" \
	${BASEDIR:+"$BASEDIR/ibcrd/ibcrd" "$BASEDIR/cli/ibcr" "$BASEDIR/init/ibcr-init"}; do
	test -x "$f" || test -r "$f" || { echo "ibcrd-scale: $f missing: build first" >&2; exit 2; }
done
for c in munged mungekey ip nsenter python3; do
	command -v $c >/dev/null || { echo "ibcrd-scale: $c missing (contrib/deps.sh)" >&2; exit 2; }
done
MAX=0
for n in $NODES; do test "$n" -gt "$MAX" && MAX=$n; done
test "$MAX" -le 64 || { echo "ibcrd-scale: at most 64 hosts" >&2; exit 2; }

W=$(mktemp -d "$BASE/ibcrd-scale.XXXXXX")
S=$(mktemp -d /dev/shm/ibcrd-scale.XXXXXX)
chmod 755 "$W" "$S"
TAG=sc$$
NET=
PIDS=
cleanup() {
	set +e
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	i=1
	while test $i -le "$MAX"; do
		pids=$(ip netns pids "${TAG}h$i" 2>/dev/null)
		test -n "$pids" && kill -KILL $pids 2>/dev/null
		ip link del "${TAG}v$i" 2>/dev/null
		ip netns del "${TAG}h$i" 2>/dev/null
		i=$((i + 1))
	done
	ip link del "${TAG}b" 2>/dev/null
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	sleep 0.3
	rm -rf "$S"
	test "$KEEP" = 1 || rm -rf "$W"
}
trap cleanup EXIT INT TERM

# A /24 of 198.18.0.0/15 (benchmark range) not in use here.
k=0
while test $k -lt 512; do
	i=$(( ($$ + k) % 512 ))
	cand="198.$((18 + i / 256)).$((i % 256))"
	if ! ip -4 -o addr show | grep -q " inet $cand\."; then NET=$cand; break; fi
	k=$((k + 1))
done
test -n "$NET" || { echo "ibcrd-scale: no free /24 in 198.18.0.0/15" >&2; exit 1; }

ip link add name "${TAG}b" type bridge
ip addr add "$NET.254/24" dev "${TAG}b"
ip link set "${TAG}b" up
i=1
while test $i -le "$MAX"; do
	ns=${TAG}h$i
	ip netns add "$ns"
	ip link add "${TAG}v$i" type veth peer name "${TAG}p$i"
	ip link set "${TAG}p$i" netns "$ns"
	ip link set "${TAG}v$i" master "${TAG}b" up
	ip -n "$ns" link set "${TAG}p$i" name eth0
	ip -n "$ns" addr add "$NET.$i/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
	i=$((i + 1))
done

# One munged for all hosts, with a key of its own.
mkdir -p "$W/munge/key" "$W/munge/sock" "$W/munge/log"
chmod 0755 "$W/munge" "$W/munge/sock"
chmod 0700 "$W/munge/key"
mungekey --create --keyfile="$W/munge/key/munge.key"
munged --foreground --force --key-file="$W/munge/key/munge.key" \
	--socket="$W/munge/sock/munge.socket" --pid-file="$W/munge/munged.pid" \
	--log-file="$W/munge/log/munged.log" --seed-file="$W/munge/key/munged.seed" \
	2>>"$W/munge/log/stderr" &
PIDS="$PIDS $!"
t=0
until test -S "$W/munge/sock/munge.socket"; do
	t=$((t + 1)); test $t -lt 100 || { echo "ibcrd-scale: munged did not start" >&2; exit 1; }
	sleep 0.05
done

# softib (a private copy) and verbs_ns for the restore side.
SOFTIB=$W/softib
if test "$RESTORE" = 1; then
	mkdir -p "$SOFTIB"
	for f in "$TOP"/lib/softib/.libs/lib*.so.[0-9]; do cp -L "$f" "$SOFTIB/"; done
	${CC:-cc} -O2 -o "$W/verbs_ns" "$TOP/bench/verbs_ns.c" -libverbs -lpthread
fi

# One ibcrd per host of build tree $1 (hosts 1..$2), fan-out $3 (empty:
# the build's default); staging on tmpfs as on a compute node.
mkdir -p "$W/shared"
DPIDS=
daemons_start() {
	i=1
	while test $i -le "$2"; do
		h=$W/h$i
		mkdir -p "$h" "$W/w$i"
		chmod 0755 "$h"
		cat >"$h/ibcrd.conf" <<-EOF
		node = n$i
		socket = $h/run/ibcrd.sock
		storage = $W/shared
		staging = $S/h$i
		peer_port = 7195
		munge_socket = $W/munge/sock/munge.socket
		criu = $CRIU
		retention = $((CKPTS + 1))
		EOF
		if test -n "${3:-}"; then echo "fanout = $3" >>"$h/ibcrd.conf"; fi
		rm -f "$h/run/ibcrd.sock"
		nsenter --net=/run/netns/${TAG}h$i env IBCR_INIT="$1/init/ibcr-init" "$1/ibcrd/ibcrd" -F \
			-c "$h/ibcrd.conf" 2>>"$h/ibcrd.log" &
		DPIDS="$DPIDS $!"
		PIDS="$PIDS $!"
		i=$((i + 1))
	done
	i=1
	while test $i -le "$2"; do
		t=0
		until test -S "$W/h$i/run/ibcrd.sock"; do
			t=$((t + 1)); test $t -lt 200 || { echo "ibcrd-scale: ibcrd h$i did not start:" >&2
				cat "$W/h$i/ibcrd.log" >&2; exit 1; }
			sleep 0.05
		done
		i=$((i + 1))
	done
}

daemons_stop() {
	for p in $DPIDS; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $DPIDS; do
		t=0
		while kill -0 "$p" 2>/dev/null; do
			t=$((t + 1)); test $t -lt 100 || { kill -KILL "$p" 2>/dev/null; break; }
			sleep 0.05
		done
		wait "$p" 2>/dev/null || true
	done
	DPIDS=
}

on() {
	h=$1
	shift
	IBCR_SOCKET=$W/h$h/run/ibcrd.sock nsenter --net=/run/netns/${TAG}h$h "$@"
}

# joined J N: the leader's log says every other node joined (older
# ibcrd's status does not list members).
joined() {
	test "$(grep -c "job $1: node n[0-9]* (.*) joined with rank" "$W/h1/ibcrd.log")" -ge $(($2 - 1))
}

cat >"$W/stats.py" <<'PY'
import json, statistics, sys
n, mdir, ckpts, wall, label, fan = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                    sys.argv[4].split(), sys.argv[5], sys.argv[7])
rows = []
def med(v):
    v = sorted(v)
    return statistics.median(v), v[0], v[-1]
def fmt(v):
    return "%.0f (%.0f-%.0f)" % med(v)
for k in range(1, ckpts + 1):
    m = json.load(open("%s/gen-%d/manifest.json" % (mdir, k)))
    times = m["times"]
    # Both builds: the leader's phase times.
    phases = sum(times[p] for p in ("quiesce_ms", "drain_ms", "release_ms", "dump_ms",
                                    "rebuild_ms", "resume_ms"))
    base = dict(cmd=float(wall[k - 1]), phases=phases, dump=times["dump_ms"],
                pcoord=phases - times["dump_ms"], copy=times["copy_ms"])
    if "timeline" not in m:
        rows.append(base)
        print("raw %s N=%d gen=%d %s" % (label, n, k, " ".join(
            "%s=%.1f" % kv for kv in sorted(base.items()))), file=sys.stderr)
        continue
    tl = m["timeline"]
    nodes = tl["nodes"]
    assert len(nodes) == n, (len(nodes), n)
    def span(ph):
        s = [x["phases"][ph] for x in nodes if ph in x["phases"]]
        return min(e["start_ms"] for e in s), max(e["end_ms"] for e in s)
    dump_sum = sum(x["phases"]["dump"]["node_ms"] for x in nodes)
    b0, b1 = span("begin") if n > 1 else (0.0, 0.0)
    q0, q1 = span("quiesce")
    r0, r1 = span("resume")
    row = dict(base, total=tl["total_ms"], stall=r1, dump_sum=dump_sum, begin=b1 - b0,
               quiesce=q1 - q0)
    # The leader's own CPU per request of a session (send, read, HMAC,
    # JSON), and per child for gen-begin (MUNGE client side, connect, and
    # the "begin" that children leading nodes get): the leader talks to
    # its children only.
    leader = [x["node"] for x in nodes if x["leader"]][0]
    kids = sum(1 for x in nodes if x.get("parent", leader) == leader and not x["leader"])
    inner = len({x.get("parent") for x in nodes} - {None, leader})
    nreq = tl["requests"] - kids - inner
    row["us_req"] = 1000.0 * (tl["fanout_cpu_ms"] - tl["begin_cpu_ms"]) / max(nreq, 1)
    row["us_begin"] = 1000.0 * tl["begin_cpu_ms"] / max(kids, 1)
    row["reqs"] = tl["requests"]
    row["levels"] = tl.get("levels", 1)
    row["coord"] = row["total"] - row["dump"] - row["copy"]
    rows.append(row)
    print("raw %s N=%d gen=%d %s" % (label, n, k, " ".join(
        "%s=%.1f" % kv for kv in sorted(row.items()))), file=sys.stderr)
def f(key):
    return fmt([r[key] for r in rows])
# One line for the summary file: label N and medians, for the comparison.
with open(sys.argv[6], "a") as out:
    out.write("%s %d %s %s\n" % (label, n, fan, " ".join("%s=%.1f" % (key, med([r[key] for r in rows])[0])
                                                for key in sorted(rows[0]))))
if "total" in rows[0]:
    par = sorted(r["dump_sum"] / r["dump"] for r in rows)
    print("| %d | %s | %d | %s | %s | %s | %s | %s | %.2f | %s | %s | %s | %.0f | %.0f | %.0f |" % (
        n, fan, med([r["levels"] for r in rows])[0], f("total"), f("stall"), f("coord"), f("dump"), f("dump_sum"),
        statistics.median(par), f("copy"), f("begin"), f("quiesce"),
        med([r["reqs"] for r in rows])[0], med([r["us_req"] for r in rows])[0],
        med([r["us_begin"] for r in rows])[0]))
PY

# run_job TREE LABEL N FANOUT: job of N ranks, CKPTS checkpoints; prints
# its row.
run_job() {
	tree=$1 label=$2 n=$3 fan=$4 job=$2$3$4
	r=0
	while test $r -lt "$n"; do
		h=$((r + 1))
		( cd "$W/w$h" && on $h env IBCR_INIT="$tree/init/ibcr-init" \
			IBCR_LIBIBCR="$tree/lib/ibcr/.libs/libibcr.so" "$tree/cli/ibcr" run --job $job \
			--rank $r --size $n --leader "n1@$NET.1" \
			-- sh -c 'while :; do sleep 0.2; done' >"$W/$job.$r.out" 2>"$W/$job.$r.err" ) &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	t=0
	until joined $job $n; do
		t=$((t + 1)); test $t -lt 600 || { echo "ibcrd-scale: job $job: not every rank joined" >&2; exit 1; }
		sleep 0.05
	done
	walls=
	k=1
	while test $k -le "$CKPTS"; do
		t0=$(date +%s%N)
		on 1 "$tree/cli/ibcr" checkpoint $job --wait >"$W/$job.ck$k" 2>&1 ||
			{ echo "ibcrd-scale: checkpoint $k of $job failed:" >&2; cat "$W/$job.ck$k" >&2; exit 1; }
		t1=$(date +%s%N)
		walls="$walls $(( (t1 - t0) / 1000000 ))"
		k=$((k + 1))
	done
	python3 "$W/stats.py" $n "$W/shared/local/$job" "$CKPTS" "$walls" $label "$W/summary.txt" \
		"$fan" 2>>"$W/raw.txt"
	# The job ends: its ibcr run's end their tasks.
	for p in $(pgrep -f "$tree/cli/ibcr run --job $job "); do kill -TERM "$p" 2>/dev/null || true; done
	t=0
	while pgrep -f "$tree/cli/ibcr run --job $job " >/dev/null; do
		t=$((t + 1)); test $t -lt 200 || break
		sleep 0.05
	done
}

# leader_has_restore J: the leader's status shows J's restart resumed.
leader_has_restore() {
	on 1 "$TOP/cli/ibcr" status $1 --json 2>/dev/null | grep -q '"last_restore":{"generation":0,"result":"resumed"'
}

cat >"$W/restore.py" <<'PY'
import json, sys
n, fan, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lr = json.load(open(path))["job"]["last_restore"]
tl = lr["timeline"]
nodes = tl["nodes"]
assert len(nodes) == n, (len(nodes), n)
ph = lambda x, p: x["phases"][p]
rs = [ph(x, "restore") for x in nodes]
r0, r1 = min(e["start_ms"] for e in rs), max(e["end_ms"] for e in rs)
rsum = sum(e["end_ms"] - e["start_ms"] for e in rs)
reb0 = min(ph(x, "rebuild")["start_ms"] for x in nodes)
res1 = max(ph(x, "resume")["end_ms"] for x in nodes)
print("| %d | %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f |" % (
    n, fan, tl.get("levels", 1), r1 - r0, rsum, rsum / max(r1 - r0, 1e-3), res1 - r1, res1 - reb0))
PY

# run_restore N FANOUT: a verbs job of N ranks (verbs_ns waiting), one
# checkpoint, every rank killed and restarted at once; a row of the
# restore table into $W/restore.txt.
run_restore() {
	n=$1 fan=$2 job=v$1$2
	r=0
	while test $r -lt "$n"; do
		h=$((r + 1))
		rm -f "$W/w$h/$job.ready"
		( cd "$W/w$h" && on $h env LD_LIBRARY_PATH="$SOFTIB" "$TOP/cli/ibcr" run --job $job \
			--rank $r --size $n --leader "n1@$NET.1" \
			-- "$W/verbs_ns" -t 1 -w "$W/w$h/$job.ready" -g "$W/never" \
			>"$W/$job.$r.out" 2>"$W/$job.$r.err" ) &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	t=0
	until joined $job $n && test "$(ls "$W"/w*/$job.ready 2>/dev/null | wc -l)" -ge "$n"; do
		t=$((t + 1)); test $t -lt 1200 || { echo "ibcrd-scale: verbs job $job did not start" >&2; return 1; }
		sleep 0.05
	done
	on 1 "$TOP/cli/ibcr" checkpoint $job --wait >"$W/$job.ck" 2>&1 ||
		{ echo "ibcrd-scale: checkpoint of $job failed:" >&2; cat "$W/$job.ck" >&2; return 1; }
	# every rank killed: its task's init (the ibcr run ends with it)
	r=0
	while test $r -lt "$n"; do
		h=$((r + 1))
		p=$(on $h "$TOP/cli/ibcr" status $job --json | sed "s/.*\"tasks\"://" |
			grep -o "\"pid\":[0-9]*" | head -n 1 | sed "s/.*://")
		kill -KILL "$p" 2>/dev/null || true
		r=$((r + 1))
	done
	t=0
	while pgrep -f "$TOP/cli/ibcr run --job $job " >/dev/null; do
		t=$((t + 1)); test $t -lt 400 || break
		sleep 0.05
	done
	r=0
	while test $r -lt "$n"; do
		h=$((r + 1))
		( cd "$W/w$h" && on $h env LD_LIBRARY_PATH="$SOFTIB" "$TOP/cli/ibcr" restart $job \
			--rank $r --leader "n1@$NET.1" >"$W/$job.$r.rout" 2>"$W/$job.$r.rerr" ) &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	t=0
	until leader_has_restore $job; do
		t=$((t + 1)); test $t -lt 1200 || { echo "ibcrd-scale: restart of $job not resumed" >&2; return 1; }
		sleep 0.05
	done
	on 1 "$TOP/cli/ibcr" status $job --json >"$W/$job.status.json"
	python3 "$W/restore.py" $n "$fan" "$W/$job.status.json" >>"$W/restore.txt"
	for p in $(pgrep -f "$TOP/cli/ibcr restart $job "); do kill -TERM "$p" 2>/dev/null || true; done
	t=0
	while pgrep -f "$TOP/cli/ibcr restart $job " >/dev/null; do
		t=$((t + 1)); test $t -lt 200 || break
		sleep 0.05
	done
}

echo "ibcrd-scale: $(nproc) cores, load $(cut -d" " -f1-3 /proc/loadavg), hosts $NODES," \
	"$CKPTS checkpoints each, storage $W/shared${BASEDIR:+, against $BASEDIR}" >&2
: >"$W/summary.txt"
echo
echo "| N | fan-out | levels | total | stall | coord | dump wall | sum of node dumps | sum/wall | copy wall | begin | quiesce (1 round trip) | requests | leader CPU/request (us) | leader CPU/begin (us) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
: >"$W/restore.txt"
for n in $NODES; do
	if test -n "$BASEDIR"; then
		daemons_start "$BASEDIR" $n
		run_job "$BASEDIR" b $n -
		daemons_stop
	fi
	for fan in $FANOUTS; do
		k=$fan
		test "$fan" = flat && k=64
		daemons_start "$TOP" $n $k
		run_job "$TOP" s $n $fan
		if test "$RESTORE" = 1; then
			run_restore $n $fan || echo "| $n | $fan | failed: see $W |" >>"$W/restore.txt"
		fi
		daemons_stop
	done
done
echo
echo "ms; median (min-max) of $CKPTS checkpoints; load at the end $(cut -d" " -f1-3 /proc/loadavg)"
if test "$RESTORE" = 1; then
	echo
	echo "| N | fan-out | levels | restore wall | sum of node restores | sum/wall | barrier (last restore to last resume) | rebuild..resume |"
	echo "|---|---|---|---|---|---|---|---|"
	cat "$W/restore.txt"
	echo
	echo "ms; one restart each, from the leader's last_restore"
fi
# What one MUNGE credential costs here (the begin phase's unit).
echo
echo "MUNGE here, one thread: $(remunge -S "$W/munge/sock/munge.socket" -D 3 -T 1 -e -q 2>/dev/null)" \
	"credentials encoded/s, $(remunge -S "$W/munge/sock/munge.socket" -D 3 -T 1 -d -q 2>/dev/null)" \
	"encoded and decoded/s"
if test -n "$BASEDIR"; then
	python3 - "$W/summary.txt" <<-'PY'
	import sys
	rows = {}
	for line in open(sys.argv[1]):
	    label, n, fan, *kv = line.split()
	    if label == "s" and fan != "flat":
	        continue
	    rows[(label, int(n))] = {k: float(v) for k, v in (x.split("=") for x in kv)}
	print()
	print("| N | checkpoint --wait: base | this | base/this | dump wall: base | this | "
	      "other phases (quiesce..resume but dump): base | this |")
	print("|---|---|---|---|---|---|---|---|")
	for n in sorted({n for _, n in rows}):
	    b, s = rows.get(("b", n)), rows.get(("s", n))
	    if b and s:
	        print("| %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.1f | %.1f |" % (
	            n, b["cmd"], s["cmd"], b["cmd"] / s["cmd"], b["dump"], s["dump"],
	            b["pcoord"], s["pcoord"]))
	print()
	print("medians, ms")
	PY
fi
echo "raw numbers: $W/raw.txt$(test "$KEEP" = 1 || echo ' (removed; --keep keeps it)')"
