# softib tests (see t/Makefile.am): Debian's unmodified verbs tools and
# perftest running on softib's drop-in libibverbs.so.1.
TESTS += \
	t1001-softib-devices.t
TESTS += t1002-softib-pingpong.t
TESTS += t1003-softib-perftest.t
TESTS += t1004-softib-lifecycle.t
TESTS += t1005-softib-badpeer.t

# Verb-semantics programs (TAP), one group of verbs each, checked against
# the IB spec; run by t1006-softib-verbs.t with softib selected.  They link
# the system libibverbs and pick the device at run time (LD_LIBRARY_PATH).
check_LTLIBRARIES += softib-verbs/libsv.la
softib_verbs_libsv_la_SOURCES = softib-verbs/sv.c softib-verbs/sv.h
softib_verbs_libsv_la_LIBADD = libtap.la -libverbs
SV_LDADD = softib-verbs/libsv.la libtap.la -libverbs $(AX_PTHREAD_LIBS)
check_PROGRAMS += softib-verbs/qp_table
softib_verbs_qp_table_SOURCES = softib-verbs/qp_table.c
softib_verbs_qp_table_LDADD = $(SV_LDADD)
TESTS += t1006-softib-verbs.t
check_PROGRAMS += softib-verbs/rc_semantics
softib_verbs_rc_semantics_SOURCES = softib-verbs/rc_semantics.c
softib_verbs_rc_semantics_LDADD = $(SV_LDADD)
check_PROGRAMS += softib-verbs/cq_events
softib_verbs_cq_events_SOURCES = softib-verbs/cq_events.c
softib_verbs_cq_events_LDADD = $(SV_LDADD)
check_PROGRAMS += softib-verbs/mt_post
softib_verbs_mt_post_SOURCES = softib-verbs/mt_post.c
softib_verbs_mt_post_LDADD = $(SV_LDADD)
check_PROGRAMS += softib-verbs/ud_ah
softib_verbs_ud_ah_SOURCES = softib-verbs/ud_ah.c
softib_verbs_ud_ah_LDADD = $(SV_LDADD)
check_PROGRAMS += softib-verbs/conn_death
softib_verbs_conn_death_SOURCES = softib-verbs/conn_death.c
softib_verbs_conn_death_LDADD = $(SV_LDADD)
TESTS += t1007-softib-log.t
TESTS += t1008-softib-srq-repeat.t
