# 03-leftovers.sh - what a test starts outside its trash directory, written
# down for the suite's last test (t9999-leftovers.t); short private folders
# for unix sockets.
#
# A test's teardown (01-atexit.sh) should end everything it started.  This
# file is the second line of defence: it lets the suite prove it.
#
#   - Every test exports IBCR_SUITE_TAG (the build tree's t/ folder), so
#     everything it starts carries the tag in its environment, also across
#     srun, sbatch, ibcrd and a CRIU restore (the environment lives in the
#     process's memory).
#   - Every test writes $IBCR_SUITE_DIR/<test>.<PID>.rec (default
#     $IBCR_BUILDDIR/t/suite.d): a line for the test shell itself, then one
#     line per daemon or folder a helper makes outside the trash directory:
#       test PID START NAME    the test shell
#       proc PID START WHAT    a daemon or helper process
#       path PATH              a folder or file (a short folder, /run/...)
#     START is field 22 of /proc/PID/stat (start time in clock ticks), so
#     a pid the kernel reused for something else is never taken for ours.
#
# API:
#   ibcr_record_proc PID WHAT   write down a process this test started
#   ibcr_record_path PATH       write down a folder or file outside the trash
#                               directory that teardown removes
#   ibcr_shortdir               prints a private folder with a short name,
#                               /tmp/ibcr.<PID>.XXXXXX (mkdtemp; 0755, root's),
#                               made when a test starts, recorded, removed at
#                               its end (when the test failed, its *.log
#                               files are first copied to shortdir-logs/ in
#                               the trash directory).  Unix sockets live
#                               there: a path in the trash directory grows
#                               with the clone's location and soon passes
#                               the 107 bytes a socket path may have.  So
#                               do ibcrd's storage and staging (ibcrd/lib.sh):
#                               an ibcrd.conf line holds 198 characters.
#                               (Checkpoint images then take room in /tmp,
#                               not in the build tree.)
#   ibcr_shortlink PATH NAME    prints PATH when it has at most 64
#                               characters; else makes NAME in the short
#                               folder, a link to PATH, and prints the
#                               link's path.  For a file named in a
#                               configuration with a short line limit (a
#                               criu built in a deep build tree): never for
#                               a folder root writes into, where ibcrd
#                               needs the real path.  IBCR_CRIU
#                               (00-prereqs.sh) goes through it when a
#                               test starts.
#   ibcr_leftovers DIR [--keep]
#                               what the tests that wrote DIR/*.rec left
#                               behind, one line each on stdout: a recorded
#                               process still running, a process carrying
#                               IBCR_SUITE_TAG, a recorded path that still
#                               exists, and by each test's PID a /run/ibcr*
#                               or /tmp/ibcr.* folder, network namespace,
#                               link, cgroup or mount of the helpers'
#                               naming.  Each is then ended (SIGKILL, then
#                               waited for), unmounted or removed.  Records
#                               of a test whose shell still runs are left
#                               alone.  Returns 1 when anything was found.
#                               With --keep, DIR's records are kept (else
#                               removed once checked).
#
# Only ever touches what a record names, or what carries this build
# tree's tag: other checkouts' tests on the same machine are never seen.

# Only sharness tests are written down and tagged: a script that loads
# these helpers by hand (contrib/demo.sh) keeps its daemons to itself.
ibcr_rec_on_=
if command -v test_done >/dev/null 2>&1; then
	ibcr_rec_on_=1
	: "${IBCR_SUITE_DIR:=${IBCR_BUILDDIR:-.}/t/suite.d}"
	: "${IBCR_SUITE_TAG:=${IBCR_BUILDDIR:-$PWD}/t}"
	export IBCR_SUITE_DIR IBCR_SUITE_TAG
fi

# ibcr_starttime_ PID: field 22 of /proc/PID/stat (empty when gone).  The
# command name (field 2) may hold spaces and parentheses: cut after the
# last ") ".
ibcr_starttime_() {
	sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

ibcr_rec_file_=
ibcr_record_() {
	test -n "$ibcr_rec_on_" || return 0
	if test -z "$ibcr_rec_file_"; then
		mkdir -p "$IBCR_SUITE_DIR" 2>/dev/null || return 0
		ibcr_rec_name_=$(basename "${SHARNESS_TEST_FILE:-$0}" .t)
		ibcr_rec_file_=$IBCR_SUITE_DIR/$ibcr_rec_name_.$$.rec
		echo "test $$ $(ibcr_starttime_ $$) $ibcr_rec_name_" >"$ibcr_rec_file_" || return 0
	fi
	echo "$*" >>"$ibcr_rec_file_"
	return 0
}

ibcr_record_proc() {
	ibcr_rp_st=$(ibcr_starttime_ "$1")
	# Gone already: nothing that can outlive the test.
	test -n "$ibcr_rp_st" || return 0
	ibcr_rp_pid=$1
	shift
	ibcr_record_ "proc $ibcr_rp_pid $ibcr_rp_st $*"
}

ibcr_record_path() {
	ibcr_record_ "path $1"
}

ibcr_shortdir_=
ibcr_shortdir() {
	if test -z "$ibcr_shortdir_"; then
		ibcr_shortdir_=$(mktemp -d "/tmp/ibcr.$$.XXXXXX") || return 1
		chmod 0755 "$ibcr_shortdir_" || return 1
		ibcr_record_path "$ibcr_shortdir_"
		ibcr_atexit ibcr_shortdir_rm_
	fi
	echo "$ibcr_shortdir_"
}

ibcr_shortdir_rm_() {
	test -n "$ibcr_shortdir_" || return 0
	# A failed test keeps its trash directory for a post-mortem: keep the
	# logs that lived here (CRIU's dump and restore logs in staging) too.
	if ibcr_failed && test -d "${SHARNESS_TRASH_DIRECTORY:-}"; then
		mkdir -p "$SHARNESS_TRASH_DIRECTORY/shortdir-logs" &&
		(cd "$ibcr_shortdir_" &&
		 find . -name '*.log' -type f -exec cp --parents {} \
			"$SHARNESS_TRASH_DIRECTORY/shortdir-logs/" \;) 2>/dev/null
	fi
	rm -rf "$ibcr_shortdir_"
	ibcr_shortdir_=
	return 0
}

ibcr_shortlink() {
	if test ${#1} -le 64; then
		echo "$1"
		return 0
	fi
	ibcr_sl_dir=$(ibcr_shortdir) || return 1
	ln -sfT "$1" "$ibcr_sl_dir/$2" || return 1
	echo "$ibcr_sl_dir/$2"
}

# Every test writes its first line now, so the final check knows its
# PID (for the names of its /run folders, namespaces and cgroups) even
# when no helper recorded anything.
ibcr_record_ start
# The short folder is made now, in the test's own shell: a first call
# from a command substitution would make one that the test forgets.
if test -n "$ibcr_rec_on_"; then
	ibcr_shortdir >/dev/null
	# "criu = $IBCR_CRIU" lines: a criu in a deep build tree is named by
	# a link in the short folder (ibcrd opens the binary through links).
	if test -n "${IBCR_CRIU:-}" &&
	   ibcr_sl_criu=$(ibcr_shortlink "$IBCR_CRIU" criu); then
		IBCR_CRIU=$ibcr_sl_criu
		export IBCR_CRIU
	fi
fi

# --- the final check ------------------------------------------------------

# ibcr_lo_is_ours_ PID: PID is this shell or one of its descendants (the
# check's own pipelines), or descends from a test shell still running.
ibcr_lo_is_ours_() {
	ibcr_lo_p=$1
	ibcr_lo_n=0
	while test -n "$ibcr_lo_p" && test "$ibcr_lo_p" -gt 1 && test $ibcr_lo_n -lt 200; do
		case " $$ $ibcr_lo_live " in
		*" $ibcr_lo_p "*) return 0 ;;
		esac
		ibcr_lo_p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$ibcr_lo_p/status" 2>/dev/null)
		ibcr_lo_n=$((ibcr_lo_n + 1))
	done
	return 1
}

# ibcr_lo_report_ TEXT: one survivor (stdout, and the found flag).
ibcr_lo_report_() {
	echo "$*"
	ibcr_lo_found=1
}

ibcr_lo_kill_() {
	kill -KILL "$1" 2>/dev/null
	ibcr_wait_for 10 ibcr_dead "$1" >/dev/null 2>&1
}

ibcr_lo_cmdline_() {
	{ tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | cut -c1-160
}

ibcr_leftovers() {
	ibcr_lo_dir=$1
	ibcr_lo_found=
	ibcr_lo_live=
	ibcr_lo_tests=
	# Test shells still running keep their records (and children).
	for ibcr_lo_f in "$ibcr_lo_dir"/*.rec; do
		test -f "$ibcr_lo_f" || continue
		read -r ibcr_lo_kw ibcr_lo_pid ibcr_lo_st ibcr_lo_rest <"$ibcr_lo_f"
		test "$ibcr_lo_kw" = test || continue
		if test "$ibcr_lo_pid" != $$ && ibcr_alive "$ibcr_lo_pid" &&
		   test "$(ibcr_starttime_ "$ibcr_lo_pid")" = "$ibcr_lo_st"; then
			ibcr_lo_live="$ibcr_lo_live $ibcr_lo_pid"
			echo "# $ibcr_lo_rest (pid $ibcr_lo_pid) still runs: its records are left for later" >&2
		else
			# (names without spaces; DIR may have some)
			ibcr_lo_tests="$ibcr_lo_tests ${ibcr_lo_f##*/}"
		fi
	done

	# 1. Recorded processes.
	for ibcr_lo_f in $ibcr_lo_tests; do
		ibcr_lo_f=$ibcr_lo_dir/$ibcr_lo_f
		ibcr_lo_name=$(sed -n '1s/^test [0-9]* [0-9]* //p' "$ibcr_lo_f")
		while read -r ibcr_lo_kw ibcr_lo_pid ibcr_lo_st ibcr_lo_rest; do
			test "$ibcr_lo_kw" = proc || continue
			ibcr_alive "$ibcr_lo_pid" || continue
			test "$(ibcr_starttime_ "$ibcr_lo_pid")" = "$ibcr_lo_st" || continue
			ibcr_lo_report_ "process $ibcr_lo_pid ($ibcr_lo_rest) started by $ibcr_lo_name still runs: $(ibcr_lo_cmdline_ "$ibcr_lo_pid")"
			ibcr_lo_kill_ "$ibcr_lo_pid"
		done <"$ibcr_lo_f"
	done

	# 2. Any process carrying the suite's tag (not ours, not a running
	# test's).  Kill parents first would orphan children onto init; a
	# SIGKILL to each is enough, as each is listed.
	for ibcr_lo_e in /proc/[0-9]*/environ; do
		ibcr_lo_pid=${ibcr_lo_e#/proc/}
		ibcr_lo_pid=${ibcr_lo_pid%/environ}
		{ tr '\0' '\n' <"$ibcr_lo_e"; } 2>/dev/null |
			grep -qxF "IBCR_SUITE_TAG=$IBCR_SUITE_TAG" || continue
		ibcr_alive "$ibcr_lo_pid" || continue
		ibcr_lo_is_ours_ "$ibcr_lo_pid" && continue
		ibcr_lo_report_ "process $ibcr_lo_pid, started by a test of this suite (IBCR_SUITE_TAG in its environment), still runs: $(ibcr_lo_cmdline_ "$ibcr_lo_pid")"
		ibcr_lo_kill_ "$ibcr_lo_pid"
	done

	# 3. Recorded paths, then what the helpers name after a test's PID.
	for ibcr_lo_f in $ibcr_lo_tests; do
		ibcr_lo_f=$ibcr_lo_dir/$ibcr_lo_f
		ibcr_lo_name=$(sed -n '1s/^test [0-9]* [0-9]* //p' "$ibcr_lo_f")
		ibcr_lo_tpid=$(sed -n '1s/^test \([0-9]*\) .*/\1/p' "$ibcr_lo_f")
		# Names carry the test's PID.  Once the kernel gave that PID
		# to another process (another checkout's test, say), a folder
		# or namespace of that name may be its own: leave names alone.
		if test -n "$ibcr_lo_tpid" && ibcr_alive "$ibcr_lo_tpid"; then
			echo "# $ibcr_lo_name: its pid $ibcr_lo_tpid runs another process now; its folders and namespaces are not checked" >&2
			continue
		fi
		# Mounts below a folder of this test's (cgroup bind mounts).
		if test -n "$ibcr_lo_tpid"; then
			for ibcr_lo_m in $(awk -v p="$ibcr_lo_tpid" '$2 ~ "^/(run|tmp)/ibcr[^/]*[.]" p "([./]|$)" { print $2 }' /proc/mounts | sort -r); do
				ibcr_lo_report_ "mount $ibcr_lo_m made by $ibcr_lo_name is still mounted"
				umount -l "$ibcr_lo_m" 2>/dev/null
			done
		fi
		{
			sed -n 's/^path //p' "$ibcr_lo_f"
			if test -n "$ibcr_lo_tpid"; then
				ls -d /run/ibcr*."$ibcr_lo_tpid" /run/ibcr*."$ibcr_lo_tpid".* \
					/tmp/ibcr."$ibcr_lo_tpid".* 2>/dev/null
			fi
		} | sort -u | while read -r ibcr_lo_path; do
			test -e "$ibcr_lo_path" || test -L "$ibcr_lo_path" || continue
			echo "$ibcr_lo_path"
		done >"$ibcr_lo_dir/.paths"
		while read -r ibcr_lo_path; do
			ibcr_lo_report_ "$ibcr_lo_path made by $ibcr_lo_name still exists"
			rm -rf "$ibcr_lo_path"
		done <"$ibcr_lo_dir/.paths"
		rm -f "$ibcr_lo_dir/.paths"
		test -n "$ibcr_lo_tpid" || continue
		for ibcr_lo_ns in $(ip netns list 2>/dev/null | sed -n "s/^\(ib${ibcr_lo_tpid}h[0-9]*\).*/\1/p"); do
			ibcr_lo_report_ "network namespace $ibcr_lo_ns made by $ibcr_lo_name still exists"
			for ibcr_lo_p in $(ip netns pids "$ibcr_lo_ns" 2>/dev/null); do
				ibcr_lo_report_ "process $ibcr_lo_p in namespace $ibcr_lo_ns still runs: $(ibcr_lo_cmdline_ "$ibcr_lo_p")"
				ibcr_lo_kill_ "$ibcr_lo_p"
			done
			ip netns del "$ibcr_lo_ns" 2>/dev/null
		done
		for ibcr_lo_l in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(ib${ibcr_lo_tpid}[bvp][0-9]*\)[@:].*/\1/p"); do
			ibcr_lo_report_ "network link $ibcr_lo_l made by $ibcr_lo_name still exists"
			ip link del "$ibcr_lo_l" 2>/dev/null
		done
		for ibcr_lo_cg in /sys/fs/cgroup/*/ibcr_"$ibcr_lo_tpid"; do
			test -d "$ibcr_lo_cg" || continue
			ibcr_lo_report_ "cgroup $ibcr_lo_cg made by $ibcr_lo_name still exists"
			find "$ibcr_lo_cg" -depth -type d -exec rmdir {} \; 2>/dev/null
		done
	done

	if test "$2" != --keep; then
		for ibcr_lo_f in $ibcr_lo_tests; do
		ibcr_lo_f=$ibcr_lo_dir/$ibcr_lo_f
			rm -f "$ibcr_lo_f"
		done
	fi
	test -z "$ibcr_lo_found"
}
