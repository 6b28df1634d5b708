# ibcrd and ibcr CLI tests

# Test helper: hand-made frames to ibcrd's socket.
check_PROGRAMS += ibcrd/rawmsg
ibcrd_rawmsg_SOURCES = ibcrd/rawmsg.c
ibcrd_rawmsg_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
ibcrd_rawmsg_LDADD = $(top_builddir)/lib/common/libcommon.la $(JSON_LIBS)
EXTRA_DIST += ibcrd/lib.sh ibcrd/pipehog.py
TESTS += t3001-ibcrd-daemon.t

# Test helper: a generation made with the store calls ibcrd uses.
check_PROGRAMS += ibcrd/mkgen
ibcrd_mkgen_SOURCES = ibcrd/mkgen.c
ibcrd_mkgen_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
ibcrd_mkgen_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la $(JSON_LIBS)
TESTS += t3002-ibcrd-store.t

# Test helper: ibcrd's peer protocol with good and bad MUNGE credentials.
check_PROGRAMS += ibcrd/peermsg
ibcrd_peermsg_SOURCES = ibcrd/peermsg.c
ibcrd_peermsg_CPPFLAGS = $(AM_CPPFLAGS) $(JSON_CFLAGS)
ibcrd_peermsg_LDADD = $(top_builddir)/lib/common/libcommon_daemon.la $(JSON_LIBS) $(MUNGE_LIBS)
TESTS += t3003-ibcrd-peer.t
TESTS += t3004-ibcrd-security.t
TESTS += t3005-ibcrd-run.t
TESTS += t3006-ibcrd-abort.t
TESTS += t3007-ibcrd-periodic.t
TESTS += t3008-ibcrd-multinode.t
TESTS += t3009-ibcrd-verbs.t
TESTS += t3010-ibcrd-compress.t
TESTS += t3011-ibcrd-restore-timeout.t
TESTS += t3012-ibcrd-progress.t
# Test helper: the job user's side of a race against root's commit.
check_PROGRAMS += ibcrd/swapper
ibcrd_swapper_SOURCES = ibcrd/swapper.c
TESTS += t3014-ibcrd-storage-users.t
TESTS += t3016-ibcrd-user-run.t
TESTS += t3017-ibcrd-multiproc.t
TESTS += t3013-ibcrd-users.t
TESTS += t3015-ibcrd-fanout.t
TESTS += t3018-ibcrd-tree.t
TESTS += t3019-ibcrd-restore-tree.t
TESTS += t3020-ibcrd-max-nodes.t
