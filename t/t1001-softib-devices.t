#!/bin/sh
test_description='softib: the drop-in libibverbs.so.1 and device queries

Debian'"'"'s unmodified ibv_devices and ibv_devinfo, run against softib with
LD_LIBRARY_PATH, list the softib0 device with an address-derived LID and
GID; the library exports exactly the symbol versions of rdma-core 44.'

. $(dirname $0)/sharness.sh
ibcr_require IBVUTILS

SOFTIB_LIB=$IBCR_BUILDDIR/lib/softib/.libs
LD_LIBRARY_PATH=$SOFTIB_LIB
export LD_LIBRARY_PATH

test_expect_success 'the build produced libibverbs.so.1' '
	test -f "$SOFTIB_LIB/libibverbs.so.1"
'

test_expect_success 'Debian tools load softib, not the system library' '
	ldd "$(command -v ibv_devinfo)" >ldd.out &&
	grep -F "libibverbs.so.1 => $SOFTIB_LIB/libibverbs.so.1" ldd.out
'

test_expect_success 'exported symbols and versions equal rdma-core 44 public ABI' '
	sysl=$(ldconfig -p | sed -n "s/.*libibverbs.so.1 (libc6,x86-64) => //p" | head -n1) &&
	test -n "$sysl" &&
	objdump -T "$sysl" | awk "/ DF | DO | g / && !/UND/ {print \$(NF-1), \$NF}" |
		grep -v PRIVATE | sort >want &&
	objdump -T "$SOFTIB_LIB/libibverbs.so.1" |
		awk "/ DF | DO | g / && !/UND/ {print \$(NF-1), \$NF}" |
		grep -v PRIVATE | sort >have &&
	test $(wc -l <want) -ge 120 &&
	test_cmp want have
'

test_expect_success 'IBVERBS_PRIVATE_34 has what Debian tools import' '
	objdump -T "$SOFTIB_LIB/libibverbs.so.1" >dyn &&
	grep -E "IBVERBS_PRIVATE_34 +ibv_query_gid_type$" dyn
'

test_expect_success 'internal symbols are not exported' '
	! grep -E " sib_" dyn
'

test_expect_success 'ibv_devices lists softib0 without loader warnings' '
	SOFTIB_ADDR=10.1.2.3 ibv_devices >out 2>err &&
	cat out &&
	grep -E "^[[:space:]]+softib0[[:space:]]+53420000" out &&
	! grep -i "version information" err
'

test_expect_success 'ibv_devinfo -v: active IB port, LID and GID from SOFTIB_ADDR' '
	SOFTIB_ADDR=10.1.2.3 ibv_devinfo -v >out 2>err &&
	grep -E "hca_id:[[:space:]]+softib0" out &&
	grep -E "state:[[:space:]]+PORT_ACTIVE" out &&
	grep -E "link_layer:[[:space:]]+InfiniBand" out &&
	grep -E "port_lid:[[:space:]]+515$" out &&
	grep -E "GID\[ *0\]:[[:space:]]+0000:0000:0000:0000:0000:ffff:0a01:0203" out &&
	grep -E "atomic_cap:[[:space:]]+ATOMIC_HCA" out &&
	grep -E "max_qp_wr:[[:space:]]+16384" out
'

test_expect_success 'without SOFTIB_ADDR the LID comes from an interface address' '
	ibv_devinfo >out 2>err &&
	lid=$(sed -n "s/.*port_lid:[[:space:]]*//p" out) &&
	test "$lid" -gt 0
'

test_expect_success 'SOFTIB_IFACE=lo selects 127.0.0.1' '
	SOFTIB_IFACE=lo ibv_devinfo -v >out 2>err &&
	grep -E "port_lid:[[:space:]]+1$" out &&
	grep -E "GID\[ *0\]:.*ffff:7f00:0001" out
'

test_expect_success 'a bad SOFTIB_ADDR is refused with a message naming it' '
	test_must_fail env SOFTIB_ADDR=not-an-ip ibv_devinfo >out 2>err;
	cat err &&
	grep "SOFTIB_ADDR=.not-an-ip. is not an IPv4 address" err
'

test_expect_success 'an unknown SOFTIB_IFACE is refused with a message naming it' '
	test_must_fail env SOFTIB_IFACE=nosuchif0 ibv_devinfo >out 2>err;
	cat err &&
	grep "SOFTIB_IFACE=.nosuchif0. has no IPv4 address" err
'

test_expect_success 'a bad SOFTIB_PORT_BASE is refused with a message naming it' '
	test_must_fail env SOFTIB_PORT_BASE=80 ibv_devinfo >out 2>err;
	cat err &&
	grep "SOFTIB_PORT_BASE=.80. is not a port number" err
'

test_done
