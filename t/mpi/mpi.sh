# mpi.sh - run UCX and MPI on softib from sharness tests.
#
# Sourced by t/t1104-softib-ucx.t and t/t5NNN-mpi-*.t after sharness.sh.
#
# API:
#   mpi_setup           sets SOFTIB_LIBDIR, LIBIBCR, MPI_VERIFY_OPENMPI,
#                       MPI_VERIFY_MPICH (prerequisites MPIBUILT,
#                       VERIFY_OPENMPI and VERIFY_MPICH of 00-prereqs.sh
#                       say they are built).
#   ucx_env_words       print the environment that restricts UCX to
#                       softib's verbs (rc_verbs, ud_verbs as its helper,
#                       self), so a run that is not on softib fails rather
#                       than falling back to TCP or shared memory.
#   ucx_on HOST CMD...  run CMD in netns host HOST (0: here), under
#                       softib-devns (UCX sees /dev/infiniband/uverbs0), as
#                       $IBCR_JOB_USER when set, with softib selected and
#                       $UCX_ENV_EXTRA (e.g. LD_PRELOAD=...) added.
#   ucx_tl_devs         from `ucx_info -d` on stdin: "TRANSPORT DEVICE"
#                       lines.
#   ucx_perf NAME SRVHOST CLIHOST PERFTEST-OPTIONS...
#                       ucx_perftest server on SRVHOST, client on CLIHOST
#                       (to the server's address); both must exit 0 and
#                       the client print its "Final:" line.  Output in
#                       NAME.{srv,cli}.{out,err}.
#   mpi_job_env MPI     print the environment words of a job of MPI
#                       (openmpi, mpich) on softib: ucx_env_words, Open
#                       MPI's pml ucx (Debian's openmpi-mca-params.conf
#                       turns it off), and $MPI_ENV_EXTRA.
#   mpi_with MPI [VAR=VALUE...] CMD...
#                       run CMD (srun, sbatch: the harness's wrappers that
#                       run them as $IBCR_JOB_USER) with mpi_job_env MPI
#                       and the VAR=VALUE words exported, in a subshell.
#   mpi_srun MPI NAME [VAR=VALUE...]
#                       mpi_verify of MPI, 4 ranks on 2 nodes (2 each) under
#                       srun with MPI's Slurm plugin (openmpi: pmix,
#                       mpich: pmi2), the VAR=VALUE words added; output in
#                       NAME.{out,err}, checked by mpi_check_out.
#   mpi_alloc MPI NAME [LAUNCHER-OPTIONS...]
#                       the same through MPI's own launcher (mpirun.openmpi,
#                       mpiexec.mpich) inside a 2-node sbatch allocation,
#                       where it starts its daemons with srun.
#   mpi_ibcr_loaded FILE N
#                       libibcr (IBCR_DEBUG=1) said in N processes of FILE
#                       that it loaded its backend.
#   mpi_cycles MPI NAME CYCLES
#                       mpi_srun with libibcr preloaded and t/ibcr/coord
#                       (run as the job user, socket NAME.sock) driving
#                       CYCLES quiesce/drain/release/rebuild/resume cycles
#                       2-20 ms apart while the ranks exchange data;
#                       mpi_verify goes on until the cycles are done.  Every
#                       cycle must complete in all 4 ranks, each of which
#                       must hold a QP rebuilt with a new real number, and
#                       every message be verified.
#   mpi_check_out FILE NRANKS ITERS NODES
#                       FILE holds mpi_verify's output: NRANKS rank lines,
#                       from NODES distinct hosts, ITERS iterations each
#                       ("any": the count of the OK line), and the OK line
#                       with the expected message count.

. "$SHARNESS_TEST_SRCDIR"/softib/vw.sh
. "$SHARNESS_TEST_SRCDIR"/ibcr/ibcr.sh

mpi_setup() {
	SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
	LIBIBCR=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
	MPI_VERIFY_OPENMPI=$IBCR_BUILDDIR/t/mpi/mpi_verify.openmpi
	MPI_VERIFY_MPICH=$IBCR_BUILDDIR/t/mpi/mpi_verify.mpich
	return 0
}

ucx_env_words() {
	echo "UCX_TLS=rc_v,self UCX_NET_DEVICES=softib0:1 UCX_WARN_UNUSED_ENV_VARS=n"
}

ucx_on() {
	ucx_on_h=$1
	shift
	set -- "$IBCR_SOFTIB_DEVNS" \
		${IBCR_JOB_USER:+setpriv --reuid="$IBCR_JOB_USER" --regid="$IBCR_JOB_USER" --init-groups} \
		env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" $(ucx_env_words) $UCX_ENV_EXTRA "$@"
	if test -z "$ucx_on_h" || test "$ucx_on_h" = 0; then
		"$@"
	else
		netns_exec "$ucx_on_h" "$@"
	fi
}

ucx_tl_devs() {
	awk '/# *Transport:/ { tl = $3 } /# *Device:/ && tl != "" { print tl, $3 }'
}

# ucx_perf_listening_or_exited: ucx_perf's server listens, or is gone.
ucx_perf_listening_or_exited() {
	ibcr_on_ "$ucx_pf_srv" ss -Hltn "sport = :$ucx_pf_port" | grep -q LISTEN ||
		ibcr_dead $ucx_pf_spid
}

ucx_perf() {
	ucx_pf_name=$1 ucx_pf_srv=$2 ucx_pf_cli=$3
	shift 3
	# below the ephemeral range and softib's endpoint ports (24576-)
	ucx_pf_port=$(( 12000 + ($$ * 13 + ${ucx_pf_k:=0}) % 12000 ))
	ucx_pf_k=$((ucx_pf_k + 1))
	while ibcr_on_ "$ucx_pf_srv" ss -Htan "( sport = :$ucx_pf_port )" | grep -q .; do
		ucx_pf_port=$((ucx_pf_port + 1))
	done
	ucx_on "$ucx_pf_srv" timeout 120 ucx_perftest -p $ucx_pf_port \
		>"$ucx_pf_name".srv.out 2>"$ucx_pf_name".srv.err &
	ucx_pf_spid=$!
	if ! ibcr_wait_for 20 ucx_perf_listening_or_exited || ibcr_dead $ucx_pf_spid; then
		kill $ucx_pf_spid 2>/dev/null
		wait $ucx_pf_spid
		echo "ucx_perf $ucx_pf_name: the server did not listen" >&2
		cat "$ucx_pf_name".srv.err >&2
		return 1
	fi
	ucx_on "$ucx_pf_cli" timeout 120 ucx_perftest -p $ucx_pf_port "$@" \
		"$(netns_ip "$ucx_pf_srv")" >"$ucx_pf_name".cli.out 2>"$ucx_pf_name".cli.err
	ucx_pf_crc=$?
	wait $ucx_pf_spid
	ucx_pf_src=$?
	if test $ucx_pf_crc -ne 0 || test $ucx_pf_src -ne 0 ||
	   ! grep -q "^Final:" "$ucx_pf_name".cli.out; then
		echo "ucx_perf $ucx_pf_name: client exit $ucx_pf_crc, server exit $ucx_pf_src" >&2
		for ucx_pf_f in srv.out srv.err cli.out cli.err; do
			sed "s|^|$ucx_pf_name.$ucx_pf_f: |" "$ucx_pf_name.$ucx_pf_f" >&2
			tail -n 15 "$ucx_pf_name.$ucx_pf_f" | sed "s|^|$ucx_pf_name.$ucx_pf_f: |" | ibcr_diag
		done
		return 1
	fi
	grep "^Final:" "$ucx_pf_name".cli.out
}

# ibcr_on_ HOST CMD...: CMD here (0) or in netns host HOST, as root.
ibcr_on_() {
	ibcr_oh=$1
	shift
	if test -z "$ibcr_oh" || test "$ibcr_oh" = 0; then
		"$@"
	else
		netns_exec "$ibcr_oh" "$@"
	fi
}

mpi_job_env() {
	mpi_je=$(ucx_env_words)
	case "$1" in
	# One-sided over UCX too (Debian's openmpi-mca-params.conf turns osc
	# ucx off, and osc rdma needs a verbs BTL, which UCX jobs do not have).
	openmpi) mpi_je="$mpi_je OMPI_MCA_pml=ucx OMPI_MCA_osc=ucx" ;;
	mpich) ;;
	*)
		echo "mpi_job_env: unknown MPI '$1' (openmpi, mpich)" >&2
		return 1 ;;
	esac
	echo "LD_LIBRARY_PATH=$SOFTIB_LIBDIR $mpi_je $MPI_ENV_EXTRA"
}

mpi_with() {
	(
		mpi_w_env=$(mpi_job_env "$1") || exit 1
		shift
		export $mpi_w_env || exit 1
		while test $# -gt 0; do
			case "$1" in
			*=*) export "$1" || exit 1 ;;
			*) break ;;
			esac
			shift
		done
		"$@"
	)
}

mpi_check_out() {
	mpi_co_f=$1 mpi_co_n=$2 mpi_co_it=$3 mpi_co_nodes=$4
	if test "$mpi_co_it" = any; then
		mpi_co_it=$(sed -n "s/^mpi_verify: OK $mpi_co_n ranks, \([0-9]*\) iterations, .*/\1/p" "$mpi_co_f")
		test -n "$mpi_co_it" || mpi_co_it=none
	fi
	mpi_co_lines=$(grep -c "^rank [0-9]* of $mpi_co_n on .*: $mpi_co_it iterations, .* bytes verified$" "$mpi_co_f")
	mpi_co_hosts=$(sed -n "s/^rank [0-9]* of $mpi_co_n on \(.*\): $mpi_co_it iterations.*/\1/p" "$mpi_co_f" | sort -u | wc -l)
	# all pairs, one of each of the 6 default sizes, plus the ring; and
	# one put, one accumulate and one get per pair (one-sided)
	mpi_co_msgs=$(( mpi_co_it * mpi_co_n * ((mpi_co_n - 1) * 6 + 1) ))
	mpi_co_rma=$(( mpi_co_it * mpi_co_n * (mpi_co_n - 1) * 3 ))
	if test "$mpi_co_lines" = "$mpi_co_n" && test "$mpi_co_hosts" = "$mpi_co_nodes" &&
	   grep "^mpi_verify: OK $mpi_co_n ranks, $mpi_co_it iterations, $mpi_co_msgs messages, [0-9]* bytes, $mpi_co_rma one-sided " "$mpi_co_f"; then
		return 0
	fi
	echo "mpi_check_out $mpi_co_f: $mpi_co_lines of $mpi_co_n rank lines, from $mpi_co_hosts hosts (want $mpi_co_nodes), no OK line with $mpi_co_msgs messages and $mpi_co_rma one-sided" |
		tee /dev/stderr | ibcr_diag
	sed "s|^|$mpi_co_f: |" "$mpi_co_f" | tail -n 20 | ibcr_diag
	return 1
}

MPI_ITERS=${MPI_ITERS:-4}

mpi_verify_of_() {
	case "$1" in
	openmpi) echo "$MPI_VERIFY_OPENMPI" ;;
	mpich) echo "$MPI_VERIFY_MPICH" ;;
	esac
}

# (10 minutes: t5003's and t5004's uninterrupted references of 250
# iterations, run side by side under make -j2 on two cores shared with
# other work at load 15, were cut at an earlier 5.)
mpi_srun() {
	mpi_sr_mpi=$1 mpi_sr_name=$2
	shift 2
	mpi_sr_args=${MPI_VERIFY_ARGS:--n $MPI_ITERS}
	case "$mpi_sr_mpi" in
	openmpi) mpi_sr_plugin=pmix ;;
	mpich) mpi_sr_plugin=pmi2 ;;
	esac
	mpi_with "$mpi_sr_mpi" "$@" \
		srun --mpi=$mpi_sr_plugin -N2 -n4 --ntasks-per-node=2 -t 10 \
		-o "$mpi_sr_name".out -e "$mpi_sr_name".err \
		"$(mpi_verify_of_ "$mpi_sr_mpi")" $mpi_sr_args || {
		cat "$mpi_sr_name".out "$mpi_sr_name".err | tail -n 40 | ibcr_diag
		return 1
	}
	ibcr_diag <"$mpi_sr_name".err
	mpi_check_out "$mpi_sr_name".out 4 ${MPI_CHECK_ITERS:-$MPI_ITERS} 2
}

# mpi_rebuilt_ NAME N: each of the 4 ranks' final "stat" line says it went
# through N cycles and holds a QP whose real number is no longer its
# first.  (UCX makes QPs and registers memory lazily: those made after
# the last cycle still have their first real ids.)
mpi_rebuilt_() {
	for mpi_rb_r in 0 1 2 3; do
		mpi_rb_l=$(grep "^stat .*\"rank\": $mpi_rb_r, \"cycles\": $2, " "$1".coord.out) &&
		echo "$mpi_rb_l" | sed 's/{ "v/\n&/g' |
			sed -n 's/^{ "vqpn": \([0-9]*\), "rqpn": \([0-9]*\) }.*/\1 \2/p' |
			awk '$1 != $2 { n++ } END { exit !n }' || {
			echo "$1: rank $mpi_rb_r reports no $2 cycles with a rebuilt QP" | ibcr_diag
			return 1
		}
	done
}

mpi_cycles() {
	mpi_cy_mpi=$1 mpi_cy_name=$2 mpi_cy_n=$3
	rm -f "$mpi_cy_name".sock "$mpi_cy_name".stop
	# As the job user: the ranks must be able to connect to its socket.
	setpriv --reuid="$IBCR_JOB_USER" --regid="$IBCR_JOB_USER" --init-groups \
		timeout 300 "$IBCR_BUILDDIR"/t/ibcr/coord -s "$mpi_cy_name".sock \
		-n 4 -c "$mpi_cy_n" -w 2:20 \
		>"$mpi_cy_name".coord.out 2>"$mpi_cy_name".coord.err &
	mpi_cy_cpid=$!
	# ... and mpi_verify ends only once the cycles are done.
	(
		ibcr_wait_for 240 grep -q "^cycles done" "$mpi_cy_name".coord.out
		touch "$mpi_cy_name".stop
	) &
	mpi_cy_wpid=$!
	MPI_VERIFY_ARGS="-n 1 -u $mpi_cy_name.stop" MPI_CHECK_ITERS=any \
		mpi_srun "$mpi_cy_mpi" "$mpi_cy_name" LD_PRELOAD="$LIBIBCR" \
		IBCR_SOCKET="$mpi_cy_name".sock
	mpi_cy_rc=$?
	touch "$mpi_cy_name".stop
	wait $mpi_cy_wpid
	wait $mpi_cy_cpid || {
		echo "mpi_cycles $mpi_cy_name: the coordinator failed" | ibcr_diag
		mpi_cy_rc=1
	}
	grep "^cycle " "$mpi_cy_name".coord.out | tail -n 1
	if test $mpi_cy_rc -ne 0 || ! coord_cycles_are "$mpi_cy_name" "$mpi_cy_n" ||
	   ! mpi_rebuilt_ "$mpi_cy_name" "$mpi_cy_n"; then
		tail -n 20 "$mpi_cy_name".coord.err "$mpi_cy_name".coord.out | ibcr_diag
		return 1
	fi
}

mpi_alloc() {
	mpi_al_mpi=$1 mpi_al_name=$2
	shift 2
	case "$mpi_al_mpi" in
	openmpi) mpi_al_run="mpirun.openmpi -n 4 --map-by ppr:2:node" ;;
	mpich) mpi_al_run="mpiexec.mpich -n 4 -ppn 2" ;;
	esac
	# The batch step runs as the job user: the script must be theirs to read.
	printf '#!/bin/sh\nexec %s "$@"\n' "$mpi_al_run" >"$mpi_al_name".sh &&
	chmod 755 "$mpi_al_name".sh &&
	mpi_al_j=$(mpi_with "$mpi_al_mpi" sbatch --parsable -N2 --ntasks-per-node=2 -t 5 \
		-o "$mpi_al_name".out -e "$mpi_al_name".err ./"$mpi_al_name".sh \
		"$@" "$(mpi_verify_of_ "$mpi_al_mpi")" -n $MPI_ITERS) &&
	slurm_wait_job $mpi_al_j COMPLETED 120 || {
		cat "$mpi_al_name".out "$mpi_al_name".err | tail -n 40 | ibcr_diag
		return 1
	}
	ibcr_diag <"$mpi_al_name".err
	mpi_check_out "$mpi_al_name".out 4 $MPI_ITERS 2
}

mpi_ibcr_loaded() {
	mpi_il_n=$(grep -c "^libibcr\[[0-9]*\]: backend loaded: .*libibverbs.so.1$" "$1")
	test "$mpi_il_n" = "$2" && return 0
	echo "$1: libibcr loaded in $mpi_il_n processes, not $2" | tee /dev/stderr | ibcr_diag
	return 1
}
