#!/bin/sh

test_description='compression = yes: images stored as zstd, restored intact

With compression on, every image file is stored compressed (NAME.zst),
the manifest checksums the stored bytes, verify checks them, and a restart
decompresses into a private copy that CRIU restores from: the very same
process comes back, its 32 MiB pattern intact.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU

PATTERN=$IBCR_BUILDDIR/t/criu/pattern
IBCR_INIT=$IBCR_BUILDDIR/ibcrd/ibcr-init
IBCR_LIBIBCR=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
TMPDIR=$PWD/tmp
export IBCR_INIT IBCR_LIBIBCR TMPDIR

t10_pids=
t10_cleanup() {
	for p in $t10_pids; do
		ibcrd_alive "$p" && kill -9 "$p" 2>/dev/null
	done
	for p in $t10_pids; do
		ibcrd_wait_gone "$p" 50
	done
	t10_pids=
	return 0
}
ibcr_atexit t10_cleanup

t10_wait_for() {
	i=0
	until "$@"; do
		i=$((i + 1)); test $i -lt 400 || return 1
		sleep 0.05
	done
}

t10_field() {
	"$IBCR" status "$1" --json 2>/dev/null | sed "s/.*\"tasks\"://" |
		sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"
}

t10_report() {
	n=$(grep -c "^report " "$1")
	kill -USR1 "$2" || return 1
	i=0
	until test "$(grep -c "^report " "$1")" -gt "$n"; do
		i=$((i + 1)); test $i -lt 400 || return 1
		sleep 0.05
	done
	tail -n 1 "$1"
}

test_expect_success 'setup: ibcrd with compression = yes' '
	mkdir tmp &&
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "compression = yes" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success 'a checkpoint stores every image file compressed, checksummed' '
	{ "$IBCR" run --name z -- "$PATTERN" --mib 32 >z.out 2>z.err & } &&
	t10_pids="$t10_pids $!" && echo $! >z.run &&
	t10_wait_for "$IBCR" status z &&
	t10_wait_for grep -q "^start" z.out &&
	APP=$(t10_field z app_pid) && INIT=$(t10_field z pid) &&
	t10_pids="$t10_pids $APP $INIT" && echo "$INIT $APP" >pids &&
	t10_report z.out $APP >before &&
	"$IBCR" checkpoint z --wait &&
	ls d/storage/local/z/gen-1/task-0 >files &&
	cat files &&
	grep "^pages-1.img.zst$" files &&
	! grep -v "\.zst$" files &&
	"$IBCR" verify z &&
	grep "\"path\": \"task-0.\{1,2\}core-1.img.zst\"" d/storage/local/z/gen-1/manifest.json
'

test_expect_success 'restart decompresses and brings the same process back; the copy is removed' '
	read INIT APP <pids &&
	kill -9 $(cat z.run) $INIT &&
	ibcrd_wait_gone $APP &&
	{ "$IBCR" restart z >rs.out 2>rs.err & } &&
	t10_pids="$t10_pids $!" && echo $! >rs.pid &&
	t10_wait_for grep -q "restored from generation 1" rs.err &&
	APP2=$(t10_field z app_pid) && t10_pids="$t10_pids $APP2" &&
	t10_report rs.out $APP2 >after &&
	cat before after &&
	run=$(sed -n "s/^start run=\([0-9a-f]*\).*/\1/p" z.out) &&
	grep "run=$run .*pattern=ok bad=0" after &&
	test -z "$(ls tmp)" &&
	kill -TERM $(cat rs.pid) && wait $(cat rs.pid)
'

test_expect_success 'a damaged compressed file: verify says so, restart refuses it' '
	f=d/storage/local/z/gen-1/task-0/pages-1.img.zst &&
	printf "\\001" | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null &&
	test_expect_code 5 "$IBCR" verify z >v.out &&
	grep "task-0/pages-1.img.zst: checksum mismatch" v.out &&
	test_expect_code 4 "$IBCR" restart z 2>err &&
	cat err &&
	grep "generation 1 is damaged" err &&
	grep "no intact committed generation" err
'

test_done
