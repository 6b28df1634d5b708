#!/bin/sh
test_description='softib: verbs keep the IB spec'"'"'s semantics

Each program in t/softib-verbs/ checks one group of verbs against what
the IB spec says and a real HCA does (attribute masks per QP transition
and query_qp, RNR timing, signaling, inline limits, local access rights,
completion channels, resize_cq, address handles from completions, async
events, several threads posting at once); each prints TAP and must pass
every check.  Their output is shown with -v.'

. $(dirname $0)/sharness.sh

SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
SV_BIN=$IBCR_BUILDDIR/t/softib-verbs
ibcr_require SOFTIB

# sv_tap PROG: PROG passes all its TAP checks on softib.
sv_tap() {
	env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" SOFTIB_ADDR=127.0.0.1 \
		timeout 120 "$SV_BIN/$1" >"$1.tap" 2>"$1.err"
	rc=$?
	cat "$1.tap"
	sed "s/^/stderr: /" "$1.err"
	test $rc -eq 0 &&
	grep -q "^1\.\.[1-9]" "$1.tap" &&
	! grep -q "^not ok" "$1.tap"
}

test_expect_success 'modify_qp masks per transition (RC, UC, UD), query_qp' '
	sv_tap qp_table
'

test_expect_success 'RNR timing, vanished responder, sq_sig_all, inline limits, local access' '
	sv_tap rc_semantics
'

test_expect_success 'completion channels with several CQs, resize_cq, async events' '
	sv_tap cq_events
'

test_expect_success 'UD: address handles from completions answer the sender' '
	sv_tap ud_ah
'

test_expect_success 'several threads posting at once: exactly once, in order, intact' '
	sv_tap mt_post
'

test_done
