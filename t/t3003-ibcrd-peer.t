#!/bin/sh

test_description='ibcrd peer protocol: every message carries a MUNGE credential; missing, bad, foreign and replayed ones are refused'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require MUNGE

test_expect_success 'setup: a private munged and two ibcrd nodes nA, nB' '
	ibcrd_munged_start m1 &&
	M1=$(ibcrd_munge_sock m1) &&
	ibcrd_setup a "node = nA" "peer_port = any" "peer_address = 127.0.0.1" "munge_socket = $M1" &&
	ibcrd_setup b "node = nB" "peer_port = any" "peer_address = 127.0.0.1" "munge_socket = $M1" &&
	ibcrd_start a && ibcrd_start b &&
	PA=$(ibcrd_peer_port a) && PB=$(ibcrd_peer_port b) &&
	test -n "$PA" && test "$PA" -gt 0 && test "$PB" -gt 0 && test "$PA" != "$PB"
'

test_expect_success 'ibcrd nB pings nA through the real peer client: authenticated both ways' '
	"$IBCRD" -c b/ibcrd.conf --ping-peer "nA@127.0.0.1:$PA" >out &&
	cat out &&
	grep "\"type\":\"ok\",\"request\":\"ping\",\"node\":\"nA\",\"to\":\"nB\",\"uid\":0" out
'

test_expect_success 'a good credential is accepted, the same credential again is refused as replayed' '
	"$PEERMSG" --munge-socket "$M1" $PA ping:nA replay ping:nA >out &&
	cat out &&
	sed -n 1p out | grep "^auth .*\"type\":\"ok\",\"request\":\"ping\",\"node\":\"nA\"" &&
	sed -n 2p out | grep "^auth .*\"type\":\"error\".*\"errname\":\"EACCES\".*credential refused: Replayed credential" &&
	sed -n 3p out | grep "^auth .*\"type\":\"ok\""
'

test_expect_success 'no credential, no envelope, a corrupted credential: refused, daemon serves on' '
	"$PEERMSG" --munge-socket "$M1" $PA nocred plain:nA badcred:nA ping:nA >out &&
	cat out &&
	sed -n 1p out | grep "EACCES.*without a MUNGE credential refused" &&
	sed -n 2p out | grep "EACCES.*must be of type .*peer.* and carry a MUNGE credential" &&
	sed -n 3p out | grep "EACCES.*credential refused: Invalid credential" &&
	sed -n 4p out | grep "^auth .*\"type\":\"ok\""
'

test_expect_success 'a credential made with another key (another cluster) is refused' '
	ibcrd_munged_start m2 &&
	M2=$(ibcrd_munge_sock m2) &&
	"$PEERMSG" --munge-socket "$M2" $PA ping:nA >out &&
	cat out &&
	grep "^plain .*\"type\":\"peer\",\"cred\":\"MUNGE:" out &&
	# nA seals its refusal with its own key, which the sender (another
	# key) cannot open, by design: why nA refused is only in its log.
	grep "credential refused: Invalid credential" a/ibcrd.log &&
	ibcrd_setup c "node = nC" "peer_port = 0" "munge_socket = $M2" &&
	test_expect_code 1 "$IBCRD" -c c/ibcrd.conf --ping-peer "nA@127.0.0.1:$PA" 2>err &&
	cat err &&
	grep "reply of peer 127.0.0.1:$PA cannot be authenticated (peer MUNGE credential refused: Invalid credential): do both nodes use the same MUNGE key" err
'

test_expect_success 'a message addressed to another node is refused (no cross-node replay)' '
	"$PEERMSG" --munge-socket "$M1" $PA ping:nB >out &&
	grep "EACCES.*addressed to node .nB. refused by node nA" out
'

test_expect_success 'an unknown peer request type gets an error, the connection serves on' '
	"$PEERMSG" --munge-socket "$M1" $PA type:frob:nA ping:nA >out &&
	sed -n 1p out | grep "unknown peer request type .frob." &&
	sed -n 2p out | grep "\"type\":\"ok\""
'

test_expect_success 'an explicit peer_port that is taken is a start-up error' '
	ibcrd_setup d "node = nD" "peer_port = $PA" "peer_address = 127.0.0.1" "munge_socket = $M1" &&
	test_expect_code 1 "$IBCRD" -F -c d/ibcrd.conf 2>err &&
	grep "cannot listen for peers on 127.0.0.1:$PA: Address already in use" err
'

test_expect_success 'a default peer_port that is taken only warns' '
	ibcrd_setup e "node = nE" "peer_address = 127.0.0.1" &&
	ibcrd_setup f "node = nF" "peer_address = 127.0.0.1" &&
	ibcrd_start e && ibcrd_start f &&
	test "$(ibcrd_peer_port f)" = 0 &&
	"$RAWMSG" "$(ibcrd_sock f)" "{\"version\":1,\"type\":\"ping\"}" &&
	ibcrd_stop e && ibcrd_stop f
'

test_expect_success 'no credential from munged (munged stopped): clear error' '
	ibcrd_munged_stop m2 &&
	test_expect_code 1 "$IBCRD" -c c/ibcrd.conf --ping-peer "nA@127.0.0.1:$PA" 2>err &&
	grep "cannot get a MUNGE credential: .* (is munged running?)" err
'

test_done
