# softib's own C test programs (see t/Makefile.am).
#
# The verbs workload tools link the system libibverbs at build time; tests
# select the device at run time with LD_LIBRARY_PATH (softib's drop-in, a
# real HCA's provider, or libibcr on top).  libvw holds the parts that
# libibcr's tests reuse.

check_LTLIBRARIES += softib/libvw.la
softib_libvw_la_SOURCES = \
	softib/vw_pattern.c softib/vw_pattern.h \
	softib/vw_opts.c softib/vw_opts.h \
	softib/vw_oob.c softib/vw_oob.h \
	softib/vw_verbs.c softib/vw_verbs.h \
	softib/vw_ex.c softib/vw_ex.h
softib_libvw_la_LIBADD = -libverbs

check_PROGRAMS += softib/verbs_stream
softib_verbs_stream_SOURCES = \
	softib/verbs_stream.c softib/vw_stream.h \
	softib/vw_setup.c softib/vw_client.c softib/vw_server.c
softib_verbs_stream_LDADD = softib/libvw.la -libverbs $(AX_PTHREAD_LIBS)

# Single-process error-case programs (TAP); run by t1103-softib-errors.t
# with the device selected.
check_LTLIBRARIES += softib/libvwpair.la
softib_libvwpair_la_SOURCES = softib/vw_pair.c softib/vw_pair.h
softib_libvwpair_la_LIBADD = softib/libvw.la -libverbs

VW_ERR_LDADD = softib/libvwpair.la softib/libvw.la libtap.la -libverbs $(AX_PTHREAD_LIBS)
check_PROGRAMS += softib/err_access softib/err_state softib/err_rnr \
	softib/err_flush softib/err_unsupported softib/err_peer softib/mt_post \
	softib/srq_cq softib/atomic_shared
softib_err_access_SOURCES = softib/err_access.c
softib_err_access_LDADD = $(VW_ERR_LDADD)
softib_err_state_SOURCES = softib/err_state.c
softib_err_state_LDADD = $(VW_ERR_LDADD)
softib_err_rnr_SOURCES = softib/err_rnr.c
softib_err_rnr_LDADD = $(VW_ERR_LDADD)
softib_err_flush_SOURCES = softib/err_flush.c
softib_err_flush_LDADD = $(VW_ERR_LDADD)
softib_err_unsupported_SOURCES = softib/err_unsupported.c
softib_err_unsupported_LDADD = $(VW_ERR_LDADD)

# The tools' own logic, no device needed.
TESTS += softib/vw_unit.t
check_PROGRAMS += softib/vw_unit.t
softib_vw_unit_t_SOURCES = softib/vw_unit.c
softib_vw_unit_t_LDADD = softib/libvw.la libtap.la -libverbs $(AX_PTHREAD_LIBS)

# Sharness tests of softib with these tools.
TESTS += t1101-softib-stream.t t1102-softib-stream-netns.t t1103-softib-errors.t
EXTRA_DIST += softib/vw.sh
softib_err_peer_SOURCES = softib/err_peer.c
softib_err_peer_LDADD = $(VW_ERR_LDADD)
softib_mt_post_SOURCES = softib/mt_post.c
softib_mt_post_LDADD = $(VW_ERR_LDADD)
softib_srq_cq_SOURCES = softib/srq_cq.c
softib_srq_cq_LDADD = $(VW_ERR_LDADD)
softib_atomic_shared_SOURCES = softib/atomic_shared.c
softib_atomic_shared_LDADD = $(VW_ERR_LDADD)

# softib's biased lock and its send queue's ACK, linked with their own
# files (misc.c, tx.c) and stand-ins for the rest.
TESTS += softib/test_internals.t
check_PROGRAMS += softib/test_internals.t
softib_test_internals_t_SOURCES = softib/test_internals.c \
	$(top_srcdir)/lib/softib/misc.c $(top_srcdir)/lib/softib/tx.c
softib_test_internals_t_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib/softib
softib_test_internals_t_LDADD = libtap.la $(AX_PTHREAD_LIBS)
