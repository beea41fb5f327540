#!/usr/bin/env bash
# `ssdlab serve` against nbdkit (Debian's), measured with fio's nbd engine in the same run, printing ratios:
# 4 KiB random writes and reads at QD1 and QD32 over a Unix socket (fio prints a line before its JSON: skipped),
# and the time of a FLUSH with one dirty block on a 64 GiB export (libnbd from Python: Debian's python3-libnbd).
# Installs nothing: needs fio, nbdkit, python3 and python3-libnbd.
#
#   scripts/bench-nbd.sh [SECONDS] [ROUNDS]     # default 5 s per measurement, 3 rounds, medians compared
#
# (a) protocol floor:    ssdlab serve null:1g  vs nbdkit memory 1G (writes, QD1 and QD32)
# (b) page cache bypass: ssdlab serve file:IMG (O_DIRECT) vs nbdkit file IMG cache=none (writes, QD1). Not the
#                        same promise: nbdkit's cache=none writes through the page cache and evicts behind it
#                        (its manual: it "tries to prevent the kernel from keeping" the pages), so its write is
#                        answered before it reaches the medium, where an O_DIRECT write is answered after
# (c) the page cache:    ssdlab serve file:IMG?cache=page vs nbdkit file IMG (the same promise: a FLUSH is
#                        fdatasync), writes and reads at QD1 and QD32, and reads at QD32 with the page cache
#                        dropped before every run (root only): each read then waits for the medium
# (d) DRAM absorbs:      ssdlab serve cached:file:IMG (1 GiB cache) vs nbdkit file IMG (writes, QD1)
# (e) FLUSH after one 4 KiB write on a 64 GiB export (fresh sparse file each time): median and p99 of 300
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
# Written, not sparse: reads of a hole never reach the page cache's data path.
dd if=/dev/urandom of="$work/disk.img" bs=1M count=1024 status=none

iops() { # SOCKET RW QD -> IOPS of fio's nbd engine, 4 KiB random I/O
  fio --name=bench --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$2" --bs=4k --iodepth="$3" \
    --size=1g --time_based --runtime="$seconds" --output-format=json 2>/dev/null |
    python3 -c 'import json, sys; t = sys.stdin.read(); j = json.loads(t[t.index("{"):])["jobs"][0]
print(j["write"]["iops"] + j["read"]["iops"])'
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

cold=""
# With cold set, the page cache is written back and dropped before each run, so reads meet the medium.
chill() { [ -z "$cold" ] || { sync; echo 3 >/proc/sys/vm/drop_caches; }; }

case_() { # name, rw, qd, ssdlab target, nbdkit args...
  local name=$1 rw=$2 qd=$3 target=$4; shift 4
  local a=() b=()
  for _ in $(seq "$rounds"); do
    chill
    start "$work/a.sock" "$ssdlab" serve --target "$target" --socket "$work/a.sock"
    a+=("$(iops "$work/a.sock" "$rw" "$qd")"); stop
    chill
    start "$work/b.sock" nbdkit --foreground -U "$work/b.sock" "$@"
    b+=("$(iops "$work/b.sock" "$rw" "$qd")"); stop
  done
  # The spread: each round's ratio (ssdlab's round i over nbdkit's round i, run back to back), lowest to highest.
  python3 - "$name $rw QD$qd" "${a[@]}" "|" "${b[@]}" <<'PY'
import statistics, sys
name, runs = sys.argv[1], sys.argv[2:]
split = runs.index("|")
xs, ys = list(map(float, runs[:split])), list(map(float, runs[split + 1:]))
a, b = statistics.median(xs), statistics.median(ys)
pairs = [x / max(y, 1e-9) for x, y in zip(xs, ys)]
print(f"{name:<58} ssdlab {a:>9,.0f} IOPS | nbdkit {b:>9,.0f} IOPS | ratio {a / b:5.2f}x"
      f" (rounds {min(pairs):.2f}-{max(pairs):.2f}x)")
PY
}

echo "ssdlab serve vs $(nbdkit --version): fio nbd engine, 4 KiB random I/O, ${seconds} s x $rounds rounds"
for qd in 1 32; do
  case_ "(a) null:1g vs nbdkit memory" randwrite "$qd" null:1g memory 1G
done
case_ "(b) file (O_DIRECT) vs nbdkit file cache=none" randwrite 1 "file:$work/disk.img" file "$work/disk.img" cache=none
for rw in randwrite randread; do
  for qd in 1 32; do
    case_ "(c) file?cache=page vs nbdkit file" "$rw" "$qd" "file:$work/disk.img?cache=page" file "$work/disk.img"
  done
done
if [ -w /proc/sys/vm/drop_caches ]; then
  cold=1
  case_ "(c) file?cache=page vs nbdkit file, cache dropped" randread 32 "file:$work/disk.img?cache=page" \
    file "$work/disk.img"
  cold=""
else
  echo "(c) cold reads skipped: dropping the page cache needs root"
fi
case_ "(d) cached:file (1 GiB) vs nbdkit file (page cache)" randwrite 1 "cached:file:$work/disk.img?size=1g" \
  file "$work/disk.img"

flush_us() { # SOCKET -> "median p99" microseconds of a FLUSH after one 4 KiB write, 300 times
  /usr/bin/python3 - "nbd+unix:///?socket=$1" <<'PY'
import nbd, random, statistics, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
blocks = h.get_size() // 4096
rng, times = random.Random(1), []
for _ in range(300):
    h.pwrite(b"\xa5" * 4096, rng.randrange(blocks) * 4096)
    t = time.perf_counter_ns()
    h.flush()
    times.append(time.perf_counter_ns() - t)
h.shutdown()
times.sort()
print(f"{statistics.median(times) / 1e3:.0f} {times[296] / 1e3:.0f}")
PY
}
flush_case() { # name, command...
  local name=$1; shift
  rm -f "$work/big.img"; truncate -s 64G "$work/big.img"
  start "$work/f.sock" "$@"
  read -r median p99 < <(flush_us "$work/f.sock"); stop
  printf '%-52s FLUSH median %6s us  p99 %6s us\n' "$name" "$median" "$p99"
}
if /usr/bin/python3 -c 'import nbd' 2>/dev/null; then
  echo "(e) FLUSH after one 4 KiB write on a 64 GiB export (target: < 1 ms)"
  flush_case "    ssdlab cached:null:64g (the cache's own cost)" "$ssdlab" serve --target cached:null:64g --socket "$work/f.sock"
  flush_case "    ssdlab cached:file (64 GiB sparse)" "$ssdlab" serve --target "cached:file:$work/big.img" --socket "$work/f.sock"
  flush_case "    ssdlab file (64 GiB sparse, no cache)" "$ssdlab" serve --target "file:$work/big.img" --socket "$work/f.sock"
  flush_case "    nbdkit file (64 GiB sparse, page cache)" nbdkit --foreground -U "$work/f.sock" file "$work/big.img"
else
  echo "(e) skipped: Debian's python3-libnbd is not installed"
fi
