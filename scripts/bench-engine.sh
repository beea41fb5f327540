#!/usr/bin/env bash
# Benchmarks ssdlab's engine against fio (Debian's package) on the same targets, in the same run, and prints
# ratios. Installs nothing: needs fio, python3, losetup, taskset, and root for the loop device.
#
#   scripts/bench-engine.sh [SECONDS] [ROUNDS]     # default 5 s per measurement, 3 rounds
#
# Each case alternates ssdlab and fio ROUNDS times and compares medians, since a shared 2-core VM drifts; the
# spread printed is the lowest and highest of the rounds' own IOPS ratios.
# (a) null target vs fio's null engine: 4 KiB random reads, QD32, pinned to one core (target: ssdlab >= 3x).
# (b) a loop device backed by a file in /dev/shm, O_DIRECT, io_uring: 4 KiB random reads at QD1 and QD32
#     (target: IOPS >= fio's, CPU time per I/O <= fio's).
# (c) the same on a regular file target (O_DIRECT where the filesystem allows it).
set -euo pipefail

seconds=${1:-5}
rounds=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
cpu=${BENCH_CPU:-0}

work=$(mktemp -d /dev/shm/ssdlab-bench.XXXXXX)
loop=""
file_dir=$(mktemp -d "${BENCH_FILE_DIR:-/var/tmp}/ssdlab-bench.XXXXXX")
cleanup() {
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
  rm -rf "$work" "$file_dir"
}
trap cleanup EXIT

# Prints "iops cpu_s ios" for an ssdlab run (JSON summary on stdout).
ssdlab_run() {
  taskset -c "$cpu" "$ssdlab" run "$@" --runtime "${seconds}s" --json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] == "summary":
        s = e["data"]["summary"]
        print(s["iops"], s["cpu_user_s"] + s["cpu_sys_s"], s["ios"])'
}

# Prints "iops cpu_s ios" for a fio run.
fio_run() {
  taskset -c "$cpu" fio --name=bench --output-format=json --time_based --runtime="$seconds" \
    --rw=randread --bs=4k "$@" | python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
runtime_s = job["read"]["runtime"] / 1000.0
ios = job["read"]["total_ios"]
print(job["read"]["iops"], (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s, ios)'
}

compare() { # name, then ROUNDS lines of "iops cpu_s ios" for ssdlab and for fio, separated by "|"
  python3 - "$@" <<'PY'
import statistics, sys
name, runs = sys.argv[1], sys.argv[2:]
split = runs.index("|")
def medians(lines):
    rows = [list(map(float, l.split())) for l in lines]
    return (statistics.median(r[0] for r in rows), statistics.median(r[1] / max(r[2], 1) * 1e9 for r in rows))
(a_iops, a_cpu), (b_iops, b_cpu) = medians(runs[:split]), medians(runs[split + 1:])
# The spread: each round's IOPS ratio (ssdlab's round i over fio's round i, run back to back), lowest to highest.
pairs = [float(x.split()[0]) / max(float(y.split()[0]), 1e-9) for x, y in zip(runs[:split], runs[split + 1:])]
print(f"{name:<30} ssdlab {a_iops:>12,.0f} IOPS {a_cpu:>7.0f} ns CPU/IO | fio {b_iops:>11,.0f} IOPS {b_cpu:>7.0f} ns CPU/IO"
      f" | IOPS {a_iops / b_iops:5.2f}x (rounds {min(pairs):.2f}-{max(pairs):.2f}x)  CPU/IO {a_cpu / b_cpu:5.2f}x")
PY
}

# Runs a case ROUNDS times, alternating the two tools: case NAME -- SSDLAB_ARGS... -- FIO_ARGS...
case_() {
  local name=$1; shift; shift
  local ours=() theirs=()
  while [ "$1" != "--" ]; do ours+=("$1"); shift; done; shift
  theirs=("$@")
  local a=() b=()
  for _ in $(seq "$rounds"); do
    a+=("$(ssdlab_run "${ours[@]}")")
    b+=("$(fio_run "${theirs[@]}")")
  done
  compare "$name" "${a[@]}" "|" "${b[@]}"
}

echo "ssdlab $("$ssdlab" --version | cut -d' ' -f2) vs $(fio --version): 4 KiB random reads, ${seconds} s x $rounds rounds each, pinned to CPU $cpu"

# (a) the engines' own ceiling.
case_ "(a) null, QD32" -- --target null:1g --rw randread --bs 4k --qd 32 -- --ioengine=null --size=1g --iodepth=32

# (b) a real block device (loop over a RAM-backed file).
truncate -s 1G "$work/disk.img"
dd if=/dev/urandom of="$work/disk.img" bs=1M count=1024 conv=notrunc status=none
loop=$(losetup -f --show --direct-io=on "$work/disk.img" 2>/dev/null || losetup -f --show "$work/disk.img")
for qd in 1 32; do
  case_ "(b) loop on /dev/shm, QD$qd" -- --target "$loop" --rw randread --bs 4k --qd "$qd" \
    -- --filename="$loop" --direct=1 --ioengine=io_uring --registerfiles --fixedbufs --iodepth="$qd"
done

# (c) a regular file, O_DIRECT.
dd if=/dev/urandom of="$file_dir/file.img" bs=1M count=1024 status=none
for qd in 1 32; do
  case_ "(c) file on $(df --output=fstype "$file_dir" | tail -1 | tr -d ' '), QD$qd" \
    -- --target "file:$file_dir/file.img" --rw randread --bs 4k --qd "$qd" \
    -- --filename="$file_dir/file.img" --direct=1 --ioengine=io_uring --registerfiles --fixedbufs --iodepth="$qd"
done
