# vw.sh - run softib's verbs workload tools from sharness tests.
#
# Sourced by t/t11NN-softib-*.t after sharness.sh.
#
# API:
#   softib_require      ibcr_require SOFTIB: skip (or, with CI=true, fail)
#                       when softib's drop-in libibverbs.so.1 is not built.
#   vw_env CMD...       run CMD with softib selected (LD_LIBRARY_PATH).
#   vw_stream NAME [CLIENT-OPTIONS...]
#                       run a verbs_stream server and client; both must exit
#                       0 and print the same OK totals.  Output goes to
#                       NAME.{server,client}.{out,err}; on failure they are
#                       shown.  VW_SERVER_HOST / VW_CLIENT_HOST (netns host
#                       numbers) place the two sides in network namespaces;
#                       unset, both run here and meet on 127.0.0.1.
#                       VW_CLIENT_ENV="VAR=value ..." goes to the client's
#                       environment only, VW_SERVER_ENV to the server's
#                       (e.g. LD_PRELOAD=libibcr.so for checkpoint tests).
#   vw_stream_fails NAME PATTERN [CLIENT-OPTIONS...]
#                       the same, but the run must fail and one side's
#                       stderr must match PATTERN (grep -E).
#
# Every server listens on a port the kernel picks (-p 0), so concurrent
# tests never collide.

VW_BIN=$IBCR_BUILDDIR/t/softib
SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs

softib_require() {
	ibcr_require SOFTIB
}

vw_env() {
	env LD_LIBRARY_PATH="$SOFTIB_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}

# vw_side_ HOSTNUM CMD...: run CMD here or in netns host HOSTNUM.
vw_side_() {
	vw_sd_h=$1
	shift
	if test -n "$vw_sd_h"; then
		netns_exec "$vw_sd_h" "$@"
	else
		"$@"
	fi
}

vw_show_() {
	for vw_f in "$1".server.err "$1".client.err "$1".server.out "$1".client.out; do
		test -s "$vw_f" && sed "s|^|$vw_f: |" "$vw_f" >&2
	done
	return 0
}

# vw_run_ NAME CLIENT-OPTIONS...: run both sides; sets vw_src, vw_crc.
vw_run_() {
	vw_name=$1
	shift
	rm -f "$vw_name".port
	vw_side_ "$VW_SERVER_HOST" env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" $VW_SERVER_ENV \
		"$VW_BIN"/verbs_stream -p 0 -P "$PWD/$vw_name.port" -T "${VW_TIMEOUT:-30}" \
		>"$vw_name".server.out 2>"$vw_name".server.err &
	vw_spid=$!
	if ! ibcr_wait_for 10 vw_port_or_exited || ! test -s "$vw_name".port; then
		kill $vw_spid 2>/dev/null
		wait $vw_spid
		echo "vw_stream $vw_name: the server did not start" >&2
		vw_show_ "$vw_name"
		vw_src=99
		vw_crc=99
		return 1
	fi
	if test -n "$VW_SERVER_HOST"; then
		vw_addr=$(netns_ip "$VW_SERVER_HOST")
	else
		vw_addr=127.0.0.1
	fi
	vw_side_ "$VW_CLIENT_HOST" env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" $VW_CLIENT_ENV \
		"$VW_BIN"/verbs_stream -p "$(cat "$vw_name".port)" -T "${VW_TIMEOUT:-30}" \
		"$@" "$vw_addr" >"$vw_name".client.out 2>"$vw_name".client.err
	vw_crc=$?
	if test $vw_crc -ne 0; then
		# The server may wait for a client that will never come back:
		# give it 2 s to notice, then stop it.
		ibcr_wait_for 2 ibcr_dead $vw_spid 2>/dev/null
		kill $vw_spid 2>/dev/null
	fi
	wait $vw_spid
	vw_src=$?
	return 0
}

# vw_port_or_exited: vw_stream's server wrote its port, or is gone.
vw_port_or_exited() {
	test -s "$vw_name".port || ibcr_dead $vw_spid
}

vw_stream() {
	vw_run_ "$@" || return 1
	if test $vw_crc -ne 0 || test $vw_src -ne 0; then
		echo "vw_stream $vw_name: client exit $vw_crc, server exit $vw_src" >&2
		vw_show_ "$vw_name"
		return 1
	fi
	vw_tot_c=$(sed -n 's/^\(OK msgs=[0-9]* bytes=[0-9]* checksum=[0-9a-f]*\) .*/\1/p' "$vw_name".client.out)
	vw_tot_s=$(sed -n 's/^\(OK msgs=[0-9]* bytes=[0-9]* checksum=[0-9a-f]*\) .*/\1/p' "$vw_name".server.out)
	if test -z "$vw_tot_c" || test "$vw_tot_c" != "$vw_tot_s"; then
		echo "vw_stream $vw_name: totals differ: client '$vw_tot_c' server '$vw_tot_s'" >&2
		vw_show_ "$vw_name"
		return 1
	fi
	cat "$vw_name".client.out
}

vw_stream_fails() {
	vw_fname=$1
	vw_pat=$2
	shift 2
	vw_run_ "$vw_fname" "$@"
	if test $vw_crc -eq 0 && test $vw_src -eq 0; then
		echo "vw_stream_fails $vw_fname: both sides succeeded" >&2
		vw_show_ "$vw_fname"
		return 1
	fi
	if ! cat "$vw_fname".server.err "$vw_fname".client.err | grep -E "$vw_pat" >/dev/null; then
		echo "vw_stream_fails $vw_fname: no side said /$vw_pat/" >&2
		vw_show_ "$vw_fname"
		return 1
	fi
	cat "$vw_fname".server.err "$vw_fname".client.err
}
