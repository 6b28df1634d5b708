#!/bin/sh
test_description='harness: a 3-node Slurm cluster, one network namespace per node

Each slurmd runs in its own network (and UTS) namespace with its own IPv4
address on a bridge made for this test; teardown removes all of it.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT SLURM NETNS

test_expect_success 'netns_create 3 gives three hosts with distinct addresses' '
	netns_create 3 &&
	for i in 1 2 3; do
		netns_exec $i ip -4 -o addr show dev eth0 | grep -F " $(netns_ip $i)/24 " ||
			return 1
	done &&
	test $(for i in 1 2 3; do netns_ip $i; done | sort -u | wc -l) -eq 3
'

test_expect_success 'netns_exec rejects a host that does not exist' '
	test_must_fail netns_exec 4 true 2>err &&
	grep "no host .4." err
'

test_expect_success 'slurm_start 3 --netns brings up three idle nodes' '
	slurm_start 3 --netns &&
	test $(sinfo -h -N -o "%N %t" | grep -c " idle$") -eq 3 &&
	for i in 1 2 3; do
		test "$(scontrol show node n$i | sed -n "s/.*NodeAddr=\([^ ]*\).*/\1/p")" = "$(netns_ip $i)" ||
			return 1
	done
'

test_expect_success 'srun -N3 shows three nodes, each with its own IP' '
	srun -N3 sh -c "echo \$SLURMD_NODENAME \$(hostname) \$(ip -4 -o addr show dev eth0 | awk \"{print \\\$4}\")" |
		sort >ran &&
	cat ran &&
	for i in 1 2 3; do
		echo "n$i n$i $(netns_ip $i)/24" || return 1
	done >expect &&
	test_cmp expect ran
'

# The batch step runs on n1; its srun reaches the slurmd of n2 and n3 at
# their own addresses, so this also crosses the bridge node to node.
test_expect_success 'an sbatch job completes and its output is all there' '
	jobid=$(sbatch --parsable -N3 -o job.out \
		--wrap "srun -N3 sh -c \"seq 1 5000 | cksum\" | uniq -c") &&
	slurm_wait_job "$jobid" COMPLETED 30 &&
	echo "      3 $(seq 1 5000 | cksum)" >expect &&
	test_cmp expect job.out
'

test_expect_success 'teardown leaves no process, cgroup or namespace behind' '
	pids=$(slurm_pids) &&
	test $(echo $pids | wc -w) -eq 5 &&
	names="$(netns_name 1) $(netns_name 2) $(netns_name 3)" &&
	slurm_stop &&
	netns_destroy &&
	for p in $pids; do
		test ! -e /proc/$p || return 1
	done &&
	test -z "$(ls -d /sys/fs/cgroup/*$IBCR_CGROUP_PREFIX 2>/dev/null)" &&
	for n in $names; do
		test ! -e /run/netns/$n || return 1
	done &&
	test -z "$(ip -o link show | grep "ib$$[bvp]")"
'

test_done
