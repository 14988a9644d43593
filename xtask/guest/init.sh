#!/bin/busybox sh
# cargo xtask kernels, stage 1 (the initramfs's /init): load the guest
# kernel's own virtio, 9p and overlay modules (listed in /modules.order,
# dependencies first), mount the host's root read-only under a tmpfs
# overlay, mount the results share, and hand over to stage 2 (stage2.sh,
# copied into the results share), run by the host's bash.
bb=/bin/busybox
$bb mkdir -p /proc /sys /dev /lower /rw /newroot
$bb mount -t proc proc /proc
$bb mount -t sysfs sys /sys
$bb mount -t devtmpfs dev /dev
for m in $($bb cat /modules.order); do
    $bb insmod "/mod/$m" || echo "ccl-guest: insmod $m failed"
done
# msize: 512 KiB messages (the default 8 KiB makes every binary's load
# take seconds under TCG).
$bb mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose hostroot /lower ||
    echo "ccl-guest: cannot mount the host's root"
$bb mount -t tmpfs -o size=1200m rw /rw
$bb mkdir -p /rw/upper /rw/work
$bb mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
    echo "ccl-guest: cannot mount the overlay"
$bb mkdir -p /newroot/ccl-out
$bb mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 cclout /newroot/ccl-out ||
    echo "ccl-guest: cannot mount the results share"
$bb umount /proc /sys
$bb mount --move /dev /newroot/dev
exec $bb switch_root /newroot /bin/bash /ccl-out/stage2.sh
# not reached unless switch_root failed: power off rather than panic
echo "ccl-guest: switch_root failed"
echo o > /proc/sysrq-trigger
