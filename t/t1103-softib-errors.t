#!/bin/sh
test_description='softib: error cases and finer semantics behave as on an HCA

Remote access errors (bad rkey, out of bounds, missing rights), the QP
state machine and its attribute masks, RNR retries, flushes of QPs in
ERR, features softib refuses, garbage and cut-off messages from a
peer (only its QP dies, with QP_FATAL), threads posting to one QP at once, SRQ
limit events, CQ resize and solicited-only notification.  Each program prints TAP; here each
must pass every one of its checks (their output is shown with -v).'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/softib/vw.sh
softib_require

# vw_tap NAME PROG: PROG passes all its TAP checks.
vw_tap() {
	vw_env timeout 120 "$VW_BIN/$2" >"$1.tap" 2>"$1.err"
	rc=$?
	cat "$1.tap"
	sed "s/^/stderr: /" "$1.err"
	test $rc -eq 0 &&
	grep -q "^1\.\.[1-9]" "$1.tap" &&
	! grep -q "^not ok" "$1.tap"
}

test_expect_success 'remote access errors complete with REM_ACCESS_ERR, QP in ERR' '
	vw_tap access err_access
'

test_expect_success 'QP state machine: masks, transitions, posting in wrong states' '
	vw_tap state err_state
'

test_expect_success 'RNR: retries exhausted, and a late receive with rnr_retry 7' '
	vw_tap rnr err_rnr
'

test_expect_success 'WRs of a QP in ERR complete with WR_FLUSH_ERR' '
	vw_tap flush err_flush
'

test_expect_success 'unsupported features fail with EOPNOTSUPP, the context lives on' '
	VW_STRICT_UNSUPPORTED=1 &&
	export VW_STRICT_UNSUPPORTED &&
	vw_tap unsupported err_unsupported
'

test_expect_success 'a peer sending garbage or vanishing mid-message kills only its QP' '
	vw_tap peer err_peer
'

test_expect_success 'four threads post to one QP and poll one CQ at once' '
	vw_tap mtpost mt_post
'

test_expect_success 'SRQ limit event, CQ resize, solicited-only notification' '
	vw_tap srqcq srq_cq
'

test_expect_success 'one counter, four QPs and threads: atomics stay atomic' '
	vw_tap atomic atomic_shared
'

test_done
