#!/usr/bin/env bash
# `ssdlab report` over many results, against itself at a tenth of the results: the time must grow with the
# results, not with their square (issue 51: 100 results took 0.46 s, 200 3.13 s, 500 45.6 s). It lays out N copies
# of one small result that differ only by their seed (so every label needs the options that tell twins apart, the
# costly case), redraws the page over them in alternating rounds, and prints each size's median, range and the
# ratio of the medians.
#
#   scripts/bench-report.sh [SMALL [LARGE]]      # default 50 and 500; targets: 500 within 2 s, 10x at most 15x
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet -p ssdlab)
small=${1:-50}
large=${2:-500}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$ssdlab" run --target null --runtime 100ms --out "$work/base" 2>/dev/null
python3 - "$work" "$large" <<'PY'
import json, os, shutil, sys
work, n = sys.argv[1], int(sys.argv[2])
base = json.load(open(os.path.join(work, "base", "result.json")))
for i in range(n):
    d = os.path.join(work, "r", f"{i:05d}")
    os.makedirs(d)
    base["options"]["workload"]["seed"] = i + 1
    json.dump(base, open(os.path.join(d, "result.json"), "w"))
PY
time_once() {
    local start end
    start=$(date +%s.%N)
    "$ssdlab" report "$@" --out "$work/page.html" >/dev/null 2>&1
    end=$(date +%s.%N)
    rm -f "$work/page.html"
    echo "$end - $start" | bc -l
}
dirs=("$work"/r/*)
rounds=5
small_times=()
large_times=()
# Alternating rounds (small, large, small, ...), so a change in the machine's load falls on both sizes.
for _ in $(seq "$rounds"); do
    small_times+=("$(time_once "${dirs[@]:0:$small}")")
    large_times+=("$(time_once "${dirs[@]:0:$large}")")
done
stats() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {printf "%.3f %.3f %.3f", v[int((NR+1)/2)], v[1], v[NR]}'; }
read -r s_med s_min s_max <<<"$(stats "${small_times[@]}")"
read -r l_med l_min l_max <<<"$(stats "${large_times[@]}")"
printf 'report over %5d results: median %6.3f s, range %.3f-%.3f s over %d alternating rounds\n' "$small" "$s_med" "$s_min" "$s_max" "$rounds"
printf 'report over %5d results: median %6.3f s, range %.3f-%.3f s over %d alternating rounds\n' "$large" "$l_med" "$l_min" "$l_max" "$rounds"
printf 'ratio of medians: %.1fx the time for %dx the results (target: at most %dx)\n' \
    "$(echo "$l_med / $s_med" | bc -l)" "$((large / small))" "$((large * 3 / small / 2))"
