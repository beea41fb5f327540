#!/usr/bin/env bash
# QD1 4 KiB random reads over NBD (fio's nbd engine, Unix socket): `ssdlab serve` against nbdkit in the same
# run, and optionally against an older ssdlab binary, in alternating rounds so that a busy machine slows every
# side alike. Prints per side the median IOPS, the range and the spread ((max - min) / median), and the ratio of
# medians. Installs nothing: needs fio, nbdkit and python3.
#
#   scripts/bench-nbd-qd1.sh [ROUNDS] [SECONDS]      # default 10 rounds of 5 s per side
#   SSDLAB_BASE=/path/to/old/ssdlab scripts/bench-nbd-qd1.sh   # also the old binary, for an A/B of a change
#
# Two cases: file:IMG (O_DIRECT) against nbdkit file cache=none (both bypass the page cache), and null:1g against
# nbdkit memory (the protocol's floor: no device time at all).
set -euo pipefail
rounds=${1:-10}
seconds=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
base=${SSDLAB_BASE:-}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet -p ssdlab)
for tool in fio nbdkit python3; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install fio nbdkit)" >&2; exit 2; }
done
work=$(mktemp -d "${BENCH_FILE_DIR:-/var/tmp}/ssdlab-qd1.XXXXXX")
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
# Written, not sparse: a hole reads without touching the device.
dd if=/dev/urandom of="$work/disk.img" bs=1M count=256 status=none

iops() { # SOCKET -> IOPS of 4 KiB random reads at QD1
  fio --name=bench --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw=randread --bs=4k --iodepth=1 \
    --size=256m --time_based --runtime="$seconds" --output-format=json 2>/dev/null |
    python3 -c 'import json, sys; t = sys.stdin.read(); print(json.loads(t[t.index("{"):])["jobs"][0]["read"]["iops"])'
}
start() { # socket, command...
  local sock=$1; shift
  rm -f "$sock"
  "$@" 2>/dev/null &
  server=$!
  for _ in $(seq 200); do [ -S "$sock" ] && return; sleep 0.05; done
  echo "server did not start: $*" >&2; exit 1
}
stop() { kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""; }

case_() { # name, ssdlab target, nbdkit args...
  local name=$1 target=$2; shift 2
  local new=() old=() peer=()
  for _ in $(seq "$rounds"); do
    start "$work/s.sock" "$ssdlab" serve --target "$target" --socket "$work/s.sock" --read-only
    new+=("$(iops "$work/s.sock")"); stop
    if [ -n "$base" ]; then
      start "$work/s.sock" "$base" serve --target "$target" --socket "$work/s.sock" --read-only
      old+=("$(iops "$work/s.sock")"); stop
    fi
    start "$work/s.sock" nbdkit --foreground --readonly -U "$work/s.sock" "$@"
    peer+=("$(iops "$work/s.sock")"); stop
  done
  python3 - "$name" "$rounds" "${new[*]}" "${old[*]:-}" "${peer[*]}" <<'PY'
import statistics, sys
name, rounds, new, old, peer = sys.argv[1], sys.argv[2], *[list(map(float, a.split())) for a in sys.argv[3:]]
def line(label, xs):
    m = statistics.median(xs)
    return f"    {label:<14} median {m:>8,.0f} IOPS  range {min(xs):>8,.0f}-{max(xs):<8,.0f} spread {100 * (max(xs) - min(xs)) / m:4.0f}%"
print(f"{name} ({rounds} alternating rounds)")
print(line("ssdlab", new))
if old:
    print(line("ssdlab (base)", old))
print(line("nbdkit", peer))
if old:
    print(f"    ratio ssdlab / base   {statistics.median(new) / statistics.median(old):5.2f}x")
print(f"    ratio ssdlab / nbdkit {statistics.median(new) / statistics.median(peer):5.2f}x")
PY
}

echo "QD1 4 KiB random reads over NBD (fio nbd engine), ${seconds} s per side per round; $(nbdkit --version)"
case_ "file (O_DIRECT) vs nbdkit file cache=none" "file:$work/disk.img" file "$work/disk.img" cache=none
case_ "null:1g vs nbdkit memory 1G (protocol floor)" null:1g memory 1G
