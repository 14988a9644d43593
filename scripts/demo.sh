#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: set up, attach ccpd, run a real
# transfer through it over a temporary emulated bottleneck while showing its
# live estimator state, compare it with cubic on the same link, show status
# and stats, then detach.  Leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo build --locked -q
ccload=target/debug/ccload

cleanup() {
    $ccload detach --algo ccpd >/dev/null 2>&1 || true
}
trap cleanup EXIT

$ccload doctor
$ccload attach --algo ccpd --set kp=2 --set kd=100
# ccpd, then cubic, each through a fresh emulated bottleneck (3 network
# namespaces, TBF + drop-tail pfifo, a userspace delay line): 50 Mbit/s,
# 40 ms, 1 BDP.  The live rows come from `ccload watch`; CA = the law runs.
# DEMO_SECS shortens each run (scripts/test.sh runs the demo in CI).
cargo xtask lab demo --algo ccpd ${DEMO_SECS:+--secs "$DEMO_SECS"}

echo "== status"
$ccload status
echo "== in-kernel aggregates (exact, whatever watch dropped)"
$ccload stats
echo "== detach"
$ccload detach --algo ccpd
grep -qw ccpd /proc/sys/net/ipv4/tcp_available_congestion_control && { echo "ccpd still registered" >&2; exit 1; }
echo "ccpd unregistered; nothing pinned under /sys/fs/bpf/ccload"
