# ibcr tests (see t/Makefile.am): libibcr's ABI, virtual objects, and
# checkpoint cycles driven by the test coordinator (t/ibcr/coord).
TESTS += \
	t2001-ibcr-abi.t

check_PROGRAMS += ibcr/unit
ibcr_unit_SOURCES = ibcr/unit.c \
	$(top_srcdir)/lib/ibcr/map.c \
	$(top_srcdir)/lib/ibcr/wrlog.c \
	$(top_srcdir)/lib/ibcr/drain.c
ibcr_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib $(JSON_CFLAGS)
ibcr_unit_LDADD = libtap.la $(JSON_LIBS)
