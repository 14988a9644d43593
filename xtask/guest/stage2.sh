#!/bin/bash
# cargo xtask kernels, stage 2: on the host's root (read-only, under a tmpfs
# overlay), with this kernel's modules bound where kmod looks for them; runs
# /ccl-out/job.sh, writes its exit status to /ccl-out/rc, powers off.
mount -t proc proc /proc
mount -t sysfs sys /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mkdir -p "/lib/modules/$(uname -r)"
mount --bind "$(cat /ccl-out/modules-dir)" "/lib/modules/$(uname -r)"
# /run anew: the host's runtime state (ccload's lock and pins' records,
# named netns) is not the guest's.  /tmp stays the host's (under the
# overlay, so writes stay in the guest): a checkout may live there.
mount -t tmpfs tmpfs /run
mkdir -p /run/lock /run/netns
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# the testbed's link (TUN) and the kernel's own CCs the tests compare with;
# the rest (veth, qdiscs, ifb) loads on demand
for m in tun tcp_bbr; do modprobe "$m" 2>/dev/null; done
ip link set lo up
hostname ccl-guest
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
echo "$(uname -r) $(cut -d' ' -f1 /proc/uptime)" > /ccl-out/booted
echo "ccl-guest: $(uname -r) up after $(cut -d' ' -f1 /proc/uptime) s"
bash /ccl-out/job.sh
echo $? > /ccl-out/rc
sync
echo o > /proc/sysrq-trigger
# the power-off is asynchronous: init must not exit before it (a panic)
sleep 30
