#!/usr/bin/env bash
# `ssdlab serve` against nbdkit (Debian's), measured with fio's nbd engine in the same run, printing ratios:
# 4 KiB random writes at QD1 over a Unix socket (fio prints a line before its JSON: skipped). Installs nothing: needs fio, nbdkit and python3.
#
#   scripts/bench-nbd.sh [SECONDS] [ROUNDS]     # default 5 s per measurement, 3 rounds, medians compared
#
# (a) protocol floor: ssdlab serve null:1g  vs nbdkit memory 1G
# (b) a file:         ssdlab serve file:IMG vs nbdkit file IMG   (ssdlab uses O_DIRECT, nbdkit the page cache)
# (c) the cache:      ssdlab serve cached:file:IMG vs nbdkit file IMG
set -euo pipefail
seconds=${1:-5}
rounds=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
for tool in fio nbdkit python3; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install fio nbdkit)" >&2; exit 2; }
done
work=$(mktemp -d "${BENCH_FILE_DIR:-/var/tmp}/ssdlab-nbd.XXXXXX")
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
truncate -s 1G "$work/disk.img"

iops() { # SOCKET -> IOPS of fio's nbd engine, 4 KiB random writes, QD1
  fio --name=bench --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw=randwrite --bs=4k --iodepth=1 \
    --size=1g --time_based --runtime="$seconds" --output-format=json 2>/dev/null |
    python3 -c 'import json, sys; t = sys.stdin.read(); print(json.loads(t[t.index("{"):])["jobs"][0]["write"]["iops"])'
}

start() { # socket, command...
  local sock=$1; shift
  rm -f "$sock"
  "$@" 2>/dev/null &
  server=$!
  for _ in $(seq 100); do [ -S "$sock" ] && return; sleep 0.05; done
  echo "server did not start: $*" >&2; exit 1
}
stop() { kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""; }

case_() { # name, ssdlab target, nbdkit args...
  local name=$1 target=$2; shift 2
  local a=() b=()
  for _ in $(seq "$rounds"); do
    start "$work/a.sock" "$ssdlab" serve --target "$target" --socket "$work/a.sock"
    a+=("$(iops "$work/a.sock")"); stop
    start "$work/b.sock" nbdkit --foreground -U "$work/b.sock" "$@"
    b+=("$(iops "$work/b.sock")"); stop
  done
  python3 - "$name" "${a[@]}" "|" "${b[@]}" <<'PY'
import statistics, sys
name, runs = sys.argv[1], sys.argv[2:]
split = runs.index("|")
a, b = statistics.median(map(float, runs[:split])), statistics.median(map(float, runs[split + 1:]))
print(f"{name:<44} ssdlab {a:>9,.0f} IOPS | nbdkit {b:>9,.0f} IOPS | ratio {a / b:5.2f}x")
PY
}

echo "ssdlab serve vs $(nbdkit --version): fio nbd engine, 4 KiB random writes QD1, ${seconds} s x $rounds rounds"
case_ "(a) null:1g vs nbdkit memory" null:1g memory 1G
case_ "(b) file (O_DIRECT) vs nbdkit file" "file:$work/disk.img" file "$work/disk.img"
case_ "(c) cached:file vs nbdkit file" "cached:file:$work/disk.img?size=256m" file "$work/disk.img"
