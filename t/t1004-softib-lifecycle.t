#!/bin/sh
test_description='softib: nothing left behind, and two independent copies

After the last ibv_close_device a process holds no softib thread, fd,
socket or mapping (what CRIU needs to see), a new ibv_open_device starts
afresh with the current address, and two copies of the library loaded
with dlopen from two paths work side by side without sharing state.
Driven from python3 ctypes so the library is loaded exactly as libibcr
loads its backend (dlopen, RTLD_LOCAL).'

. $(dirname $0)/sharness.sh

ibcr_require PYTHON3

SOFTIB_LIB=$IBCR_BUILDDIR/lib/softib/.libs/libibverbs.so.1

cat >lifecycle.py <<'PYEOF'
import ctypes, os, sys

V = ctypes.c_void_p

def load(path):
    lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
    lib.ibv_get_device_list.restype = ctypes.POINTER(V)
    lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.ibv_free_device_list.argtypes = [ctypes.POINTER(V)]
    for f in ("ibv_open_device", "ibv_alloc_pd", "ibv_create_comp_channel"):
        getattr(lib, f).restype = V
        getattr(lib, f).argtypes = [V]
    lib.ibv_create_cq.restype = V
    lib.ibv_create_cq.argtypes = [V, ctypes.c_int, V, V, ctypes.c_int]
    lib.ibv_reg_mr.restype = V
    lib.ibv_reg_mr.argtypes = [V, V, ctypes.c_size_t, ctypes.c_int]
    lib.ibv_create_qp.restype = V
    lib.ibv_create_qp.argtypes = [V, V]
    for f in ("ibv_close_device", "ibv_dealloc_pd", "ibv_destroy_cq",
              "ibv_destroy_comp_channel", "ibv_dereg_mr", "ibv_destroy_qp"):
        getattr(lib, f).argtypes = [V]
    lib.ibv_query_gid.argtypes = [V, ctypes.c_uint8, ctypes.c_int, V]
    return lib

class Cap(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in
                ("max_send_wr", "max_recv_wr", "max_send_sge",
                 "max_recv_sge", "max_inline_data")]

class QPInit(ctypes.Structure):
    _fields_ = [("qp_context", V), ("send_cq", V), ("recv_cq", V),
                ("srq", V), ("cap", Cap), ("qp_type", ctypes.c_int),
                ("sq_sig_all", ctypes.c_int)]

def snapshot():
    fds = sorted(os.listdir("/proc/self/fd"))
    tasks = len(os.listdir("/proc/self/task"))
    with open("/proc/self/maps") as f:
        # the brk heap may grow (Python allocates too); it is no mapping
        maps = sorted(l.split()[0] for l in f if "[heap]" not in l)
    return fds, tasks, maps

def use(lib):
    """Open the device, make one of everything, return (ctx, objs, qpn)."""
    n = ctypes.c_int()
    devs = lib.ibv_get_device_list(ctypes.byref(n))
    assert n.value == 1 and devs[0], "no softib device"
    ctx = lib.ibv_open_device(devs[0])
    lib.ibv_free_device_list(devs)
    assert ctx, "ibv_open_device failed"
    pd = lib.ibv_alloc_pd(ctx)
    ch = lib.ibv_create_comp_channel(ctx)
    cq = lib.ibv_create_cq(ctx, 64, None, ch, 0)
    buf = ctypes.create_string_buffer(1 << 16)
    mr = lib.ibv_reg_mr(pd, ctypes.addressof(buf), 1 << 16, 7)
    ia = QPInit(send_cq=cq, recv_cq=cq, cap=Cap(16, 16, 1, 1, 0), qp_type=2)
    qp = lib.ibv_create_qp(pd, ctypes.byref(ia))
    assert pd and ch and cq and mr and qp, "object creation failed"
    qpn = ctypes.c_uint32.from_address(qp + 52).value   # ibv_qp.qp_num
    return ctx, (pd, ch, cq, mr, qp, buf), qpn

def release(lib, ctx, objs):
    pd, ch, cq, mr, qp, buf = objs
    assert lib.ibv_destroy_qp(qp) == 0
    assert lib.ibv_dereg_mr(mr) == 0
    assert lib.ibv_destroy_cq(cq) == 0
    assert lib.ibv_destroy_comp_channel(ch) == 0
    assert lib.ibv_dealloc_pd(pd) == 0
    assert lib.ibv_close_device(ctx) == 0

def gid_ip(lib, ctx):
    g = (ctypes.c_uint8 * 16)()
    assert lib.ibv_query_gid(ctx, 1, 0, g) == 0
    return ".".join(str(b) for b in g[12:])

mode = sys.argv[1]
if mode == "clean":
    lib = load(sys.argv[2])
    before = snapshot()
    ctx, objs, qpn = use(lib)
    during = snapshot()
    assert during[1] == before[1] + 1, "expected one progress thread"
    assert len(during[0]) > len(before[0]), "expected softib fds"
    release(lib, ctx, objs)
    after = snapshot()
    assert after[0] == before[0], "fds left: %s" % (set(after[0]) - set(before[0]))
    assert after[1] == before[1], "threads left: %d" % (after[1] - before[1])
    left = set(after[2]) - set(before[2])
    assert not left, "mappings left: %s" % left
    print("clean: fds %d -> %d -> %d, threads %d -> %d -> %d"
          % (len(before[0]), len(during[0]), len(after[0]),
             before[1], during[1], after[1]))
elif mode == "reopen":
    lib = load(sys.argv[2])
    os.environ["SOFTIB_ADDR"] = "10.9.8.7"
    ctx, objs, qa = use(lib)
    a = gid_ip(lib, ctx)
    ka = ctypes.c_uint32.from_address(objs[3] + 36).value   # ibv_mr.lkey
    release(lib, ctx, objs)
    os.environ["SOFTIB_ADDR"] = "10.6.5.4"
    ctx, objs, qb = use(lib)
    b = gid_ip(lib, ctx)
    kb = ctypes.c_uint32.from_address(objs[3] + 36).value
    release(lib, ctx, objs)
    ctx, objs, qc = use(lib)
    release(lib, ctx, objs)
    assert (a, b) == ("10.9.8.7", "10.6.5.4"), (a, b)
    # as on an HCA, re-registering after a reopen gives a new key
    assert ka != kb, "same MR key 0x%x after reopen" % ka
    # A QP number is the context's slot (high bits) and an index (low 12).
    # A reopened context can get its old slot back; its first QP must
    # still not repeat the old number, so the index must not start at a
    # fixed place (equal in all three opens: about 1 in 4093^2 if random).
    idx = [q & 0xfff for q in (qa, qb, qc)]
    assert len(set(idx)) > 1, "first QP index 0x%x in every open" % idx[0]
    print("reopen: address %s then %s, MR key 0x%x then 0x%x, first QPs 0x%x 0x%x 0x%x"
          % (a, b, ka, kb, qa, qb, qc))
elif mode == "twice":
    l1, l2 = load(sys.argv[2]), load(sys.argv[3])
    f1 = ctypes.cast(l1.ibv_open_device, V).value
    f2 = ctypes.cast(l2.ibv_open_device, V).value
    assert f1 != f2, "the two paths gave one copy"
    c1, o1, q1 = use(l1)
    c2, o2, q2 = use(l2)
    assert q1 >> 12 != q2 >> 12, "both copies took one endpoint slot"
    release(l1, c1, o1)
    c3, o3, q3 = use(l2)   # copy 2 unaffected by copy 1's close
    release(l2, c2, o2)
    release(l2, c3, o3)
    print("twice: QPNs 0x%x and 0x%x" % (q1, q2))
PYEOF

test_expect_success 'after the last close: no softib thread, fd or mapping' '
	python3 lifecycle.py clean "$SOFTIB_LIB" >out 2>&1;
	rc=$?; cat out; test $rc = 0 && grep "^clean:" out
'

test_expect_success 'a new open after close starts afresh: new address, MR keys, QP numbers' '
	python3 lifecycle.py reopen "$SOFTIB_LIB" >out 2>&1;
	rc=$?; cat out; test $rc = 0 && grep "^reopen: address 10.9.8.7 then 10.6.5.4" out
'

test_expect_success 'two copies from two paths work side by side' '
	mkdir -p a b &&
	cp "$SOFTIB_LIB" a/libibverbs.so.1 &&
	cp "$SOFTIB_LIB" b/libibverbs.so.1 &&
	python3 lifecycle.py twice "$PWD/a/libibverbs.so.1" "$PWD/b/libibverbs.so.1" >out 2>&1;
	rc=$?; cat out; test $rc = 0 && grep "^twice:" out
'

test_done
