#!/usr/bin/env bash
# README's test command: installs what the tests use from Debian (when missing), then runs every test.
# Run as root on Debian: the tests create loop devices, file systems and mounts and clean them up.
set -euo pipefail
cd "$(dirname "$0")/.."

# fio: the engine's peer; e2fsprogs/util-linux/mount: file systems and loop devices; chromium: the report in a real
# browser; btrfs-progs: reflinks and snapshots; xfsprogs: a file system that reports its device number as its
# id; attr: xattrs in the refresh tests; libnbd-bin (nbdinfo, nbdcopy), python3-libnbd (libnbd from a test
# script) and qemu-utils (qemu-io): real NBD clients of `ssdlab serve`; fuse3: nbdfuse's mounts (an export as a
# file, for a loop device and a file system on top); nbdkit: the negative control of the crash oracle and of
# block status; smartmontools: `ssdlab health` runs smartctl; prometheus: promtool checks every --prom output;
# fdisk: sfdisk writes the partition tables `ssdlab op` must keep clear of; python3-jsonschema: every result.json
# the tests write is checked against the JSON Schema generated from the types (docs/result.schema.json);
# blktrace: blktrace and blkparse record a real trace of a loop device for `test replay`'s blkparse reader;
# strace: watches the reads and writes a replay issues, to check them against the trace.
# The fleet (docs/fleet.md, dist/): prometheus (promtool test rules, and a real server that loads the rules and
# fires an alert), prometheus-node-exporter (serves ssdlab's .prom files from its textfile collector), systemd
# (systemd-analyze verify and calendar on the units) and ansible-core (the play, applied into a scratch root).
# The safety gate's signature test puts every signature a Debian package can create on a loop device and checks
# that wipefs sees it and ssdlab refuses it: dosfstools, exfatprogs, ntfs-3g, f2fs-tools, jfsutils,
# reiserfsprogs, nilfs-tools, udftools (file systems), squashfs-tools and genisoimage (images), cryptsetup-bin
# (LUKS1/2), lvm2 (pvcreate), bcache-tools (make-bcache).
# The device lab (crates/ssdlab/tests/vm, scripts/vm-lab) boots Debian's kernel in QEMU with NVMe, AHCI and virtio
# disks: qemu-system-x86, busybox-static (the guest's shell), kmod (depmod, modprobe --show-depends), cpio, and the
# tools it copies into the guest: nvme-cli, hdparm, mdadm, nbd-client (with smartmontools, lvm2, cryptsetup-bin,
# e2fsprogs and fdisk above).
packages=(fio e2fsprogs util-linux mount chromium btrfs-progs xfsprogs attr libnbd-bin python3-libnbd qemu-utils fuse3 nbdkit
    smartmontools prometheus prometheus-node-exporter systemd ansible-core fdisk python3-jsonschema blktrace strace
    dosfstools exfatprogs ntfs-3g f2fs-tools jfsutils reiserfsprogs nilfs-tools udftools squashfs-tools genisoimage
    cryptsetup-bin lvm2 bcache-tools fuse2fs
    qemu-system-x86 busybox-static kmod cpio binutils nvme-cli hdparm mdadm nbd-client)
missing_packages() {
    missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
}
missing_packages
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # An install can remove a package that was there: a machine with qemu-utils from bookworm-backports loses it
    # when Debian's qemu-system-x86 comes in (their versions must match), and qemu-io with it. A second pass
    # puts back what the first took away, at the version that fits.
    missing_packages
    if ((${#missing[@]})); then
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        missing_packages
        ((${#missing[@]} == 0)) || { echo "test.sh: could not install: ${missing[*]}" >&2; exit 1; }
    fi
fi

# A CI machine once ran out of disk linking the test binaries. Say how much there is, and build without
# incremental data (1.5 GB that a one-off build never reads again).
df -h . /tmp 2>/dev/null || true
export CARGO_INCREMENTAL=0

# The habits hold without a reminder: formatting and lints are part of the test.
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The device lab must run here: a missing QEMU is a failure, not a skip.
SSDLAB_VM_LAB=require cargo test --workspace "$@"
