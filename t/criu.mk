# CRIU tests: ibcr-init's PID-namespace tree is dumped and restored by
# real CRIU (t0003).  pattern is the process whose state must survive.
TESTS += t0003-criu-basic.t
check_PROGRAMS += criu/pattern
criu_pattern_SOURCES = criu/pattern.c
criu_pattern_LDADD = $(AX_PTHREAD_LIBS)
# Runs a command in its own session with no inherited descriptor above
# stderr, for the tests that hand a process to CRIU themselves (t0003, t2008).
check_PROGRAMS += criu/detach
criu_detach_SOURCES = criu/detach.c
