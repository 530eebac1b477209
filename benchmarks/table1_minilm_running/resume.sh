#!/usr/bin/env bash
# Resume Table 1's m 100 / n 100 run on a new machine: a worktree of the plan's commit, the carried units
# copied into its results folder, then the plan's command (the grid skips the units on disk).
# Run from the repository root, with .venv installed (bash .ci/install) and ../shared beside it.
set -euo pipefail
root=$(pwd)
wt=${1:-$(dirname "$root")/table1}
[ -d "$wt" ] || git worktree add "$wt" ceda17f
dst="$wt/results/table1_minilm/m100/n100/minilm"
mkdir -p "$dst"
(cd benchmarks/table1_minilm_running/m100/n100/minilm && find . -path './*/units/*' -type f -exec cp -n --parents {} "$dst/" \;)
cd "$wt"
PYTHONPATH="$wt" OMP_NUM_THREADS=1 exec "$root/.venv/bin/tapt-bench" run --config table1_minilm_m100 \
  --data-dir ../shared/data --threads 1 --workers 2
