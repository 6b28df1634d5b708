# sharness.sh - ibcr's entry to sharness.
#
# Every t/tNNNN-*.t starts with ". $(dirname $0)/sharness.sh".  This sets
# where the source and build trees are, then loads the system sharness
# (Debian package "sharness"), which in turn loads t/sharness.d/*.sh.

if test -z "$SHARNESS_TEST_SRCDIR"; then
	SHARNESS_TEST_SRCDIR=$(cd "$(dirname "$0")" && pwd)
fi
export SHARNESS_TEST_SRCDIR
# Build tree: make check exports IBCR_BUILDDIR; by hand, assume an
# in-tree build and that we run from t/.
if test -z "$IBCR_BUILDDIR"; then
	IBCR_BUILDDIR=$(cd "$SHARNESS_TEST_SRCDIR/.." && pwd)
fi
IBCR_SRCDIR=$(cd "$SHARNESS_TEST_SRCDIR/.." && pwd)
export IBCR_BUILDDIR IBCR_SRCDIR
SHARNESS_BUILD_DIRECTORY=$IBCR_BUILDDIR
export SHARNESS_BUILD_DIRECTORY

: "${IBCR_SHARNESS_SH:=/usr/share/sharness/sharness.sh}"
if ! test -r "$IBCR_SHARNESS_SH"; then
	echo "Bail out! sharness not found at $IBCR_SHARNESS_SH (Debian: apt-get install sharness)"
	exit 1
fi
. "$IBCR_SHARNESS_SH"

# IBCR_TEST_VERBOSE=1 (CI sets it): what each test's commands print is
# kept, and a failing test's last 60 lines of it go to the TAP stream as
# "# | " comments just before its "not ok" line, so that a failure's log
# says why, in order, without a rerun.  (-v would send it to stdout as is,
# where a program's "ok ..." line could be taken for a result.)
if test -n "$IBCR_TEST_VERBOSE" && test "$verbose" != t; then
	ibcr_out_=$PWD/.test-output
	: >"$ibcr_out_"
	exec 3>>"$ibcr_out_" 4>&3
	# sharness's own two functions, with the output kept or shown.
	test_ok_() {
		: >"$ibcr_out_"
		test_success=$(($test_success + 1))
		say_color "" "ok $test_count - $@"
	}
	test_failure_() {
		test_failure=$(($test_failure + 1))
		tail -n 60 "$ibcr_out_" | sed -e 's/^/# | /'
		: >"$ibcr_out_"
		say_color error "not ok $test_count - $1"
		shift
		echo "$@" | sed -e 's/^/#	/'
		test "$immediate" = "" || { EXIT_OK=t; exit 1; }
	}
fi
