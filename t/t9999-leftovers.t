#!/bin/sh
test_description='the suite left nothing behind

Runs after every other test of the suite (t/harness.mk makes its log
depend on all the others, so also under make -j).  Every process a test
started carries IBCR_SUITE_TAG in its environment, and the helpers write
down the daemons and folders they make (t/sharness.d/03-leftovers.sh).
Anything of that still alive or present now outlived its test: it is
named here, with the test that made it, then ended or removed, so the
next run finds a clean machine.  Run by hand (make check
TESTS=t9999-leftovers.t) only when no other test of this build tree
runs: a daemon a running test has detached is no child of that test.'

. "$(dirname "$0")"/sharness.sh

test_expect_success 'no process, mount, namespace, cgroup or folder of a test is left' '
	ibcr_leftovers "$IBCR_SUITE_DIR" >survivors
	rc=$?
	sed "s/^/left behind: /" survivors | ibcr_diag
	cat survivors &&
	test $rc = 0
'

test_done
