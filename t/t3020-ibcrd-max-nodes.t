#!/bin/sh

test_description='a job'"'"'s nodes: a growing table, bounded by max_nodes

Four network-namespace hosts, one real ibcrd each (MUNGE between them);
the leader'"'"'s ibcrd.conf says max_nodes = 3.  A four-rank job, one rank
per host: the leader'"'"'s table of the job'"'"'s nodes grows as n2 and n3
join (it starts with room for one), and n4'"'"'s join, the fourth node, is
refused for good, naming the limit.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT NETNS

ibcrd_use_build
unset IBCR_SOCKET

# t20_ibcr I ARGS: ibcr against host I's ibcrd, inside host I.
t20_ibcr() {
	t20_h=$1
	shift
	IBCR_SOCKET=$(ibcrd_sock h$t20_h) netns_exec $t20_h "$IBCR" "$@"
}

# t20_rank RANK HOST: start rank RANK of the 4-rank job mn on HOST.
t20_rank() {
	{ IBCR_SOCKET=$(ibcrd_sock h$2) netns_exec $2 "$IBCR" run --job mn --rank $1 --size 4 \
		--leader "n1@$(netns_ip 1)" -- "$PATTERN" --mib 1 >mn.$1.out 2>mn.$1.err & } &&
	ibcr_track $! &&
	ibcrd_wait_for t20_ibcr $2 status mn &&
	ibcrd_wait_for grep -q "^start" mn.$1.out &&
	app=$(t20_ibcr $2 status mn --json 2>/dev/null | ibcrd_json_task app_pid $1) &&
	ibcr_track $app && echo $app >mn.$1.app
}

# t20_members: the nodes in the leader's status of mn, sorted, one a line.
t20_members() {
	t20_ibcr 1 status mn --json | /usr/bin/python3 -c '
import json, sys
for n in sorted(m["node"] for m in json.load(sys.stdin)["job"].get("members", [])):
    print(n)'
}

test_expect_success 'setup: four hosts, munged, one ibcrd per host; the leader allows 3 nodes' '
	netns_create 4 &&
	ibcrd_munged_start m &&
	MSOCK=$(ibcrd_munge_sock m) &&
	ibcrd_host_start 1 "$MSOCK" "max_nodes = 3" &&
	ibcrd_host_start 2 "$MSOCK" && ibcrd_host_start 3 "$MSOCK" && ibcrd_host_start 4 "$MSOCK"
'

test_expect_success 'n2 and n3 join the leader: its table grows past its first room' '
	t20_rank 0 1 &&
	t20_rank 1 2 &&
	ibcrd_wait_for ibcrd_joined h1 mn n2 1 &&
	t20_rank 2 3 &&
	ibcrd_wait_for ibcrd_joined h1 mn n3 2 &&
	printf "n2\nn3\n" >expect &&
	t20_members >actual &&
	test_cmp expect actual
'

test_expect_success 'n4, the fourth node, is refused for good, naming max_nodes; the table stays' '
	t20_rank 3 4 &&
	# the refusal is final: n4 gives up at once instead of retrying
	ibcrd_wait_for grep -q "job mn: rank 3 could not join leader n1" h4/ibcrd.log &&
	grep "job mn: rank 3 could not join leader n1 .*too many nodes: node n1 allows 3 (max_nodes in ibcrd.conf)" h4/ibcrd.log &&
	t20_members >actual &&
	test_cmp expect actual
'

test_expect_success 'stop the ranks' '
	ibcr_kill 9 $(cat mn.0.app) $(cat mn.1.app) $(cat mn.2.app) $(cat mn.3.app)
'

test_done
