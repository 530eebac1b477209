#!/usr/bin/env bash
# Copy the finished units (and the run's logs and manifest) of the running plan into this folder, so that
# git keeps them across a stop; nothing here is read until the last unit is written.
#   bash benchmarks/table1_minilm_plan_running/carry.sh   (from the repository root)
set -euo pipefail
src=${WORKTREE:-/work/study-wt}/results/table1_minilm_plan/m50
dst=benchmarks/table1_minilm_plan_running/m50
mkdir -p "$dst"
(cd "$src" && find . -path "*/units/*" -o -name "manifest-*.json" -o -name "*.log" | while read -r f; do
    [ -f "$f" ] && mkdir -p "$(dirname "$OLDPWD/$dst/$f")" && cp -p "$f" "$OLDPWD/$dst/$f"; done)
echo "$(find "$dst" -path "*/units/*.json" | wc -l) units carried"
