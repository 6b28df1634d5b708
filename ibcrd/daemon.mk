# ibcrd (the per-node daemon) and ibcr (the command line).
sbin_PROGRAMS += ibcrd
ibcrd_SOURCES = \
	ibcrd.c \
	lock.c lock.h \
	jobs.c jobs.h \
	server.c server.h server_int.h \
	server_gen.c \
	peer.c peer.h \
	gen.c gen.h \
	fanout.c fanout.h \
	timeline.c timeline.h \
	gen_local.c \
	gen_member.c \
	libctl.c libctl.h \
	imgcopy.c imgcopy.h \
	sockdiag.c sockdiag.h \
	worker.c worker.h \
	tasks.c tasks.h \
	$(top_srcdir)/lib/ibcr/drain.c
ibcrd_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS) $(MUNGE_CFLAGS)
ibcrd_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la $(JSON_LIBS) $(INIH_LIBS) \
	$(MUNGE_LIBS)

bin_PROGRAMS += ibcr
ibcr_SOURCES = \
	ibcr.c cli.h \
	cli_status.c \
	cli_store.c \
	cli_task.c \
	cli_run.c \
	cli_ckpt.c \
	cli_progress.c \
	cli_restart.c
ibcr_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
ibcr_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la $(JSON_LIBS) $(INIH_LIBS) $(XXHASH_LIBS)
