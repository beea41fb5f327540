#!/usr/bin/env bash
# Benchmarks the virtual SSD: simulated host writes per wall second in WA mode (target >= 5 M/s on one core),
# the wall time of a full 2000-second consistency run on sim:840evo-250g at full scale (target < 60 s), and
# peak memory per mapping unit (target about 4 bytes plus a constant). Installs nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)

# WA mode: each size ROUNDS times (default 3), since a shared machine's memory bandwidth drifts; the median and
# the range of the speeds are printed.
rounds=${ROUNDS:-3}
for units in 262144 16777216; do
  echo "== WA mode: $units logical units ($((units / 262144)) GiB), OP 25%, 64 units per block, 21 capacities written"
  speeds=()
  for _ in $(seq "$rounds"); do
    out=$(taskset -c 0 "$ssdlab" sim wa --op 25 --pages-per-block 64 --logical-units "$units" 2>&1)
    speeds+=("$(sed -n 's/^speed *\([0-9.]*\) M.*/\1/p' <<<"$out")")
  done
  sed 's/^/   /' <<<"$out" | grep -v '^   speed'
  python3 - "${speeds[@]}" <<'PY'
import statistics, sys
xs = list(map(float, sys.argv[1:]))
print(f"   speed {statistics.median(xs):.1f} M simulated host writes per wall second (median of {len(xs)}; "
      f"range {min(xs):.1f}-{max(xs):.1f}; target >= 5)")
PY
done

echo "== consistency workload at full scale: sim:840evo-250g, sequential fill, 4 KiB random writes QD32, 2000 s"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
/usr/bin/time -f "%e %M" -o "$tmp.time" taskset -c 0 "$ssdlab" run --target 'sim:840evo-250g?fill=100%' \
  --rw randwrite --norandommap --runtime 2000s --json 2>/dev/null >"$tmp"
read -r wall_s maxrss_kb <"$tmp.time"
rm -f "$tmp.time"
python3 - "$tmp" "$wall_s" "$maxrss_kb" <<'PY'
import json, sys
path, wall_s, maxrss_kb = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
for line in open(path):
    e = json.loads(line)
    if e["type"] == "begin":
        units = e["data"]["target"]["capacity_bytes"] // 4096
    if e["type"] == "summary":
        s = e["data"]["summary"]
print(f"   {s['ios']:,} host I/Os over {s['seconds']:.0f} virtual s in {wall_s:.1f} wall s "
      f"({s['seconds'] / wall_s:.0f}x real time, {s['ios'] / wall_s / 1e6:.2f} M host I/Os per wall second, "
      f"including the instant sequential fill of {units:,} units)")
print(f"   peak memory {maxrss_kb / 1024:.0f} MiB = {maxrss_kb * 1024 / units:.2f} bytes per logical mapping unit "
      f"({units:,} units)")
print(f"   write amplification {s['write_amplification']:.2f}, mean {s['iops']:.0f} IOPS")
PY
