#!/bin/sh
test_description='mpi: Open MPI 4.1 (pml ucx) on softib across two Slurm nodes

Debian'"'"'s Open MPI over UCX'"'"'s rc_verbs on softib, restricted to it
(UCX_TLS=rc_v,self: no TCP or shared-memory fallback; OMPI_MCA_pml=ucx
overrides Debian'"'"'s openmpi-mca-params.conf, which turns pml ucx off),
four ranks on two network-namespace nodes of the test'"'"'s own Slurm
cluster, as an ordinary user.  Every slurmd runs under softib-devns, so
its jobs see /dev/infiniband/uverbs0.  mpi_verify checks every message
(point-to-point at eager and rendezvous sizes, a ring, broadcast,
allreduce, alltoall): launched by srun --mpi=pmix, and by mpirun inside
an allocation (which starts its daemons with srun), each without and
with libibcr preloaded; and under srun while t/ibcr/coord drives libibcr
through 20 release/rebuild cycles (new real QPs and keys each time).'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
ibcr_require ROOT SLURM NETNS UCX OPENMPI SOFTIBDEV USERS MPIBUILT VERIFY_OPENMPI
mpi_setup

test_expect_success 'a 2-node netns cluster whose slurmds see softib as a device' '
	slurm_start 2 --netns --devns
'

test_expect_success 'srun --mpi=pmix: 4 ranks on 2 nodes, every message verified' '
	mpi_srun openmpi pmix
'

test_expect_success 'srun --mpi=pmix with libibcr preloaded' '
	mpi_srun openmpi pmix-ibcr LD_PRELOAD=$LIBIBCR IBCR_DEBUG=1 &&
	mpi_ibcr_loaded pmix-ibcr.err 4
'

test_expect_success 'srun --mpi=pmix, libibcr: 20 release/rebuild cycles during the job, every message verified' '
	mpi_cycles openmpi cyc 20
'

# (the ranks that did not abort are killed, so srun may say so by a signal)
test_expect_success 'a corrupted message makes the job fail, naming it' '
	! mpi_with openmpi \
		srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 -t 5 -o bad.out -e bad.err \
		"$MPI_VERIFY_OPENMPI" -n 2 -x &&
	grep "rank 0 on .*: message of 4194304 bytes from rank 1, iteration 1, seq .*: payload byte 4194263 is" bad.err &&
	! grep "mpi_verify: OK" bad.out
'

test_expect_success 'mpirun inside an sbatch allocation: 4 ranks on 2 nodes' '
	mpi_alloc openmpi mpirun
'

test_expect_success 'mpirun inside an allocation with libibcr preloaded' '
	mpi_alloc openmpi mpirun-ibcr -x LD_PRELOAD=$LIBIBCR -x IBCR_DEBUG=1 &&
	mpi_ibcr_loaded mpirun-ibcr.err 4
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
