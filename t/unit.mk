# C unit tests of lib/common.
TESTS += common/test_log.t
check_PROGRAMS += common/test_log.t
common_test_log_t_SOURCES = common/test_log.c
common_test_log_t_LDADD = $(top_builddir)/lib/common/libcommon.la libtap.la

TESTS += common/test_proto.t
check_PROGRAMS += common/test_proto.t
common_test_proto_t_SOURCES = common/test_proto.c
common_test_proto_t_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
common_test_proto_t_LDADD = $(top_builddir)/lib/common/libcommon.la libtap.la $(JSON_LIBS)

TESTS += common/test_conf.t
check_PROGRAMS += common/test_conf.t
common_test_conf_t_SOURCES = common/test_conf.c
common_test_conf_t_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la libtap.la

TESTS += common/test_proc.t
check_PROGRAMS += common/test_proc.t
common_test_proc_t_SOURCES = common/test_proc.c
common_test_proc_t_LDADD = $(top_builddir)/lib/common/libcommon.la libtap.la $(JSON_LIBS)

TESTS += common/test_store.t
check_PROGRAMS += common/test_store.t
common_test_store_t_SOURCES = common/test_store.c
common_test_store_t_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
common_test_store_t_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la libtap.la $(JSON_LIBS)

TESTS += common/test_safedir.t
check_PROGRAMS += common/test_safedir.t
common_test_safedir_t_SOURCES = common/test_safedir.c
common_test_safedir_t_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la libtap.la

TESTS += common/test_peersession.t
check_PROGRAMS += common/test_peersession.t
common_test_peersession_t_SOURCES = common/test_peersession.c
common_test_peersession_t_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
common_test_peersession_t_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la libtap.la $(JSON_LIBS)

# ibcrd's copy of a dump folder into storage (ibcrd/imgcopy.c).
TESTS += ibcrd/test_imgcopy.t
check_PROGRAMS += ibcrd/test_imgcopy.t
ibcrd_test_imgcopy_t_SOURCES = ibcrd/test_imgcopy.c $(top_srcdir)/ibcrd/imgcopy.c
ibcrd_test_imgcopy_t_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/ibcrd $(JSON_CFLAGS)
ibcrd_test_imgcopy_t_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la libtap.la $(JSON_LIBS)
