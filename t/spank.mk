# SPANK plugin tests (issue 6): spank/spank_ibcr.so from the build tree on
# a private Slurm cluster (t/sharness.d/20-slurm.sh), with a real ibcrd per
# node where a test needs one.  See t/Makefile.am.
TESTS += \
	t4001-spank-option.t \
	t4002-spank-task.t \
	t4003-spank-daemon.t \
	t4004-spank-criu.t \
	t4005-spank-watch.t \
	t4006-spank-restore.t \
	t4007-spank-requeue.t \
	t4008-spank-triggers.t \
	t4009-spank-verbs.t \
	t4010-spank-stream.t \
	t4011-spank-stream-triggers.t \
	t4012-spank-late-conf.t \
	t4013-spank-users.t \
	t4014-spank-forged.t \
	t4015-spank-compressed.t \
	t4016-spank-storage-truth.t \
	t4017-spank-multiproc.t

# Helpers the t40NN-spank tests source.
EXTRA_DIST += spank/lib.sh
EXTRA_DIST += criu/forge.py criu/sockets.py

# The Slurm watcher's test driver (t4005): ibcrd's slurm_watch.c on its own,
# printing what it sees.  Built for the tests only.
check_PROGRAMS += spank/ibcr-slurm-watch
spank_ibcr_slurm_watch_SOURCES = spank/slurm_watch_drv.c $(top_srcdir)/ibcrd/slurm_watch.c \
	$(top_srcdir)/ibcrd/slurm_watch.h
spank_ibcr_slurm_watch_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/ibcrd $(SLURM_CFLAGS)
spank_ibcr_slurm_watch_LDADD = $(top_builddir)/lib/common/libcommon.la $(SLURM_LIBS)
