#!/bin/sh

test_description='a generation goes down a tree of ibcrds, and a lost inner node

Five network-namespace hosts, one real ibcrd each (MUNGE between them),
"fanout = 2": the leader n1 asks only two children, each of which leads
the rest of its subtree (n2 leads n3, n4 leads n5, as they joined), and
relays every phase down and the answers, errors and timeline up.  A
five-rank job (a pattern program per rank) commits on all five nodes; the
leader'"'"'s timeline names each node'"'"'s parent and shows the two leaves of
the tree dumping at the same time.  An inner node whose worker dies
during the dump aborts the generation at once; one whose worker stops
(SIGSTOP) aborts it after timeout_dump, and the node below it, which no
message of the tree reaches any more, is told to undo its part through
its ibcrd.  Each time the last committed generation stays, nothing of
the aborted one is left, every rank runs on with its pattern intact, and
the next generation commits on all five nodes.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU NETNS PYTHON3

ibcrd_use_build
unset IBCR_SOCKET

# t18_ibcr I ARGS: ibcr against host I's ibcrd, inside host I.
t18_ibcr() {
	t18_h=$1
	shift
	IBCR_SOCKET=$(ibcrd_sock h$t18_h) netns_exec $t18_h "$IBCR" "$@"
}

t18_field() {
	t18_ibcr $1 status $2 --json 2>/dev/null | sed "s/.*\"tasks\"://" |
		sed -n "s/.*\"$3\":\([0-9]*\).*/\1/p"
}

# t18_jf HOST JOB KEY: KEY of JOB in HOST's "ibcr status --json".
t18_jf() {
	t18_ibcr $1 status $2 --json 2>/dev/null | ibcrd_json_job $3
}

t18_is() {
	test "$(t18_jf $1 $2 $3)" = "$4"
}

t18_err_like() {
	t18_jf $1 $2 last_error | grep -q "$3"
}

t18_gens() {
	t18_ibcr 1 list "$1" --json | grep -o "\"generation\":[0-9]*" | sed "s/.*://" | tr "\n" " "
}

# t18_rank JOB RANK MIB: rank RANK of a 5-rank job on host RANK+1, in a
# working folder of its own; a member waits until it joined the leader,
# so that the members join in the order of their hosts.
t18_rank() {
	t18_n=$(($2 + 1)) &&
	mkdir -p "w$t18_n" && t18_s=$(ibcrd_sock h$t18_n) &&
	{ ( cd "w$t18_n" && IBCR_SOCKET=$t18_s netns_exec $t18_n "$IBCR" run --job $1 \
		--rank $2 --size 5 --leader "n1@$(netns_ip 1)" -- "$PATTERN" --mib $3 \
		>../$1.$2.out 2>../$1.$2.err ) & } &&
	ibcr_track $! &&
	ibcrd_wait_for t18_ibcr $t18_n status $1 &&
	ibcrd_wait_for grep -q "^start" $1.$2.out &&
	app=$(t18_field $t18_n $1 app_pid) && ibcr_track $app $(t18_field $t18_n $1 pid) &&
	echo $app >$1.$2.app &&
	if test $2 -gt 0; then ibcrd_wait_for ibcrd_joined h1 $1 n$t18_n $2; fi
}

t18_all_ok() {
	for r in 0 1 2 3 4; do
		ibcrd_report $1.$r.out $(cat $1.$r.app) | grep pattern=ok || return 1
	done
}

# t18_worker HOST: the generation worker of HOST's ibcrd that a criu
# runs under (into worker.pid).
t18_worker() {
	t18_d=$(cat h$1/run/ibcrd.pid) || return 1
	for t18_c in $(cat /proc/$t18_d/task/*/children 2>/dev/null); do
		if t18_has_criu $t18_c; then
			echo "$t18_c" >worker.pid
			return 0
		fi
	done
	return 1
}

t18_has_criu() {
	for t18_k in $(cat /proc/$1/task/*/children 2>/dev/null); do
		test "$(cat /proc/$t18_k/comm 2>/dev/null)" = criu && return 0
		t18_has_criu $t18_k && return 0
	done
	return 1
}

# t18_clean GEN [KILLED]: nothing of generation GEN in storage or in
# any staging but KILLED's, the host whose worker was killed (its next
# worker removes it).
t18_clean() {
	! test -e shared/local/tj/gen-$1 &&
	for h in 1 2 3 4 5; do
		test "$h" = "${2:-}" && continue
		ibcrd_wait_for test ! -e h$h/staging/tj/gen-$1 || return 1
	done
}

test_expect_success 'setup: five hosts, munged, one ibcrd per host with fanout 2' '
	netns_create 5 &&
	ibcrd_munged_start m &&
	MSOCK=$(ibcrd_munge_sock m) &&
	for h in 1 2 3 4 5; do
		ibcrd_host_start $h "$MSOCK" "fanout = 2" "timeout_dump = 5s" \
			"timeout_connect = 2s" || return 1
	done
'

test_expect_success 'a five-rank job: the first generation commits on all five nodes' '
	# the inner nodes dump long enough to be caught in it
	t18_rank tj 0 8 &&
	t18_rank tj 1 160 &&
	t18_rank tj 2 64 &&
	t18_rank tj 3 160 &&
	t18_rank tj 4 64 &&
	t18_ibcr 1 checkpoint tj --wait >ck1.out &&
	grep "generation 1 committed" ck1.out &&
	for r in 0 1 2 3 4; do test -d shared/local/tj/gen-1/task-$r || return 1; done &&
	t18_ibcr 1 verify tj &&
	for h in 1 2 3 4 5; do
		ibcrd_wait_for t18_is $h tj last_gen 1 &&
		test -z "$(t18_jf $h tj last_error)" || return 1
	done
'

# t18_tree FILE: FILE (a manifest, or status --json) holds generation 1's
# timeline: the tree of fanout 2, two levels, n2 and n4 the leader's
# children and n3 and n5 theirs; every node did every phase up to the
# copy; the two leaves dumped at the same time.
t18_tree() {
	python3 - "$1" <<-\EOF
	import json, sys
	d = json.load(open(sys.argv[1]))
	tl = d["timeline"] if "timeline" in d else d["job"]["last_generation"]["timeline"]
	assert tl["fanout"] == 2 and tl["levels"] == 2, (tl["fanout"], tl["levels"])
	nodes = {n["node"]: n for n in tl["nodes"]}
	parents = {k: n.get("parent") for k, n in nodes.items()}
	assert parents == {"n1": None, "n2": "n1", "n3": "n2", "n4": "n1", "n5": "n4"}, parents
	for n in nodes.values():
	    for ph in ("begin", "quiesce", "drain", "release", "dump", "rebuild", "resume", "copy"):
	        if ph == "begin" and n["leader"]:
	            continue
	        e = n["phases"][ph]
	        assert e["count"] >= 1 and "failed" not in e, (n["node"], ph, e)
	        # A relayed span is put on the leader's clock through its
	        # parent's request time; one CI run saw such an end 1.1 ms past
	        # total_ms (not understood yet): 10 ms of slack, no more.
	        assert 0 <= e["start_ms"] <= e["end_ms"] <= tl["total_ms"] + 10, (n["node"], ph, e)
	d3, d5 = nodes["n3"]["phases"]["dump"], nodes["n5"]["phases"]["dump"]
	print("dump n3 %.1f-%.1f (%.1f on the node), n5 %.1f-%.1f (%.1f on the node)" % (
	    d3["start_ms"], d3["end_ms"], d3["node_ms"], d5["start_ms"], d5["end_ms"], d5["node_ms"]))
	assert d3["node_ms"] >= 20 and d5["node_ms"] >= 20, "dumps too short to tell"
	assert max(d3["start_ms"], d5["start_ms"]) < min(d3["end_ms"], d5["end_ms"]), \
	    "the leaves' dumps followed each other"
	# the leader asked only its two children: gen-begin and begin, then
	# each phase (drain in rounds) up to the copy (and end, in status):
	# 2 requests a phase, not 4
	r = nodes["n1"]["phases"]["drain"]["count"]
	assert tl["requests"] in (4 + 2 * (7 + r), 4 + 2 * (8 + r)), (tl["requests"], r)
	EOF
}

test_expect_success 'the timeline shows the tree, and the leaves dumping at the same time' '
	t18_tree shared/local/tj/gen-1/manifest.json &&
	t18_ibcr 1 status tj --json >status.json &&
	t18_tree status.json
'

test_expect_success 'an inner node whose worker dies during the dump: aborted at once' '
	{ t18_ibcr 1 checkpoint tj --wait >ck2.out 2>ck2.err & } &&
	ck=$! &&
	ibcrd_wait_for t18_worker 2 &&
	w=$(cat worker.pid) &&
	kill -KILL $w &&
	test_expect_code 1 wait $ck &&
	cat ck2.err &&
	grep "generation 2 aborted in dump: node n2: it closed the connection before answering" ck2.err &&
	t18_err_like 1 tj "^generation 2: dump: node n2: it closed the connection" &&
	# the node below it undid its part when its parent went away; the
	# other subtree when the abort came down through n4
	ibcrd_wait_for t18_err_like 3 tj "^generation 2: .*the leader closed the session" &&
	ibcrd_wait_for t18_err_like 5 tj "^generation 2: abort: the leader aborted the generation: dump: node n2: it closed the connection" &&
	ibcrd_wait_for t18_err_like 4 tj "^generation 2: abort: the leader aborted the generation: dump: node n2" &&
	for h in 1 2 3 4 5; do
		ibcrd_wait_for t18_is $h tj phase "" &&
		test "$(t18_jf $h tj last_gen)" = 1 || return 1
	done &&
	test "$(t18_gens tj)" = "1 " &&
	t18_clean 2 2 &&
	t18_ibcr 1 verify tj &&
	t18_all_ok tj
'

test_expect_success 'an inner node stopped during the dump: aborted after timeout_dump, the node below it undone' '
	ibcrd_wait_for test -z "$(pgrep -f "$(ibcrd_staging h2)/tj/dump-gen-2")" &&
	{ t18_ibcr 1 checkpoint tj --wait >ck3.out 2>ck3.err & } &&
	ck=$! &&
	ibcrd_wait_for t18_worker 4 &&
	w=$(cat worker.pid) && ibcr_track $w &&
	kill -STOP $w &&
	test_expect_code 1 wait $ck &&
	cat ck3.err &&
	grep "generation 3 aborted in dump: node n4: no reply to dump within 5000 ms" ck3.err &&
	t18_jf 1 tj last_error >err1 && cat err1 &&
	grep "^generation 3: dump: node n4: no reply to dump" err1 &&
	# n5 hears it from its own ibcrd: nothing of the tree reaches it
	ibcrd_wait_for t18_err_like 5 tj "^generation 3: .*the leader aborted the generation (it lost the node above this one)" &&
	ibcrd_wait_for t18_is 5 tj phase "" &&
	test "$(t18_jf 5 tj last_gen)" = 1 &&
	ibcrd_wait_for t18_err_like 3 tj "^generation 3: abort: the leader aborted the generation: dump: node n4" &&
	# the stopped one is still in its dump
	test "$(t18_jf 4 tj phase)" = dump &&
	t18_ibcr 1 status tj --json >status3.json &&
	python3 -c "import json; lg = json.load(open(\"status3.json\"))[\"job\"][\"last_generation\"]; \
		n = {x[\"node\"]: x for x in lg[\"timeline\"][\"nodes\"]}; \
		assert lg[\"generation\"] == 3 and lg[\"result\"] == \"aborted\", lg; \
		assert n[\"n4\"][\"phases\"][\"dump\"][\"failed\"], n[\"n4\"]; \
		assert n[\"n5\"][\"phases\"][\"dump\"][\"failed\"], n[\"n5\"]; \
		assert n[\"n5\"][\"phases\"][\"abort\"][\"count\"] == 1, n[\"n5\"]" &&
	test "$(t18_gens tj)" = "1 " &&
	! test -e shared/local/tj/gen-3 &&
	for r in 0 1 2 4; do
		ibcrd_report tj.$r.out $(cat tj.$r.app) | grep pattern=ok || return 1
	done &&
	kill -CONT $w &&
	ibcrd_wait_gone $w &&
	ibcrd_wait_for t18_err_like 4 tj "^generation 3: dump: the leader closed the session" &&
	t18_clean 3 &&
	t18_all_ok tj
'

test_expect_success 'the next generation commits on all five nodes; the first stays' '
	ibcrd_wait_for test -z "$(pgrep -f "$(ibcrd_staging h4)/tj/dump-gen-3")" &&
	t18_ibcr 1 checkpoint tj --wait >ck4.out &&
	grep "generation 4 committed" ck4.out &&
	test "$(t18_gens tj)" = "1 4 " &&
	t18_ibcr 1 verify tj &&
	t18_all_ok tj &&
	for h in 1 2 3 4 5; do
		ibcrd_wait_for t18_is $h tj last_gen 4 &&
		test -z "$(t18_jf $h tj last_error)" || return 1
	done &&
	kill -9 $(cat tj.0.app) $(cat tj.1.app) $(cat tj.2.app) $(cat tj.3.app) $(cat tj.4.app)
'

test_done
