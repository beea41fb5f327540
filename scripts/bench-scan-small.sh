#!/usr/bin/env bash
# Scan of many small files against `find | xargs cat` reading the same files, caches dropped before every run,
# alternating rounds, medians and the rounds' spread (#51's target: ssdlab at most 1.3x cat's wall time).
# Needs root (to drop the page cache) and python3; installs nothing.
# Usage: scripts/bench-scan-small.sh [FILES] [ROUNDS] [DIR]     # default 100000 files of 4 KiB, 3 rounds, /var/tmp
set -euo pipefail
files=${1:-100000}
rounds=${2:-3}
dir=$(mktemp -d "${3:-/var/tmp}/ssdlab-bench-scan-small.XXXXXX")
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
[ "$(id -u)" = 0 ] || { echo "run as root: the page cache is dropped before every run" >&2; exit 2; }
python3 - "$dir/tree" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i // 1000:04d}")
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:07d}"), "wb") as f:
        f.write(os.urandom(4096))
PY
sync
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
ours=() theirs=()
for _ in $(seq "$rounds"); do
  cold; ours+=("$(t "$ssdlab" scan "$dir/tree" --min-size 4k --state-dir "$dir/state")")
  cold; theirs+=("$(t sh -c "find '$dir/tree' -type f -print0 | xargs -0 cat")")
done
python3 - "$files" "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
n, ours, theirs = int(sys.argv[1]), list(map(float, sys.argv[2].split())), list(map(float, sys.argv[3].split()))
o, t = statistics.median(ours), statistics.median(theirs)
pairs = [a / b for a, b in zip(ours, theirs)]
print(f"{n} files of 4 KiB, cold caches: ssdlab scan {o:.2f} s, find | xargs cat {t:.2f} s: "
      f"{o / t:.2f}x cat's time (rounds {min(pairs):.2f}-{max(pairs):.2f}x; target <= 1.3x)")
PY
