# CRIU tests: ibcr-init's PID-namespace tree is dumped and restored by
# real CRIU (t0003).  pattern is the process whose state must survive.
TESTS += t0003-criu-basic.t
check_PROGRAMS += criu/pattern
criu_pattern_SOURCES = criu/pattern.c
criu_pattern_LDADD = $(AX_PTHREAD_LIBS)
