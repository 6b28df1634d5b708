# ibcrd (the per-node daemon) and ibcr (the command line).
sbin_PROGRAMS += ibcrd
ibcrd_SOURCES = \
	ibcrd.c \
	lock.c lock.h \
	jobs.c jobs.h \
	server.c server.h
ibcrd_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
ibcrd_LDADD = $(top_builddir)/lib/common/libcommon.la $(JSON_LIBS) $(INIH_LIBS)
