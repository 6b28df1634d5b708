#!/bin/sh
test_description='mpi: MPICH 4.0 (ch4:ucx) on softib across two Slurm nodes

Debian'"'"'s MPICH, whose only network module is UCX, over rc_verbs on
softib (UCX_TLS=rc_v,self: no TCP fallback between nodes), four ranks on
two network-namespace nodes of the test'"'"'s own Slurm cluster, as an
ordinary user; every slurmd runs under softib-devns.  mpi_verify checks
every message: launched by srun --mpi=pmi2, and by mpiexec (Hydra)
inside an allocation, which starts its proxies with srun, each without
and with libibcr preloaded; and under srun while t/ibcr/coord drives
libibcr through 20 release/rebuild cycles (new real QPs and keys each
time).'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
ibcr_require ROOT SLURM NETNS UCX MPICH SOFTIBDEV USERS MPIBUILT VERIFY_MPICH
mpi_setup

test_expect_success 'a 2-node netns cluster whose slurmds see softib as a device' '
	slurm_start 2 --netns --devns
'

test_expect_success 'srun --mpi=pmi2: 4 ranks on 2 nodes, every message verified' '
	mpi_srun mpich pmi2
'

test_expect_success 'srun --mpi=pmi2 with libibcr preloaded' '
	mpi_srun mpich pmi2-ibcr LD_PRELOAD=$LIBIBCR IBCR_DEBUG=1 &&
	mpi_ibcr_loaded pmi2-ibcr.err 4
'

test_expect_success 'srun --mpi=pmi2, libibcr: 20 release/rebuild cycles during the job, every message verified' '
	mpi_cycles mpich cyc 20
'

# (the ranks that did not abort are killed, so srun may say so by a signal)
test_expect_success 'a corrupted message makes the job fail, naming it' '
	! mpi_with mpich \
		srun --mpi=pmi2 -N2 -n4 --ntasks-per-node=2 -t 5 -o bad.out -e bad.err \
		"$MPI_VERIFY_MPICH" -n 2 -x &&
	grep "rank 0 on .*: message of 4194304 bytes from rank 1, iteration 1, seq .*: payload byte 4194263 is" bad.err &&
	! grep "mpi_verify: OK" bad.out
'

test_expect_success 'mpiexec inside an sbatch allocation: 4 ranks on 2 nodes' '
	mpi_alloc mpich mpiexec -iface eth0
'

test_expect_success 'mpiexec inside an allocation with libibcr preloaded' '
	mpi_alloc mpich mpiexec-ibcr -iface eth0 -genv LD_PRELOAD $LIBIBCR -genv IBCR_DEBUG 1 &&
	mpi_ibcr_loaded mpiexec-ibcr.err 4
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
