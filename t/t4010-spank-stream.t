#!/bin/sh
test_description='spank: a sequence-checked verbs stream survives a requeue

Issue 6 with the project'"'"'s own stream (t/softib/verbs_stream -C):
rank 0 receives, rank 1 sends sequence-numbered, checksummed RC SENDs,
paced so the stream outlasts two periodic checkpoints.  "scontrol requeue"
ends the job; its next run restores both ranks from the newest
generation, and the stream goes on from where it was: it does not start
again (its out-of-band connection is made once, in the first run), and
both ranks end with the same totals, every message verified exactly once
and in order.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU NETNS BUILT

spank_verbs_setup
# Below the ephemeral range and softib's endpoint ports (24576-).
PORT=$(( 12000 + ($$ + 7) % 12000 ))
# 2 QPs x 24000 messages of 4 KiB at 1000 per second and QP: about 24 s.
MSGS=24000

# vs.sh PORT: the two-rank stream (see spank/lib.sh), 2 x MSGS messages.
spank_write_vs 600 "" "-n $MSGS -r 1000"

test_expect_success BUILT 'start a 2-node netns cluster, an ibcrd per node, one storage' '
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	SLURM_PLUGSTACK=plugstack.conf SLURM_CONF_EXTRA="JobRequeue=1" slurm_start 2 --netns &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET" &&
	ibcrd_start_node n1 && ibcrd_start_node n2
'

test_expect_success BUILT 'sbatch --checkpoint-ib=4s: the stream runs, two generations commit' '
	J=$(sbatch --parsable -N2 --checkpoint-ib=4s --open-mode=append -o job.out \
		--export=ALL,LD_LIBRARY_PATH=$SOFTIB_LIBDIR \
		--wrap "srun -N2 -n2 --open-mode=append -o vs.%t.out -e vs.%t.err ./vs.sh $PORT") &&
	slurm_wait_job $J RUNNING 30 &&
	{ spank_wait_gens $J 2 60 || { cat vs.*.err; false; }; } &&
	grep -c "out-of-band connection closed" vs.0.err vs.1.err >conn.1 &&
	cat conn.1 &&
	grep -x "vs.0.err:1" conn.1 && grep -x "vs.1.err:1" conn.1 &&
	! grep "^OK" vs.0.out vs.1.out
'

test_expect_success BUILT 'scontrol requeue: both ranks are restored, not started again' '
	scontrol requeue $J &&
	slurm_wait_job $J PENDING 30 &&
	newest=$(ls -d "$store/$J"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	slurm_start_now $J &&
	slurm_wait_job $J RUNNING 60 &&
	spank_wait_restored vs &&
	grep "task 0 on n1: restored from generation $newest" vs.0.err &&
	grep "task 1 on n2: restored from generation $newest" vs.1.err
'

test_expect_success BUILT 'the restored stream finishes: same totals on both ranks, no fresh start' '
	slurm_wait_job $J COMPLETED 300 &&
	cat vs.0.out vs.1.out vs.0.err vs.1.err | ibcr_diag &&
	grep "^OK msgs=$((2 * MSGS)) " vs.0.out >ok.0 &&
	grep "^OK msgs=$((2 * MSGS)) " vs.1.out >ok.1 &&
	test $(wc -l <ok.0) -eq 1 && test $(wc -l <ok.1) -eq 1 &&
	sed "s/ secs=.*//" ok.0 >tot.0 && sed "s/ secs=.*//" ok.1 >tot.1 &&
	test_cmp tot.0 tot.1 &&
	# A fresh start would have connected again and said so a second time.
	test $(grep -c "out-of-band connection closed" vs.0.err) -eq 1 &&
	test $(grep -c "out-of-band connection closed" vs.1.err) -eq 1
'

test_expect_success BUILT 'stop the cluster' '
	slurm_stop
'

test_done
