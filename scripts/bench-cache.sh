#!/usr/bin/env bash
# The cache's read hits in-process against the page cache, in the same run, printing GB/s and the ratio:
# ssdlab reads a 256 MiB working set at 1 MiB through `cached:file:` (1 GiB cache, every block hot after the first
# reads), fio reads the same working set from a file in /dev/shm (memory copies out of the page cache, psync).
# Both are one thread at QD1; the first second of ssdlab's run (the misses that admit the set) is included, and its
# hit ratio printed. Installs nothing: needs fio and python3.
#
#   scripts/bench-cache.sh [SECONDS] [ROUNDS]     # default 5 s per measurement, 3 rounds, medians compared
set -euo pipefail
seconds=${1:-5}
rounds=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
for tool in fio python3; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install fio)" >&2; exit 2; }
done
work=$(mktemp -d "${BENCH_FILE_DIR:-/var/tmp}/ssdlab-cache.XXXXXX")
shm=$(mktemp -d /dev/shm/ssdlab-cache.XXXXXX)
trap 'rm -rf "$work" "$shm"' EXIT
head -c 256M /dev/urandom > "$work/disk.img"
cp "$work/disk.img" "$shm/disk.img"

ssdlab_gbps() {
  "$ssdlab" run --target "cached:file:$work/disk.img?size=1g" --rw randread --bs 1m --qd 1 --span 0:256m \
    --runtime "${seconds}s" --json 2>/dev/null |
    python3 -c '
import json, sys
s = [json.loads(l) for l in sys.stdin if l.startswith("{")]
summary = [e for e in s if e.get("type") == "summary"][-1]["data"]["summary"]
c = summary["cache"]
print(summary["bytes_per_s"] / 1e9, c["read_hits"] / max(1, c["read_hits"] + c["read_misses"]))'
}
fio_gbps() {
  fio --name=pagecache --filename="$shm/disk.img" --ioengine=psync --rw=randread --bs=1m --iodepth=1 \
    --size=256m --time_based --runtime="$seconds" --output-format=json 2>/dev/null |
    python3 -c 'import json, sys; t = sys.stdin.read(); print(json.loads(t[t.index("{"):])["jobs"][0]["read"]["bw_bytes"] / 1e9)'
}

a=() b=() hits=()
for _ in $(seq "$rounds"); do
  read -r gbps hit < <(ssdlab_gbps)
  a+=("$gbps"); hits+=("$hit")
  b+=("$(fio_gbps)")
done
python3 - "${a[@]}" "|" "${b[@]}" "|" "${hits[@]}" <<'PY'
import statistics, sys
runs = sys.argv[1:]
i = runs.index("|"); j = runs.index("|", i + 1)
a = statistics.median(map(float, runs[:i])); b = statistics.median(map(float, runs[i + 1:j]))
hit = statistics.median(map(float, runs[j + 1:]))
print(f"1 MiB random reads of a 256 MiB hot set, QD1: ssdlab cached:file {a:5.2f} GB/s (hits {100 * hit:.1f}%) | "
      f"fio psync from /dev/shm {b:5.2f} GB/s | ratio {a / b:4.2f}x  (target: >= 2 GB/s)")
PY
