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

# IBCR_TEST_VERBOSE=1 (CI sets it): what each test's commands print goes
# to stderr, which the TAP driver copies into the test's log without
# reading it as TAP, so a failure's log shows why without a rerun.  (-v
# would send it to stdout, where a program's "ok ..." line could be
# taken for a result.)
if test -n "$IBCR_TEST_VERBOSE" && test "$verbose" != t; then
	verbose=t
	exec 3>&2 4>&2
fi
