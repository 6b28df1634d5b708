#!/bin/sh
test_description='libibcr: exported ABI, lazy start, clear errors (no device needed)

libibcr must export the names and symbol versions of rdma-core 44 (and no
version of its own), cost nothing to a process that never calls a verb, and
say which backend it could not load.'

. $(dirname $0)/sharness.sh

LIBIBCR="$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so"
SYSVERBS=$(ldconfig -p | sed -n "s/.*libibverbs.so.1 (libc6,x86-64) => //p" | head -1)

test_expect_success 'libibcr is built' '
	test -f "$LIBIBCR" &&
	test -n "$SYSVERBS"
'

test_expect_success 'every exported name@version exists in rdma-core' '
	objdump -T "$SYSVERBS" | awk "/IBVERBS/ && \$NF !~ /^IBVERBS/ {print \$NF, \$(NF-1)}" |
		sort >sys &&
	objdump -T "$LIBIBCR" | awk "/IBVERBS/ && \$NF !~ /^IBVERBS/ {print \$NF, \$(NF-1)}" |
		sort >ours &&
	test $(wc -l <ours) -gt 90 &&
	comm -13 sys ours >extra &&
	test_must_be_empty extra
'

test_expect_success 'the object-taking verbs are all wrapped, with both versions' '
	for f in ibv_get_device_list ibv_open_device ibv_close_device ibv_alloc_pd \
		ibv_reg_mr ibv_create_cq ibv_create_qp ibv_modify_qp ibv_query_qp \
		ibv_create_srq ibv_create_ah ibv_get_cq_event ibv_query_port; do
		grep -qx "$f IBVERBS_1.1" ours &&
		grep -qx "$f (IBVERBS_1.0)" ours || { echo "missing $f"; return 1; }
	done &&
	for f in "ibv_create_comp_channel IBVERBS_1.0" "ibv_reg_mr_iova2 IBVERBS_1.8" \
		"_ibv_query_gid_ex IBVERBS_1.11" "ibv_query_gid_type IBVERBS_PRIVATE_34" \
		"ibv_qp_to_qp_ex IBVERBS_1.6"; do
		grep -qx "$f" ours || { echo "missing $f"; return 1; }
	done
'

test_expect_success 'nothing but rdma-core versions is exported, and the stand-ins for connect, MPI_Init/Finalize, UCX'"'"'s choice of clock and its ids' '
	objdump -T "$LIBIBCR" | awk "\$2 == \"g\" && /\\.text/ {print \$(NF-1), \$NF}" |
		grep -v "^(*IBVERBS_" | sort >others &&
	cat >want <<-\EOF &&
	GLIBC_2.2.5 connect
	IBCR_MPI_1 MPI_Finalize
	IBCR_MPI_1 MPI_Init
	IBCR_MPI_1 MPI_Init_thread
	IBCR_MPI_1 PMPI_Finalize
	IBCR_MPI_1 PMPI_Init
	IBCR_MPI_1 PMPI_Init_thread
	IBCR_UCX_1 ucs_generate_uuid
	IBCR_UCX_1 ucs_x86_init_tsc_freq
	EOF
	sort want >want.sorted &&
	test_cmp want.sorted others
'

test_expect_success 'a process that never calls a verb loads no backend' '
	LD_PRELOAD="$LIBIBCR" cat /proc/self/maps >maps &&
	grep -F libibcr.so maps &&
	test $(grep -c "libc.so.6" maps) = $(cat /proc/self/maps | grep -c "libc.so.6") &&
	! grep -F libibverbs maps
'

test_expect_success 'ibv_devices answers as without libibcr (no device here)' '
	{ ibv_devices >plain.out 2>plain.err; echo $? >plain.rc; } &&
	{ LD_PRELOAD="$LIBIBCR" ibv_devices >pre.out 2>pre.err; echo $? >pre.rc; } &&
	test_cmp plain.rc pre.rc &&
	test_cmp plain.out pre.out &&
	test_cmp plain.err pre.err
'

test_expect_success 'an unloadable IBCR_BACKEND is named in one clear line' '
	{ IBCR_BACKEND=/nonexistent/libibverbs.so.1 LD_PRELOAD="$LIBIBCR" ibv_devices \
		>out 2>err; test $? -ne 0; } &&
	grep "libibcr.*cannot load the verbs backend /nonexistent/libibverbs.so.1" err &&
	grep "set IBCR_BACKEND" err
'

test_expect_success 'an unreachable IBCR_SOCKET is named with what to do' '
	{ IBCR_SOCKET=$(ibcr_shortdir)/nosock LD_PRELOAD="$LIBIBCR" ibv_devices >out 2>err;
	  test $? -ne 0; } &&
	grep "cannot connect to the checkpoint coordinator at IBCR_SOCKET=$(ibcr_shortdir)/nosock" err
'

test_expect_success 'unit tests of maps, WR logs and the drain condition' '
	"$IBCR_BUILDDIR/t/ibcr/unit" >unit.out 2>&1 || { cat unit.out; false; } &&
	cat unit.out && ! grep "^not ok" unit.out
'

test_done
