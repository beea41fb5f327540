#!/usr/bin/env bash
# Seed 001's RAPID tables, reproduced on the virtual 840 EVO 250 GB with and without ssdlab's DRAM cache, in one
# side-by-side report and as text with RAPID's columns (IOPS, MB/s, average and maximum latency, CPU) beside the
# review's own figures.
#
#   scripts/rapid-tables.sh [OUT_DIR]     # default ./rapid-tables; about a minute
#
# - `test latency` (4 KiB random writes at QD1 over 8 GiB, 60 s): plain, and cached with the default settings
#   (small writes absorbed and coalesced: what RAPID did for this test).
# - `test sweep` at 2 GiB and 512 MiB test sizes (ATTO's two runs in the review): plain, and cached the way RAPID
#   treats a workload that fits (sequential transfers cached too: seq-cutoff=1g, dirty-limit=90%). The cache's own
#   work is charged in virtual time (0.7 us per operation plus copies at 4.2 GB/s), so DRAM speeds are modeled,
#   not measured on this host.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
out=${1:-rapid-tables}
mkdir -p "$out"
drive="sim:840evo-250g"
rapid="cached:$drive?size=1g&seq-cutoff=1g&dirty-limit=90%"
"$ssdlab" test latency --target "$drive" --out "$out/latency-plain" --replace 2>/dev/null
"$ssdlab" test latency --target "cached:$drive?size=1g" --out "$out/latency-cached" --replace 2>/dev/null
for size in 2g 512m; do
  "$ssdlab" test sweep --target "$drive" --test-size "$size" --out "$out/sweep-$size-plain" --replace 2>/dev/null
  "$ssdlab" test sweep --target "$rapid" --test-size "$size" --out "$out/sweep-$size-cached" --replace 2>/dev/null
done
"$ssdlab" report "$out"/latency-plain "$out"/latency-cached "$out"/sweep-2g-plain "$out"/sweep-2g-cached \
  "$out"/sweep-512m-plain "$out"/sweep-512m-cached --out "$out/rapid.html" 2>/dev/null
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
load = lambda name: json.load(open(os.path.join(out, name, "result.json")))["analysis"]
print("4 KiB random writes, QD1 (test latency)   IOPS      MB/s   avg lat   max lat   CPU")
print("  RAPID review, 840 EVO 250GB off         22.8K     -      43.5 us   0.75 ms   -")
print("  RAPID review, RAPID on                  73.5K     -      13.5 us   31.4 ms   -")
for name, tag in [("latency-plain", "ssdlab sim, no cache"), ("latency-cached", "ssdlab sim, cached:")]:
    a = load(name)
    print(f"  {tag:<38}{a['iops'] / 1e3:5.1f}K {a['bytes_per_s'] / 1e6:8.1f} {a['latency_ns_mean'] / 1e3:7.1f} us "
          f"{a['latency_ns_max'] / 1e6:7.2f} ms {a['cpu_percent']:5.1f}%")
p, c = load("latency-plain"), load("latency-cached")
print(f"  ratio cached/plain: IOPS {c['iops'] / p['iops']:.2f}x (review: 3.22x), max latency "
      f"{c['latency_ns_max'] / p['latency_ns_max']:.1f}x (review: 42x)")
for size in ["2g", "512m"]:
    plain, cached = load(f"sweep-{size}-plain"), load(f"sweep-{size}-cached")
    best = lambda a, k: max(r[k] for r in a["rows"]) / 1e6
    print(f"sweep {size} test: best read {best(plain, 'read_bytes_per_s'):7.0f} -> {best(cached, 'read_bytes_per_s'):7.0f} MB/s, "
          f"best write {best(plain, 'write_bytes_per_s'):7.0f} -> {best(cached, 'write_bytes_per_s'):7.0f} MB/s")
print("  review: 2GB test read +34% (>700 MB/s); 512MB test reads to 3.8 GB/s, writes past 4 GB/s")
print(f"report: {os.path.join(out, 'rapid.html')}")
PY
