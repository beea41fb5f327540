#!/usr/bin/env bash
# Scan throughput against fio reading the same files sequentially with O_DIRECT (1 MiB blocks, QD4, io_uring),
# alternating rounds, medians (target: ssdlab >= 95% of fio). Installs nothing; needs fio and python3.
# Usage: scripts/bench-scan.sh [FILES] [MIB_PER_FILE] [ROUNDS] [DIR]
set -euo pipefail
files=${1:-8}
mib=${2:-128}
rounds=${3:-3}
dir=$(mktemp -d "${4:-/var/tmp}/ssdlab-bench-scan.XXXXXX")
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
names=()
for i in $(seq "$files"); do
  head -c $((mib << 20)) /dev/urandom >"$dir/f$i.bin"
  names+=("$dir/f$i.bin")
done
sync
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
ours=() theirs=()
for _ in $(seq "$rounds"); do
  ours+=("$(t "$ssdlab" scan "$dir" --chunk 1m --qd 4 --state-dir "$dir/state")")
  theirs+=("$(t fio --name=scan --rw=read --bs=1m --iodepth=4 --direct=1 --ioengine=io_uring \
    --filename="$(IFS=:; echo "${names[*]}")" --file_service_type=sequential --size=$((files * mib))m)")
done
python3 - "$((files * mib))" "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
mib, ours, theirs = int(sys.argv[1]), list(map(float, sys.argv[2].split())), list(map(float, sys.argv[3].split()))
o, t = statistics.median(ours), statistics.median(theirs)
print(f"{mib} MiB in files: ssdlab scan {o:.2f} s ({mib / o:.0f} MiB/s), fio {t:.2f} s ({mib / t:.0f} MiB/s): "
      f"ssdlab reaches {100 * t / o:.0f}% of fio's throughput (wall time, process start included)")
PY
