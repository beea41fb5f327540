#!/usr/bin/env bash
# `ssdlab report` over many results, against itself at a tenth of the results: the time must grow with the
# results, not with their square (issue 51: 100 results took 0.46 s, 200 3.13 s, 500 45.6 s). It lays out N copies
# of one small result that differ only by their seed (so every label needs the options that tell twins apart, the
# costly case), redraws the page over them, and prints each size's median of three rounds and the ratio.
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
median_of_three() {
    local times=()
    for _ in 1 2 3; do
        local start end
        start=$(date +%s.%N)
        "$ssdlab" report "$@" --out "$work/page.html" >/dev/null 2>&1
        end=$(date +%s.%N)
        rm -f "$work/page.html"
        times+=("$(echo "$end - $start" | bc -l)")
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n 2p
}
dirs=("$work"/r/*)
t_small=$(median_of_three "${dirs[@]:0:$small}")
t_large=$(median_of_three "${dirs[@]:0:$large}")
printf 'report over %5d results: %6.2f s (median of 3)\n' "$small" "$t_small"
printf 'report over %5d results: %6.2f s (median of 3)\n' "$large" "$t_large"
printf 'ratio: %.1fx the time for %dx the results (target: at most %dx)\n' \
    "$(echo "$t_large / $t_small" | bc -l)" "$((large / small))" "$((large * 3 / small / 2))"
