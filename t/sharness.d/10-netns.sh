# 10-netns.sh - one network namespace per test "host", joined by a bridge.
#
# Tests that must cross a real network (verbs traffic over softib's TCP,
# node failure) give each node its own network namespace and IPv4 address.
#
# API:
#   netns_create N     make N (1..64) namespaces ib<PID>h1..ib<PID>hN, each with
#                      lo up and eth0 (a veth into the bridge ib<PID>b), in one
#                      /24 of 198.18.0.0/15 (benchmark range, never routed)
#                      chosen from the test's PID and skipped if the host
#                      already uses it.  The host side of the bridge is
#                      .254, hosts are .1 .. .N.  Calling it again with the
#                      same or a smaller N is a no-op.
#   netns_name I       prints host I's namespace name
#   netns_ip I         prints host I's IPv4 address
#   netns_host_ip      prints the bridge's (host side) address
#   netns_count        prints N (0 when none made)
#   netns_exec I CMD [ARGS...]
#                      runs CMD in host I's network namespace.  Uses
#                      nsenter, not `ip netns exec`, which would remount
#                      /sys in a new mount namespace and hide the cgroups.
#   netns_destroy      kills what still runs inside our namespaces, removes
#                      namespaces, veths and the bridge.  Idempotent;
#                      registered with ibcr_atexit by netns_create.
#
# Requires the NETNS prerequisite.  Touches only names containing this
# test's PID.

ibcr_netns_n=0
ibcr_netns_tag=
ibcr_netns_net=

netns_count() {
	echo "$ibcr_netns_n"
}

netns_name() {
	echo "ib${ibcr_netns_tag}h$1"
}

netns_ip() {
	echo "$ibcr_netns_net.$1"
}

netns_host_ip() {
	echo "$ibcr_netns_net.254"
}

# ibcr_netns_pick_net_: print a /24 prefix of 198.18.0.0/15 not in use here.
ibcr_netns_pick_net_() {
	ibcr_k=0
	while test $ibcr_k -lt 512; do
		ibcr_i=$(( ($$ + ibcr_k) % 512 ))
		ibcr_net="198.$((18 + ibcr_i / 256)).$((ibcr_i % 256))"
		if ! ip -4 -o addr show | grep -q " inet $ibcr_net\."; then
			echo "$ibcr_net"
			return 0
		fi
		ibcr_k=$((ibcr_k + 1))
	done
	echo "netns_create: no free /24 in 198.18.0.0/15 on this host" >&2
	return 1
}

netns_create() {
	ibcr_want=$1
	case "$ibcr_want" in
	[1-9]|[1-5][0-9]|6[0-4]) ;;
	*)
		echo "netns_create: need a host count 1..64, got '$ibcr_want'" >&2
		return 1 ;;
	esac
	if test "$ibcr_netns_n" -ge "$ibcr_want"; then
		return 0
	fi
	if test "$ibcr_netns_n" -gt 0; then
		echo "netns_create: $ibcr_netns_n namespaces exist already; call netns_create with the largest count first" >&2
		return 1
	fi
	ibcr_netns_tag=$$
	ibcr_atexit netns_destroy
	ibcr_netns_net=$(ibcr_netns_pick_net_) || return 1
	ibcr_br="ib${ibcr_netns_tag}b"
	ip link add name "$ibcr_br" type bridge &&
	ip addr add "$(netns_host_ip)/24" dev "$ibcr_br" &&
	ip link set "$ibcr_br" up || {
		echo "netns_create: cannot make bridge $ibcr_br" >&2
		return 1
	}
	ibcr_h=1
	while test $ibcr_h -le "$ibcr_want"; do
		ibcr_ns=$(netns_name $ibcr_h)
		ibcr_v="ib${ibcr_netns_tag}v$ibcr_h"
		ibcr_p="ib${ibcr_netns_tag}p$ibcr_h"
		ip netns add "$ibcr_ns" &&
		ibcr_netns_n=$ibcr_h &&
		ip link add "$ibcr_v" type veth peer name "$ibcr_p" &&
		ip link set "$ibcr_p" netns "$ibcr_ns" &&
		ip link set "$ibcr_v" master "$ibcr_br" up &&
		ip -n "$ibcr_ns" link set "$ibcr_p" name eth0 &&
		ip -n "$ibcr_ns" addr add "$(netns_ip $ibcr_h)/24" dev eth0 &&
		ip -n "$ibcr_ns" link set eth0 up &&
		ip -n "$ibcr_ns" link set lo up &&
		ip -n "$ibcr_ns" route add default via "$(netns_host_ip)" || {
			echo "netns_create: cannot set up namespace $ibcr_ns" >&2
			return 1
		}
		ibcr_h=$((ibcr_h + 1))
	done
}

netns_exec() {
	ibcr_ne_i=$1
	case "$ibcr_ne_i" in
	[1-9]|[1-9][0-9]) ;;
	*) ibcr_ne_i=0 ;;
	esac
	if test "$ibcr_ne_i" -lt 1 || test "$ibcr_ne_i" -gt "$ibcr_netns_n"; then
		echo "netns_exec: no host '$1' (netns_create made $ibcr_netns_n)" >&2
		return 1
	fi
	ibcr_ne_ns=$(netns_name "$1")
	shift
	nsenter --net="/run/netns/$ibcr_ne_ns" "$@"
}

netns_destroy() {
	test -n "$ibcr_netns_tag" || return 0
	ibcr_h=1
	while test $ibcr_h -le "$ibcr_netns_n"; do
		ibcr_ns=$(netns_name $ibcr_h)
		# A namespace lives on while a process is inside, and so would
		# its veth: whatever still runs there was started by this test.
		ibcr_pids=$(ip netns pids "$ibcr_ns" 2>/dev/null)
		if test -n "$ibcr_pids"; then
			kill -KILL $ibcr_pids 2>/dev/null
		fi
		ip link del "ib${ibcr_netns_tag}v$ibcr_h" 2>/dev/null
		ip netns del "$ibcr_ns" 2>/dev/null
		ibcr_h=$((ibcr_h + 1))
	done
	ip link del "ib${ibcr_netns_tag}b" 2>/dev/null
	ibcr_netns_n=0
	ibcr_netns_tag=
	return 0
}
