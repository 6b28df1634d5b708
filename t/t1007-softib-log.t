#!/bin/sh
test_description='softib: SOFTIB_LOG routes or silences its log lines

softib logs why a QP failed, a peer was refused, or input was bad.
SOFTIB_LOG=stderr (the default) writes "softib: ..." lines to stderr,
quiet drops them, syslog sends them to /dev/log (here a socket of the
test'"'"'s own, bound over /dev in a private mount namespace); any other
value makes ibv_open_device fail with a message naming the value.
ibv_devinfo with an invalid SOFTIB_PORT_BASE is the log line source.'

. $(dirname $0)/sharness.sh

ibcr_require IBVUTILS PYTHON3
ibcr_want ROOT

LD_LIBRARY_PATH=$IBCR_BUILDDIR/lib/softib/.libs
export LD_LIBRARY_PATH

test_expect_success 'default and stderr: the line is on stderr' '
	test_must_fail env SOFTIB_PORT_BASE=1 ibv_devinfo 2>err1 &&
	SOFTIB_LOG=stderr test_must_fail env SOFTIB_PORT_BASE=1 ibv_devinfo 2>err2 &&
	cat err1 err2 &&
	grep "^softib: SOFTIB_PORT_BASE=.1. is not a port number" err1 &&
	grep "^softib: SOFTIB_PORT_BASE=.1. is not a port number" err2
'

test_expect_success 'quiet: no softib line at all' '
	SOFTIB_LOG=quiet test_must_fail env SOFTIB_PORT_BASE=1 ibv_devinfo 2>err &&
	cat err &&
	! grep "softib" err
'

test_expect_success 'an unknown mode fails the open and names the value' '
	SOFTIB_LOG=loud test_must_fail ibv_devinfo 2>err &&
	cat err &&
	grep "SOFTIB_LOG=.loud. is not a log mode: set quiet, stderr or syslog" err
'

test_expect_success ROOT 'syslog: the line goes to /dev/log, not stderr' '
	mkdir dev &&
	cat >syslogd.py <<-\EOF &&
	import socket, sys
	s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
	s.bind(sys.argv[1])
	open(sys.argv[2], "w").close()
	s.settimeout(20)
	msg = s.recv(4096).decode()
	print(msg)
	EOF
	python3 syslogd.py dev/log ready >syslog.out &
	pid=$! &&
	ibcr_wait_for 5 test -e ready &&
	SOFTIB_LOG=syslog test_must_fail unshare -m sh -c "mount --bind dev /dev && exec env SOFTIB_PORT_BASE=1 ibv_devinfo" 2>err &&
	wait $pid &&
	cat syslog.out err &&
	grep "^<12>softib\[[0-9]*\]: SOFTIB_PORT_BASE=.1. is not a port number" syslog.out &&
	! grep "softib" err
'

test_done
