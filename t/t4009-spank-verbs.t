#!/bin/sh
test_description='spank: a two-node verbs job checkpointed, requeued, restored

Issue 6 with a verbs application: Debian'"'"'s ibv_rc_pingpong with buffer
validation (-c), rank 0 the server and rank 1 the client, as
"srun -N2 -n2" in a batch job with --checkpoint-ib, libibcr preloaded by
the plugin and softib as the device (LD_LIBRARY_PATH in the task
environment), on a 3-node Slurm cluster with one network namespace and
one ibcrd per node and one shared storage.  Rank 0'"'"'s ibcrd leads: the
other node'"'"'s ibcrd joins it (the plugin names rank 0'"'"'s node and its
Slurm address).  Periodic generations commit both ranks while the
pingpong runs on; "scontrol requeue" ends the job and its next run
restores both ranks from the newest generation, hands libibcr its control
socket back, rebuilds the verbs objects with new real ids exchanged
across the nodes, and the pingpong finishes with every buffer validated.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU NETNS IBVUTILS BUILT

spank_verbs_setup
# Below the ephemeral range and softib's endpoint ports (24576-).
PORT=$(( 12000 + $$ % 12000 ))
ITERS=${T4009_ITERS:-400000}

# pp.sh PORT ITERS: rank 0 serves on its node's address and writes it
# to addr.JOB; rank 1 connects once the test has seen rank 0 listen
# (t9_server_up).  exec: the task is the pingpong itself.
cat >pp.sh <<\EOF
#!/bin/sh
a=addr.$SLURM_JOB_ID
if test "$SLURM_PROCID" = 0; then
	ip -4 -o addr show eth0 | awk '{ split($4, a, "/"); print a[1] }' >$a.tmp && mv $a.tmp $a
	exec ibv_rc_pingpong -c -n "$2" -p "$1"
fi
# Rank 0 listens on another node, where this one cannot look, and a probe
# would be taken for its one client: the test looks for it there and
# creates listening.JOB.  ibv_rc_pingpong does not retry its connect.
t=0
while ! test -e listening.$SLURM_JOB_ID; do
	t=$((t + 1))
	test $t -lt 600 || { echo "pp.sh: rank 0 not seen listening in 60 s" >&2; exit 3; }
	sleep 0.1
done
exec ibv_rc_pingpong -c -n "$2" -p "$1" "$(cat $a)"
EOF
chmod +x pp.sh

# t9_listens JOB PORT: JOB's rank 0 listens on PORT, seen inside its node
# (the namespace host whose address it wrote to addr.JOB: netns_ip I ends
# in .I).
t9_listens() {
	t9_a=$(cat addr.$1 2>/dev/null) && test -n "$t9_a" &&
	netns_exec "${t9_a##*.}" ss -Hltn "sport = :$2" | grep -q LISTEN
}

# t9_server_up JOB PORT: once JOB's rank 0 listens, rank 1 may connect.
t9_server_up() {
	ibcr_wait_for 60 t9_listens $1 $2 && touch listening.$1
}

# t9_exchanged JOB PORT: rank 0, seen listening before, listens no more:
# ibv_rc_pingpong closes its listener once rank 1 connected, exchanges
# addresses and goes on with the verbs traffic.
t9_exchanged() {
	test -e listening.$1 && ! t9_listens $1 $2
}

test_expect_success BUILT 'start a 3-node netns cluster, an ibcrd per node, one storage' '
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	spank_start_preempt_cluster 3 &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET" &&
	spank_start_ibcrds 3
'

test_expect_success BUILT 'sbatch --checkpoint-ib=4s: the two ranks on two nodes, generations while it runs' '
	J=$(sbatch --parsable -N2 -w n1,n2 --checkpoint-ib=4s --open-mode=append -o job.out \
		--export=ALL,LD_LIBRARY_PATH=$SOFTIB_LIBDIR \
		--wrap "srun -N2 -n2 --open-mode=append -o pp.%t.out -e pp.%t.err ./pp.sh $PORT $ITERS") &&
	slurm_wait_job $J RUNNING 30 &&
	t9_server_up $J $PORT &&
	spank_wait_gens $J 2 60 &&
	ibcrd_node_joined n1 $J n2 &&
	newest=$(ls -d "$store/$J"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	ls "$store/$J/gen-$newest" | tee gen.ls &&
	grep -x task-0 gen.ls && grep -x task-1 gen.ls &&
	grep "\"ctl_ino\"" "$store/$J/gen-$newest/manifest.json" &&
	echo "$newest" >newest
'

test_expect_success BUILT 'scontrol requeue: both ranks come back from the newest generation' '
	scontrol requeue $J &&
	slurm_wait_job $J PENDING 30 &&
	newest=$(ls -d "$store/$J"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	for r in 0 1; do mv pp.$r.out pp.$r.out.1; mv pp.$r.err pp.$r.err.1; done &&
	slurm_start_now $J &&
	slurm_wait_job $J RUNNING 60 &&
	spank_wait_restored pp &&
	cat pp.0.err pp.1.err | ibcr_diag &&
	grep "task 0 on n1: restored from generation $newest" pp.0.err &&
	grep "task 1 on n2: restored from generation $newest" pp.1.err
'

# t9_has_restore: the leader's status shows the restart's rebuild resumed
# (into status.json).
t9_has_restore() {
	"$IBCR_BUILDDIR/cli/ibcr" -c "$IBCRD_RUN/ibcrd/n1/ibcrd.conf" \
		--socket "$IBCRD_RUN/ibcrd/n1/ibcrd.sock" status $J --json >status.json &&
	grep -q "\"last_restore\":{\"generation\":0,\"result\":\"resumed\"" status.json
}

# Each node's restorer (the plugin's, here) tells its ibcrd how long its
# CRIU restore took, as "ibcr restart" does: the leader's last_restore
# has a restore span for both nodes, ending before their rebuild began.
test_expect_success BUILT 'the leader recorded the restart: both nodes'"'"' restores, then rebuild' '
	ibcr_wait_for 60 t9_has_restore &&
	python3 - status.json <<-\EOF
	import json, sys
	lr = json.load(open(sys.argv[1]))["job"]["last_restore"]
	assert lr["result"] == "resumed", lr
	tl = lr["timeline"]
	nodes = {n["node"]: n for n in tl["nodes"]}
	assert sorted(nodes) == ["n1", "n2"], sorted(nodes)
	for n in nodes.values():
	    ph = n["phases"]
	    assert "restore" in ph, (n["node"], "no restore span", ph)
	    r = ph["restore"]
	    assert r["count"] == 1 and "failed" not in r, (n["node"], r)
	    assert r["start_ms"] < r["end_ms"], (n["node"], r)
	    assert r["node_ms"] > 0, (n["node"], r)
	    assert r["end_ms"] <= ph["rebuild"]["start_ms"], (n["node"], r, ph["rebuild"])
	    print("%s restore %.1f..%.1f ms, rebuild from %.1f ms" % (n["node"], r["start_ms"],
	          r["end_ms"], ph["rebuild"]["start_ms"]))
	EOF
'

test_expect_success BUILT 'the restored pingpong finishes, every buffer validated' '
	slurm_wait_job $J COMPLETED 300 &&
	cat pp.0.out pp.1.out pp.0.err pp.1.err | ibcr_diag &&
	grep "^$ITERS iters in" pp.0.out && grep "^$ITERS iters in" pp.1.out
'

test_expect_success BUILT 'drain of the member node: the leader checkpoints and requeues the job' '
	filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	rm -f pp.*.out pp.*.err &&
	D=$(sbatch --parsable -N2 --checkpoint-ib=4s --open-mode=append -o jobd.out \
		--export=ALL,LD_LIBRARY_PATH=$SOFTIB_LIBDIR \
		--wrap "srun -N2 -n2 --open-mode=append -o pp.%t.out -e pp.%t.err ./pp.sh $((PORT + 1)) $ITERS") &&
	slurm_wait_job $D RUNNING 30 &&
	t9_server_up $D $((PORT + 1)) &&
	test "$(spank_field $D NodeList)" = "n[1-2]" &&
	scancel $filler &&
	spank_wait_gens $D 2 60 &&
	scontrol update nodename=n2 state=drain reason=ibcr-t4009 &&
	slurm_wait_job $D PENDING 60 &&
	test "$(ibcrd_gen_trigger $D $(ls -d "$store/$D"/gen-* | sed "s/.*gen-//" | sort -n |
		tail -n 1))" = drain
'

test_expect_success BUILT 'its newest generation damaged in rank 1'"'"'s images, it restores the previous one on n1 and n3 (requeued once more if rank 0 picked the newest first)' '
	newest=$(ls -d "$store/$D"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	img=$(ls $store/$D/gen-$newest/task-1/pages-*.img | head -n 1) &&
	printf "XXXXXXXX" | dd of="$img" bs=1 seek=100 conv=notrunc 2>/dev/null &&
	for r in 0 1; do mv pp.$r.out pp.$r.out.d1; mv pp.$r.err pp.$r.err.d1; done &&
	slurm_start_now $D &&
	slurm_wait_job $D RUNNING 60 &&
	test "$(spank_field $D NodeList)" = "n[1,3]" &&
	slurm_wait_job $D COMPLETED 300 &&
	cat pp.0.err pp.1.err | ibcr_diag &&
	# rank 0 reads none of rank 1'"'"'s images: it knows of their damage
	# from the mark rank 1 left in the generation (which retention has
	# removed since, with the generation)
	for r in 0 1; do
		grep "generation $newest is damaged (task-1/pages-.*), falling back to the previous one" pp.$r.err || return 1
	done &&
	if grep -q "task 0 on n1: restored from generation $newest " pp.0.err
	then
		echo "rank 0 picked generation $newest before rank 1 marked it: requeued once more" | ibcr_diag &&
		grep "as generation $newest was found damaged (task-1/pages-.*) after some ranks had picked it; not resumed, and the job is requeued" pp.0.err
	else
		echo "rank 1 marked generation $newest before rank 0 looked" | ibcr_diag
	fi &&
	grep "task 0 on n1: restored from generation $((newest - 1)) " pp.0.err &&
	grep "task 1 on n3: restored from generation $((newest - 1)) " pp.1.err &&
	grep "^$ITERS iters in" pp.0.out && grep "^$ITERS iters in" pp.1.out &&
	scontrol update nodename=n2 state=resume
'

test_expect_success BUILT 'preempted (bare --checkpoint-ib): SIGTERM held on both nodes, one final checkpoint, requeued' '
	rm -f pp.*.out pp.*.err &&
	P=$(sbatch --parsable -N2 -w n1,n2 --checkpoint-ib -o jobp.out \
		--export=ALL,LD_LIBRARY_PATH=$SOFTIB_LIBDIR \
		--wrap "srun -N2 -n2 -o pp.%t.out -e pp.%t.err ./pp.sh $((PORT + 3)) $ITERS") &&
	slurm_wait_job $P RUNNING 30 &&
	t9_server_up $P $((PORT + 3)) &&
	ibcr_wait_for 30 ibcrd_node_joined n1 $P n2 &&
	# (preempted in the middle of the pingpong, not at its start)
	ibcr_wait_for 30 t9_exchanged $P $((PORT + 3)) &&
	t0=$(date +%s) &&
	H=$(sbatch --parsable -p high -w n1 -c 2 -o /dev/null --wrap "sleep 3") &&
	spank_restarts_at_least $P 1 40 &&
	took=$(( $(date +%s) - t0 )) &&
	echo "preempted, checkpointed on both nodes and requeued after $took s (GraceTime 30 s)" | ibcr_diag &&
	test $took -lt 30 &&
	test "$(spank_gens $P)" = 1 &&
	test "$(ibcrd_gen_trigger $P 1)" = preempt &&
	# (when each node let SIGTERM through, and why: in the logs only)
	log=$IBCRD_RUN/ibcrd/n1/ibcrd.log &&
	grep "job $P rank 0: SIGTERM goes to the task (requeued)" $log &&
	grep "job $P rank 1: SIGTERM held" $IBCRD_RUN/ibcrd/n2/ibcrd.log &&
	grep "job $P rank 1: SIGTERM goes to the task (checkpointed)" $IBCRD_RUN/ibcrd/n2/ibcrd.log
'

test_expect_success BUILT 'the preempted job comes back from that checkpoint and finishes validated' '
	slurm_wait_job $P PENDING 30 &&
	for r in 0 1; do mv pp.$r.out pp.$r.out.p1; mv pp.$r.err pp.$r.err.p1; done &&
	slurm_start_now $P &&
	slurm_wait_job $P COMPLETED 300 &&
	cat pp.0.err pp.1.err | ibcr_diag &&
	grep "task 0 on .*: restored from generation 1 " pp.0.err &&
	grep "task 1 on .*: restored from generation 1 " pp.1.err &&
	grep "^$ITERS iters in" pp.0.out && grep "^$ITERS iters in" pp.1.out
'

test_expect_success BUILT 'ibcrd down on n2: rank 1 says it runs UNPROTECTED, the job completes' '
	kill -TERM $(cat $IBCRD_RUN/ibcrd/n2/ibcrd.pid) &&
	ibcr_wait_for 10 test ! -S $IBCRD_RUN/ibcrd/n2/ibcrd.sock &&
	rm -f pp.*.out pp.*.err &&
	U=$(sbatch --parsable -N2 -w n1,n2 --checkpoint-ib=4s -o jobu.out \
		--export=ALL,LD_LIBRARY_PATH=$SOFTIB_LIBDIR \
		--wrap "srun -N2 -n2 -o pp.%t.out -e pp.%t.err ./pp.sh $((PORT + 2)) 100000") &&
	slurm_wait_job $U RUNNING 30 &&
	t9_server_up $U $((PORT + 2)) &&
	slurm_wait_job $U COMPLETED 120 &&
	cat pp.0.err pp.1.err | ibcr_diag &&
	grep "ibcr: job $U step 0 task 1 on n2: cannot reach ibcrd at .*; running UNPROTECTED" pp.1.err &&
	! grep UNPROTECTED pp.0.err &&
	grep "^100000 iters in" pp.0.out && grep "^100000 iters in" pp.1.out
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
