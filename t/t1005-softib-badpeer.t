#!/bin/sh
test_description='softib: a misbehaving peer ends one QP, never the process

A python3 peer speaks softib'"'"'s wire protocol to an unmodified
ibv_rc_pingpong server: garbage and bad handshakes on its endpoint are
refused with a logged reason while a real client still completes a
validated run; a peer that disconnects in the middle of a message, or
sends an unknown opcode, moves the server'"'"'s QP to ERROR with a logged
reason, and the server ends through its normal error path (flushed
receive), not a crash.'

. $(dirname $0)/sharness.sh
ibcr_require IBVUTILS
ibcr_require PYTHON3

LD_LIBRARY_PATH=$IBCR_BUILDDIR/lib/softib/.libs
SOFTIB_ADDR=127.0.0.1
export LD_LIBRARY_PATH SOFTIB_ADDR

cat >peer.py <<'PYEOF'
import socket, struct, sys, time

BASE = 24576
def hdr(op, ln=0, seq=0):
    return struct.pack("<BBHIIIQIIQQ", op, 0, 1, ln, seq, 0, 0, 0, 0, 0, 0)
def hello(src_qpn, dst_qpn, psn, magic=0x53494231):
    body = struct.pack("<IHH4sIII", magic, 1, 1, socket.inet_aton("127.0.0.1"),
                       src_qpn, dst_qpn, psn)
    return hdr(1, len(body)) + body
def endpoint(qpn):
    s = socket.create_connection(("127.0.0.1", BASE + ((qpn >> 12) & 0xfff)))
    return s

mode, qpn = sys.argv[1], int(sys.argv[2], 16)
if mode == "junk":
    for data in (b"\x00" * 100,                       # not a HELLO
                 hello(0x1002, qpn, 0, magic=0xdead),  # wrong magic
                 hello(0x1002, (qpn & ~0xfff) | 1, 0),  # no such QP: index 1 is never given
                 hdr(1, 24)[:20]):                     # truncated, then EOF
        s = endpoint(qpn); s.sendall(data); time.sleep(0.1); s.close()
    print("junk sent")
else:
    # play the pingpong client's exchange, then misbehave as requester
    pp_port = int(sys.argv[3])
    fake_qpn, psn = 0xfff002, 0x000001
    # the server prints its address before it listens: retry a while
    for i in range(100):
        try:
            c = socket.create_connection(("127.0.0.1", pp_port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    else:
        sys.exit("pingpong server never listened on %d" % pp_port)
    msg = ("%04x:%06x:%06x:%s" % (1, fake_qpn, psn, "0" * 32)).encode() + b"\0"
    c.sendall(msg)
    rep = b""
    while len(rep) < len(msg):
        got = c.recv(len(msg) - len(rep))
        if not got:   # EOF: the loop would never end
            sys.exit("pingpong server closed the exchange after %d bytes" % len(rep))
        rep += got
    c.sendall(b"done\0")
    s = endpoint(qpn)
    s.sendall(hello(fake_qpn, qpn, psn))
    if mode == "midmsg":
        s.sendall(hdr(3, 4096) + b"x" * 100)   # SEND of 4096, 100 sent
    else:
        s.sendall(hdr(0x7f, 0))                # unknown opcode
    time.sleep(0.3); s.close()
    print(mode, "sent")
PYEOF

# listening_or_gone PORT PID: PORT is listened on, or PID has ended.
listening_or_gone() {
	ss -Hltn "sport = :$1" | grep -q LISTEN || ibcr_dead $2
}

# start_server ARGS...: pingpong server on a free port; sets spid, port,
# qpn.  Ports are guessed, and other tests run at the same time: a port
# someone else holds ("Couldn't listen") means another try on the next.
start_server() {
	for try in 1 2 3 4 5; do
		port=$(( 36000 + ($$ * 7 + ${srv_n:=0} * 131) % 2000 ))
		srv_n=$((srv_n + 1))
		stdbuf -oL timeout 30 ibv_rc_pingpong -p $port "$@" >srv.out 2>srv.err &
		spid=$!
		if ! ibcr_wait_for 5 listening_or_gone $port $spid || ibcr_dead $spid; then
			kill $spid 2>/dev/null
			wait $spid
		else
			qpn=$(sed -n "s/.*local address:.*QPN 0x\([0-9a-f]*\).*/\1/p" srv.out)
			test -n "$qpn"
			return
		fi
	done
	return 1
}

test_expect_success 'garbage and bad handshakes are refused; a real client still runs' '
	start_server -c -n 200 &&
	python3 peer.py junk $qpn &&
	timeout 30 ibv_rc_pingpong -p $port -c -n 200 127.0.0.1 >cli.out 2>cli.err &&
	wait $spid &&
	cat srv.err &&
	grep "iters in" srv.out && grep "iters in" cli.out &&
	grep "bad message from .*unknown opcode" srv.err &&
	grep "not a softib peer" srv.err &&
	grep "no RC QP with that number" srv.err
'

test_expect_success 'a requester vanishing mid-message moves only that QP to ERROR' '
	start_server -n 5 &&
	python3 peer.py midmsg $qpn $port &&
	{ wait $spid; rc=$?; } ; cat srv.out srv.err;
	test $rc -gt 0 && test $rc -lt 128 &&
	grep "disconnected in the middle of a message" srv.err &&
	grep -i "QP 0x$qpn -> ERROR" srv.err
'

test_expect_success 'an unknown opcode moves that QP to ERROR with a reason' '
	start_server -n 5 &&
	python3 peer.py badop $qpn $port &&
	{ wait $spid; rc=$?; } ; cat srv.out srv.err;
	test $rc -gt 0 && test $rc -lt 128 &&
	grep "unknown opcode" srv.err &&
	grep -i "QP 0x$qpn -> ERROR" srv.err
'

test_done
