#!/bin/sh

test_description='compression = yes: images stored as zstd, restored intact

With compression on, every image file is stored compressed (NAME.zst),
the manifest checksums the stored bytes, verify checks them, and a restart
decompresses into a private copy that CRIU restores from: the very same
process comes back, its 32 MiB pattern intact.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU

ibcrd_use_build
TMPDIR=$PWD/tmp
export TMPDIR

test_expect_success 'setup: ibcrd with compression = yes' '
	mkdir tmp &&
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "compression = yes" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success 'a checkpoint stores every image file compressed, checksummed' '
	{ "$IBCR" run --name z -- "$PATTERN" --mib 32 >z.out 2>z.err & } &&
	ibcr_track $! && echo $! >z.run &&
	ibcrd_wait_for "$IBCR" status z &&
	ibcrd_wait_for grep -q "^start" z.out &&
	APP=$(ibcrd_field z app_pid) && INIT=$(ibcrd_field z pid) &&
	ibcr_track $APP $INIT && echo "$INIT $APP" >pids &&
	ibcrd_report z.out $APP >before &&
	"$IBCR" checkpoint z --wait &&
	ls d/storage/local/z/gen-1/task-0 >files &&
	cat files &&
	grep "^pages-1.img.zst$" files &&
	! grep -v "\.zst$" files &&
	"$IBCR" verify z &&
	grep "\"path\": \"task-0.\{1,2\}core-101.img.zst\"" d/storage/local/z/gen-1/manifest.json
'

test_expect_success 'restart decompresses and brings the same process back; the copy is removed' '
	read INIT APP <pids &&
	ibcr_kill 9 $(cat z.run) $INIT &&
	ibcrd_wait_gone $APP &&
	{ "$IBCR" restart z >rs.out 2>rs.err & } &&
	ibcr_track $! && echo $! >rs.pid &&
	ibcrd_wait_for grep -q "restored from generation 1" rs.err &&
	APP2=$(ibcrd_field z app_pid) && ibcr_track $APP2 &&
	ibcrd_report rs.out $APP2 >after &&
	cat before after &&
	run=$(sed -n "s/^start run=\([0-9a-f]*\).*/\1/p" z.out) &&
	grep "run=$run .*pattern=ok bad=0" after &&
	! ls d/staging/restore | grep "\.img$" &&
	kill -TERM $(cat rs.pid) && wait $(cat rs.pid)
'

test_expect_success 'a damaged compressed file: verify says so, restart refuses it' '
	f=d/storage/local/z/gen-1/task-0/pages-1.img.zst &&
	printf "\\001" | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null &&
	test_expect_code 5 "$IBCR" verify z >v.out &&
	grep "task-0/pages-1.img.zst: checksum mismatch" v.out &&
	test_expect_code 5 "$IBCR" restart z 2>err &&
	cat err &&
	grep "generation 1 is damaged" err &&
	grep "job z has 1 committed generation and every one is damaged" err
'

test_done
