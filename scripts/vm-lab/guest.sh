#!/bin/sh
# The device lab's guest, PID 1 of the VM. It loads the modules, runs every scenario's commands against the real
# drivers (QEMU's NVMe and AHCI controllers, virtio, md, device-mapper, LVM, dm-crypt, swap, ext4, the kernel's
# NBD client), keeps each command's standard output, standard error and exit code in /out, writes /out as a tar
# onto the outbox disk (/dev/vdb) and powers off. It judges nothing: the host's test reads the outbox and asserts.
#
# Disks: /dev/nvme0 with namespace /dev/nvme0n1, /dev/sda on ich9-ahci, /dev/vda (virtio, the holders' disk),
# /dev/vdb (the outbox).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR=/tmp SSDLAB_STATE_DIR=/tmp/state
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mkdir -p /dev/shm /run/lock /run/cryptsetup /out
for module in $(cat /etc/modules.order); do insmod "$module" 2>/dev/null; done
for _ in $(seq 100); do
    [ -b /dev/nvme0n1 ] && [ -b /dev/sda ] && [ -b /dev/vda ] && [ -b /dev/vdb ] && break
    sleep 0.1
done
echo "LAB booted $(cut -d' ' -f1 /proc/uptime)"

# step NAME COMMAND...: runs it (for two minutes at most: a hung step fails, it does not hang the lab), keeping
# NAME.out, NAME.err and NAME.rc in /out.
step() {
    name=$1
    shift
    timeout 120 "$@" > "/out/$name.out" 2> "/out/$name.err"
    echo $? > "/out/$name.rc"
    echo "LAB step $name rc=$(cat "/out/$name.rc") at $(cut -d' ' -f1 /proc/uptime)"
}
# note NAME TEXT: a fact the host checks (a file's checksum, a size), kept as NAME.out.
note() {
    echo "$2" > "/out/$1.out"
}

# 1. Health, live: smartctl and nvme-cli on QEMU's controllers, before and after a known write.
step health-nvme-before ssdlab health /dev/nvme0 --json --history /out/history --prom /out/health-before.prom
step run-nvme ssdlab run --target /dev/nvme0n1 --allow-destroy --rw write --bs 1m --qd 8 --bytes 256m --json
step health-nvme-after ssdlab health /dev/nvme0 --json --history /out/history --prom /out/health-after.prom
step health-nvme-nvmecli nvme smart-log /dev/nvme0 -o json
step health-sata ssdlab health /dev/sda --json --no-history --prom /out/health-sata.prom

# 2. The PTS purges with the drive's own secure erase (QEMU's NVMe has no sanitize, so a format with secure erase
# settings), not discard, and its report carries the serial, firmware and write cache the kernel reports. It runs
# before the erases, which leave the namespace reading zeroes for the over-provisioning step.
step pts-nvme ssdlab test pts --target /dev/nvme0n1 --allow-destroy --test latency --round-time 100ms --out /out/pts-nvme --json

# Erase: QEMU's NVMe has no sanitize, so auto falls back to a format with secure erase; QEMU's ATA disk has no
# security feature set, so secure-erase refuses and auto falls back to what the kernel offers.
step erase-nvme-sanitize ssdlab erase --target /dev/nvme0n1 --allow-destroy --method sanitize --json
step erase-nvme-auto ssdlab erase --target /dev/nvme0n1 --allow-destroy --method auto --out /out/erase-nvme --json
step erase-sata-secure ssdlab erase --target /dev/sda --allow-destroy --method secure-erase --json
step erase-sata-auto ssdlab erase --target /dev/sda --allow-destroy --method auto --out /out/erase-sata --json

# 3. Over-provisioning: the tail of the namespace discarded; a GPT whose last partition ends where op says the
# usable space ends fits, and the kernel's own partition scan sees it.
step op-nvme ssdlab op --target /dev/nvme0n1 --set 25% --allow-destroy --out /out/op-nvme --json
usable=$(grep -o '"usable_bytes":[0-9]*' /out/op-nvme.out | head -1 | cut -d: -f2)
note op-usable-bytes "$usable"
if [ -n "$usable" ]; then
    # Sectors of 512 bytes: the partition from 1 MiB to the end of the usable space, the backup GPT in the tail.
    step op-sfdisk sh -c "printf 'label: gpt\nstart=2048, size=$((usable / 512 - 2048))\n' | sfdisk --no-reread /dev/nvme0n1"
    step op-rescan blockdev --rereadpt /dev/nvme0n1
    note op-partition-sectors "$(cat /sys/block/nvme0n1/nvme0n1p1/size 2>/dev/null)"
    note op-partition-start "$(cat /sys/block/nvme0n1/nvme0n1p1/start 2>/dev/null)"
fi

# 4. scan and refresh on an ext4 on the namespace's partition: files a year old found by the scan, a refresh
# killed with SIGKILL mid-file, and the next run settling what it left: the same bytes, the old times.
step fs-mkfs mkfs.ext4 -q /dev/nvme0n1p1
mkdir -p /mnt/nvme
step fs-mount mount /dev/nvme0n1p1 /mnt/nvme
step fs-write sh -c "for f in a b c; do dd if=/dev/urandom of=/mnt/nvme/\$f bs=1M count=24 conv=fsync 2>/dev/null; done; touch -d '2025-01-01 00:00:00' /mnt/nvme/a /mnt/nvme/b /mnt/nvme/c; sync"
note fs-sums-before "$(cd /mnt/nvme && md5sum a b c && stat -c '%n %Y' a b c)"
step fs-scan ssdlab scan /mnt/nvme --out /out/scan-nvme --json
ssdlab refresh /mnt/nvme --chunk 64k --rate 8m > /out/fs-refresh-killed.err 2>&1 &
refresh=$!
sleep 2
kill -9 "$refresh"
wait "$refresh" 2>/dev/null
note fs-journal-after-kill "$(cat /tmp/state/refresh-journal.jsonl 2>/dev/null | wc -l)"
step fs-refresh ssdlab refresh /mnt/nvme --chunk 1m --out /out/refresh-nvme --json
note fs-sums-after "$(cd /mnt/nvme && md5sum a b c && stat -c '%n %Y' a b c)"
step fs-umount umount /mnt/nvme
step fs-fsck e2fsck -n -f /dev/nvme0n1p1

# 5. The safety gate against real holders on /dev/vda: md RAID1 members, a dm-linear map, swap, an LVM PV with an
# active LV, a mounted ext4, a dm-crypt mapping; and on /dev/sda a file system that is only a signature.
step gate-partition sh -c "printf 'label: gpt\n,96M\n,96M\n,96M\n,96M\n,96M\n,96M\n,96M\n' | sfdisk /dev/vda"
step gate-md mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.2 /dev/vda1 /dev/vda2
step gate-dm dmsetup create lab-linear --table "0 $(blockdev --getsz /dev/vda3) linear /dev/vda3 0"
step gate-mkswap mkswap /dev/vda4
step gate-swapon swapon /dev/vda4
step gate-pv pvcreate -y /dev/vda5
step gate-vg vgcreate labvg /dev/vda5
step gate-lv lvcreate -y -L 32m -n lv labvg
step gate-mkfs mkfs.ext4 -q /dev/vda6
mkdir -p /mnt/vda6
step gate-mount mount /dev/vda6 /mnt/vda6
step gate-luks sh -c "printf lab | cryptsetup luksFormat --batch-mode --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 /dev/vda7 -"
step gate-luks-open sh -c "printf lab | cryptsetup open --key-file - /dev/vda7 labcrypt"
step gate-devices ssdlab devices
for victim in vda1 vda3 vda4 vda5 vda6 vda7 vda; do
    step "gate-write-$victim" ssdlab run --target "/dev/$victim" --allow-destroy --force --rw write --bytes 1m
done
step gate-sata-mkfs mkfs.ext4 -q -F /dev/sda
step gate-sata-unforced ssdlab run --target /dev/sda --allow-destroy --rw write --bytes 1m
step gate-sata-forced ssdlab run --target /dev/sda --allow-destroy --force --rw write --bytes 1m
umount /mnt/vda6
swapoff /dev/vda4

# 6. serve under the kernel's NBD client, over a file and over the DRAM cache in front of one: ext4 on /dev/nbd0,
# a writer creating files with fsync (each logged once its fsync returned), the server killed with SIGKILL while
# the writer runs, a new server on the same file, the journal replayed by a mount, every logged file checked,
# e2fsck -n clean.
serve() {
    case $1 in
        # The negative control: nbdkit's cache filter told to ignore flushes, which the oracle must catch.
        nbdkit-unsafe) nbdkit --foreground --unix /tmp/nbd.sock --filter=cache file /tmp/unsafe.img cache=unsafe \
            > "/out/$2.err" 2>&1 & ;;
        *) ssdlab serve --target "$1" --socket /tmp/nbd.sock > "/out/$2.err" 2>&1 & ;;
    esac
    echo $! > /tmp/serve.pid
    for _ in $(seq 100); do [ -S /tmp/nbd.sock ] && break; sleep 0.1; done
}
mkdir -p /mnt/nbd
dd if=/dev/zero of=/tmp/unsafe.img bs=1M count=0 seek=256 2>/dev/null
for export in file:/tmp/export.img:256m cached:file:/tmp/cached.img:256m?size=64m nbdkit-unsafe; do
    kind=${export%%:*}
    # Killed mid-write: after this long the writer is part-way through its files.
    case $kind in file) kill_after=1.5 ;; *) kill_after=2.5 ;; esac
    serve "$export" "nbd-$kind-serve-first"
    step "nbd-$kind-connect" nbd-client -u /tmp/nbd.sock /dev/nbd0 -N '' -b 4096 -t 5
    step "nbd-$kind-mkfs" mkfs.ext4 -q /dev/nbd0
    step "nbd-$kind-mount" mount /dev/nbd0 /mnt/nbd
    : > "/tmp/synced-$kind"
    (
        i=0
        while [ $i -lt 400 ]; do
            i=$((i + 1))
            dd if=/dev/urandom of=/mnt/nbd/f$i bs=64k count=4 conv=fsync 2>/dev/null || break
            (cd /mnt/nbd && md5sum f$i) >> "/tmp/synced-$kind"
        done
    ) &
    writer=$!
    sleep "$kill_after"
    kill -9 "$(cat /tmp/serve.pid)"
    wait "$(cat /tmp/serve.pid)" 2>/dev/null
    note "nbd-$kind-killed-after" "$kill_after s, $(wc -l < "/tmp/synced-$kind") files fsync'ed"
    nbd-client -d /dev/nbd0 > /dev/null 2>&1
    wait "$writer" 2>/dev/null
    umount -l /mnt/nbd 2>/dev/null
    rm -f /tmp/nbd.sock
    cp "/tmp/synced-$kind" "/out/nbd-$kind-synced.out"
    serve "$export" "nbd-$kind-serve-second"
    step "nbd-$kind-reconnect" nbd-client -u /tmp/nbd.sock /dev/nbd0 -N '' -b 4096 -t 5
    step "nbd-$kind-remount" mount /dev/nbd0 /mnt/nbd
    step "nbd-$kind-check" sh -c "cd /mnt/nbd && md5sum -c /tmp/synced-$kind"
    step "nbd-$kind-umount" umount /mnt/nbd
    step "nbd-$kind-fsck" e2fsck -n -f /dev/nbd0
    step "nbd-$kind-disconnect" nbd-client -d /dev/nbd0
    kill -TERM "$(cat /tmp/serve.pid)"
    wait "$(cat /tmp/serve.pid)" 2>/dev/null
    rm -f /tmp/nbd.sock
done

echo "LAB done $(cut -d' ' -f1 /proc/uptime)"
tar cf /dev/vdb -C /out .
sync
poweroff -f
