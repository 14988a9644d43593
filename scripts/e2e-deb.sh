#!/usr/bin/env bash
# The README's path from `cargo xtask dist` to a server, on a fresh Debian 12
# without Rust: debootstrap a minimal bookworm (with systemd) into a scratch
# directory, install the .deb there with dpkg, then boot it with systemd as
# PID 1 (systemd-nspawn, over this host's kernel and bpffs) and check:
#   - the unit is enabled and starts (its ExecStartPre is `ccload doctor`);
#   - `ccload serve` binds a configured cgroup that did not exist when it
#     started, once it appears;
#   - `systemctl reload` applies the config again and the unit stays active.
# With a second, older package: that one is installed and started first, a
# transfer runs on the ccpd it attached (iperf3 over loopback: nspawn shares
# the host's network and bpffs), and the new package is installed over the
# running one; then
#   - the restarted daemon upgraded ccpd in place (its log says so, status
#     says the object is the new binary's), and the transfer finished
#     without an error.
# nspawn's own syscall filter would refuse bpf(): --system-call-filter lets
# it through, as a host's systemd does.
# Usage (root): scripts/e2e-deb.sh dist/ccload_VERSION_ARCH.deb [OLDER.deb]
set -euo pipefail
deb=$(realpath "$1")
old=${2:+$(realpath "$2")}
root=$(mktemp -d /tmp/ccl-e2e-deb.XXXXXX)
nspawn_pid=
in_ct() {
    local leader
    leader=$(pgrep -P "$nspawn_pid" | head -1)
    nsenter -t "$leader" -a /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
cleanup() {
    if [ -n "$nspawn_pid" ]; then
        in_ct ccload detach --all >/dev/null 2>&1 || true
        kill "$nspawn_pid" 2>/dev/null || true
        wait "$nspawn_pid" 2>/dev/null || true
    fi
    rm -rf "$root"
}
trap cleanup EXIT
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
command -v systemd-nspawn >/dev/null || apt-get install -y -qq systemd-container >/dev/null
debootstrap --variant=minbase --include=systemd,systemd-sysv,init-system-helpers,dbus \
    bookworm "$root" http://deb.debian.org/debian >/dev/null
mkdir -p "$root/root/new" "$root/root/old"
cp "$deb" "$root/root/new/"
first=/root/new/$(basename "$deb")
if [ -n "$old" ]; then
    cp "$old" "$root/root/old/"
    first=/root/old/$(basename "$old")
fi
chroot "$root" /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -euo pipefail -c "
! command -v cargo
dpkg -i $first >/dev/null
test -L /etc/systemd/system/multi-user.target.wants/ccload.service
printf '[[cgroups]]\npath = \"/sys/fs/cgroup/ccl-e2e\"\nalgo = \"ccpd\"\n' >> /etc/ccload/config.toml
"
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 systemd-nspawn -q -D "$root" --boot --keep-unit \
    --register=no --capability=all --system-call-filter='bpf perf_event_open' \
    --bind=/sys/fs/bpf -M ccl-e2e-$$ >"$root.boot.log" 2>&1 &
nspawn_pid=$!
trap 'cleanup; rm -f "$root.boot.log" "$root.iperf.json"' EXIT
active=
for _ in $(seq 60); do
    sleep 0.5
    if pgrep -P "$nspawn_pid" >/dev/null && [ "$(in_ct systemctl is-active ccload 2>/dev/null)" = active ]; then
        active=1
        break
    fi
done
if [ -z "$active" ]; then
    in_ct journalctl -u ccload -b -o cat --no-pager 2>/dev/null | tail -20 || tail -20 "$root.boot.log"
    echo "e2e-deb: FAILED: the unit did not become active" >&2
    exit 1
fi
if [ -n "$old" ]; then
    command -v iperf3 >/dev/null || apt-get install -y -qq iperf3 >/dev/null
    for _ in $(seq 40); do grep -qw ccpd /proc/sys/net/ipv4/tcp_available_congestion_control && break; sleep 0.25; done
    iperf3 -s -1 -p 5399 -B 127.0.0.1 >/dev/null 2>&1 &
    srv=$!
    sleep 0.5
    iperf3 -c 127.0.0.1 -p 5399 -C ccpd -t 12 -b 200M -J >"$root.iperf.json" 2>&1 &
    cli=$!
    sleep 3
    in_ct dpkg -i "/root/new/$(basename "$deb")" >/dev/null
    up=
    for _ in $(seq 60); do
        sleep 0.5
        if in_ct journalctl -u ccload -b -o cat --no-pager 2>/dev/null | grep -q "upgraded ccpd in place"; then
            up=1
            break
        fi
    done
    in_ct journalctl -u ccload -b -o cat --no-pager 2>/dev/null | grep -A8 "upgraded ccpd in place" || true
    if ! wait "$cli"; then
        kill "$srv" 2>/dev/null || true
        tail -5 "$root.iperf.json"
        echo "e2e-deb: FAILED: the transfer across the package upgrade failed" >&2
        exit 1
    fi
    wait "$srv" 2>/dev/null || true
    if [ -z "$up" ] || ! in_ct ccload status | grep -q "(this ccload's)"; then
        in_ct ccload status || true
        echo "e2e-deb: FAILED: the new package did not upgrade ccpd in place" >&2
        exit 1
    fi
    sent=$(grep -o '"bytes":[[:space:]]*[0-9]*' "$root.iperf.json" | tail -1 | grep -o '[0-9]*$')
    echo "e2e-deb: upgraded over a running transfer: $((sent / 1048576)) MB sent across the upgrade, no error"
fi
in_ct /bin/bash -euo pipefail -c '
ccload doctor >/dev/null
mkdir /sys/fs/cgroup/ccl-e2e
for _ in $(seq 20); do ccload cgroup list | grep -q "^/sys/fs/cgroup/ccl-e2e .*algo=ccpd" && break; sleep 0.1; done
ccload cgroup list | grep "^/sys/fs/cgroup/ccl-e2e .*algo=ccpd"
systemctl reload ccload
test "$(systemctl is-active ccload)" = active
systemctl stop ccload
ccload detach --all >/dev/null
rmdir /sys/fs/cgroup/ccl-e2e
'
echo "e2e-deb: PASSED (${old:+upgraded over a running older package with a transfer running; }installed, enabled, started by systemd, doctor ok, a cgroup made after the start bound, reloaded)"
