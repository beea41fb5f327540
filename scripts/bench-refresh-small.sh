#!/usr/bin/env bash
# Refresh of many small files at two sizes of tree, alternating rounds: does the cost per file stay flat as the tree
# grows? #51's target: refreshing 10x the files takes at most 11x the time. Each run starts from a fresh state
# directory and files aged past --older-than, so every run rewrites every file. Prints the median of each size,
# the ratio and the spread of the rounds' ratios, and the cost per file. Installs nothing.
# Usage: scripts/bench-refresh-small.sh [FILES] [ROUNDS] [DIR]   # default 1000 (and 10x that), 3 rounds, /var/tmp
set -euo pipefail
small=${1:-1000}
rounds=${2:-3}
large=$((small * 10))
dir=$(mktemp -d "${3:-/var/tmp}/ssdlab-bench-refresh-small.XXXXXX")
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
python3 - "$dir" "$small" "$large" <<'PY'
import os, sys
base = sys.argv[1]
for n in map(int, sys.argv[2:]):
    for i in range(n):
        d = os.path.join(base, f"t{n}", f"d{i // 1000:04d}")
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:07d}"), "wb") as f:
            f.write(os.urandom(8192))
PY
sync
# Times one refresh of the tree of N files; a run that did not rewrite every file ends the benchmark (its time
# would mean nothing).
run() {
  local n=$1 s e
  find "$dir/t$n" -type f -exec touch -d '40 days ago' {} +
  rm -rf "$dir/state"
  s=$(date +%s.%N)
  "$ssdlab" refresh "$dir/t$n" --state-dir "$dir/state" >"$dir/out.txt" 2>&1 ||
    { echo "bench-refresh-small: refresh failed" >&2; cat "$dir/out.txt" >&2; return 1; }
  e=$(date +%s.%N)
  grep -q "0 files skipped, given up or pending" "$dir/out.txt" ||
    { echo "bench-refresh-small: not every file was rewritten" >&2; tail -3 "$dir/out.txt" >&2; return 1; }
  echo "$e - $s" | bc
}
smalls=() larges=()
for _ in $(seq "$rounds"); do
  smalls+=("$(run "$small")")
  larges+=("$(run "$large")")
done
python3 - "$small" "$large" "${smalls[*]}" "${larges[*]}" <<'PY'
import statistics, sys
n1, n2 = int(sys.argv[1]), int(sys.argv[2])
a, b = (list(map(float, x.split())) for x in sys.argv[3:5])
ma, mb = statistics.median(a), statistics.median(b)
ratios = [y / x for x, y in zip(a, b)]
print(f"refresh of {n1} files of 8 KiB: {ma:.2f} s ({ma / n1 * 1e3:.2f} ms a file); "
      f"of {n2}: {mb:.2f} s ({mb / n2 * 1e3:.2f} ms a file)")
print(f"  {n2 // n1}x the files took {mb / ma:.2f}x the time (rounds {min(ratios):.2f}-{max(ratios):.2f}x; "
      f"target <= {1.1 * n2 / n1:.0f}x)")
PY
