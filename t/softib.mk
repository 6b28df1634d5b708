# softib tests (see t/Makefile.am): Debian's unmodified verbs tools and
# perftest running on softib's drop-in libibverbs.so.1.
TESTS += \
	t1001-softib-devices.t
TESTS += t1002-softib-pingpong.t
TESTS += t1003-softib-perftest.t
TESTS += t1004-softib-lifecycle.t
TESTS += t1005-softib-badpeer.t
