#!/usr/bin/env bash
# Installs what ccload needs on a fresh Debian 12 machine (as root) and mounts
# bpffs.  Idempotent: installs only what is missing.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
pkg_missing() { ! dpkg -s "$1" >/dev/null 2>&1; }

have clang || need+=(clang)
have clang-format || need+=(clang-format)
have llvm-strip || need+=(llvm)
have bpftool || need+=(bpftool)
have iperf3 || need+=(iperf3)
have ip || need+=(iproute2)
have ethtool || need+=(ethtool)
have nsenter || need+=(util-linux)
have pkg-config || need+=(pkg-config)
have iptables || need+=(iptables)
have umoci || need+=(umoci)      # cargo xtask dist: the OCI image
have readelf || need+=(binutils)
for p in libelf-dev zlib1g-dev libclang-dev fonts-dejavu-core; do pkg_missing "$p" && need+=("$p"); done

if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi

# tests/tests/kubernetes.rs renders deploy/kubernetes with kubectl's kustomize or
# the kustomize CLI. Debian 12 packages neither: build the CLI from its Go
# module (about 30 s once) where Go is installed.
gobin=$(command -v go || echo /usr/local/go/bin/go)
if ! have kubectl && ! have kustomize && [ -x "$gobin" ]; then
    echo "setup: building kustomize v5.7.1 from its Go module"
    GOBIN=/usr/local/bin GOFLAGS=-mod=mod "$gobin" install sigs.k8s.io/kustomize/kustomize/v5@v5.7.1
fi

# Prometheus and promtool, for the monitoring tests (tests/tests/prometheus.rs):
# the two binaries of Debian's package, unpacked rather than installed, since
# the package's service would run a Prometheus on :9090 of every machine that
# runs the tests.
if ! have prometheus || ! have promtool; then
    echo "setup: unpacking prometheus and promtool from Debian's package"
    tmp=$(mktemp -d)
    (cd "$tmp" && { apt-get download -qq prometheus 2>/dev/null ||
        { apt-get update -qq && apt-get download -qq prometheus; }; })
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
    install -m 0755 "$tmp/x/usr/bin/prometheus" "$tmp/x/usr/bin/promtool" /usr/local/bin/
    rm -rf "$tmp"
fi

if ! have cargo; then
    echo "setup: cargo not found; install Rust >= 1.89 (rustup) first" >&2
    exit 2
fi

# bpffs: ccload pins its controllers there.
if ! mountpoint -q /sys/fs/bpf; then
    mkdir -p /sys/fs/bpf
    mount -t bpf bpf /sys/fs/bpf
fi
