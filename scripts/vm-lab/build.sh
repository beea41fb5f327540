#!/usr/bin/env bash
# The device lab's boot pieces: Debian's kernel (the version linux-image-amd64 depends on, extracted once into
# the cache) and an initramfs holding busybox, the modules the lab loads, the real tools it drives (nvme-cli,
# smartctl, mdadm, lvm, cryptsetup, e2fsprogs, nbd-client, hdparm, sfdisk, nbdkit) with their libraries, the ssdlab
# binary under test and the guest script as /init.
#
# usage: scripts/vm-lab/build.sh OUT_DIR SSDLAB_BINARY GUEST_SCRIPT
# Writes OUT_DIR/vmlinuz and OUT_DIR/initramfs.cpio; the kernel and its modules stay in OUT_DIR/cache.
set -euo pipefail
out=$1
binary=$2
guest=$3
cache="$out/cache"
mkdir -p "$cache"

version=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {sub("linux-image-", "", $2); print $2; exit}')
[ -n "$version" ] || { echo "vm-lab: cannot tell which kernel linux-image-amd64 depends on" >&2; exit 1; }
kernel="$cache/kernel-$version"
if [ ! -e "$kernel/.complete" ]; then
    rm -rf "$kernel" && mkdir -p "$kernel"
    (cd "$cache" && apt-get download -qq "linux-image-$version" >/dev/null 2>&1)
    dpkg -x "$cache"/linux-image-"$version"_*.deb "$kernel"
    rm -f "$cache"/linux-image-"$version"_*.deb
    depmod -b "$kernel" "$version"
    touch "$kernel/.complete"
fi
cp "$kernel/boot/vmlinuz-$version" "$out/vmlinuz"

root="$out/root"
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,proc,sys,dev,tmp,run,mnt,out,etc/lvm,var/lock}

# busybox for the shell and the small tools; the real tools below come first on PATH.
cp "$(command -v busybox)" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done

# Modules, in the order modprobe would load them, each once.
modules=(nvme ahci sd_mod virtio_pci virtio_blk nbd loop dm-mod dm-crypt raid1 raid0 md-mod ext4 crc32c_generic algif_skcipher algif_hash sha256_generic cbc
    aesni_intel xts dm-thin-pool dm-snapshot bcache)
: > "$root/etc/modules.order"
for module in "${modules[@]}"; do
    modprobe -d "$kernel" -S "$version" --show-depends "$module" 2>/dev/null | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r path; do
    relative=${path#"$kernel"}
    mkdir -p "$root$(dirname "$relative")"
    cp "$path" "$root$relative"
    echo "$relative" >> "$root/etc/modules.order"
done

# Every library a program loads, at the same paths as here.
copy_libraries() {
    ldd "$1" 2>/dev/null | grep -o '/[^ ]*' | while read -r library; do
        mkdir -p "$root$(dirname "$library")"
        cp -L "$library" "$root$library"
    done
}
copy_with_libraries() {
    mkdir -p "$root$(dirname "$1")"
    cp -L "$1" "$root$1"
    copy_libraries "$1"
}
for tool in nvme smartctl mdadm lvm dmsetup cryptsetup mkfs.ext4 e2fsck nbd-client hdparm sfdisk blkid wipefs mkswap swapon swapoff make-bcache; do
    path=$(command -v "$tool") || { echo "vm-lab: $tool is not installed" >&2; exit 1; }
    copy_with_libraries "$path"
done
# nbdkit with its file plugin and cache filter: the NBD scenario's negative control.
copy_with_libraries "$(command -v nbdkit)"
for module in plugins/nbdkit-file-plugin.so filters/nbdkit-cache-filter.so; do
    copy_with_libraries "/usr/lib/x86_64-linux-gnu/nbdkit/$module"
done
# lvm's commands are lvm itself under other names.
for name in pvcreate vgcreate lvcreate vgchange lvs; do ln -sf lvm "$root/usr/sbin/$name"; done
# No udev in the guest: lvm and cryptsetup must not wait for it.
cat > "$root/etc/lvm/lvm.conf" <<'CONF'
activation {
    udev_sync = 0
    udev_rules = 0
}
global {
    # No thin-provisioning-tools in the guest: a new pool has nothing to check.
    thin_check_executable = ""
}
devices {
    obtain_device_list_from_udev = 0
}
CONF

objcopy --strip-debug "$binary" "$root/usr/sbin/ssdlab"
copy_libraries "$binary"
cp "$guest" "$root/init"
chmod 755 "$root/init"

(cd "$root" && find . | cpio -o -H newc --quiet) > "$out/initramfs.cpio"
