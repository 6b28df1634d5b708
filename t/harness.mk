# Harness tests (issue 2): the real-daemon helpers of t/sharness.d (a
# private Slurm cluster on loopback or one network namespace per node) and
# loading a SPANK plugin from the build tree.  See t/Makefile.am.
TESTS += \
	t0001-harness-slurm.t \
	t0002-harness-netns.t
