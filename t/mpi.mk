# UCX and MPI on softib (see t/Makefile.am): Debian's UCX tools, Open MPI
# 4.1 (pml ucx) and MPICH 4.0 (ch4:ucx) across network-namespace hosts.
#
# mpi_verify is built once per MPI with that MPI's own compiler wrapper
# (mpicc.openmpi, mpicc.mpich: "mpicc" is an alternative and may name
# either); a missing MPI leaves its binary out and its tests skip.

EXTRA_DIST += mpi/mpi_verify.c mpi/mpi.sh mpi/ckpt.sh mpi/hpcc.sh

if HAVE_MPICC_OPENMPI
check_SCRIPTS += mpi/mpi_verify.openmpi
endif
if HAVE_MPICC_MPICH
check_SCRIPTS += mpi/mpi_verify.mpich
endif
CLEANFILES += mpi/mpi_verify.openmpi mpi/mpi_verify.mpich

mpi/mpi_verify.openmpi: $(srcdir)/mpi/mpi_verify.c
	@$(MKDIR_P) mpi
	$(AM_V_CC)$(MPICC_OPENMPI) $(WARNING_CFLAGS) -O2 -o $@ $(srcdir)/mpi/mpi_verify.c
mpi/mpi_verify.mpich: $(srcdir)/mpi/mpi_verify.c
	@$(MKDIR_P) mpi
	$(AM_V_CC)$(MPICC_MPICH) $(WARNING_CFLAGS) -O2 -o $@ $(srcdir)/mpi/mpi_verify.c

# softib as a UCX device: symbol versions, ucx_info, ucx_perftest.
TESTS += t1104-softib-ucx.t
# Both MPIs across two hosts, under Slurm and its allocations' launchers.
TESTS += t5001-mpi-openmpi.t t5002-mpi-mpich.t t5003-mpi-mpich-ckpt.t t5004-mpi-openmpi-ckpt.t
# A real application from Debian's archive (hpcc), checkpointed and restored.
TESTS += t5005-mpi-hpcc.t
