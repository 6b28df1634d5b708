# ibcr-init: the PID-namespace init every checkpointable task runs under
# (see init.c).  Installed in pkglibexecdir: ibcr and the SPANK plugin run
# it, users do not.
pkglibexec_PROGRAMS += ibcr-init
ibcr_init_SOURCES = \
	init.c \
	init_spawn.c init_spawn.h \
	init_supervise.c init_supervise.h
