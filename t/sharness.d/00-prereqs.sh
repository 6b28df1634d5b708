# 00-prereqs.sh - what this machine can run, as sharness prerequisites.
#
# API (sourced by sharness for every t/*.t, and by contrib/demo.sh):
#   prerequisites set with test_set_prereq when present:
#     ROOT      running as uid 0
#     CRIU      a `criu check` that passes; IBCR_CRIU is exported with its
#               path (looked up in $IBCR_CRIU, /usr/local/sbin/criu, PATH)
#     SLURM     slurmctld, slurmd, srun, sbatch, scontrol, munged, mungekey
#     NETNS     root, and a network namespace can be made and removed
#     PERFTEST  ib_send_bw
#     IBVUTILS  ibv_rc_pingpong
#     PYTHON3   python3 and stdbuf (test peers and drivers written in python)
#     OTHERS    an unprivileged user (nobody) can reach the build tree, as
#               tests that run jobs or commands as other users need
#     PYCRIU    Debian's /usr/bin/python3 imports CRIU's pycriu and xxhash
#               (t/criu/forge.py; contrib/deps.sh installs both)
#     UCX       Debian's UCX tools (ucx_info, ucx_perftest) and its verbs
#               transports (libuct_ib.so.0)
#     OPENMPI   Debian's Open MPI: mpicc.openmpi, mpirun.openmpi
#     MPICH     Debian's MPICH: mpicc.mpich, mpiexec.mpich
#     HPCC      Debian's hpcc (HPC Challenge, linked with Open MPI)
#     SOFTIBDEV root, and lib/softib/softib-devns can give a command a
#               private /dev with /dev/infiniband/uverbs0 (unshare,
#               findmnt, overlayfs); IBCR_SOFTIB_DEVNS is exported with
#               the script's path
#     USERS     OTHERS, and the two ordinary test users that contrib/deps.sh
#               creates: IBCR_USER1/IBCR_UID1/IBCR_GID1 (ibcr-user1, the
#               job's owner) and IBCR_USER2/IBCR_UID2/IBCR_GID2 (ibcr-user2,
#               another user, hostile in security tests) are exported
#     GDB       gdb
#     CLANG_FORMAT  clang-format (the tree's style check, t0006)
#     SCRIPT    script (util-linux: a program on a terminal)
#     MUNGE     munged, mungekey, unmunge
#   and what the build tree has built (make; make check builds the rest):
#     IBCRD     the daemon, ibcrd/ibcrd
#     WATCH     the Slurm watcher's test driver, t/spank/ibcr-slurm-watch
#     SOFTIB    softib's drop-in lib/softib/.libs/libibverbs.so.1
#     LIBIBCR   lib/ibcr/.libs/libibcr.so and the test coordinator t/ibcr/coord
#     BUILT     what a verbs job under the SPANK plugin needs: SOFTIB,
#               libibcr, the plugin and t/softib/verbs_stream
#     MPIBUILT  what the UCX and MPI tests need: SOFTIB with its stand-in
#               libmlx5, LIBIBCR
#     TSAN      libibcr built with ThreadSanitizer (t/ibcr/libibcr_tsan.la,
#               made by make check when configure found -fsanitize=thread
#               works) and its runtime libtsan
#     VERIFY_OPENMPI, VERIFY_MPICH
#               t/mpi/mpi_verify.openmpi, .mpich (built when that MPI's
#               compiler wrapper was found)
#   ibcr_prereq_ok NAME      true when NAME is present (works outside sharness)
#   ibcr_prereq_why NAME     prints why NAME is missing
#   ibcr_require NAME...     call right after sourcing sharness.sh.  If one
#                            is missing: with CI=true, one failing test
#                            "prerequisite X missing: why" then test_done
#                            (CI installs everything, so a skip there would
#                            hide a broken machine); otherwise skip_all with
#                            the reason, then test_done.
#   ibcr_want NAME...        for prerequisites only some tests of a script
#                            need (test_expect_success NAME '...'): with
#                            CI=true, one failing test per missing NAME and
#                            the script goes on; otherwise nothing (those
#                            tests say "skipped" with the NAME).
#
# Every prerequisite a test uses is checked here, never with a
# test_set_prereq or skip_all of the test's own: only this file knows
# that CI must not skip.
#
# Checks run once, when this file is sourced; each costs milliseconds
# (`criu check` about 70 ms).  This file must never change the machine.

ibcr_prereq_have=" "

# ibcr_prereq_set_ NAME: NAME is present.
ibcr_prereq_set_() {
	ibcr_prereq_have="$ibcr_prereq_have$1 "
	if command -v test_set_prereq >/dev/null 2>&1; then
		test_set_prereq "$1"
	fi
}

# ibcr_prereq_missing_ NAME WHY: remember why NAME is missing.
ibcr_prereq_missing_() {
	eval "ibcr_prereq_why_$1=\$2"
}

ibcr_prereq_ok() {
	case "$ibcr_prereq_have" in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

ibcr_prereq_why() {
	eval "printf '%s\n' \"\${ibcr_prereq_why_$1:-unknown prerequisite $1 (known: ROOT CRIU SLURM NETNS PERFTEST IBVUTILS PYTHON3 OTHERS USERS PYCRIU UCX OPENMPI MPICH HPCC SOFTIBDEV GDB CLANG_FORMAT SCRIPT MUNGE IBCRD WATCH SOFTIB LIBIBCR BUILT MPIBUILT VERIFY_OPENMPI VERIFY_MPICH TSAN)}\""
}

# ibcr_prereq_cmds_ NAME CMD...: NAME is present when every CMD is found.
ibcr_prereq_cmds_() {
	ibcr_pc_name=$1
	shift
	ibcr_pc_lack=
	for ibcr_pc_cmd in "$@"; do
		command -v "$ibcr_pc_cmd" >/dev/null 2>&1 ||
			ibcr_pc_lack="$ibcr_pc_lack $ibcr_pc_cmd"
	done
	if test -z "$ibcr_pc_lack"; then
		ibcr_prereq_set_ "$ibcr_pc_name"
	else
		ibcr_prereq_missing_ "$ibcr_pc_name" \
			"not in PATH:$ibcr_pc_lack (run contrib/deps.sh as root)"
	fi
}

# ibcr_prereq_built_ NAME FILE...: NAME is present when every FILE
# (relative to the build tree) exists.
ibcr_prereq_built_() {
	ibcr_pb_name=$1
	shift
	ibcr_pb_lack=
	for ibcr_pb_f in "$@"; do
		test -e "${IBCR_BUILDDIR:-.}/$ibcr_pb_f" ||
			ibcr_pb_lack="$ibcr_pb_lack $ibcr_pb_f"
	done
	if test -z "$ibcr_pb_lack"; then
		ibcr_prereq_set_ "$ibcr_pb_name"
	else
		ibcr_prereq_missing_ "$ibcr_pb_name" \
			"not built in ${IBCR_BUILDDIR:-.}:$ibcr_pb_lack (run make, or make check)"
	fi
}

ibcr_prereq_check_() {
	# sbin is not in every user's PATH, but the daemons live there.
	case ":$PATH:" in
	*:/usr/sbin:*) ;;
	*) PATH="$PATH:/usr/sbin:/sbin"; export PATH ;;
	esac

	if test "$(id -u)" = 0; then
		ibcr_prereq_set_ ROOT
	else
		ibcr_prereq_missing_ ROOT "needs root (uid 0), running as uid $(id -u)"
	fi

	# CRIU: the first candidate that exists decides; a broken one is
	# reported as broken rather than silently replaced by another.
	ibcr_criu=
	for ibcr_c in "$IBCR_CRIU" /usr/local/sbin/criu "$(command -v criu 2>/dev/null)"; do
		if test -n "$ibcr_c" && test -x "$ibcr_c"; then
			ibcr_criu=$ibcr_c
			break
		fi
	done
	if test -z "$ibcr_criu"; then
		ibcr_prereq_missing_ CRIU "no criu binary (looked at \$IBCR_CRIU, /usr/local/sbin/criu, PATH); run contrib/deps.sh"
	elif ! ibcr_prereq_ok ROOT; then
		ibcr_prereq_missing_ CRIU "criu needs root"
	elif ibcr_criu_out=$("$ibcr_criu" check 2>&1); then
		IBCR_CRIU=$ibcr_criu
		export IBCR_CRIU
		ibcr_prereq_set_ CRIU
	else
		ibcr_prereq_missing_ CRIU "'$ibcr_criu check' fails: $(printf '%s' "$ibcr_criu_out" | tail -n 1) (CRIU >= 4.1 is needed on kernels >= 6.13; run contrib/deps.sh)"
	fi

	ibcr_prereq_cmds_ SLURM slurmctld slurmd srun sbatch scontrol squeue munged mungekey
	ibcr_prereq_cmds_ PERFTEST ib_send_bw
	ibcr_prereq_cmds_ IBVUTILS ibv_rc_pingpong
	ibcr_prereq_cmds_ PYTHON3 python3 stdbuf
	if ls /usr/lib/*/ucx/libuct_ib.so.0 >/dev/null 2>&1; then
		ibcr_prereq_cmds_ UCX ucx_info ucx_perftest
	else
		ibcr_prereq_missing_ UCX "UCX's verbs transports (ucx/libuct_ib.so.0) not found (run contrib/deps.sh)"
	fi
	ibcr_prereq_cmds_ OPENMPI mpicc.openmpi mpirun.openmpi
	ibcr_prereq_cmds_ MPICH mpicc.mpich mpiexec.mpich
	ibcr_prereq_cmds_ HPCC hpcc
	IBCR_SOFTIB_DEVNS=${IBCR_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/lib/softib/softib-devns
	if ! ibcr_prereq_ok ROOT; then
		ibcr_prereq_missing_ SOFTIBDEV "a private /dev needs root"
	elif ! test -x "$IBCR_SOFTIB_DEVNS"; then
		ibcr_prereq_missing_ SOFTIBDEV "no $IBCR_SOFTIB_DEVNS"
	elif ! command -v unshare >/dev/null 2>&1 || ! command -v findmnt >/dev/null 2>&1; then
		ibcr_prereq_missing_ SOFTIBDEV "unshare or findmnt (util-linux) not in PATH"
	elif ! grep -qw overlay /proc/filesystems 2>/dev/null; then
		ibcr_prereq_missing_ SOFTIBDEV "the kernel has no overlayfs (modprobe overlay)"
	else
		export IBCR_SOFTIB_DEVNS
		ibcr_prereq_set_ SOFTIBDEV
	fi
	ibcr_prereq_cmds_ GDB gdb
	ibcr_prereq_cmds_ CLANG_FORMAT clang-format
	ibcr_prereq_cmds_ SCRIPT script
	ibcr_prereq_cmds_ MUNGE munged mungekey unmunge
	ibcr_prereq_built_ IBCRD ibcrd/ibcrd
	ibcr_prereq_built_ WATCH t/spank/ibcr-slurm-watch
	ibcr_prereq_built_ SOFTIB lib/softib/.libs/libibverbs.so.1
	ibcr_prereq_built_ LIBIBCR lib/ibcr/.libs/libibcr.so t/ibcr/coord
	ibcr_prereq_built_ BUILT lib/softib/.libs/libibverbs.so.1 \
		lib/ibcr/.libs/libibcr.so spank/.libs/spank_ibcr.so t/softib/verbs_stream
	ibcr_prereq_built_ MPIBUILT lib/softib/.libs/libibverbs.so.1 \
		lib/softib/.libs/libmlx5.so.1 lib/ibcr/.libs/libibcr.so t/ibcr/coord
	ibcr_prereq_built_ VERIFY_OPENMPI t/mpi/mpi_verify.openmpi
	ibcr_tsan_so=${IBCR_BUILDDIR:-.}/t/ibcr/.libs/libibcr_tsan.so
	if ! test -e "$ibcr_tsan_so"; then
		ibcr_prereq_missing_ TSAN "not built: $ibcr_tsan_so (make check builds it when configure says ThreadSanitizer: yes; install libtsan2 and configure again)"
	elif ! ldd "$ibcr_tsan_so" 2>/dev/null | grep -q "libtsan.*=> /"; then
		ibcr_prereq_missing_ TSAN "libtsan (ThreadSanitizer's runtime) not found by the loader (install libtsan2)"
	else
		ibcr_prereq_set_ TSAN
	fi
	ibcr_prereq_built_ VERIFY_MPICH t/mpi/mpi_verify.mpich
	if /usr/bin/python3 -c 'import pycriu.images, xxhash' >/dev/null 2>&1; then
		ibcr_prereq_set_ PYCRIU
	else
		ibcr_prereq_missing_ PYCRIU "/usr/bin/python3 cannot import pycriu and xxhash (run contrib/deps.sh)"
	fi

	# Jobs and commands run as other users must reach the build tree
	# (binaries, scripts in trash directories): a clone under a private
	# folder such as /root cannot give them that.
	if ! ibcr_prereq_ok ROOT; then
		ibcr_prereq_missing_ OTHERS "needs root to switch to another user"
	elif ! command -v setpriv >/dev/null 2>&1; then
		ibcr_prereq_missing_ OTHERS "setpriv (util-linux) not in PATH"
	elif setpriv --reuid=65534 --regid=65534 --clear-groups \
		test -x "${IBCR_BUILDDIR:-.}/t" 2>/dev/null; then
		ibcr_prereq_set_ OTHERS
	else
		ibcr_prereq_missing_ OTHERS "user nobody cannot reach ${IBCR_BUILDDIR:-.}: a folder above it is private (e.g. /root is 0700); clone and build ibcr in a folder other users can traverse, such as /usr/local/src or /opt"
	fi

	IBCR_USER1=ibcr-user1 IBCR_USER2=ibcr-user2
	if ! ibcr_prereq_ok OTHERS; then
		ibcr_prereq_missing_ USERS "$(ibcr_prereq_why OTHERS)"
	elif IBCR_UID1=$(id -u $IBCR_USER1 2>/dev/null) && IBCR_GID1=$(id -g $IBCR_USER1) &&
		IBCR_UID2=$(id -u $IBCR_USER2 2>/dev/null) && IBCR_GID2=$(id -g $IBCR_USER2); then
		export IBCR_USER1 IBCR_UID1 IBCR_GID1 IBCR_USER2 IBCR_UID2 IBCR_GID2
		ibcr_prereq_set_ USERS
	else
		ibcr_prereq_missing_ USERS "test users $IBCR_USER1 and $IBCR_USER2 do not exist (run contrib/deps.sh as root)"
	fi

	if ! ibcr_prereq_ok ROOT; then
		ibcr_prereq_missing_ NETNS "network namespaces need root"
	elif ! command -v ip >/dev/null 2>&1 || ! command -v nsenter >/dev/null 2>&1; then
		ibcr_prereq_missing_ NETNS "ip (iproute2) or nsenter (util-linux) not in PATH"
	elif ip netns add "ibchk$$" 2>/dev/null && ip netns del "ibchk$$" 2>/dev/null; then
		ibcr_prereq_set_ NETNS
	else
		ip netns del "ibchk$$" 2>/dev/null
		ibcr_prereq_missing_ NETNS "'ip netns add' fails here (no network namespace support?)"
	fi
}
ibcr_prereq_check_

ibcr_require() {
	ibcr_rq_missing=
	for ibcr_rq in "$@"; do
		ibcr_prereq_ok "$ibcr_rq" ||
			ibcr_rq_missing="$ibcr_rq_missing $ibcr_rq"
	done
	test -z "$ibcr_rq_missing" && return 0
	ibcr_rq_msg=
	for ibcr_rq in $ibcr_rq_missing; do
		ibcr_rq_msg="$ibcr_rq_msg${ibcr_rq_msg:+; }$ibcr_rq: $(ibcr_prereq_why "$ibcr_rq")"
	done
	if test "$CI" = true; then
		# One visible failure per test script, naming everything missing.
		test_expect_success "prerequisite$ibcr_rq_missing missing: $ibcr_rq_msg" '
			false
		'
	else
		skip_all="missing $ibcr_rq_msg"
	fi
	test_done
}

ibcr_want() {
	for ibcr_wt in "$@"; do
		ibcr_prereq_ok "$ibcr_wt" && continue
		test "$CI" = true || continue
		test_expect_success "prerequisite $ibcr_wt missing: $(ibcr_prereq_why "$ibcr_wt")" '
			false
		'
	done
	return 0
}
