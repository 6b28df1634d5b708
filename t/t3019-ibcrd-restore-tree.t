#!/bin/sh

test_description='a restart of four nodes at once, rebuilt down a tree

Four network-namespace hosts, one real ibcrd each, "fanout = 2"; one
four-rank verbs job: two pairs of Debian'"'"'s ibv_rc_pingpong with buffer
validation (-c), libibcr preloaded, softib as the device, pair A on
hosts 1 and 2, pair B on hosts 3 and 4.  A checkpoint commits on all four
nodes; every rank is killed and all four are restarted at once, each on
its own host.  The four CRIU restores run at the same time; the leader
waits for every rank, then rebuilds, reconnects and resumes them down
its tree (two levels), and records what it saw: each node'"'"'s restore,
rebuild, connect and resume, in "ibcr status --json" ("last_restore").
Both pingpongs finish, every buffer validated.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU NETNS IBVUTILS PYTHON3

SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
test -e "$SOFTIB_LIBDIR/libibverbs.so.1" || error "softib is not built"
ibcrd_use_build
unset IBCR_SOCKET

ITERS=150000

t19_done() {
	for r in 0 1 2 3; do test -s $1.$r.rc || return 1; done
}

# t19_pp_ok NAME: all four ranks exited 0 after all $ITERS iterations
# (every buffer validated: -c).
t19_pp_ok() {
	for r in 0 1 2 3; do
		cat $1.$r.out $1.$r.err &&
		test "$(cat $1.$r.rc)" = 0 &&
		grep "^$ITERS iters in" $1.$r.out || return 1
	done
}

# t19_servers_connected PA PB: the two pingpong servers (hosts 1 and 3)
# listen no more: ibv_rc_pingpong closes its listener once its client
# connected.
t19_servers_connected() {
	! ibcrd_listening $1 1 && ! ibcrd_listening $2 3
}

# t19_bg HOST RANK ARGS: ibcr ARGS on HOST, as rank RANK of job rt
# (started through $t19_wrap, if set).
t19_wrap=
t19_bg() {
	t19_h=$1 t19_r=$2
	shift 2
	IBCRD_ON="$(ibcrd_on $t19_h)$t19_wrap" IBCR_SOCKET=$(ibcrd_sock h$t19_h) \
		ibcrd_bg rt $t19_r "$@"
}

# t19_bg_go HOST RANK ARGS: t19_bg, but ibcr starts only once the file
# "go" exists (at most 6000 polls, 60 s or more): restarts launched one
# after another start together, so their restores overlap even on a busy
# machine.  A wait whose test script is gone (stopped before its go) ends.
t19_bg_go() {
	t19_wrap=" sh ./t19-go.sh $$"
	t19_bg "$@"
	t19_bg_rc=$?
	t19_wrap=
	return $t19_bg_rc
}
cat >t19-go.sh <<\EOF
t=$1
shift
i=0
while ! test -e go; do
	i=$((i + 1))
	kill -0 "$t" 2>/dev/null || exit 1
	test $i -le 6000 || { echo "t19-go.sh: no go after 6000 polls" >&2; exit 1; }
	sleep 0.01
done
exec "$@"
EOF

# t19_has_restore: the leader's status shows the restart resumed (into
# status.json).
t19_has_restore() {
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" status rt --json >status.json &&
	grep -q "\"last_restore\":{\"generation\":0,\"result\":\"resumed\"" status.json
}

test_expect_success 'setup: four hosts, munged, one ibcrd per host with fanout 2' '
	netns_create 4 &&
	ibcrd_munged_start m &&
	MSOCK=$(ibcrd_munge_sock m) &&
	for h in 1 2 3 4; do
		ibcrd_host_start $h "$MSOCK" "fanout = 2" || return 1
	done
'

test_expect_success 'a four-rank verbs job (two pingpong pairs) checkpointed on all four nodes' '
	L="n1@$(netns_ip 1)" && PA=$(ibcrd_free_port 0) && PB=$(ibcrd_free_port 1) &&
	t19_bg 1 0 run --job rt --rank 0 --size 4 --leader $L -- ibv_rc_pingpong -c -n $ITERS -p $PA &&
	t19_bg 3 2 run --job rt --rank 2 --size 4 --leader $L -- ibv_rc_pingpong -c -n $ITERS -p $PB &&
	ibcrd_wait_for ibcrd_listening $PA 1 && ibcrd_wait_for ibcrd_listening $PB 3 &&
	t19_bg 2 1 run --job rt --rank 1 --size 4 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $PA $(netns_ip 1) &&
	t19_bg 4 3 run --job rt --rank 3 --size 4 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $PB $(netns_ip 3) &&
	ibcrd_wait_for ibcrd_joined h1 rt n2 1 && ibcrd_wait_for ibcrd_joined h1 rt n3 2 &&
	ibcrd_wait_for ibcrd_joined h1 rt n4 3 &&
	for h in 1 2 3 4; do ibcrd_wait_for ibcrd_ctl 1 rt h$h || return 1; done &&
	# (checkpointed in the middle of the traffic, after the pairs
	# exchanged their addresses)
	ibcrd_wait_for t19_servers_connected $PA $PB &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint rt --wait >ck.out &&
	grep "generation 1 committed" ck.out &&
	! t19_done rt
'

test_expect_success 'every rank killed, all four restarted at once: the pingpongs finish' '
	for h in 1 2 3 4; do
		k=$(IBCR_SOCKET=$(ibcrd_sock h$h) ibcrd_task_fields rt pid) &&
		a=$(IBCR_SOCKET=$(ibcrd_sock h$h) ibcrd_task_fields rt app_pid) &&
		ibcr_track $k $a && echo $a >>apps && ibcr_kill 9 $k || return 1
	done &&
	for a in $(cat apps); do ibcrd_wait_gone $a || return 1; done &&
	ibcr_wait_for 300 t19_done rt &&
	mkdir first && mv rt.* first/ &&
	L="n1@$(netns_ip 1)" &&
	t19_bg_go 2 1 restart rt --rank 1 --leader $L &&
	t19_bg_go 4 3 restart rt --rank 3 --leader $L &&
	t19_bg_go 3 2 restart rt --rank 2 --leader $L &&
	t19_bg_go 1 0 restart rt --rank 0 --leader $L &&
	touch go &&
	for r in 0 1 2 3; do
		ibcrd_wait_for grep -q "restored from generation 1" rt.$r.err || return 1
	done &&
	# what the leader saw of it, while the job runs
	ibcrd_wait_for t19_has_restore &&
	ibcr_wait_for 300 t19_done rt &&
	t19_pp_ok rt &&
	grep "job rt: restored tasks rebuilt and resumed" h1/ibcrd.log
'

# The leader'"'"'s last_restore: every node restored, rebuilt, connected and
# resumed, down a tree of two levels; the members'"'"' restores overlap.
t19_restore_tl() {
	python3 - status.json <<-\EOF
	import json, sys
	lr = json.load(open(sys.argv[1]))["job"]["last_restore"]
	assert lr["result"] == "resumed", lr
	tl = lr["timeline"]
	assert tl["fanout"] == 2 and tl["levels"] == 2, (tl["fanout"], tl["levels"])
	nodes = {n["node"]: n for n in tl["nodes"]}
	assert sorted(nodes) == ["n1", "n2", "n3", "n4"], sorted(nodes)
	# one member is reached through another
	assert sum(1 for n in nodes.values() if n.get("parent") not in (None, "n1")) == 1, nodes
	for n in nodes.values():
	    for ph in ("restore", "rebuild", "connect", "resume"):
	        e = n["phases"][ph]
	        assert e["count"] == 1 and "failed" not in e, (n["node"], ph, e)
	        assert e["start_ms"] <= e["end_ms"] <= tl["total_ms"], (n["node"], ph, e)
	    r = n["phases"]["restore"]
	    # restored before the rebuild began, which waits for every rank
	    assert r["end_ms"] <= n["phases"]["rebuild"]["start_ms"], (n["node"], r)
	    print("%s restore %.1f-%.1f, resume %.1f-%.1f" % (n["node"], r["start_ms"], r["end_ms"],
	          n["phases"]["resume"]["start_ms"], n["phases"]["resume"]["end_ms"]))
	rs = [nodes[k]["phases"]["restore"] for k in ("n2", "n3", "n4")]
	assert max(r["start_ms"] for r in rs) < min(r["end_ms"] for r in rs), \
	    "the members' restores followed each other"
	EOF
}

test_expect_success 'the leader recorded the restart: the restores overlapped' '
	t19_restore_tl
'

test_done
