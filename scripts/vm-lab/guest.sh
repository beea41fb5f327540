#!/bin/sh
# The device lab's guest, PID 1 of the VM. It loads the modules, runs every scenario's commands against the real
# drivers (QEMU's NVMe and AHCI controllers, virtio, md, device-mapper, LVM, dm-crypt, swap, ext4, the kernel's
# NBD client), keeps each command's standard output, standard error and exit code in /out, writes /out as a tar
# onto the outbox disk (/dev/vdb) and powers off. It judges nothing: the host's test reads the outbox and asserts.
#
# Disks: /dev/nvme0 with namespace /dev/nvme0n1, /dev/sda on ich9-ahci, /dev/vda (virtio, the holders' disk),
# /dev/vdb (the outbox), /dev/vdc (virtio, the stacks' disk: a DOS label with an extended partition).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR=/tmp SSDLAB_STATE_DIR=/tmp/state
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mkdir -p /dev/shm /run/lock /run/cryptsetup /out
for module in $(cat /etc/modules.order); do insmod "$module" 2>/dev/null; done
for _ in $(seq 100); do
    [ -b /dev/nvme0n1 ] && [ -b /dev/sda ] && [ -b /dev/vda ] && [ -b /dev/vdb ] && [ -b /dev/vdc ] && break
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
# The history keeps one snapshot per second of time taken, and the write takes about half a second here: without
# the pause both readings can fall in one second, and the later is not recorded (seen once in about ten labs).
sleep 1
step health-nvme-after ssdlab health /dev/nvme0 --json --history /out/history --prom /out/health-after.prom
step health-nvme-nvmecli nvme smart-log /dev/nvme0 -o json
step health-sata ssdlab health /dev/sda --json --no-history --prom /out/health-sata.prom
# The same drives as the real smartctl prints them in text (-x, what people paste) and in JSON, each read back by
# ssdlab from the saved file: the two forms must give the same figures.
for dev in sda nvme0; do
    step "smart-$dev-json" smartctl --json=c -x "/dev/$dev"
    step "smart-$dev-text" smartctl -x "/dev/$dev"
    step "health-$dev-from-json" ssdlab health --no-history --from "/out/smart-$dev-json.out" --json
    step "health-$dev-from-text" ssdlab health --no-history --from "/out/smart-$dev-text.out" --json
done

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

# 7. Stacks, each refused while in use and writable once free (#45): md RAID1 on primary partitions, md RAID0 on
# logical ones, LVM with a thin pool and two plain volumes (and an alias of one by its table), LUKS2 and plain
# dm-crypt, bcache; and the DOS extended partition that holds the logical ones. File systems are made without
# lazy init and mounted noatime, so nothing writes behind ssdlab's back.
# dmdev NAME: the /dev/dm-N node of the dm device NAME (the kernel's own node; no udev here to make links).
dmdev() {
    for d in /sys/block/dm-*; do
        [ "$(cat "$d/dm/name")" = "$1" ] && echo "/dev/$(basename "$d")" && return
    done
}
# MKFS_MOUNT DEVICE DIR (through sh -c: `step` runs programs, not functions).
MKFS_MOUNT='mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$1" && mkdir -p "$2" && mount -o noatime "$1" "$2" && echo in use > "$2/data" && sync'

# vdc: 1 primary (md1 A), 2 primary (md1 B), 3 extended over the rest: 5, 6 (md2 RAID0), 7 (thin pool VG),
# 8 (two plain LVs), 9 (LUKS2), 10 (plain crypt), 11 (bcache backing).
step stack-partition sh -c "printf 'label: dos\n,64M\n,64M\n,,E\n,64M\n,64M\n,160M\n,96M\n,64M\n,64M\n,64M\n' | sfdisk /dev/vdc"
note stack-extended-size "$(cat /sys/block/vdc/vdc3/size 2>/dev/null)"
step stack-md1 mdadm --create /dev/md1 --run --level=1 --raid-devices=2 --metadata=1.2 /dev/vdc1 /dev/vdc2
step stack-md2 mdadm --create /dev/md2 --run --level=0 --raid-devices=2 --metadata=1.2 /dev/vdc5 /dev/vdc6
step stack-thin-pv pvcreate -y /dev/vdc7
step stack-thin-vg vgcreate thinvg /dev/vdc7
step stack-thin-pool lvcreate -y -L 96m -T thinvg/pool
step stack-thin-lv lvcreate -y -V 64m -T thinvg/pool -n thin1
step stack-plain-pv pvcreate -y /dev/vdc8
step stack-plain-vg vgcreate plainvg /dev/vdc8
step stack-plain-lva lvcreate -y -L 32m -n lva plainvg
step stack-plain-lvb lvcreate -y -L 32m -n lvb plainvg
step stack-luks sh -c "printf lab | cryptsetup luksFormat --batch-mode --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 /dev/vdc9 -"
step stack-luks-open sh -c "printf lab | cryptsetup open --key-file - /dev/vdc9 stackluks"
step stack-plain-crypt sh -c "printf lab | cryptsetup open --type plain --cipher aes-xts-plain64 --key-size 256 --hash sha256 --key-file - /dev/vdc10 stackplain"
step stack-bcache make-bcache -B /dev/vdc11
step stack-bcache-register sh -c "echo /dev/vdc11 > /sys/fs/bcache/register; for _ in \$(seq 50); do [ -b /dev/bcache0 ] && exit 0; sleep 0.1; done; exit 1"
note stack-thin1 "$(dmdev thinvg-thin1)"
note stack-lva "$(dmdev plainvg-lva)"
note stack-lvb "$(dmdev plainvg-lvb)"
note stack-luks-dev "$(dmdev stackluks)"
note stack-plain-dev "$(dmdev stackplain)"
# The tops, by their kernel nodes.
tops="md1:/dev/md1 md2:/dev/md2 thin1:$(dmdev thinvg-thin1) lva:$(dmdev plainvg-lva) luks:$(dmdev stackluks) plaincrypt:$(dmdev stackplain) bcache:/dev/bcache0"
# Free: nothing on top uses them yet, so each is written (its members, held by the stack, stay refused).
for top in $tops; do
    step "stack-free-${top%%:*}" ssdlab run --target "${top#*:}" --allow-destroy --rw write --bytes 1m
done
step stack-devices-free ssdlab devices
# In use: a mounted ext4 on each; every top refused even with --force, and so are its members and the extended
# partition that holds the logical ones.
# (`step` sets `name` itself: the loop's own is `top_name`.)
for top in $tops; do
    top_name=${top%%:*}
    step "stack-mkfs-$top_name" sh -c "$MKFS_MOUNT" sh "${top#*:}" "/mnt/stack-$top_name"
    step "stack-used-$top_name" ssdlab run --target "${top#*:}" --allow-destroy --force --rw write --bytes 1m
done
step stack-mkfs-lvb sh -c "$MKFS_MOUNT" sh "$(dmdev plainvg-lvb)" /mnt/stack-lvb
for member in vdc1 vdc5 vdc7 vdc8 vdc9 vdc10 vdc11 vdc3; do
    step "stack-member-$member" ssdlab run --target "/dev/$member" --allow-destroy --force --rw write --bytes 1m
done
# An alias mapping the same bytes as the mounted lvb is refused; lva, apart on the same PV, is not held by lvb.
step stack-alias sh -c "dmsetup create stackalias --table \"\$(dmsetup table plainvg-lvb)\""
note stack-alias-dev "$(dmdev stackalias)"
step stack-used-alias ssdlab run --target "$(dmdev stackalias)" --allow-destroy --force --rw write --bytes 1m
step stack-devices-used ssdlab devices
# What each mounted file system holds after every refusal: its file, whole.
note stack-data-after-refusals "$(for top in $tops lvb:x; do cat "/mnt/stack-${top%%:*}/data" 2>/dev/null; done)"
# Free again: unmounted (the alias removed), each top is written again, now over its file system's signature.
step stack-alias-remove dmsetup remove stackalias
for top in $tops lvb:x; do umount "/mnt/stack-${top%%:*}"; done
for top in $tops; do
    step "stack-freed-${top%%:*}" ssdlab run --target "${top#*:}" --allow-destroy --force --rw write --bytes 1m
done
# The extended partition, once nothing on its logical partitions is active, is a device like another.
step stack-md2-stop mdadm --stop /dev/md2
step stack-thin-off vgchange -an thinvg
step stack-plain-off vgchange -an plainvg
step stack-luks-close cryptsetup close stackluks
step stack-plain-close cryptsetup close stackplain
step stack-bcache-stop sh -c "echo 1 > /sys/block/bcache0/bcache/stop; for _ in \$(seq 50); do [ -b /dev/bcache0 ] || exit 0; sleep 0.1; done; exit 1"
step stack-freed-extended ssdlab run --target /dev/vdc3 --allow-destroy --force --rw write --bytes 1k --bs 1k

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
