#!/bin/sh
test_description='spank: a Slurm task with two verbs processes survives a requeue

Issue 14 under Slurm: one task of an ordinary user'"'"'s job (sbatch
--checkpoint-ib) is verbs_stream -F, a program that forks its server
before its first verbs call, so two processes of the task each hold a
libibcr control connection.  Two checkpoints take both (each socket
external, both in the manifest); "scontrol requeue" ends the job, its
next run restores the task with a fresh control connection for each
process (the plugin attaches as many as the generation lists), and the
stream goes on: both processes count every sequence-numbered,
checksummed message exactly once and agree.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU USERS BUILT

spank_verbs_setup
# 2 QPs x 20000 messages of 4 KiB at 1000 per second and QP: about 20 s.
MSGS=20000

# st_procs JOB: the pids of the task's verbs processes, as n1's ibcrd
# status says.
st_procs() {
	"$IBCR_BUILDDIR/cli/ibcr" -c "$IBCRD_RUN/ibcrd/n1/ibcrd.conf" \
		--socket "$IBCRD_RUN/ibcrd/n1/ibcrd.sock" status "$1" --json >st.json &&
	/usr/bin/python3 - st.json <<-\PY
	import json, sys
	for t in json.load(open(sys.argv[1]))["job"]["tasks"]:
	    for p in t.get("verbs_pids", []):
	        print(p)
	PY
}

st_nprocs() {
	test "$(st_procs $1 | grep -c "^[1-9]")" -eq "$2"
}

test_expect_success BUILT 'start a 1-node cluster and its ibcrd' '
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	SLURM_PLUGSTACK=plugstack.conf SLURM_CONF_EXTRA="JobRequeue=1" slurm_start 1 &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU" &&
	ibcrd_start_node n1 &&
	mkdir -m 0777 u
'

test_expect_success BUILT 'user 1s task forks a second verbs process: both are checkpointed twice' '
	J=$(sbatch --parsable --uid=$IBCR_UID1 --gid=$IBCR_GID1 -N1 -D "$(pwd)/u" \
		--checkpoint-ib --open-mode=append -o "$(pwd)/u/job.out" \
		--export=ALL,LD_LIBRARY_PATH=$SOFTIB_LIBDIR \
		--wrap "srun -n1 --open-mode=append -o app.out -e app.err \
			$VS -F -C -T 600 -n $MSGS -q 2 -r 1000") &&
	slurm_wait_job $J RUNNING 30 &&
	ibcr_wait_for 30 grep -q "client: checkpointable" u/app.err &&
	ibcr_wait_for 30 grep -q "server: checkpointable" u/app.err &&
	ibcr_wait_for 20 st_nprocs $J 2 &&
	for p in $(st_procs $J); do
		grep "^Uid:.$IBCR_UID1.$IBCR_UID1" /proc/$p/status || return 1
	done &&
	spank_checkpoint $J &&
	spank_checkpoint $J &&
	test "$(spank_gens $J)" -eq 2 &&
	/usr/bin/python3 - "$store/$J/gen-2/manifest.json" <<-\PY &&
	import json, sys
	t = json.load(open(sys.argv[1]))["tasks"]
	assert len(t) == 1 and len(set(t[0]["ctl_inos"])) == 2, t
	PY
	! grep "^OK" u/app.out
'

test_expect_success BUILT 'scontrol requeue: the task comes back with both processes, each its own connection' '
	(cd u && spank_requeue $J) &&
	slurm_wait_job $J RUNNING 60 &&
	ibcr_wait_for 60 grep -q "restored from generation 2" u/app.err &&
	ibcr_wait_for 20 st_nprocs $J 2
'

test_expect_success BUILT 'the restored stream finishes: every message once, both processes agree' '
	slurm_wait_job $J COMPLETED 300 &&
	cat u/app.out u/app.err | ibcr_diag &&
	s=$(sed -n "s/^\(OK msgs=[0-9]* bytes=[0-9]* checksum=[0-9a-f]*\) .*role=server$/\1/p" u/app.out) &&
	c=$(sed -n "s/^\(OK msgs=[0-9]* bytes=[0-9]* checksum=[0-9a-f]*\) .*role=client$/\1/p" u/app.out) &&
	test -n "$s" && test "$s" = "$c" &&
	echo "$s" | grep "^OK msgs=$((2 * MSGS)) bytes=$((2 * MSGS * 4096)) " &&
	# Started once: a fresh start would have connected again.
	test $(grep -c "client: checkpointable" u/app.err.1 u/app.err | grep -c ":1$") -eq 1
'

test_expect_success BUILT 'stop the cluster' '
	slurm_stop
'

test_done
