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
	t2008-ibcr-criu.t

check_PROGRAMS += ibcr/unit
ibcr_unit_SOURCES = ibcr/unit.c \
	$(top_srcdir)/lib/ibcr/map.c \
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
check_PROGRAMS += ibcr/async
ibcr_async_SOURCES = ibcr/async.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_async_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/evwake
ibcr_evwake_SOURCES = ibcr/evwake.c ibcr/selfqp.c ibcr/selfqp.h
ibcr_evwake_LDADD = libtap.la -libverbs
check_PROGRAMS += ibcr/refuse
ibcr_refuse_SOURCES = ibcr/refuse.c
ibcr_refuse_LDADD = libtap.la -libverbs

# Shell helpers sourced by the tests.
EXTRA_DIST += ibcr/ibcr.sh
