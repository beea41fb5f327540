#!/usr/bin/env bash
# Large sequential copies out of `ssdlab serve file:IMG?cache=page` against `nbdkit file IMG`, through libnbd's
# nbdcopy (several connections, large requests) in the same run, alternating, with the page cache warm (the image
# read once before) and cold (written back and dropped before every copy; root only). #51's target: at least
# 1.0x nbdkit (ssdlab's copy time at most nbdkit's). Prints medians and each round's ratio.
# Installs nothing: needs nbdkit and libnbd-bin (nbdcopy).
#
#   scripts/bench-nbd-copy.sh [MIB] [ROUNDS]     # default 512 MiB, 5 rounds
set -euo pipefail
mib=${1:-512}
rounds=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
ssdlab=${SSDLAB:-$here/target/release/ssdlab}
[ -x "$ssdlab" ] || (cd "$here" && cargo build --release --quiet)
for tool in nbdkit nbdcopy python3; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install nbdkit libnbd-bin)" >&2; exit 2; }
done
work=$(mktemp -d "${BENCH_FILE_DIR:-/var/tmp}/ssdlab-nbd-copy.XXXXXX")
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
dd if=/dev/urandom of="$work/disk.img" bs=1M count="$mib" status=none
start() { # socket, command...
  local sock=$1; shift
  rm -f "$sock"
  "$@" 2>/dev/null &
  server=$!
  for _ in $(seq 100); do [ -S "$sock" ] && return; sleep 0.05; done
  echo "server did not start: $*" >&2; exit 1
}
stop() { kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""; }
copy() { # socket -> seconds of one nbdcopy to /dev/null, checked
  local s e
  s=$(date +%s.%N)
  nbdcopy "nbd+unix:///?socket=$1" null: || { echo "nbdcopy failed" >&2; return 1; }
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
run_case() { # warm|cold -> prints the line
  local mode=$1 a=() b=()
  for _ in $(seq "$rounds"); do
    if [ "$mode" = cold ]; then sync; echo 3 >/proc/sys/vm/drop_caches; else cat "$work/disk.img" >/dev/null; fi
    start "$work/a.sock" "$ssdlab" serve --target "file:$work/disk.img?cache=page" --socket "$work/a.sock"
    a+=("$(copy "$work/a.sock")"); stop
    if [ "$mode" = cold ]; then sync; echo 3 >/proc/sys/vm/drop_caches; else cat "$work/disk.img" >/dev/null; fi
    start "$work/b.sock" nbdkit --foreground -U "$work/b.sock" file "$work/disk.img"
    b+=("$(copy "$work/b.sock")"); stop
  done
  python3 - "$mode" "$mib" "${a[@]}" "|" "${b[@]}" <<'PY'
import statistics, sys
mode, mib, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
split = runs.index("|")
xs, ys = list(map(float, runs[:split])), list(map(float, runs[split + 1:]))
a, b = statistics.median(xs), statistics.median(ys)
# The ratio is of speeds (nbdkit's time over ssdlab's): above 1.0x ssdlab copies faster.
pairs = sorted(y / x for x, y in zip(xs, ys))
print(f"nbdcopy {mib} MiB, page cache {mode}: ssdlab {a:.3f} s ({mib / a:,.0f} MiB/s) | nbdkit {b:.3f} s "
      f"({mib / b:,.0f} MiB/s) | ssdlab's speed {b / a:.2f}x nbdkit's (rounds {pairs[0]:.2f}-{pairs[-1]:.2f}x; "
      f"target >= 1.0x)")
PY
}
echo "ssdlab serve vs $(nbdkit --version), nbdcopy $(nbdcopy --version | head -1 | awk '{print $2}'), $rounds rounds"
run_case warm
[ "$(id -u)" = 0 ] && run_case cold || echo "(cold: run as root to drop the page cache)"
