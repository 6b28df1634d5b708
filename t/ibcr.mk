# ibcr tests (see t/Makefile.am): libibcr's ABI, virtual objects, and
# checkpoint cycles driven by the test coordinator (t/ibcr/coord).
TESTS += \
	t2001-ibcr-abi.t \
	t2002-ibcr-cycle-nodev.t \
	t2003-ibcr-passthru.t \
	t2004-ibcr-cycle.t \
	t2005-ibcr-cycles-netns.t \
	t2006-ibcr-rebuild.t \
	t2007-ibcr-limits.t \
	t2008-ibcr-criu.t \
	t2009-ibcr-threads.t

check_PROGRAMS += ibcr/unit
ibcr_unit_SOURCES = ibcr/unit.c \
	$(top_srcdir)/lib/ibcr/map.c \
	$(top_srcdir)/lib/ibcr/idtab.c \
	$(top_srcdir)/lib/ibcr/wrlog.c \
	$(top_srcdir)/lib/ibcr/drain.c \
	$(top_srcdir)/lib/ibcr/nsheap.c
ibcr_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib $(JSON_CFLAGS)
ibcr_unit_LDADD = libtap.la $(JSON_LIBS)

# The test coordinator (plays ibcrd's leader; see lib/ibcr/ckpt_proto.h).
check_PROGRAMS += ibcr/coord
ibcr_coord_SOURCES = ibcr/coord.c $(top_srcdir)/lib/ibcr/drain.c
ibcr_coord_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib $(JSON_CFLAGS)
ibcr_coord_LDADD = $(top_builddir)/lib/common/libcommon.la $(JSON_LIBS)

# Workloads run under LD_PRELOAD=libibcr.
check_PROGRAMS += ibcr/idle
ibcr_idle_SOURCES = ibcr/idle.c
ibcr_idle_LDADD = -libverbs
check_PROGRAMS += ibcr/rnr
ibcr_rnr_SOURCES = ibcr/rnr.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_rnr_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/reset
ibcr_reset_SOURCES = ibcr/reset.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_reset_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/udlost
ibcr_udlost_SOURCES = ibcr/udlost.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_udlost_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/rnr2
ibcr_rnr2_SOURCES = ibcr/rnr2.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_rnr2_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/async
ibcr_async_SOURCES = ibcr/async.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_async_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/evwake
ibcr_evwake_SOURCES = ibcr/evwake.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_evwake_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/latemr
ibcr_latemr_SOURCES = ibcr/latemr.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_latemr_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/refuse
ibcr_refuse_SOURCES = ibcr/refuse.c
ibcr_refuse_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/race
ibcr_race_SOURCES = ibcr/race.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_race_LDADD = libtap.la -libverbs $(AX_PTHREAD_LIBS)
# A module preloaded ahead of libibcr by t1104: UCX's clock chosen by
# libucs itself (libibcr's warning).  -rpath makes it a shared module.
check_LTLIBRARIES += ibcr/ucxtsc.la
ibcr_ucxtsc_la_SOURCES = ibcr/ucxtsc.c
ibcr_ucxtsc_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
ibcr_ucxtsc_la_LIBADD = -ldl
check_PROGRAMS += ibcr/ucxuuid
ibcr_ucxuuid_SOURCES = ibcr/ucxuuid.c
ibcr_ucxuuid_LDADD = -ldl
check_PROGRAMS += ibcr/udrace
ibcr_udrace_SOURCES = ibcr/udrace.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_udrace_LDADD = libtap.la -libverbs $(AX_PTHREAD_LIBS)

# libibcr built with ThreadSanitizer, for t2009 (data races on the data
# path).  The same sources as lib/ibcr/libibcr.la; gcc warns that TSan
# does not model atomic_thread_fence (the gate's fallback path), hence
# -Wno-tsan.
if HAVE_TSAN
check_LTLIBRARIES += ibcr/libibcr_tsan.la
ibcr_libibcr_tsan_la_SOURCES = \
	$(top_srcdir)/lib/ibcr/ibcr.c \
	$(top_srcdir)/lib/ibcr/exports.c \
	$(top_srcdir)/lib/ibcr/backend.c \
	$(top_srcdir)/lib/ibcr/gate.c \
	$(top_srcdir)/lib/ibcr/map.c \
	$(top_srcdir)/lib/ibcr/idtab.c \
	$(top_srcdir)/lib/ibcr/wrlog.c \
	$(top_srcdir)/lib/ibcr/device.c \
	$(top_srcdir)/lib/ibcr/mem.c \
	$(top_srcdir)/lib/ibcr/cq.c \
	$(top_srcdir)/lib/ibcr/cqx.c \
	$(top_srcdir)/lib/ibcr/pump.c \
	$(top_srcdir)/lib/ibcr/qp.c \
	$(top_srcdir)/lib/ibcr/qpx.c \
	$(top_srcdir)/lib/ibcr/srq.c \
	$(top_srcdir)/lib/ibcr/ah.c \
	$(top_srcdir)/lib/ibcr/post.c \
	$(top_srcdir)/lib/ibcr/xlate.c \
	$(top_srcdir)/lib/ibcr/drain.c \
	$(top_srcdir)/lib/ibcr/ckpt.c \
	$(top_srcdir)/lib/ibcr/nsheap.c \
	$(top_srcdir)/lib/ibcr/ctl.c \
	$(top_srcdir)/lib/ibcr/mpi.c \
	$(top_srcdir)/lib/ibcr/pmix.c \
	$(top_srcdir)/lib/ibcr/ucxclock.c
ibcr_libibcr_tsan_la_CPPFLAGS = -I$(top_srcdir)/lib -I$(top_srcdir)/lib/ibcr $(JSON_CFLAGS)
ibcr_libibcr_tsan_la_CFLAGS = $(WARNING_CFLAGS) -Wno-tsan -fvisibility=hidden \
	-fsanitize=thread -g -O1
ibcr_libibcr_tsan_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-rpath $(abs_builddir)/ibcr -fsanitize=thread \
	-Wl,--version-script=$(top_srcdir)/lib/ibcr/libibcr.map -Wl,-z,defs
ibcr_libibcr_tsan_la_LIBADD = $(top_builddir)/lib/common/libcommon.la $(JSON_LIBS) \
	$(AX_PTHREAD_LIBS) -ldl
endif

# Shell helpers sourced by the tests.
EXTRA_DIST += ibcr/ibcr.sh
