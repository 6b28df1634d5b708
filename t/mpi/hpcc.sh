# hpcc.sh - Debian's HPC Challenge (hpcc, linked with Open MPI) as the
# real application of t5005 and contrib/demo-mpi.sh; sourced after
# mpi.sh.
#
# hpcc reads hpccinf.txt in its working folder and appends its report to
# hpccoutf.txt there, opening it for each section and keeping it open
# while the section computes.  It checks its own results: HPL's scaled
# residual, PTRANS's residuals, the RandomAccess tables, STREAM's
# arrays, the FFTs' errors.
#
#   hpcc_input DIR N            make DIR (the job user's) with an
#                               hpccinf.txt for 4 ranks (HPL on a 2x2
#                               grid, order N; the other kernels are
#                               sized from N)
#   hpcc_facts FILE             print what must be the same in every
#                               complete run of one input, whatever the
#                               hosts, timings and interruptions: the
#                               verdicts and residuals, HPL's norms, the
#                               sizes (the Summary section's keys below,
#                               and every PASSED/FAILED and "errors" line)
#   hpcc_writing                some hpcc process of $IBCR_JOB_USER has
#                               its hpccoutf.txt open (rank 0, inside a
#                               section)
#   hpcc_complete FILE          FILE is one complete report: it passed
#                               (Success=1, every check passed, none
#                               failed), each section begins and ends
#                               once, in order, and nothing is repeated
#                               or cut

hpcc_input() {
	mkdir -p "$1" &&
	cat >"$1"/hpccinf.txt <<-EOF &&
	HPLinpack benchmark input file
	ibcr t5005: 4 ranks, small
	HPL.out      output file name (if any)
	8            device out (6=stdout,7=stderr,file)
	1            # of problems sizes (N)
	$2           Ns
	1            # of NBs
	80           NBs
	0            PMAP process mapping (0=Row-,1=Column-major)
	1            # of process grids (P x Q)
	2            Ps
	2            Qs
	16.0         threshold
	1            # of panel fact
	2            PFACTs (0=left, 1=Crout, 2=Right)
	1            # of recursive stopping criterium
	4            NBMINs (>= 1)
	1            # of panels in recursion
	2            NDIVs
	1            # of recursive panel fact.
	1            RFACTs (0=left, 1=Crout, 2=Right)
	1            # of broadcast
	1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
	1            # of lookahead depth
	1            DEPTHs (>=0)
	2            SWAP (0=bin-exch,1=long,2=mix)
	64           swapping threshold
	0            L1 in (0=transposed,1=no-transposed) form
	0            U  in (0=transposed,1=no-transposed) form
	1            Equilibration (0=no,1=yes)
	8            memory alignment in double (> 0)
	##### This line (no. 32) is ignored (it serves as a separator). ######
	0                               Number of additional problem sizes for PTRANS
	1200 10000 30000                values of N
	0                               number of additional blocking sizes for PTRANS
	40 9 8 13 13 20 16 32 64        values of NB
	EOF
	chown -R "${IBCR_JOB_USER:-root}" "$1"
}

# The Summary keys whose values depend only on the input and the number
# of ranks.  Not the timings and rates, not the executed RandomAccess
# updates (cut to fit a time bound measured at run time), not DGEMM's
# residual (its matrices are seeded from the clock).
hpcc_keys_="Success CommWorldProcs HPL_N HPL_NB HPL_nprow HPL_npcol HPL_RnormI HPL_Anorm1 HPL_AnormI HPL_Xnorm1 HPL_XnormI HPL_BnormI PTRANS_residual PTRANS_n MPIRandomAccess_N MPIRandomAccess_Errors MPIRandomAccess_LCG_N MPIRandomAccess_LCG_Errors RandomAccess_N RandomAccess_LCG_N STREAM_VectorSize DGEMM_N FFT_N MPIFFT_N MPIFFT_maxErr MPIFFT_Procs"

hpcc_facts() {
	for hpcc_k in $hpcc_keys_; do
		grep "^$hpcc_k=" "$1" || echo "$hpcc_k missing"
	done
	# HPL's residual line; PTRANS's checks (rate and time columns out).
	# Only the WALL rows: hpcc leaves out a CPU row whose CPU time came
	# out as 0 (seen on a fast machine), so their number varies.
	grep "^||Ax-b||" "$1"
	awk '$1 == "WALL" && NF == 11 { print $1, $2, $3, $4, $5, $6, $7, $9, $11 }' "$1"
	grep -e "^Found [0-9]* errors" -e "^Solution Validates" -e "^max(|x-x0|)" \
		-e "tests completed and" -e "Node(s) with error" "$1"
}

hpcc_complete() {
	grep -q "^Success=1$" "$1" &&
	grep -q "^||Ax-b||.*PASSED$" "$1" &&
	test "$(grep -c "^WALL .* PASSED " "$1")" -ge 5 &&
	! grep -q -e "FAILED" -e "^ *[1-9][0-9]* tests completed and failed" "$1" &&
	test "$(grep -c "^End of HPC Challenge tests.$" "$1")" = 1 &&
	test "$(grep -c "^This is the DARPA/DOE HPC Challenge Benchmark" "$1")" = 1 &&
	sed -n "s/^Begin of \(.*\) section.$/\1/p" "$1" >"$1".begun &&
	sed -n "s/^End of \(.*\) section.$/\1/p" "$1" >"$1".ended &&
	test_cmp "$1".begun "$1".ended &&
	test "$(sort "$1".begun | uniq -d)" = "" &&
	test "$(wc -l <"$1".begun)" = 17 || {
		echo "hpcc_complete $1: not one complete, passed report" | ibcr_diag
		tail -n 30 "$1" | sed "s|^|$1: |" | ibcr_diag
		return 1
	}
}

hpcc_writing() {
	for hpcc_p in $(pgrep -u "${IBCR_JOB_USER:-root}" -x hpcc); do
		ls -l /proc/$hpcc_p/fd 2>/dev/null | grep -q "/hpccoutf.txt$" && return 0
	done
	return 1
}
