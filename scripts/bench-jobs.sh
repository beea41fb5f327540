#!/usr/bin/env bash
# Benchmarks `ssdlab run --jobs` against fio's numjobs (Debian's package) on the same targets, in the same run,
# and prints ratios. Installs nothing: needs fio, python3, losetup, and root for the loop device.
#
#   scripts/bench-jobs.sh [SECONDS] [ROUNDS]     # default 5 s per measurement, 3 rounds
#
# 4 KiB random reads at QD32 per job, with one and two jobs, on (a) the null target against fio's null engine,
# (b) a loop device over a file in /dev/shm (O_DIRECT, io_uring) and (c) a regular file (O_DIRECT). Nothing is
# pinned: two jobs are meant to use two cores. Each round runs ssdlab and fio alternately at one job, then at two;
# medians are compared, and the spread is the lowest and highest of the rounds' own ratios.
# Targets (#51): ssdlab's scaling (--jobs 2 over --jobs 1) at least the lower of 0.9x fio's and 1.6x, and
# --jobs 2 at least fio's numjobs=2.
set -euo pipefail

seconds=${1:-5}
rounds=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }

work=$(mktemp -d /dev/shm/ssdlab-bench.XXXXXX)
loop=""
file_dir=$(mktemp -d "${BENCH_FILE_DIR:-/var/tmp}/ssdlab-bench.XXXXXX")
cleanup() {
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
  rm -rf "$work" "$file_dir"
}
trap cleanup EXIT

# Prints the IOPS of an ssdlab run: ssdlab_run JOBS ARGS...
ssdlab_run() {
  local jobs=$1; shift
  "$ssdlab" run "$@" --jobs "$jobs" --runtime "${seconds}s" --json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] == "summary":
        print(e["data"]["summary"]["iops"])'
}

# Prints the IOPS of a fio run, all jobs together: fio_run JOBS ARGS...
fio_run() {
  local jobs=$1; shift
  fio --name=bench --output-format=json --time_based --runtime="$seconds" --group_reporting \
    --numjobs="$jobs" --rw=randread --bs=4k "$@" | python3 -c '
import json, sys
print(json.load(sys.stdin)["jobs"][0]["read"]["iops"])'
}

# Runs a case: case_ NAME -- SSDLAB_ARGS... -- FIO_ARGS...
case_() {
  local name=$1; shift; shift
  local ours=() theirs=()
  while [ "$1" != "--" ]; do ours+=("$1"); shift; done; shift
  theirs=("$@")
  local rows=()
  for _ in $(seq "$rounds"); do
    local a1 b1 a2 b2
    a1=$(ssdlab_run 1 "${ours[@]}"); b1=$(fio_run 1 "${theirs[@]}")
    a2=$(ssdlab_run 2 "${ours[@]}"); b2=$(fio_run 2 "${theirs[@]}")
    rows+=("$a1 $b1 $a2 $b2")
  done
  python3 - "$name" "${rows[@]}" <<'PY'
import statistics, sys
name, rows = sys.argv[1], [list(map(float, r.split())) for r in sys.argv[2:]]
med = [statistics.median(r[i] for r in rows) for i in range(4)]
a1, b1, a2, b2 = med
ours, theirs = a2 / a1, b2 / b1
want = min(0.9 * theirs, 1.6)
spread = lambda f: f"{min(f(r) for r in rows):.2f}-{max(f(r) for r in rows):.2f}"
print(f"{name:<26} jobs 1: ssdlab {a1:>11,.0f} fio {b1:>11,.0f} ({a1 / b1:.2f}x, rounds {spread(lambda r: r[0] / r[1])})"
      f" | jobs 2: ssdlab {a2:>11,.0f} fio {b2:>11,.0f} ({a2 / b2:.2f}x, rounds {spread(lambda r: r[2] / r[3])})")
print(f"{'':<26} scaling 2/1: ssdlab {ours:.2f}x (rounds {spread(lambda r: r[2] / r[0])}), fio {theirs:.2f}x"
      f" (rounds {spread(lambda r: r[3] / r[1])}); target >= {want:.2f}x: {'met' if ours >= want else 'NOT met'};"
      f" jobs 2 >= fio's: {'met' if a2 >= b2 else 'NOT met'}")
PY
}

echo "ssdlab $("$ssdlab" --version | cut -d' ' -f2) vs $(fio --version): 4 KiB random reads at QD32 per job, ${seconds} s x $rounds rounds, $(nproc) CPUs"

case_ "(a) null" -- --target null:1g --rw randread --bs 4k --qd 32 -- --ioengine=null --size=1g --iodepth=32

truncate -s 1G "$work/disk.img"
dd if=/dev/urandom of="$work/disk.img" bs=1M count=1024 conv=notrunc status=none
loop=$(losetup -f --show --direct-io=on "$work/disk.img" 2>/dev/null || losetup -f --show "$work/disk.img")
case_ "(b) loop on /dev/shm" -- --target "$loop" --rw randread --bs 4k --qd 32 \
  -- --filename="$loop" --direct=1 --ioengine=io_uring --registerfiles --fixedbufs --iodepth=32

dd if=/dev/urandom of="$file_dir/file.img" bs=1M count=1024 status=none
case_ "(c) file on $(df --output=fstype "$file_dir" | tail -1 | tr -d ' ')" \
  -- --target "file:$file_dir/file.img" --rw randread --bs 4k --qd 32 \
  -- --filename="$file_dir/file.img" --direct=1 --ioengine=io_uring --registerfiles --fixedbufs --iodepth=32
