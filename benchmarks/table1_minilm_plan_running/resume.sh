#!/usr/bin/env bash
# Resume the confirmatory Table 1 plan (harness/grid/configs/table1_minilm_plan.yaml, committed at ff50b3e)
# on a new machine: a worktree of the plan's commit, the units carried here copied in, the same command.
# The grid skips the finished units and rebuilds the tables from them; no unit is read before the last.
#   bash benchmarks/table1_minilm_plan_running/resume.sh   (from the repository root, .venv installed)
set -euo pipefail
root=$(pwd)
wt=${WORKTREE:-/work/study-wt}
[ -d "$wt" ] || git worktree add "$wt" ff50b3e
mkdir -p "$wt/results/table1_minilm_plan"
cp -rn "$root/benchmarks/table1_minilm_plan_running/m50" "$wt/results/table1_minilm_plan/" 2>/dev/null || true
cd "$wt"
PYTHONPATH="$wt" nohup "$root/.venv/bin/python" -m harness.cli run --config table1_minilm_plan \
    --data-dir "${DATA_DIR:-$root/../shared/data}" --workers 2 --threads 1 >> "$root/../study.log" 2>&1 &
echo "resumed in $wt"
