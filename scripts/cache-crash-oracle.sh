#!/usr/bin/env bash
# The cache's crash oracle at length: KILLS SIGKILLs of `ssdlab serve` on a cached: export while a client writes
# (some FUA) and flushes, each checked block by block against the volatile-write-cache model; then the same
# oracle against nbdkit's cache filter (writeback, size-limited), where it must find losses.
# Needs nbdkit (Debian's) and root is not required.
#
#   scripts/cache-crash-oracle.sh [KILLS]     # default 200
set -euo pipefail
cd "$(dirname "$0")/.."
export CRASH_ORACLE_KILLS=${1:-200}
cargo test --release -p ssdlab --test cli crash_oracle -- --nocapture --test-threads 1 2>&1 |
  grep -E "violations|test result|panicked"
