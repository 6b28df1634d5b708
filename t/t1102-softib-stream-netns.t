#!/bin/sh
test_description='softib: verbs_stream between two network-namespace hosts

The server runs on host 1, the client on host 2, each with its own IPv4
address, so softib addresses the peer by a LID/GID derived from another
host and its TCP transport really crosses a (virtual) network.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/softib/vw.sh
ibcr_require ROOT NETNS
softib_require

test_expect_success 'two namespace hosts' '
	netns_create 2
'
VW_SERVER_HOST=1
VW_CLIENT_HOST=2

for op in send send_imm write write_imm read; do
	test_expect_success "RC $op across hosts" "
		vw_stream ns-$op -o $op -n 500 -s 8192
	"
done

for op in fadd cswap; do
	test_expect_success "RC $op across hosts" "
		vw_stream ns-$op -o $op -n 1000
	"
done

test_expect_success 'RC write and read of 64 KiB messages across hosts' '
	vw_stream ns-w64 -o write -n 200 -s 65536 &&
	vw_stream ns-r64 -o read -n 200 -s 65536
'

test_expect_success 'UD send with GIDs (GRH) across hosts' '
	vw_stream ns-ud -U -x 0 -o send_imm -q 2 -s 2048 -n 500
'

test_expect_success 'RC addressed by GID (GRH) across hosts' '
	vw_stream ns-gid -x 0 -o write_imm -n 500
'

test_expect_success 'several QPs, CQs and threads, SRQ, blocked receiver across hosts' '
	vw_stream ns-mt -o send -q 6 -c 4 -t 2 -S -w event -g 2 -n 300
'

test_expect_success 'extended verbs API across hosts' '
	vw_stream ns-x -X -o write_imm -q 2 -n 300 &&
	vw_stream ns-xa -X -o cswap -n 300
'

# softib derives GID 0 from the host address (::ffff:a.b.c.d): each side
# must have seen its own and the other host's address.
vw_gid_of() {
	printf "00000000000000000000ffff%02x%02x%02x%02x" $(echo "$1" | tr . " ")
}

test_expect_success 'each side is addressed by its own host, not the other' '
	vw_stream ns-addr -v -x 0 -o send -n 10 &&
	grep "client: qp 0 local .*gid=$(vw_gid_of $(netns_ip 2))" ns-addr.client.err &&
	grep "client: qp 0 remote .*gid=$(vw_gid_of $(netns_ip 1))" ns-addr.client.err
'

test_done
