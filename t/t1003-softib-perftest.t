#!/bin/sh
test_description='softib: Debian'"'"'s perftest between two network-namespace hosts

ib_send_bw, ib_write_bw, ib_read_bw, ib_atomic_bw, ib_send_lat and
ib_write_lat, unmodified (with softib'"'"'s stand-in libmlx5, libefa and
librdmacm next to its libibverbs.so.1), complete between two hosts with
the default ibv_wr_* API and with --use_old_post_send.  Each run must
report its message size and iteration count on both sides with a
non-zero result.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT NETNS PERFTEST

LD_LIBRARY_PATH=$IBCR_BUILDDIR/lib/softib/.libs
export LD_LIBRARY_PATH

test_expect_success 'perftest resolves every library from softib'"'"'s folder' '
	ldd "$(command -v ib_send_bw)" >ldd.out &&
	for l in libibverbs libmlx5 libefa librdmacm; do
		grep -F "$l.so.1 => $LD_LIBRARY_PATH/$l.so.1" ldd.out || return 1
	done
'

test_expect_success 'set up two network-namespace hosts' '
	netns_create 2
'

# pt_run TOOL SIZE ARGS...: server on host 1, client on host 2; both must
# succeed and print a result line "SIZE ITERS ..." with a non-zero value.
# pt_listening PORT: the server on host 1 listens on TCP PORT.
pt_listening() {
	netns_exec 1 ss -Hltn "sport = :$1" | grep -q LISTEN
}

# pt_stacks PID...: each one still running gets its threads' stacks
# printed (when gdb is here), then SIGKILL: a hang is named, not just cut.
pt_stacks() {
	for p; do
		ibcr_alive $p || continue
		echo "still running after 60 s: pid $p"
		if command -v gdb >/dev/null; then
			timeout 30 gdb -q -batch -p $p -ex "thread apply all bt" </dev/null 2>&1 |
				grep -v "^\[New LWP\|^warning:"
		fi
		ibcr_kill KILL $p
	done
}

pt_run() {
	tool=$1 size=$2
	shift 2
	port=$(( 32000 + ($$ + ${pt_n:=0}) % 2000 ))
	pt_n=$((pt_n + 1))
	netns_exec 1 "$tool" -p $port -s $size "$@" >srv.out 2>&1 &
	spid=$!
	ibcr_wait_for 10 pt_listening $port || { kill $spid; return 1; }
	netns_exec 2 "$tool" -p $port -s $size "$@" "$(netns_ip 1)" >cli.out 2>&1 &
	cpid=$!
	ibcr_wait_for 60 ibcr_dead $spid && ibcr_wait_for 5 ibcr_dead $cpid
	pt_stacks $spid $cpid
	wait $cpid
	crc=$?
	wait $spid
	src=$?
	cat srv.out cli.out
	echo "exit status: server $src, client $crc"
	test $crc = 0 && test $src = 0 &&
	for f in srv.out cli.out; do
		awk -v s=$size "\$1 == s && \$2 > 0 && \$4 + 0 > 0 { ok = 1 } END { exit !ok }" $f ||
			return 1
	done &&
	! grep -qi "error\|fail\|couldn.t" srv.out cli.out
}

for api in "" "--use_old_post_send"; do
	name=${api:-ibv_wr API}
	test_expect_success "ib_send_bw 64 KiB ($name)" "
		pt_run ib_send_bw 65536 -n 500 $api
	"
	test_expect_success "ib_write_bw 64 KiB ($name)" "
		pt_run ib_write_bw 65536 -n 500 $api
	"
	test_expect_success "ib_read_bw 64 KiB ($name)" "
		pt_run ib_read_bw 65536 -n 200 $api
	"
	test_expect_success "ib_atomic_bw ($name)" "
		pt_run ib_atomic_bw 8 -n 500 $api
	"
	test_expect_success "ib_send_lat ($name)" "
		pt_run ib_send_lat 8 -n 300 $api
	"
	test_expect_success "ib_write_lat ($name)" "
		pt_run ib_write_lat 8 -n 300 $api
	"
done

test_expect_success 'ib_send_bw UD (-c UD)' '
	pt_run ib_send_bw 2048 -c UD -n 500
'

test_expect_success 'ib_write_bw with 4 QPs and a post list' '
	pt_run ib_write_bw 4096 -q 4 -l 8 -n 400
'

# softib's librdmacm answers ENODEV without a word to
# rdma_create_event_channel, as the real one does on a host without
# rdma_cm (UCX opens a channel in every worker and must stay quiet).
test_expect_success 'rdma_cm mode (-R) fails cleanly, naming rdma_cm' '
	rc=0 &&
	timeout 10 ib_send_bw -R -p 1 127.0.0.1 >out 2>&1 || rc=$? &&
	cat out &&
	test $rc = 1 &&
	grep "rdma_create_event_channel failed" out
'

test_done
