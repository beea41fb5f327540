#!/usr/bin/env bash
# Kills `ssdlab refresh` with SIGKILL at pseudo-random moments N times (default 1000) over a tree of awkward
# files (hard links, sparse, unaligned sizes, read-only permissions, old timestamps), checking after every kill
# that every file is byte-identical, and after a final run that contents, sizes, holes, permissions, links and
# atime/mtime are exactly as before. Needs root. SSDLAB_SEED picks another sequence of kill moments.
set -euo pipefail
cd "$(dirname "$0")/.."
export SSDLAB_REFRESH_KILLS=${1:-1000}
cargo test --release -p ssdlab --test cli refresh_survives_sigkill_at_any_moment -- --nocapture
