#!/usr/bin/env bash
# Kills `ssdlab refresh` with SIGKILL at pseudo-random moments N times (default 1000) over a tree of awkward
# files (hard links, sparse, unaligned sizes, read-only permissions, old timestamps), checking after every kill
# that every file is byte-identical, and after a final run that contents, sizes, holes, permissions, links and
# atime/mtime are exactly as before. Then M rounds (default 200) of the mixed scenario: a kill mid-file, then
# another program edits, chmods, renames, replaces (inode reuse) or sets an xattr on the file, and the next run
# must settle it as the model says (times back unless the data changed; the other program's change kept).
# Needs root. SSDLAB_SEED picks another sequence of kill moments.
# Usage: scripts/refresh-torture.sh [N] [M]
set -euo pipefail
cd "$(dirname "$0")/.."
export SSDLAB_REFRESH_KILLS=${1:-1000}
export SSDLAB_REFRESH_MIXED=${2:-200}
cargo test --release -p ssdlab --test cli -- --exact refresh::refresh_survives_sigkill_at_any_moment \
    refresh::refresh_survives_kills_mixed_with_other_programs --nocapture
