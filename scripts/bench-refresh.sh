#!/usr/bin/env bash
# Times `ssdlab refresh` against `dd if=f of=f conv=notrunc,fsync oflag=direct` on the same file, alternating,
# and prints the ratio (target: at most 1.3x dd's time, while ssdlab also re-reads and verifies every chunk and
# journals its progress). Installs nothing. Usage: scripts/bench-refresh.sh [SIZE_MIB] [ROUNDS] [DIR]
set -euo pipefail
size_mib=${1:-1024}
rounds=${2:-3}
dir=$(mktemp -d "${3:-/var/tmp}/ssdlab-bench-refresh.XXXXXX")
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
head -c $((size_mib << 20)) /dev/urandom >"$dir/f.bin"
sync
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
dd_times=() ssdlab_times=()
for _ in $(seq "$rounds"); do
  dd_times+=("$(t dd if="$dir/f.bin" of="$dir/f.bin" bs=4M conv=notrunc,fsync oflag=direct iflag=direct)")
  # dd just wrote the file, and refresh leaves a file modified a moment ago alone (its data is fresh): age it.
  touch -d '2 days ago' "$dir/f.bin"
  ssdlab_times+=("$(t "$ssdlab" refresh "$dir/f.bin" --chunk 4m --state-dir "$dir/state")")
done
# A refresh that rewrote nothing (it refused the file) would look fast: check the last one's own count.
touch -d '2 days ago' "$dir/f.bin"
"$ssdlab" refresh "$dir/f.bin" --chunk 4m --state-dir "$dir/state" 2>&1 | grep -q "^done .*f.bin" ||
  { echo "ssdlab refresh did not rewrite the whole file; the timing means nothing" >&2; exit 1; }
python3 - "$size_mib" "${dd_times[*]}" "${ssdlab_times[*]}" <<'PY'
import statistics, sys
size, dd, ours = int(sys.argv[1]), list(map(float, sys.argv[2].split())), list(map(float, sys.argv[3].split()))
d, o = statistics.median(dd), statistics.median(ours)
pairs = [b / a for a, b in zip(dd, ours)]
print(f"{size} MiB file: dd {d:.2f} s ({size / d:.0f} MiB/s), "
      f"ssdlab refresh {o:.2f} s ({size / o:.0f} MiB/s): {o / d:.2f}x dd's time "
      f"(rounds {min(pairs):.2f}-{max(pairs):.2f}x; target <= 1.3x)")
PY
