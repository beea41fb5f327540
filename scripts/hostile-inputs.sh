#!/usr/bin/env bash
# Issue #28's hostile-input table: each input is run through the release binary with /usr/bin/time, and its
# wall time, peak RSS and exit code printed. An input under 1 MB must take under 2 s and 200 MB, and nothing may
# panic (exit 101) or be killed by the guard's timeout. Exit 1 when any line breaks that.
#   scripts/hostile-inputs.sh
set -uo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p ssdlab
bin=$PWD/target/release/ssdlab
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sim='sim:840evo-250g?scale=1/64'

# The inputs.
printf 'fio version 3 iolog\n0 /f read 0 4096\n10000000000000 /f read 4096 4096\n10000000000001 /f read 8192 4096\n' >"$work/gap.iolog"
printf 'fio version 3 iolog\n0 /f read 0 4096\n1000 /f read 4096 4096\n2000 /f read 8192 4096\n' >"$work/small.iolog"
mkfifo "$work/fifo"
python3 - "$work" <<'PY'
import sys, os, json
w = sys.argv[1]
with open(f"{w}/blank-lines.iolog", "w") as f:
    f.write("\n" * (50 << 20)); f.write("fio version 3 iolog\n0 /f read 0 4096\n")
with open(f"{w}/long-line.iolog", "w") as f:
    f.write("fio version 3 iolog\n0 /f " + "x" * (100 << 20) + " read 0 4096\n")
with open(f"{w}/names.iolog", "w") as f:
    f.write("fio version 3 iolog\n")
    for i in range(200_000):
        f.write(f"{i} /f{i} read 0 4096\n")
with open(f"{w}/devices.blkparse", "w") as f:
    for i in range(200_000):
        f.write(f"  {8 + i // 256},{i % 256}    0        {i+1}     0.{i:09d}  4242  Q   R {i * 8} + 8 [dd]\n")
with open(f"{w}/disks.csv", "w") as f:
    for i in range(200_000):
        f.write(f"{128166372003061629 + i},hm,{i},Read,{i * 4096},4096,100\n")
with open(f"{w}/nested.json", "w") as f:
    f.write("[" * (1 << 20))
with open(f"{w}/fleet-long-line.txt", "w") as f:
    f.write("sim:840evo-250g?scale=1/64 " + "n" * (1 << 20) + "\n")
with open(f"{w}/smartctl-garbage.json", "w") as f:
    json.dump({"smartctl": {"exit_status": 0}, "model_name": "x" * (1 << 20)}, f)
PY

rc=0
printf '%-52s %9s %7s %5s %8s %9s  %s\n' input "input MB" "wall s" exit "peak MB" "err line" verdict
row() {
    local name=$1 input_bytes=$2
    shift 2
    /usr/bin/time -o "$work/time" -f '%e %M' timeout -s KILL 60 "$@" >/dev/null 2>"$work/stderr"
    local code=$?
    local wall rss
    read -r wall rss < <(tail -1 "$work/time")
    local mb=$((rss / 1024))
    # The longest line the command printed: bad input is quoted by a short prefix, never whole.
    local longest
    longest=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$work/stderr")
    local verdict=ok
    if [[ $code == 101 || $code == 134 || $code == 137 ]]; then
        verdict="FAIL (panic, abort or killed)"
    elif ((input_bytes < 1 << 20)) && { (($(echo "$wall > 2" | bc))) || ((mb > 200)); }; then
        verdict="FAIL (over 2 s or 200 MB)"
    elif ((longest > 1000)); then
        verdict="FAIL (an error line of $longest bytes)"
    fi
    [[ $verdict == ok ]] || rc=1
    printf '%-52s %9.1f %7s %5s %8s %9s  %s\n' "$name" "$(echo "$input_bytes / 1048576" | bc -l)" "$wall" "$code" "$mb" "$longest" "$verdict"
}
size() { stat -c %s "$1"; }

row "scan --dataset=1d:18446744073709551615x4k" 30 $bin scan --target "$sim" --dataset=1d:18446744073709551615x4k
row "scan --dataset=1d:100000000x4k" 20 $bin scan --target "$sim" --dataset=1d:100000000x4k
row "replay on sim:, second operation at 1e7 s" "$(size "$work/gap.iolog")" $bin test replay --target "$sim" --trace "$work/gap.iolog"
row "replay on sim:, --time-scale 1e10" "$(size "$work/small.iolog")" $bin test replay --target "$sim" --trace "$work/small.iolog" --time-scale 1e10
row "/dev/zero as --trace" 0 $bin test replay --target null:1g --trace /dev/zero
row "/dev/zero as report's result" 0 $bin report /dev/zero --out "$work/r.html"
row "/dev/zero as refresh --from" 0 $bin refresh --from /dev/zero --dry-run
row "/dev/zero as health --from" 0 $bin health --from /dev/zero
row "/dev/zero as fanout --fleet" 0 $bin fanout --fleet /dev/zero
row "a FIFO as --trace" 0 $bin test replay --target null:1g --trace "$work/fifo"
row "50 MB of blank lines before a trace header" "$(size "$work/blank-lines.iolog")" $bin test replay --target null:1g --trace "$work/blank-lines.iolog"
row "one 100 MB line in a trace" "$(size "$work/long-line.iolog")" $bin test replay --target null:1g --trace "$work/long-line.iolog"
row "200k distinct file names in a fio iolog" "$(size "$work/names.iolog")" $bin test replay --target null:1g --trace "$work/names.iolog" --as-fast-as-possible
row "200k devices in blkparse text" "$(size "$work/devices.blkparse")" $bin test replay --target null:64g --trace "$work/devices.blkparse" --as-fast-as-possible
row "200k disks in an MSR CSV" "$(size "$work/disks.csv")" $bin test replay --target null:64g --trace "$work/disks.csv" --as-fast-as-possible
row "1 MiB of '[' as report's result.json" "$(size "$work/nested.json")" $bin report "$work/nested.json" --out "$work/n.html"
row "a fleet file with a 1 MiB line" "$(size "$work/fleet-long-line.txt")" $bin fanout --fleet "$work/fleet-long-line.txt" --runtime 1s
row "smartctl JSON with a 1 MiB model name" "$(size "$work/smartctl-garbage.json")" $bin health --from "$work/smartctl-garbage.json"
exit $rc
