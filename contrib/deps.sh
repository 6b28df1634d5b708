#!/bin/bash
# Install everything ibcr needs to build and test on Debian 12, idempotently.
#
# Usage: contrib/deps.sh [--no-criu]
#
# Debian packages that are already installed are skipped, so a second run
# takes seconds.  CRIU: Debian 12's criu 3.17.1 cannot start on kernels
# >= 6.13 (new vDSO layout); when no working CRIU >= 4.1 is found, this
# script builds one from Debian's source archive (suite sid), reusing the
# mirror URIs the machine's apt sources already name, and installs the
# binary as $IBCR_CRIU_PREFIX/sbin/criu (default /usr/local/sbin/criu).
#
# Must run as root.
set -euo pipefail

prog=${0##*/}
die() { echo "$prog: error: $*" >&2; exit 1; }
say() { echo "$prog: $*"; }

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs Debian packages)"
command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian 12 only"

want_criu=1
[ "${1:-}" = "--no-criu" ] && want_criu=0

PKGS=(
    # build
    build-essential autoconf automake libtool pkg-config make git
    # libraries
    libibverbs-dev libjson-c-dev libmunge-dev libslurm-dev libssl-dev
    libcap-dev libcurl4-openssl-dev libzstd-dev libxxhash-dev libsystemd-dev libinih-dev
    # verbs tools run on softib by the tests
    ibverbs-utils perftest ibverbs-providers librdmacm1 libibumad3
    # slurm and munge, started by the tests themselves
    munge slurmctld slurmd slurm-client
    # UCX and both MPIs of Debian, run on softib by the tests (mpicc.openmpi
    # and mpicc.mpich are named explicitly: "mpicc" is an alternative)
    ucx-utils openmpi-bin libopenmpi-dev mpich libmpich-dev
    # a real MPI application the tests checkpoint (HPC Challenge, Open MPI)
    hpcc
    # Slurm's mpi/pmix plugin dlopens the unversioned libpmix.so
    libpmix-dev
    # test tooling
    sharness iproute2 util-linux procps psmisc gdb xz-utils python3 nftables
    python3-xxhash
    # the C style check (t0006; .clang-format)
    clang-format
    # CRIU build dependencies (see TESTBED.md)
    libbsd-dev libcap-dev libgnutls28-dev libnet1-dev libnftables-dev
    libnl-3-dev libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler
    protobuf-compiler python3-protobuf uuid-dev libaio-dev
    dpkg-dev
)

missing=()
for p in "${PKGS[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = "installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${#missing[@]} package(s): ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    # Services must not start on install: the tests start their own daemons.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d.ibcr
    chmod 755 /usr/sbin/policy-rc.d.ibcr
    had_policy=0
    [ -e /usr/sbin/policy-rc.d ] && had_policy=1
    [ $had_policy -eq 1 ] || cp /usr/sbin/policy-rc.d.ibcr /usr/sbin/policy-rc.d
    rc=0
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
    [ $had_policy -eq 1 ] || rm -f /usr/sbin/policy-rc.d
    rm -f /usr/sbin/policy-rc.d.ibcr
    [ $rc -eq 0 ] || die "apt-get install failed (exit $rc) for: ${missing[*]}"
else
    say "all ${#PKGS[@]} Debian packages already installed"
fi

# ---- test users -------------------------------------------------------------
# Two ordinary users for the tests (jobs run as users, not root; security
# tests need a second, hostile one).  No home, no login shell, no password.
for u in ibcr-user1:4242 ibcr-user2:4243; do
    name=${u%%:*} id=${u##*:}
    if ! getent passwd "$name" >/dev/null; then
        getent group "$name" >/dev/null || groupadd -g "$id" "$name"
        useradd -M -d /nonexistent -s /usr/sbin/nologin -u "$id" -g "$id" "$name" ||
            die "cannot create test user $name (uid $id)"
        say "created test user $name (uid $id)"
    fi
done

# ---- kernel settings (ibcrd(8) SYSTEM SETTINGS) ---------------------------
# The same file "make install" puts in $prefix/lib/sysctl.d; here so that
# this machine's tests and demo run as an installed node would.
sysctl_conf=$(dirname "$0")/sysctl.d/60-ibcr.conf
if [ -f "$sysctl_conf" ]; then
    if ! cmp -s "$sysctl_conf" /etc/sysctl.d/60-ibcr.conf; then
        install -m 0644 "$sysctl_conf" /etc/sysctl.d/60-ibcr.conf
        say "installed /etc/sysctl.d/60-ibcr.conf"
    fi
    sysctl -q -p /etc/sysctl.d/60-ibcr.conf || die "sysctl -p /etc/sysctl.d/60-ibcr.conf failed"
fi

[ $want_criu -eq 1 ] || exit 0

# ---- CRIU -----------------------------------------------------------------
criu_prefix=${IBCR_CRIU_PREFIX:-/usr/local}
criu_bin=$criu_prefix/sbin/criu

criu_works() {
    local c=$1
    [ -x "$c" ] || return 1
    "$c" check >/dev/null 2>&1
}

# pycriu (CRIU's Python image library, from the same source) for the tests
# that alter images the way a hostile job could (t/criu/forge.py), for
# Debian's /usr/bin/python3.
pycriu_ok() { /usr/bin/python3 -c 'import pycriu.images, xxhash' >/dev/null 2>&1; }

work=${IBCR_DEPS_WORK:-/var/tmp/ibcr-criu-build}

# criu_source: CRIU's source unpacked in $work/src/build.
criu_source() {
    [ -f "$work/src/build/Makefile" ] && return 0
    mkdir -p "$work/lists/partial" "$work/src"
    # A deb-src entry for sid that reuses the URIs of this machine's own sources.
    uris=$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n';
              cat /etc/apt/sources.list 2>/dev/null | awk '/^deb /{for(i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) {print $i; break}}'; } \
            | awk 'NF && tolower($0) !~ /security/' | sort -u || true)
    [ -n "$uris" ] || die "cannot find a Debian mirror URI in /etc/apt/sources.list{,.d}: add one, or install CRIU >= 4.1 and set IBCR_CRIU"
    srclist=$work/sid-src.sources
    {
        echo "Types: deb-src"
        echo "URIs: $(echo $uris)"
        echo "Suites: sid"
        echo "Components: main"
        echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    } > "$srclist"
    # Valid-Until is not checked: the machine may reach the archive through a
    # dated snapshot whose sid Release file is past its date; signatures and
    # file hashes are still verified.
    aptopts=(-o "Dir::Etc::SourceList=$srclist" -o "Dir::Etc::SourceParts=-"
             -o "Acquire::Check-Valid-Until=false"
             -o "Dir::State::Lists=$work/lists" -o "APT::Sandbox::User=root")
    apt-get "${aptopts[@]}" update -qq || die "apt-get update of the sid deb-src list failed (URIs: $uris)"
    (
        cd "$work/src"
        if ! ls criu_*.orig.tar.* >/dev/null 2>&1; then
            apt-get "${aptopts[@]}" source --download-only criu >/dev/null 2>&1 || true
        fi
        tarball=$(ls -1 criu_*.orig.tar.* 2>/dev/null | sort -V | tail -1)
        [ -n "$tarball" ] || die "could not download CRIU's source from Debian sid; install CRIU >= 4.1 by hand and set IBCR_CRIU=/path/to/criu"
        say "unpacking $tarball"
        rm -rf build && mkdir build
        tar -xf "$tarball" -C build --strip-components=1
    )
}

ensure_pycriu() {
    pycriu_ok && return 0
    criu_source
    make -C "$work/src/build" -j"$(nproc)" lib >"$work/src/pycriu.log" 2>&1 ||
        { tail -20 "$work/src/pycriu.log" >&2; die "building pycriu failed, see $work/src/pycriu.log"; }
    site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
    mkdir -p "$site"
    rm -rf "$site/pycriu"
    cp -r "$work/src/build/lib/pycriu" "$site/pycriu"
    pycriu_ok || die "installed pycriu in $site but /usr/bin/python3 cannot import it"
    say "pycriu ok: $site/pycriu"
}

for c in "${IBCR_CRIU:-}" "$criu_bin" "$(command -v criu 2>/dev/null || true)"; do
    [ -n "$c" ] || continue
    if criu_works "$c"; then
        say "CRIU ok: $c ($("$c" --version | head -1))"
        ensure_pycriu
        exit 0
    fi
done

say "no working CRIU >= 4.1 found; building one from Debian's source archive (sid)"
criu_source
cd "$work/src"
say "building CRIU"
make -C build -j"$(nproc)" criu >build.log 2>&1 || { tail -30 build.log >&2; die "CRIU build failed, see $work/src/build.log"; }
install -D -m 0755 build/criu/criu "$criu_bin"
criu_works "$criu_bin" || { "$criu_bin" check >&2 || true; die "built $criu_bin but 'criu check' fails"; }
say "CRIU ok: $criu_bin ($("$criu_bin" --version | head -1))"
ensure_pycriu
