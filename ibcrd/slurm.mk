# Slurm watcher (job end times, node drains, preemption, requeue) used by
# ibcrd: slurm_watch.h.  Added to ibcrd here so that the daemon's own
# fragment (daemon.mk) need not change; ibcr-slurm-watch is its test
# driver (t/t4005-spank-watch.t), never installed.
ibcrd_SOURCES += slurm_watch.c slurm_watch.h slurm_hook.c slurm_hook.h
ibcrd_CPPFLAGS += $(SLURM_CFLAGS)
ibcrd_LDADD += $(SLURM_LIBS) -lpthread

noinst_PROGRAMS += ibcr-slurm-watch
ibcr_slurm_watch_SOURCES = slurm_watch_drv.c slurm_watch.c slurm_watch.h
ibcr_slurm_watch_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CFLAGS)
ibcr_slurm_watch_LDADD = $(SLURM_LIBS)
