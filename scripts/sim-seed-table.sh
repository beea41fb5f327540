#!/usr/bin/env bash
# The virtual drive against every seed's figures: runs the simulator where each seed measured a real drive and
# prints one Markdown table of the seed's figure, the simulator's and the error. With --write it also replaces
# the table in docs/sim.md (between its seed-table markers). Virtual time: the same binary gives the same table.
#
#   scripts/sim-seed-table.sh [--write]      # about two minutes on 2 cores
#
# Seeds: 000 (the field report: bulk-read hours per 900 GB by data age, read as cat read them), 001 (the RAPID
# review: 4 KiB QD1 random writes with and without the cache, ATTO's 512 MB run), 002 (TRIM validation on the
# 120 GB: clean, dirty and after-TRIM sequential writes), 003 (the mSATA 1 TB with 25% extra spare area: when
# the consistency test first drops), 004 (an enterprise MLC drive: the same), the reviews' steady state of the
# 250 GB, and Samsung's read ratings (1 MiB sequential reads at QD1, the 120 GB's random reads at QD32).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$ssdlab" scan --target 'sim:840evo-1t?scale=1/16' --dataset field-report --reader cat --random-reads 0 \
    --out "$out/seed000" --replace 2>/dev/null || true
"$ssdlab" test latency --target sim:840evo-250g --out "$out/seed001-plain" --replace 2>/dev/null
"$ssdlab" test latency --target 'cached:sim:840evo-250g?size=1g' --out "$out/seed001-cached" --replace 2>/dev/null
"$ssdlab" test sweep --target 'cached:sim:840evo-250g?size=1g&seq-cutoff=1g&dirty-limit=90%' --test-size 512m \
    --out "$out/seed001-sweep" --replace 2>/dev/null
"$ssdlab" test trim --target sim:840evo-120g --torture 40m --out "$out/seed002" --replace 2>/dev/null || true
"$ssdlab" test consistency --target sim:840evo-250g --runtime 2000s --out "$out/steady" --replace 2>/dev/null || true
"$ssdlab" test consistency --target sim:840evo-msata-1t --op 25 --runtime 2000s --out "$out/seed003" --replace 2>/dev/null || true
"$ssdlab" test consistency --target sim:enterprise-mlc-400g --runtime 2000s --out "$out/seed004" --replace 2>/dev/null || true
# The reviews' and the datasheet's read figures (issue 50): large reads at QD1, small random reads at QD32.
for drive in 840evo-120g 840evo-250g '840evo-1t?scale=1/8&'; do
    name=${drive%%\?*}
    sep='?'; case $drive in *'?'*) sep='';; esac
    "$ssdlab" run --target "sim:${drive}${sep}fill=100%" --rw read --bs 1m --qd 1 --runtime 10s \
        --out "$out/seq1m-$name" --replace 2>/dev/null
done
"$ssdlab" run --target 'sim:840evo-120g?fill=100%' --rw randread --qd 32 --runtime 10s --out "$out/rr32-120g" \
    --replace 2>/dev/null

python3 - "$out" "$here/docs/sim.md" "${1:-}" <<'PY'
import json, os, sys
out, doc, write = sys.argv[1], sys.argv[2], sys.argv[3] == "--write"
load = lambda name: json.load(open(os.path.join(out, name, "result.json")))["analysis"]
rows = []
def row(seed, figure, reference, simulated, unit, fmt="{:.2f}"):
    error = f"{100 * (simulated / reference - 1):+.0f}%" if reference else "-"
    rows.append(f"| {seed} | {figure} | {fmt.format(reference)} {unit} | {fmt.format(simulated)} {unit} | {error} |")

for r in load("seed000")["field_report"]["rows"]:
    if r["field_report_hours_per_900gb"]:
        row("000", f"bulk read of {r['months']:g}-month-old data (cat), seed 1", r["field_report_hours_per_900gb"],
            r["hours_per_900gb"], "h per 900 GB")
plain, cached = load("seed001-plain"), load("seed001-cached")
row("001", "4 KiB random write QD1, IOPS", 22.8e3, plain["iops"], "", "{:,.0f}")
row("001", "4 KiB random write QD1, mean latency", 43.5, plain["latency_ns_mean"] / 1e3, "µs", "{:.1f}")
row("001", "4 KiB random write QD1, maximum latency", 0.75, plain["latency_ns_max"] / 1e6, "ms")
row("001", "the same through the DRAM cache, IOPS ratio", 3.22, cached["iops"] / plain["iops"], "x")
sweep = load("seed001-sweep")
row("001", "ATTO 512 MB through the cache, best read", 3.8e3, max(r["read_bytes_per_s"] for r in sweep["rows"]) / 1e6,
    "MB/s", "{:,.0f}")
trim = load("seed002")
row("002", "sequential write, clean", 180.4, trim["clean_bytes_per_s"] / 1e6, "MB/s", "{:.1f}")
row("002", "sequential write, dirty (after 40 min of torture)", 69.3, trim["dirty_bytes_per_s"] / 1e6, "MB/s", "{:.1f}")
row("002", "sequential write, after TRIM", 126.2, trim["after_trim_bytes_per_s"] / 1e6, "MB/s", "{:.1f}")
steady = load("steady")
row("reviews", "250 GB steady state, 4 KiB QD32 random writes (3,000-5,000)", 4000, steady["steady_iops_mean"], "IOPS",
    "{:,.0f}")
summary = lambda name: json.load(open(os.path.join(out, name, "result.json")))["phases"][0]["summary"]
for name, label in [("840evo-120g", "120 GB"), ("840evo-250g", "250 GB"), ("840evo-1t", "1 TB (1/8 scale)")]:
    row("rating", f"{label}: 1 MiB sequential reads at QD1 (540 MB/s rated)", 540,
        summary(f"seq1m-{name}")["bytes_per_s"] / 1e6, "MB/s", "{:.0f}")
row("rating", "120 GB: 4 KiB random reads at QD32 (94K rated)", 94e3, summary("rr32-120g")["iops"], "IOPS", "{:,.0f}")
def first_drop(seed, figure, reference, name):
    cliff = load(name)["cliff"]
    if cliff is None:
        rows.append(f"| {seed} | {figure} | {reference} s | no drop in 2000 s | - |")
    else:
        row(seed, figure, reference, cliff["t_s"], "s", "{:.0f}")
first_drop("003", "mSATA 1 TB with 25% extra spare: first drop", 300, "seed003")
first_drop("004", "enterprise MLC: first drop", 600, "seed004")
table = "\n".join(["| seed | figure | seed | simulator | error |", "|---|---|---|---|---|"] + rows)
print(table)
if write:
    text = open(doc).read()
    start, end = "<!-- seed-table: scripts/sim-seed-table.sh --write -->", "<!-- /seed-table -->"
    if start not in text:
        sys.exit(f"{doc}: no seed-table markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    open(doc, "w").write(f"{head}{start}\n{table}\n{end}{tail}")
    print(f"written into {doc}")
PY
