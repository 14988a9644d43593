#!/usr/bin/env bash
# The README's path from `cargo xtask dist` to a server, on a fresh Debian 12
# without Rust: debootstrap a minimal bookworm (with systemd) into a scratch
# directory, install the .deb there with dpkg, then, in a chroot over this
# host's kernel (its /sys, /proc, /dev):
#   - the unit is enabled; ccload doctor passes;
#   - the unit's ExecStart, `ccload serve`, binds a configured cgroup that
#     did not exist when it started, once it appears.
# The unit itself is not started by systemd: this runs where systemd is not
# PID 1 (tests/tests/deploy.rs checks the unit with systemd-analyze).
# Usage (root): scripts/e2e-deb.sh dist/ccload_VERSION_ARCH.deb
set -euo pipefail
deb=$(realpath "$1")
root=$(mktemp -d /tmp/ccl-e2e-deb.XXXXXX)
cg2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
cg="$cg2/ccl-e2e-$$"
cleanup() {
    rmdir "$cg" 2>/dev/null || true
    ccload_host=$(command -v ccload || true)
    "$root/usr/bin/ccload" detach --all >/dev/null 2>&1 || ${ccload_host:-true} detach --all >/dev/null 2>&1 || true
    rm -rf "$root"
}
trap cleanup EXIT
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
debootstrap --variant=minbase --include=systemd,systemd-sysv,init-system-helpers \
    bookworm "$root" http://deb.debian.org/debian >/dev/null
cp "$deb" "$root/root/"
unshare -m bash -euo pipefail -c "
mount --make-rprivate /
mount -t proc proc '$root/proc'
mount --rbind /sys '$root/sys'
mount --rbind /dev '$root/dev'
mount -t tmpfs tmpfs '$root/run'
chroot '$root' /bin/bash -euo pipefail -c '
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
! command -v cargo
dpkg -i /root/$(basename "$deb") >/dev/null
test -L /etc/systemd/system/multi-user.target.wants/ccload.service
ccload doctor
printf \"[[cgroups]]\npath = \\\"$cg\\\"\nalgo = \\\"ccpd\\\"\n\" >> /etc/ccload/config.toml
\$(sed -n \"s/^ExecStart=//p\" /lib/systemd/system/ccload.service) 2>/tmp/serve.log &
sp=\$!
sleep 2
mkdir $cg
for _ in \$(seq 20); do ccload cgroup list | grep -q \"^$cg .*algo=ccpd\" && break; sleep 0.1; done
ccload cgroup list | grep \"^$cg .*algo=ccpd\"
kill -TERM \$sp; wait \$sp
'
"
echo "e2e-deb: PASSED (installed, enabled, doctor ok, a cgroup made after the start bound)"
