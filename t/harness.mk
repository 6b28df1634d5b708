# Harness tests (issue 2): the real-daemon helpers of t/sharness.d (a
# private Slurm cluster on loopback or one network namespace per node) and
# loading a SPANK plugin from the build tree.  See t/Makefile.am.
TESTS += \
	t0001-harness-slurm.t \
	t0002-harness-netns.t

# A trivial SPANK plugin, loaded from the build tree by t0004 through a
# plugstack.conf; never installed.  -rpath makes libtool build a shared
# module even though it is a check library.
TESTS += t0004-harness-spank.t
check_LTLIBRARIES += spank/harness_spank.la
spank_harness_spank_la_SOURCES = spank/harness_spank.c
spank_harness_spank_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere \
	-export-symbols-regex '^(slurm_spank_|plugin_|spank_plugin_)'

# What the tests leave behind (t/sharness.d/03-leftovers.sh): t0005 checks
# the check, t9999 runs it over the whole suite.  TESTS' order is no
# barrier under make -j: t9999's log depends on every other test's log, so
# it starts only when they have all finished (make check TESTS=... runs
# just the named ones, and t9999 after them when it is named).
TESTS += t0005-harness-leftovers.t

# Working from a folder far below the trash directory, as a deep clone.
TESTS += t0007-harness-deep-path.t

# A test stopped by a signal (SIGTERM, ^C) still runs its teardown.
TESTS += t0008-harness-interrupt.t

# The one C style (.clang-format), over every C file git knows.
TESTS += t0006-style.t
TESTS += t9999-leftovers.t
t9999-leftovers.log: $(filter-out t9999-leftovers.log,$(TEST_LOGS))
