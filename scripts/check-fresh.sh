#!/usr/bin/env bash
# make check-fresh: runs the README's two commands, `make demo` then `make test`, in a clean
# Debian root that has only what a new user has, on a clean clone of the committed HEAD.
#
# The root is built from Debian's packages (debootstrap, minbase variant) with FRESH_PACKAGES
# and nothing else; Rust is this machine's toolchain, bind-mounted read-only (Debian's rustc
# is too old, and a new user installs Rust with rustup). The environment is emptied (env -i),
# so nothing of this machine's PATH, virtualenvs or caches leaks in. Needs root (debootstrap,
# chroot, mounts) and access to Debian's mirror, PyPI and crates.io. Besides the toolchain,
# only this machine's network settings go in: proxy variables and, where an environment
# variable names one (SSL_CERT_FILE, PIP_CERT, ...), its TLS trust bundle, which a network that
# intercepts TLS (this sandbox's does) needs for any download to work.
#
# Settings (environment):
#   FRESH_DIR       where the root lives (default /var/tmp/sluice-fresh); rebuilt every run
#   FRESH_SUITE     Debian suite (default bookworm)
#   FRESH_MIRROR    Debian mirror (default http://deb.debian.org/debian)
#   FRESH_SECURITY_MIRROR  its security archive (default http://deb.debian.org/debian-security)
#   FRESH_PACKAGES  what the new user's machine has besides minbase (default below):
#                   python3 and make (the README's requirements), ca-certificates (present
#                   wherever rustup was installed over HTTPS), and libclang-cpp14, the library
#                   whose name fooled the old libclang check: setup must not take it for the
#                   libclang bindgen loads.
#   FRESH_KEEP=1    keep the base-system cache between runs (default: keep)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${FRESH_DIR:-/var/tmp/sluice-fresh}
suite=${FRESH_SUITE:-bookworm}
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
packages=${FRESH_PACKAGES:-python3,make,ca-certificates,libclang-cpp14}
root="$work/root"

say() { printf 'check-fresh: %s\n' "$*"; }
die() { printf 'check-fresh: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and bind mounts): sudo make check-fresh"
command -v rustc >/dev/null || die "no Rust toolchain on this machine to bind into the root"
if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
sha=$(git -C "$repo" rev-parse HEAD)
if [ -n "$(git -C "$repo" status --porcelain)" ]; then
    say "warning: the checkout has uncommitted changes; the clean clone has only HEAD ($sha)"
fi

mounts=()
cleanup() {
    local m
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        m=${mounts[$i]}
        umount -l "$m" 2>/dev/null || true
    done
}
trap cleanup EXIT
bind() { # bind SRC DST [ro]
    mkdir -p "$2"
    mount --bind "$1" "$2"
    mounts+=("$2")
    if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}

# A leftover root from an interrupted run may still have mounts: undo them before deleting.
if [ -d "$root" ]; then
    { grep -o " $root[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
    rm -rf "$root"
fi
mkdir -p "$work/cache" "$root"

# The base system: debootstrap once per (suite, package list), then unpacked from a cache.
key=$(printf '%s %s %s' "$suite" "$mirror" "$packages" | sha1sum | cut -c1-12)
cache="$work/cache/$suite-$key.tar"
t0=$(date +%s)
if [ -f "$cache" ]; then
    say "unpacking the cached $suite base ($packages)"
    tar -C "$root" -xf "$cache"
else
    say "debootstrap $suite, minbase + $packages (a few minutes)"
    debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" \
        > "$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$root/var/cache/apt/archives/"*.deb
    tar -C "$root" -cf "$cache.tmp" . && mv "$cache.tmp" "$cache"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# A Debian installation takes packages from the suite, its updates and its security archive
# (the installer writes all three); debootstrap writes only the first. Chromium's updates are
# published in the security archive only, so without it a fresh root gets an old Chromium
# (150 against 156 in November 2026).
security=${FRESH_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cat > "$root/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
SOURCES
say "base ready in $(( $(date +%s) - t0 )) s: Debian $(cat "$root/etc/debian_version"), $(chroot "$root" dpkg-query -W -f '.\n' | wc -l) packages"
for pkg in libclang-dev libx264-dev build-essential python3-venv; do
    if chroot "$root" dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
        die "the base already has $pkg: it must be setup's job to install it"
    fi
done

# Rust: this machine's active toolchain, read-only (cargo's own downloads go to the root).
sysroot=$(rustc --print sysroot)
bind "$sysroot" "$root/opt/rust" ro
mkdir -p "$root/proc" "$root/sys" "$root/dev"
mount -t proc proc "$root/proc"; mounts+=("$root/proc")
bind /sys "$root/sys" ro
bind /dev "$root/dev"
mount -t devpts devpts "$root/dev/pts" 2>/dev/null && mounts+=("$root/dev/pts") || true

# A clean clone of the committed HEAD: what a new user gets.
git clone --quiet --no-local "$repo" "$root/root/sluice"
say "clean clone of $sha in $root/root/sluice"

# Network settings: proxies, and TLS trust bundles named by the usual variables (copied to
# the same path in the root, so the variables can be passed as they are).
net_vars=(http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY)
for v in SSL_CERT_FILE PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE CARGO_HTTP_CAINFO; do
    f=${!v:-}
    if [ -n "$f" ] && [ -f "$f" ]; then
        mkdir -p "$root$(dirname "$f")"
        cp "$f" "$root$f"
        net_vars+=("$v")
    fi
done

in_root() {
    local passthrough=()
    for v in "${net_vars[@]}"; do
        [ -n "${!v:-}" ] && passthrough+=("$v=${!v}")
    done
    chroot "$root" /usr/bin/env -i HOME=/root USER=root LANG=C.UTF-8 TERM=dumb \
        PATH=/opt/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        "${passthrough[@]}" /bin/bash -c "cd /root/sluice && $1"
}

declare -A took
for cmd in "make demo" "make test"; do
    say "[in the clean root] \$ $cmd"
    t=$(date +%s)
    if ! in_root "$cmd" 2>&1 | sed -u 's/^/  | /'; then
        die "'$cmd' failed in the clean root after $(( $(date +%s) - t )) s"
    fi
    # (pipefail makes the status above that of the command, not of sed)
    took[$cmd]=$(( $(date +%s) - t ))
    say "'$cmd' passed in ${took[$cmd]} s"
done

installed=$(in_root "dpkg-query -W -f '\${Package}\n' libclang-dev libx264-dev build-essential python3-venv pkg-config 2>/dev/null | tr '\n' ' '")
say "setup installed in the root: $installed"
say "passed: make demo ${took[make demo]} s, make test ${took[make test]} s (Debian $(cat "$root/etc/debian_version"), commit ${sha:0:12})"
