#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: set up, attach ccpd, run a real
# transfer through it in a temporary network namespace, show its live
# estimator state, status and stats, then detach.  Leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo build --locked -q
ccload=target/debug/ccload
ns="ccl-demo-$$"
server=""

cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    $ccload detach --algo ccpd >/dev/null 2>&1 || true
}
trap cleanup EXIT

$ccload doctor
$ccload attach --algo ccpd --set kp=2 --set kd=100
ip netns add "$ns"
ip -n "$ns" link set lo up
nsenter --net=/run/netns/"$ns" iperf3 -s -1 -p 5201 >/dev/null &
server=$!
sleep 0.5

echo "== 4 s transfer with ccpd; live estimator state (last record per flow):"
nsenter --net=/run/netns/"$ns" iperf3 -c 127.0.0.1 -p 5201 -C ccpd -t 4 >/tmp/ccl-demo-iperf.$$ &
client=$!
$ccload watch --algo ccpd --format table --duration 3.5
wait "$client"
grep -E "sender|receiver" /tmp/ccl-demo-iperf.$$ || true
rm -f /tmp/ccl-demo-iperf.$$

echo "== status"
$ccload status
echo "== detach"
$ccload detach --algo ccpd
grep -qw ccpd /proc/sys/net/ipv4/tcp_available_congestion_control && { echo "ccpd still registered" >&2; exit 1; }
echo "ccpd unregistered; nothing pinned under /sys/fs/bpf/ccload"
